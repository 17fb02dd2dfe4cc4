// The console page in a real browser: Debian's chromium, headless, driven over the
// DevTools protocol (with the `ws` package), loads the page that the demo's view serves
// and is asked, from the page's own state, whether it is live: connected, echoes painted
// on the sonar picture, depths, link reports, topics listed. It saves a screenshot for
// the README (UDPROS_SCREENSHOT) and checks the layout at a tablet's width.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import WebSocket from "ws";

const VIEW = process.env.UDPROS_VIEW_URL; // ws://host:port
const CHROMIUM = process.env.UDPROS_CHROMIUM ?? "chromium";
const SCREENSHOT = process.env.UDPROS_SCREENSHOT;
assert.ok(VIEW, "UDPROS_VIEW_URL names the view to test");

/** Starts chromium and connects to its DevTools endpoint. */
async function launch() {
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
async function open(browser, url, width, height) {
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

/** Polls the page's snapshot until `ready(snapshot)`; fails with the last one after `ms`. */
async function until(page, ready, ms) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try {
      last = await page.evaluate(SNAPSHOT);
      if (ready(last)) return last;
    } catch (e) {
      last = e.message; // the page is still loading
    }
    if (Date.now() > end) throw new Error(`timed out; the page's state: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const PAGE = VIEW.replace(/^ws/, "http") + "/";

// What the page knows, as one value for the assertions and their messages.
const SNAPSHOT = `(() => {
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
    rows: document.querySelectorAll("#topics tr").length,
    linksKnown: v.links.size,
    decodeErrors: v.decodeErrors,
    overflow: document.documentElement.scrollWidth - window.innerWidth,
  };
})()`;

test("the console draws the demo live, on a laptop and a tablet", async () => {
  const browser = await launch();
  try {
    const laptop = await open(browser, PAGE, 1400, 1350);
    await until(laptop, (s) => s.connected, 20_000);
    // Live: the sonar has painted a good part of a turn, the depth and link panels have
    // their numbers, and the topic table lists the graph with the view's link counters.
    const s = await until(
      laptop,
      (s) =>
        s.echoes > 200 && s.seeded && s.profiles > 10 && s.reports >= 5 && s.linksKnown >= 3 && s.rows >= 10,
      30_000,
    );
    assert.ok(s.seeded, "the bridge's fan image seeded the picture");
    assert.ok(s.litSonarPixels > 2000, `echoes drawn: ${JSON.stringify(s)}`);
    assert.match(s.depth, /^\d+\.\d\d m$/);
    assert.match(s.rtt, /PING \d+\.\d\d ms/);
    assert.equal(s.decodeErrors, 0);
    assert.ok(s.overflow <= 0, `no sideways scrolling: ${JSON.stringify(s)}`);
    if (SCREENSHOT) {
      // PNG for the test's own check; JPEG (smaller) when the name asks for it.
      const jpeg = /\.jpe?g$/.test(SCREENSHOT);
      const { data } = await laptop.call(
        "Page.captureScreenshot",
        jpeg ? { format: "jpeg", quality: 85 } : { format: "png" },
      );
      writeFileSync(SCREENSHOT, Buffer.from(data, "base64"));
    }
    // A tablet in portrait: one column, nothing cut off at the side.
    const tablet = await open(browser, PAGE, 820, 1180);
    const t = await until(tablet, (s) => s.echoes > 20, 20_000);
    assert.ok(t.overflow <= 0, `no sideways scrolling on a tablet: ${JSON.stringify(t)}`);
  } finally {
    await browser.close();
  }
});
