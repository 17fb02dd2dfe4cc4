// The console page in a real browser: Debian's chromium, headless, driven over the
// DevTools protocol (with the `ws` package), loads the page that the demo's view serves
// and is asked, from the page's own state, whether it is live: connected, echoes painted
// on the sonar picture, depths, link reports, topics listed. It saves a screenshot for
// the book (UDPROS_SCREENSHOT) and checks the layout at a tablet's width.
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { CONSOLE_STATE, launch, open, until as untilState } from "./chromium.js";

const VIEW = process.env.UDPROS_VIEW_URL; // ws://host:port
const SCREENSHOT = process.env.UDPROS_SCREENSHOT;
assert.ok(VIEW, "UDPROS_VIEW_URL names the view to test");

// The console's page at the view's address, with the view's query (its token) kept.
const PAGE = (() => {
  const page = new URL(VIEW);
  page.protocol = "http:";
  return page.toString();
})();

const until = (page, ready, ms) => untilState(page, CONSOLE_STATE, ready, ms);

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
    // The simulated autopilot counts from its boot: said so, as a duration.
    assert.match(s.offset, /^autopilot clock: .*since its boot/);
    assert.equal(s.sonarType, "udpros/Ping360Echo", "the best type first");
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
