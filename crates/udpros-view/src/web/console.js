// The sonar console: one Foxglove WebSocket connection to the view that served this page,
// the ROS1 messages decoded here from the schemas it advertises, and four panels drawn
// from them. Each panel takes the types it can draw (udpros's own, ping360_sonar's
// SonarEcho, sensor_msgs' Range, LaserScan and Image), picks a topic with a live
// publisher by itself, and has a picker to choose another. Everything the page knows is
// in `window.udprosView`, for tests and the curious.
import { parseSchema, makeReader } from "./ros1msg.js";

const SUBPROTOCOL = "foxglove.websocket.v1";
/** What each panel draws, best first: a panel picks the first type it finds. */
const PANELS = {
  sonar: ["udpros/Ping360Echo", "ping360_sonar/SonarEcho", "sensor_msgs/LaserScan", "sensor_msgs/Image"],
  depth: ["udpros/PingProfile", "sensor_msgs/Range"],
  link: ["udpros/MavlinkLatency"],
};
/** Seconds of history in the plots and the waterfall. */
const HISTORY_S = 60;

const $ = (id) => document.getElementById(id);
const state = {
  connected: false,
  server: null,
  channels: new Map(), // id → channel
  topics: new Map(), // topic → { count, times: [], last, bytes }
  links: new Map(), // topic → the view's UDPROS link stats
  subscriptions: new Map(), // subscription id → { channel, read, onMessage }
  decodeErrors: 0,
  sonar: { echoes: 0, angle: null, range: null, gain: null, seeded: false, minAngle: 400, maxAngle: -1 },
  depth: { profiles: 0, distance: null, confidence: null },
  link: { reports: 0, last: null },
  statuses: [],
  published: new Set(), // topics with a publisher now, as the view last said
  // Each panel's topic, and whether the operator chose it (then it is kept).
  panels: { sonar: { topic: null, picked: false }, depth: { topic: null, picked: false }, link: { topic: null, picked: false } },
};
window.udprosView = state;

// ---------------------------------------------------------------- colour map
// Dark water to bright echo: deep blue, teal, amber, white (readable in daylight, and
// ordered by lightness so that strength reads without a legend).
const STOPS = [
  [0, [6, 12, 32]],
  [0.2, [20, 50, 110]],
  [0.45, [20, 140, 140]],
  [0.7, [240, 190, 60]],
  [1, [255, 255, 240]],
];
const PALETTE = new Uint32Array(256);
for (let i = 0; i < 256; i++) {
  const t = i / 255;
  let k = 0;
  while (k < STOPS.length - 2 && t > STOPS[k + 1][0]) k++;
  const [t0, c0] = STOPS[k];
  const [t1, c1] = STOPS[k + 1];
  const u = (t - t0) / (t1 - t0);
  const c = c0.map((v, j) => Math.round(v + (c1[j] - v) * u));
  PALETTE[i] = (255 << 24) | (c[2] << 16) | (c[1] << 8) | c[0]; // little-endian RGBA
}

// ---------------------------------------------------------------- connection
let socket = null;
let nextSubscription = 1;

function connect() {
  const params = new URLSearchParams(location.search);
  const url = new URL(params.get("ws") ??
    `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/`);
  // The view's token, from the URL it printed, goes to the WebSocket (which can carry
  // no header of its own); it is not shown on the page.
  const token = params.get("token");
  if (token !== null) url.searchParams.set("token", token);
  $("url").textContent = `${url.protocol}//${url.host}${url.pathname}`;
  socket = new WebSocket(url.toString(), [SUBPROTOCOL]);
  socket.binaryType = "arraybuffer";
  socket.onopen = () => {
    state.connected = true;
    showConnection();
  };
  socket.onclose = () => {
    state.connected = false;
    state.channels.clear();
    state.subscriptions.clear();
    showConnection();
    setTimeout(connect, 2000);
  };
  socket.onmessage = (event) => {
    if (typeof event.data === "string") onText(JSON.parse(event.data));
    else onBinary(new DataView(event.data));
  };
}

