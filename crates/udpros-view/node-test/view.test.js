// The udpros view as Foxglove's own client sees it: @foxglove/ws-protocol speaks to it,
// @foxglove/rosmsg parses the schemas it advertises, and @foxglove/rosmsg-serialization
// decodes the bytes it forwards. The Rust test `view_clients` starts the demo and runs
// this file with UDPROS_VIEW_URL set to the demo's WebSocket address.
import { test } from "node:test";
import assert from "node:assert/strict";
import WebSocket from "ws";
// The three are CommonJS packages: their exports are read from the default export.
import wsProtocol from "@foxglove/ws-protocol";
import rosmsg from "@foxglove/rosmsg";
import serialization from "@foxglove/rosmsg-serialization";

const { FoxgloveClient } = wsProtocol;
const { parse, md5 } = rosmsg;
const { MessageReader } = serialization;

const URL = process.env.UDPROS_VIEW_URL;
assert.ok(URL, "UDPROS_VIEW_URL names the view to test");

/** A connected client, its serverInfo and every channel advertised so far. */
async function connect(subprotocols) {
  const client = new FoxgloveClient({ ws: new WebSocket(URL, subprotocols) });
  // Listeners before the first frame: the server's advertisements follow serverInfo at once.
  const channels = new Map();
  const services = new Map();
  client.on("advertise", (list) => list.forEach((c) => channels.set(c.topic, c)));
  client.on("advertiseServices", (list) => list.forEach((s) => services.set(s.name, s)));
  client.on("unadvertise", (ids) => {
    for (const [topic, c] of channels) if (ids.includes(c.id)) channels.delete(topic);
  });
  let timer;
  const info = await new Promise((resolve, reject) => {
    client.on("serverInfo", resolve);
    client.on("error", reject);
    timer = setTimeout(() => reject(new Error("no serverInfo within 10 s")), 10_000);
  }).finally(() => clearTimeout(timer));
  return { client, info, channels, services };
}

