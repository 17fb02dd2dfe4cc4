// The console with other sources than udpros's own nodes: the ROS1 ping360_sonar
// driver's drop-in (`ping360_node`, ping360_sonar/SonarEcho on sonar/data) beside the
// demo, chosen in the sonar panel's picker, and the Ping1D's sensor_msgs/Range chosen in
// the depth panel's: each is drawn.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CONSOLE_STATE, launch, open, pick, until as untilState } from "./chromium.js";

const VIEW = process.env.UDPROS_VIEW_URL; // ws://host:port
assert.ok(VIEW, "UDPROS_VIEW_URL names the view to test");
// The console's page at the view's address, with the view's query (its token) kept.
const PAGE = (() => {
  const page = new URL(VIEW);
  page.protocol = "http:";
  return page.toString();
})();
const until = (page, ready, ms) => untilState(page, CONSOLE_STATE, ready, ms);
const SONAR_ECHO = "/ping360_node/sonar/data";

test("the console draws SonarEcho and Range topics picked by hand", async () => {
  const browser = await launch();
  try {
    const page = await open(browser, PAGE, 1400, 1350);
    await until(page, (s) => s.connected && s.sonarChoices.includes(SONAR_ECHO), 30_000);
    await pick(page, "sonar-topic", SONAR_ECHO);
    const sonar = await until(
      page,
      (s) => s.sonarType === "ping360_sonar/SonarEcho" && s.echoes > 30 && s.litSonarPixels > 500,
      30_000,
    );
    assert.equal(sonar.sonarTopic, SONAR_ECHO);
    assert.equal(sonar.decodeErrors, 0);

    const range = sonar.depthChoices.find((text) => text.includes("(Range)"));
    assert.ok(range, `a Range topic is offered: ${JSON.stringify(sonar.depthChoices)}`);
    const before = sonar.profiles;
    await pick(page, "depth-topic", range.split(" ")[0]);
    const depth = await until(
      page,
      (s) => s.depthType === "sensor_msgs/Range" && s.profiles > before + 5 && /^\d+\.\d\d m$/.test(s.depth),
      30_000,
    );
    assert.equal(depth.decodeErrors, 0);
  } finally {
    await browser.close();
  }
});