function send(request) {
  if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify(request));
}

function onText(message) {
  switch (message.op) {
    case "serverInfo":
      state.server = message;
      showConnection();
      break;
    case "advertise":
      for (const c of message.channels) state.channels.set(c.id, c);
      chooseTopics();
      break;
    case "unadvertise":
      for (const id of message.channelIds) {
        state.channels.delete(id);
        for (const [sid, s] of state.subscriptions) if (s.channel.id === id) state.subscriptions.delete(sid);
      }
      chooseTopics();
      break;
    case "status":
      state.statuses.push(message);
      if (state.statuses.length > 20) state.statuses.shift();
      $("status").textContent = message.message;
      break;
  }
}

function onBinary(view) {
  if (view.getUint8(0) !== 1 || view.byteLength < 13) return; // only Message Data is asked for
  const sub = state.subscriptions.get(view.getUint32(1, true));
  if (!sub) return; // a message sent before our unsubscribe arrived
  const bytes = new Uint8Array(view.buffer, 13);
  const seen = topicSeen(sub.channel.topic);
  seen.count++;
  seen.bytes = bytes.byteLength;
  seen.last = performance.now();
  seen.times.push(seen.last);
  if (!sub.onMessage) return;
  let message;
  try {
    message = sub.read(bytes);
  } catch (e) {
    state.decodeErrors++;
    return;
  }
  sub.onMessage(message);
}

function topicSeen(topic) {
  let seen = state.topics.get(topic);
  if (!seen) state.topics.set(topic, (seen = { count: 0, times: [], last: null, bytes: 0 }));
  return seen;
}

function subscribe(channel, onMessage) {
  const id = nextSubscription++;
  const read = onMessage ? makeReader(parseSchema(channel.schemaName, channel.schema)) : null;
  state.subscriptions.set(id, { channel, read, onMessage });
  send({ op: "subscribe", subscriptions: [{ id, channelId: channel.id }] });
  return id;
}

function unsubscribe(id) {
  state.subscriptions.delete(id);
  send({ op: "unsubscribe", subscriptionIds: [id] });
}

const subscribedTo = (channel) => [...state.subscriptions.values()].some((s) => s.channel.id === channel.id);

/** The channels `panel` can draw: live ones first, then by how well it draws the type. */
function candidates(panel) {
  const types = PANELS[panel];
  return [...state.channels.values()]
    .filter((c) => types.includes(c.schemaName))
    .sort(
      (a, b) =>
        state.published.has(b.topic) - state.published.has(a.topic) ||
        types.indexOf(a.schemaName) - types.indexOf(b.schemaName) ||
        a.topic.localeCompare(b.topic),
    );
}

const DRAW = { sonar: onSonar, depth: onDepth, link: onLatency };

/** Points `panel` at `channel`: the old topic's subscription ends, the new one starts. */
function show(panel, channel) {
  const p = state.panels[panel];
  for (const [id, s] of state.subscriptions) if (s.panel === panel) unsubscribe(id);
  p.topic = channel?.topic ?? null;
  p.type = channel?.schemaName ?? null;
  if (panel === "sonar") resetSonar();
  if (!channel) return;
  const id = subscribe(channel, (m) => DRAW[panel](m, channel.schemaName));
  state.subscriptions.get(id).panel = panel;
  if (panel === "sonar") state.sonar.topic = channel.topic;
  if (panel === "depth") state.depth.topic = channel.topic;
  if (panel === "link") state.link.topic = channel.topic;
}

/** Each panel keeps the topic it shows while it exists (and, unless the operator picked
 * it, while it has a publisher); otherwise it takes its best candidate. */