/** Waits until `check()` is truthy, polling; fails after `ms`. */
async function until(check, ms, what) {
  const end = Date.now() + ms;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The first `count` messages of `topic`, decoded with the schema the view advertised. */
async function firstMessages(session, topic, count) {
  const channel = await until(() => session.channels.get(topic), 15_000, `${topic} advertised`);
  const reader = new MessageReader(parse(channel.schema));
  const got = [];
  const id = session.client.subscribe(channel.id);
  const listener = (event) => {
    if (event.subscriptionId === id) {
      const bytes = new Uint8Array(event.data.buffer, event.data.byteOffset, event.data.byteLength);
      got.push({ message: reader.readMessage(bytes), timestamp: event.timestamp });
    }
  };
  session.client.on("message", listener);
  await until(() => got.length >= count, 15_000, `${count} messages of ${topic}`);
  session.client.unsubscribe(id);
  session.client.off("message", listener);
  return got;
}

test("advertises the demo's topics with full ROS1 definitions as schemas", async () => {
  const session = await connect([FoxgloveClient.SUPPORTED_SUBPROTOCOL]);
  try {
    assert.equal(session.info.op, "serverInfo");
    assert.match(session.info.name, /udpros_view/);
    const expected = {
      "/ping1d/range": "sensor_msgs/Range",
      "/ping1d/profile": "udpros/PingProfile",
      "/ping360/echo": "udpros/Ping360Echo",
      "/ping360/image": "sensor_msgs/Image",
      "/mavlink_bridge/latency": "udpros/MavlinkLatency",
    };
    await until(
      () => Object.keys(expected).every((t) => session.channels.has(t)),
      15_000,
      "every demo topic advertised",
    );
    for (const [topic, type] of Object.entries(expected)) {
      const c = session.channels.get(topic);
      assert.equal(c.encoding, "ros1", topic);
      assert.equal(c.schemaName, type, topic);
      assert.equal(c.schemaEncoding, "ros1msg", topic);
      assert.ok(parse(c.schema).length >= 1, topic);
    }
    // The schema is the whole definition, dependencies included: its md5 is the type's.
    assert.equal(md5(parse(session.channels.get("/ping1d/range").schema)), "c005c34273dc426c67a020a87bc24148");
    assert.equal(md5(parse(session.channels.get("/ping360/image").schema)), "060021388200f6f0f447d0fcd9c64743");
  } finally {
    session.client.close();
  }
});

test("forwards messages that decode to what the bridges published", async () => {
  const session = await connect([FoxgloveClient.SUPPORTED_SUBPROTOCOL]);
  try {
    const ranges = await firstMessages(session, "/ping1d/range", 3);
    for (const { message, timestamp } of ranges) {
      assert.equal(message.header.frame_id.length > 0, true);
      assert.ok(message.range >= message.min_range && message.range <= message.max_range, JSON.stringify(message));
      // Receipt time, in ns since the epoch: within a minute of ours.
      assert.ok(Math.abs(Number(timestamp / 1_000_000n) - Date.now()) < 60_000);
    }
    const echoes = await firstMessages(session, "/ping360/echo", 20);
    for (const { message } of echoes) {
      assert.ok(message.angle_gradians < 400);
      assert.ok(message.intensities.length > 0);
    }
    assert.ok(echoes.some(({ message }) => message.intensities.some((v) => v > 0)), "the sonar sees something");
    const [latency] = await firstMessages(session, "/mavlink_bridge/latency", 1);
    assert.equal(typeof latency.message.ping_rtt, "number");
    const [image] = await firstMessages(session, "/ping360/image", 1);
    assert.equal(image.message.data.length, image.message.step * image.message.height);
  } finally {
    session.client.close();
  }
});

test("speaks the SDK's subprotocol name too, and a stopped subscription stops", async () => {
  const session = await connect(["foxglove.sdk.v1"]);
  try {
    const channel = await until(() => session.channels.get("/ping360/echo"), 15_000, "the echo topic");
    let count = 0;
    const id = session.client.subscribe(channel.id);
    session.client.on("message", (event) => {
      if (event.subscriptionId === id) count += 1;
    });
    await until(() => count >= 10, 15_000, "echoes");
    session.client.unsubscribe(id);
    await new Promise((r) => setTimeout(r, 300));
    const after = count;
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(count, after, "no message after unsubscribe took effect");
  } finally {
    session.client.close();
  }
});

test("reads parameters and calls a node's service, decoding the answer with its schema", async () => {
  const session = await connect([FoxgloveClient.SUPPORTED_SUBPROTOCOL]);
  try {
    assert.ok(session.info.capabilities.includes("parameters"));
    assert.ok(session.info.capabilities.includes("services"));
    const values = await new Promise((resolve) => {
      session.client.on("parameterValues", (event) => event.id === "q" && resolve(event));
      session.client.getParameters(["/ping360/range"], "q");
    });
    assert.equal(values.parameters[0].name, "/ping360/range");
    assert.equal(typeof values.parameters[0].value, "number");

    const service = await until(() => session.services.get("/ping360/get_loggers"), 15_000, "get_loggers advertised");
    assert.equal(service.type, "roscpp/GetLoggers");
    const reader = new MessageReader(parse(service.responseSchema));
    const response = await new Promise((resolve, reject) => {
      session.client.on("serviceCallResponse", (event) => event.callId === 41 && resolve(event));
      session.client.on("serviceCallFailure", (event) => reject(new Error(event.message)));
      session.client.sendServiceCallRequest({ serviceId: service.id, callId: 41, encoding: "ros1", data: new DataView(new ArrayBuffer(0)) });
    });
    const bytes = new Uint8Array(response.data.buffer, response.data.byteOffset, response.data.byteLength);
    const answer = reader.readMessage(bytes);
    assert.ok(answer.loggers.some((l) => typeof l.name === "string" && l.level.length > 0), JSON.stringify(answer));
  } finally {
    session.client.close();
  }
});
