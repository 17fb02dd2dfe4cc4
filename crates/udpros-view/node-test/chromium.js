// Headless chromium for the console's tests: Debian's chromium driven over the DevTools
// protocol (with the `ws` package), a page at a URL, and polling the page's own state.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import WebSocket from "ws";

const CHROMIUM = process.env.UDPROS_CHROMIUM ?? "chromium";

/** Starts chromium and connects to its DevTools endpoint. */
export async function launch() {
  const profile = mkdtempSync(join(tmpdir(), "udpros-chromium-"));
  const browser = spawn(CHROMIUM, [
    "--headless=new",
    "--no-sandbox", // CI runs as root
    "--disable-gpu",
    "--no-first-run",
    "--remote-debugging-port=0",
    `--user-data-dir=${profile}`,
    "about:blank",
  ], { stdio: ["ignore", "ignore", "pipe"] });
  const endpoint = await new Promise((resolve, reject) => {
    let text = "";
    const timer = setTimeout(() => reject(new Error(`chromium did not start: ${text}`)), 30_000);
    browser.stderr.on("data", (chunk) => {
      text += chunk;
      const match = text.match(/DevTools listening on (ws:\/\/\S+)/);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    browser.on("exit", (code) => reject(new Error(`chromium exited (${code}): ${text}`)));
  });
  const socket = new WebSocket(endpoint, { perMessageDeflate: false });
  await new Promise((resolve, reject) => {
    socket.once("open", resolve);
    socket.once("error", reject);
  });
  let next = 1;
  const pending = new Map();
  socket.on("message", (data) => {
    const message = JSON.parse(data);
    const waiter = pending.get(message.id);
    if (waiter) {
      pending.delete(message.id);
      if (message.error) waiter.reject(new Error(JSON.stringify(message.error)));
      else waiter.resolve(message.result);
    }
  });
  const call = (method, params = {}, sessionId) =>
    new Promise((resolve, reject) => {
      const id = next++;
      pending.set(id, { resolve, reject });
      socket.send(JSON.stringify({ id, method, params, sessionId }));
    });
  const close = async () => {
    socket.close();
    const exited = new Promise((resolve) => browser.once("exit", resolve));
    browser.kill();
    await exited; // chromium writes its profile until it is gone
    try {
      rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
    } catch (e) {
      console.log(`# left ${profile}: ${e.message}`); // chromium's helpers still writing
    }
  };
  return { call, close };
}

/** A page of the browser at `url`, with a way to evaluate expressions in it. */
export async function open(browser, url, width, height) {
  const { targetId } = await browser.call("Target.createTarget", { url: "about:blank" });
  const { sessionId } = await browser.call("Target.attachToTarget", { targetId, flatten: true });
  const call = (method, params) => browser.call(method, params, sessionId);
  await call("Emulation.setDeviceMetricsOverride", { width, height, deviceScaleFactor: 1, mobile: false });
  await call("Page.enable");
  await call("Page.navigate", { url });
  const evaluate = async (expression) => {
    const { result, exceptionDetails } = await call("Runtime.evaluate", { expression, returnByValue: true });
    if (exceptionDetails) throw new Error(JSON.stringify(exceptionDetails));
    return result.value;
  };
  return { call, evaluate };
}

/** Polls the page's `snapshot` expression until `ready(value)`; fails with the last value
 * after `ms`. */
export async function until(page, snapshot, ready, ms) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try {
      last = await page.evaluate(snapshot);
      if (ready(last)) return last;
    } catch (e) {
      last = e.message; // the page is still loading
    }
    if (Date.now() > end) throw new Error(`timed out; the page's state: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}


// What the console page knows, as one value for the assertions and their messages.
export const CONSOLE_STATE = `(() => {
  const v = window.udprosView;
  const c = document.getElementById("sonar");
  const pixels = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  let lit = 0;
  for (let i = 0; i < pixels.length; i += 4 * 7) if (pixels[i] + pixels[i + 1] + pixels[i + 2] > 150) lit++;
  return {
    connected: v.connected,
    echoes: v.sonar.echoes,
    seeded: v.sonar.seeded,
    litSonarPixels: lit,
    profiles: v.depth.profiles,
    depth: document.getElementById("depth").textContent,
    reports: v.link.reports,
    rtt: document.getElementById("rtt").textContent,
    offset: document.getElementById("offset").textContent,
    sonarTopic: v.panels.sonar.topic,
    sonarType: v.panels.sonar.type,
    depthTopic: v.panels.depth.topic,
    depthType: v.panels.depth.type,
    sonarChoices: [...document.querySelectorAll("#sonar-topic option")].map((o) => o.value),
    depthChoices: [...document.querySelectorAll("#depth-topic option")].map((o) => o.textContent),
    rows: document.querySelectorAll("#topics tr").length,
    linksKnown: v.links.size,
    decodeErrors: v.decodeErrors,
    overflow: document.documentElement.scrollWidth - window.innerWidth,
  };
})()`;


/** Chooses `topic` in the picker `select` (an element id) as an operator would. */
export async function pick(page, select, topic) {
  await page.evaluate(`(() => {
    const s = document.getElementById(${JSON.stringify(select)});
    s.value = ${JSON.stringify(topic)};
    s.dispatchEvent(new Event("change"));
  })()`);
}