function chooseTopics() {
  for (const panel of Object.keys(PANELS)) {
    const p = state.panels[panel];
    const list = candidates(panel);
    const current = list.find((c) => c.topic === p.topic);
    const stale = current && !p.picked && !state.published.has(current.topic) && state.published.has(list[0]?.topic);
    if (!current || stale) show(panel, list[0]);
    fillPicker(panel, list);
  }
  // The bridge's fan image holds the sweep so far: drawn first, the picture is whole at
  // once instead of after a turn of the head. Asked for until one came (its channel may be
  // advertised after the echoes').
  const image =
    state.panels.sonar.type === "udpros/Ping360Echo" &&
    [...state.channels.values()].find(
      (c) => c.topic === state.sonar.topic.replace(/echo$/, "image") && c.schemaName === "sensor_msgs/Image",
    );
  if (image && !state.sonar.seeded && !subscribedTo(image)) {
    const id = subscribe(image, (m) => {
      seedSonar(m);
      unsubscribe(id);
    });
  }
  drawTopicTable();
}

/** The panel's picker: every topic it can draw, the one shown selected. */
function fillPicker(panel, list) {
  const select = $(`${panel}-topic`);
  if (!select) return;
  const want = list.map((c) => `${c.topic} ${c.schemaName} ${state.published.has(c.topic)}`).join("\n");
  if (select.dataset.list !== want) {
    select.dataset.list = want;
    select.replaceChildren(
      ...list.map((c) => {
        const option = document.createElement("option");
        option.value = c.topic;
        option.textContent = `${c.topic} (${c.schemaName.split("/").pop()})${state.published.has(c.topic) ? "" : " · no publisher"}`;
        return option;
      }),
    );
    if (list.length === 0) select.replaceChildren(new Option("no topic of these types", ""));
  }
  select.value = state.panels[panel].topic ?? "";
  select.onchange = () => {
    const channel = list.find((c) => c.topic === select.value);
    state.panels[panel].picked = true;
    show(panel, channel);
  };
}

function showConnection() {
  $("dot").className = state.connected ? "dot live" : "dot";
  $("server").textContent = state.connected
    ? `${state.server?.name ?? ""} · ${state.server?.metadata?.ROS_MASTER_URI ?? ""}`
    : "not connected — retrying";
}

// ---------------------------------------------------------------- Ping360
const SONAR = 720; // pixels across the sonar picture
const fan = new ImageData(SONAR, SONAR);
const fanPixels = new Uint32Array(fan.data.buffer);
fanPixels.fill(PALETTE[0]);

/** Paints one bearing's intensities from the centre to the edge (full range). */
function paintRay(gradians, intensities) {
  const centre = SONAR / 2;
  const steps = centre;
  const n = intensities.length;
  if (n === 0) return;
  // Three rays a little apart fill the 0.9° between bearings at the edge.
  for (const w of [-0.35, 0, 0.35]) {
    const a = ((gradians + w) * Math.PI) / 200;
    const s = Math.sin(a);
    const c = Math.cos(a);
    for (let k = 0; k < steps; k++) {
      const x = (centre + k * s) | 0;
      const y = (centre - k * c) | 0;
      fanPixels[y * SONAR + x] = PALETTE[intensities[Math.min(n - 1, ((k * n) / steps) | 0)]];
    }
  }
}

/** A message of the sonar panel's topic, by its type. */
function onSonar(m, type) {
  switch (type) {
    case "udpros/Ping360Echo":
      return beam(m.angle_gradians, m.range, m.gain_setting, m.intensities);
    case "ping360_sonar/SonarEcho":
      // The ROS1 driver fills `angle` in gradians and `range` in whole metres.
      return beam(Math.round(m.angle), m.range, m.gain, m.intensities);
    case "sensor_msgs/LaserScan":
      return onScan(m);
    case "sensor_msgs/Image":
      return seedSonar(m) || drawImage(m);
  }
}

/** One bearing's echo (device gradians, clockwise from the bow). */
function beam(gradians, range, gain, intensities) {
  const s = state.sonar;
  s.echoes++;
  s.angle = ((gradians % 400) + 400) % 400;
  s.range = range;
  s.gain = gain;
  s.minAngle = Math.min(s.minAngle, s.angle);
  s.maxAngle = Math.max(s.maxAngle, s.angle);
  paintRay(s.angle, intensities);
}

/** A laser scan (REP 103: radians counter-clockwise from forward): each return a bright
 * point on its bearing, the water before it dark. */
function onScan(m) {
  const s = state.sonar;
  const cells = 128;
  for (let i = 0; i < m.ranges.length; i++) {
    const bearing = -(m.angle_min + i * m.angle_increment); // clockwise, radians
    const gradians = ((((bearing * 200) / Math.PI) % 400) + 400) % 400;
    const line = new Uint8Array(cells);
    const r = m.ranges[i];
    if (Number.isFinite(r) && r >= m.range_min && r <= m.range_max && m.range_max > 0) {
      line[Math.min(cells - 1, Math.floor((r / m.range_max) * cells))] = 255;
    }
    paintRay(gradians, line);
    s.angle = gradians;
    s.minAngle = Math.min(s.minAngle, gradians);
    s.maxAngle = Math.max(s.maxAngle, gradians);
  }
  s.echoes++;
  s.range = m.range_max;
}

/** An image that is not a sonar fan: drawn whole, scaled into the picture. */
function drawImage(image) {
  const channels = { mono8: 1, mono16: 2, rgb8: 3, bgr8: 3, rgba8: 4, bgra8: 4 }[image.encoding];
  if (!channels || image.width === 0 || image.height === 0) return false;
  const scale = Math.max(image.width, image.height) / SONAR;
  const big = image.is_bigendian;
  for (let y = 0; y < SONAR; y++) {
    for (let x = 0; x < SONAR; x++) {
      const sx = Math.floor(x * scale);
      const sy = Math.floor(y * scale);
      if (sx >= image.width || sy >= image.height) continue;
      const at = sy * image.step + sx * (image.encoding === "mono16" ? 2 : channels);
      const d = image.data;
      let rgb;
      if (channels === 1) rgb = [d[at], d[at], d[at]];
      else if (image.encoding === "mono16") {
        const v = big ? d[at] : d[at + 1];
        rgb = [v, v, v];
      } else if (image.encoding.startsWith("bgr")) rgb = [d[at + 2], d[at + 1], d[at]];
      else rgb = [d[at], d[at + 1], d[at + 2]];
      fanPixels[y * SONAR + x] = (255 << 24) | (rgb[2] << 16) | (rgb[1] << 8) | rgb[0];
    }
  }
  state.sonar.echoes++;
  state.sonar.image = true;
  return true;
}

/** Draws a sonar fan image (mono8, square, the sonar at its centre) into the picture;
 * false for any other image. */
function seedSonar(image) {
  if (image.encoding !== "mono8" || image.width !== image.height) return false;
  const size = image.width;
  for (let y = 0; y < SONAR; y++) {
    for (let x = 0; x < SONAR; x++) {
      const v = image.data[((y * size) / SONAR | 0) * image.step + ((x * size) / SONAR | 0)];
      if (v) fanPixels[y * SONAR + x] = PALETTE[v];
    }
  }
  state.sonar.seeded = true;
  return true;
}

/** A new sonar topic starts on a dark picture. */
function resetSonar() {
  fanPixels.fill(PALETTE[0]);
  Object.assign(state.sonar, { angle: null, range: null, gain: null, seeded: false, image: false, minAngle: 400, maxAngle: -1 });
}

function drawSonar() {
  const canvas = $("sonar");
  const ctx = canvas.getContext("2d");
  ctx.putImageData(fan, 0, 0);
  const s = state.sonar;
  const centre = SONAR / 2;
  // Clip to the circle: outside it there is no data.
  ctx.save();
  ctx.globalCompositeOperation = "destination-in";
  ctx.beginPath();
  ctx.arc(centre, centre, centre, 0, 2 * Math.PI);
  ctx.fill();
  ctx.restore();
  // Range rings, labelled in metres.
  ctx.strokeStyle = "rgba(255,255,255,0.45)";
  ctx.fillStyle = "rgba(255,255,255,0.9)";
  ctx.lineWidth = 1;
  ctx.font = "16px system-ui, sans-serif";
  const range = s.range ?? 0;
  if (range > 0) {
    // A range a little past a round number (20.4 m) still gets four or five rings.
    const step = niceStep(range / 5);
    for (let r = step; r <= range * 1.001; r += step) {
      const px = (r / range) * centre;
      ctx.beginPath();
      ctx.arc(centre, centre, px, 0, 2 * Math.PI);
      ctx.stroke();
      // Labels along the starboard beam, clear of the bow marker.
      ctx.fillText(`${+r.toFixed(1)} m`, centre + px - 40, centre - 5);
    }
  }
  // Bow marker and the sector scanned, when it is not a full circle.
  ctx.fillText("bow", centre - 15, 16);
  if (s.maxAngle >= 0 && s.maxAngle - s.minAngle < 390) {
    ctx.strokeStyle = "rgba(255,255,255,0.7)";
    ctx.setLineDash([6, 6]);
    for (const g of [s.minAngle, s.maxAngle]) bearingLine(ctx, g, centre);
    ctx.setLineDash([]);
  }
  // The transducer's heading now.
  if (s.angle !== null) {
    ctx.strokeStyle = "#ff4d4d";
    ctx.lineWidth = 3;
    bearingLine(ctx, s.angle, centre);
  }
  $("sonar-info").textContent =
    s.image || (s.seeded && s.angle === null)
      ? `${s.topic} · image`
      : s.angle === null
      ? "waiting for echoes"
      : `${s.topic} · head ${(s.angle * 0.9).toFixed(1)}° · range ${range.toFixed(1)} m · gain ${["low", "normal", "high"][s.gain] ?? s.gain}`;
}

function bearingLine(ctx, gradians, centre) {
  const a = (gradians * Math.PI) / 200;
  ctx.beginPath();
  ctx.moveTo(centre, centre);
  ctx.lineTo(centre + centre * Math.sin(a), centre - centre * Math.cos(a));
  ctx.stroke();
}

/** 1, 2 or 5 times a power of ten, at least `x`. */
function niceStep(x) {
  const p = 10 ** Math.floor(Math.log10(x));
  return [1, 2, 5, 10].map((k) => k * p).find((v) => v >= x);
}

// ---------------------------------------------------------------- Ping1D
const WATERFALL = { columns: 300, rows: 240 };
const waterfall = new ImageData(WATERFALL.columns, WATERFALL.rows);
const waterfallPixels = new Uint32Array(waterfall.data.buffer);
waterfallPixels.fill(PALETTE[0]);
const depths = []; // [{ at, depth, confidence, window }]

/** A message of the depth panel's topic, by its type. */
function onDepth(m, type) {
  if (type === "sensor_msgs/Range") return onRange(m);
  return onProfile(m);
}

/** A range finder's reading: the depth, no profile (the column stays dark). */
function onRange(m) {
  const d = state.depth;
  d.profiles++;
  d.distance = Number.isFinite(m.range) ? m.range : null;
  d.confidence = null;
  d.window = m.max_range;
  scrollWaterfall(() => PALETTE[0]);
  if (d.distance !== null) depths.push({ at: performance.now(), depth: d.distance, confidence: null, window: d.window });
  while (depths.length > WATERFALL.columns) depths.shift();
}

/** Moves the waterfall one column left and fills the right edge, row by row. */
function scrollWaterfall(colour) {
  const { columns, rows } = WATERFALL;
  for (let y = 0; y < rows; y++) {
    waterfallPixels.copyWithin(y * columns, y * columns + 1, (y + 1) * columns);
    waterfallPixels[y * columns + columns - 1] = colour(y);
  }
}

function onProfile(m) {
  const d = state.depth;
  d.profiles++;
  d.distance = m.distance;
  d.confidence = m.confidence;
  const window = m.scan_start + m.scan_length;
  d.window = window;
  // The newest profile is the right edge, depth downwards over the profile's own window
  // scaled to the display's.
  const data = m.profile_data;
  scrollWaterfall((y) => {
    const metres = (y / WATERFALL.rows) * window;
    const i = Math.floor(((metres - m.scan_start) / m.scan_length) * data.length);
    return i >= 0 && i < data.length ? PALETTE[data[i]] : PALETTE[0];
  });
  depths.push({ at: performance.now(), depth: m.distance, confidence: m.confidence, window });
  while (depths.length > WATERFALL.columns) depths.shift();
}

function drawDepth() {
  const d = state.depth;
  $("depth").textContent = d.distance === null ? "–" : `${d.distance.toFixed(2)} m`;
  $("confidence").textContent = d.confidence === null ? "" : `confidence ${(d.confidence * 100).toFixed(0)} %`;
  $("confidence-bar").style.width = `${Math.round((d.confidence ?? 0) * 100)}%`;
  const canvas = $("waterfall");
  const ctx = canvas.getContext("2d");
  ctx.putImageData(waterfall, 0, 0);
  // The bottom the sonar reports, on top of the profiles.
  ctx.fillStyle = "#ff4d4d";
  const offset = WATERFALL.columns - depths.length;
  depths.forEach((p, i) => {
    if (p.window > 0) ctx.fillRect(offset + i, (p.depth / p.window) * WATERFALL.rows - 1, 1, 2);
  });
  ctx.fillStyle = "rgba(255,255,255,0.9)";
  ctx.font = "12px system-ui, sans-serif";
  if (d.window) {
    ctx.fillText("0 m", 2, 12);
    ctx.fillText(`${d.window.toFixed(1)} m`, 2, WATERFALL.rows - 4);
  }
}

// ---------------------------------------------------------------- MAVLink link
const samples = []; // [{ at, ping, timesync, offset, px4 }]

function onLatency(m) {
  state.link.reports++;
  state.link.last = m;
  samples.push({
    at: performance.now(),
    ping: m.ping_rtt * 1e3,
    timesync: m.timesync_rtt * 1e3,
    offset: m.uncertainty_ns >= 0 ? m.offset_ns : null,
    px4: m.px4_offset_ns !== 0 ? m.px4_offset_ns : null,
  });
  const cutoff = performance.now() - HISTORY_S * 1000;
  while (samples.length && samples[0].at < cutoff) samples.shift();
}

function drawLink() {
  const m = state.link.last;
  if (m) {
    const ms = (s) => (Number.isFinite(s) ? `${(s * 1e3).toFixed(2)} ms` : "–");
    $("rtt").textContent = `PING ${ms(m.ping_rtt)} · TIMESYNC ${ms(m.timesync_rtt)}`;
    $("loss").textContent = `loss ${(m.ping_loss * 100).toFixed(1)} % / ${(m.timesync_loss * 100).toFixed(1)} %`;
    $("offset").textContent = offsetText(m);
  }
  plot($("rtt-plot"), [
    { key: "ping", colour: "#1f77b4", label: "PING" },
    { key: "timesync", colour: "#d95f02", label: "TIMESYNC" },
  ], "ms");
  // The offset moves by microseconds around a value of ~10^9 s: plotted as its change
  // from the first sample, and the PX4 filter as its difference from ours.
  const base = samples.find((s) => s.offset !== null)?.offset;
  const change = samples.map((s) => ({
    at: s.at,
    offset: s.offset !== null && base !== undefined ? (s.offset - base) / 1e3 : null,
    px4: s.px4 !== null && s.offset !== null ? (s.px4 - s.offset) / 1e3 : null,
  }));
  plot($("offset-plot"), [
    { key: "offset", colour: "#1b9e77", label: "offset change" },
    { key: "px4", colour: "#7570b3", label: "PX4 − ours" },
  ], "µs", change);
}

/** The autopilot's clock as a person reads it. The offset is this computer's ROS time
 * minus the autopilot's: an autopilot without a calendar clock counts from its boot, so
 * the offset is then about the date itself, and the number that helps is its uptime. */
function offsetText(m) {
  if (m.uncertainty_ns < 0) return "autopilot clock: not known yet (converging)";
  const ours = m.header.stamp.sec + m.header.stamp.nsec / 1e9;
  const theirs = ours - m.offset_ns / 1e9;
  const within = `± ${(m.uncertainty_ns / 1e6).toFixed(3)} ms${m.converged ? "" : ", converging"}`;
  const skew = `drift ${m.skew_ppm.toFixed(1)} ppm`;
  if (theirs < 1e9) {
    // Before 2001: time since boot, not a date.
    return `autopilot clock: ${uptime(theirs)} since its boot (${within}) · ${skew}`;
  }
  const ahead = theirs - ours;
  const ms = Math.abs(ahead * 1e3);
  return `autopilot clock: ${ms.toFixed(3)} ms ${ahead >= 0 ? "ahead of" : "behind"} this computer (${within}) · ${skew}`;
}

/** `seconds` as 3 h 25 min 07 s (or the parts that are not zero in front). */
function uptime(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  const [h, m, r] = [Math.floor(s / 3600), Math.floor((s % 3600) / 60), s % 60];
  const two = (n) => String(n).padStart(2, "0");
  return h > 0 ? `${h} h ${two(m)} min ${two(r)} s` : m > 0 ? `${m} min ${two(r)} s` : `${r} s`;
}

/** A line plot of `series` over the last HISTORY_S seconds. */
function plot(canvas, series, unit, data = samples) {
  const ctx = canvas.getContext("2d");
  const { width, height } = canvas;
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, width, height);
  const values = data.flatMap((d) => series.map((s) => d[s.key])).filter((v) => v !== null && Number.isFinite(v));
  ctx.fillStyle = "#333";
  ctx.font = "13px system-ui, sans-serif";
  if (values.length === 0) {
    ctx.fillText("waiting for reports", 10, height / 2);
    return;
  }
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  if (hi - lo < 1e-9) {
    lo -= 1;
    hi += 1;
  }
  const now = performance.now();
  const left = 80;
  // The span shown grows with the data, up to HISTORY_S: a fresh page's first reports
  // are a line, not a dot at the right edge.
  const span = Math.min(HISTORY_S * 1000, Math.max(10_000, now - data[0].at));
  const x = (at) => left + ((at - (now - span)) / span) * (width - left - 4);
  const y = (v) => 8 + (1 - (v - lo) / (hi - lo)) * (height - 30);
  ctx.strokeStyle = "#ddd";
  ctx.beginPath();
  ctx.moveTo(left, y(lo));
  ctx.lineTo(width, y(lo));
  ctx.moveTo(left, y(hi));
  ctx.lineTo(width, y(hi));
  ctx.stroke();
  // Axes: the values at the top and bottom lines with their unit, time along the bottom
  // (seconds before now).
  ctx.fillText(`${hi.toPrecision(4)} ${unit}`, 2, y(hi) + 4);
  ctx.fillText(`${lo.toPrecision(4)} ${unit}`, 2, y(lo) + 4);
  ctx.fillText(`−${Math.round(span / 1000)} s`, left, height - 4);
  ctx.fillText("now", width - 30, height - 18);
  let legend = width - 40;
  for (const s of [...series].reverse()) {
    legend -= ctx.measureText(s.label).width + 18;
    ctx.fillStyle = s.colour;
    ctx.fillRect(legend, height - 13, 10, 10);
    ctx.fillStyle = "#333";
    ctx.fillText(s.label, legend + 13, height - 4);
  }
  ctx.lineWidth = 2;
  for (const s of series) {
    ctx.strokeStyle = s.colour;
    ctx.beginPath();
    let drawing = false;
    for (const d of data) {
      const v = d[s.key];
      if (v === null || !Number.isFinite(v)) {
        drawing = false;
        continue;
      }
      if (drawing) ctx.lineTo(x(d.at), y(v));
      else ctx.moveTo(x(d.at), y(v));
      drawing = true;
    }
    ctx.stroke();
  }
}

// ---------------------------------------------------------------- topics
function rate(seen) {
  const now = performance.now();
  while (seen.times.length && seen.times[0] < now - 2000) seen.times.shift();
  return seen.times.length / 2;
}

function drawTopicTable() {
  // The topics this page receives first, then the rest of the graph.
  const rows = [...state.channels.values()].sort(
    (a, b) => subscribedTo(b) - subscribedTo(a) || a.topic.localeCompare(b.topic),
  );
  const body = $("topics");
  const now = performance.now();
  body.replaceChildren(
    ...rows.map((c) => {
      const tr = document.createElement("tr");
      const seen = state.topics.get(c.topic);
      const watched = subscribedTo(c);
      const link = state.links.get(c.topic);
      const cells = [
        c.topic,
        c.schemaName,
        watched && seen ? `${rate(seen).toFixed(1)}` : "",
        watched && seen?.last ? age(now - seen.last) : "",
        link ? `${link.protocol}${link.fec ? ` + FEC (${link.rebuilt} rebuilt)` : ""}` : "",
        link && link.delivered + link.lost > 0 ? `${((100 * link.lost) / (link.delivered + link.lost)).toFixed(2)} %` : "",
        link?.path ? pathText(link.path) : "",
      ];
      for (const text of cells) {
        const td = document.createElement("td");
        td.textContent = text;
        tr.appendChild(td);
      }
      const td = document.createElement("td");
      const box = document.createElement("input");
      box.type = "checkbox";
      box.checked = watched;
      box.title = "watch: subscribe to count its rate and age";
      box.onchange = () => {
        if (box.checked) subscribe(c, null);
        else for (const [id, s] of state.subscriptions) if (s.channel.id === c.id) unsubscribe(id);
      };
      td.appendChild(box);
      tr.appendChild(td);
      return tr;
    }),
  );
}

/** What a publisher says of its link (`/stats.json`'s `path`), in a cell. */
function pathText(path) {
  const mbit = (bps) => `${(bps / 1e6).toFixed(2)} Mbit/s`;
  const parts = [];
  if (path.capacity_bps != null) parts.push(`capacity ${mbit(path.capacity_bps)}`);
  if (path.queue_ms != null) parts.push(`queue ${path.queue_ms.toFixed(1)} ms`);
  if (path.pacing_bps != null) parts.push(`pacing ${mbit(path.pacing_bps)}`);
  parts.push(`${path.dropped} dropped`);
  return parts.join(", ");
}

function age(ms) {
  return ms < 1000 ? `${ms.toFixed(0)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** The view's own counters of its UDPROS links, one request a second. */
async function pollLinks() {
  try {
    const token = new URLSearchParams(location.search).get("token");
    const headers = token === null ? {} : { Authorization: `Bearer ${token}` };
    const response = await fetch("/stats.json", { cache: "no-store", headers });
    const stats = await response.json();
    state.links = new Map(stats.topics.map((t) => [t.topic, t]));
    const published = new Set(stats.published ?? []);
    const changed = published.size !== state.published.size || [...published].some((t) => !state.published.has(t));
    state.published = published;
    // A panel on a topic whose publisher left moves to one that has one.
    if (changed) chooseTopics();
  } catch {
    // The next poll tries again; the table shows what it had.
  }
}

// ---------------------------------------------------------------- loop
function frame() {
  drawSonar();
  drawDepth();
  requestAnimationFrame(frame);
}

connect();
requestAnimationFrame(frame);
setInterval(() => {
  drawLink();
  drawTopicTable();
  pollLinks();
}, 1000);
