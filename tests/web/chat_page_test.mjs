// The web chat page in Debian's headless Chromium (driven by npm
// "puppeteer-core"): the page served at "/" loads and names the model, a
// prompt gets a reply that streams onto the page (it is seen growing
// before it ends), and a screenshot is saved as a test artifact.
//
//   node tests/web/chat_page_test.mjs COORDINATOR_BINARY MODEL_DIR SCREENSHOT.png
// CHROMIUM (default /usr/bin/chromium) names the browser.
import puppeteer from "puppeteer-core";
import { check, startServer } from "./server.mjs";

const [binary, modelDir, screenshot] = process.argv.slice(2);
if (!binary || !modelDir || !screenshot) {
  console.error("usage: chat_page_test.mjs COORDINATOR_BINARY MODEL_DIR SCREENSHOT.png");
  process.exit(2);
}
const server = await startServer(binary, ["--model", modelDir]);
let browser = null, failed = false;
try {
  browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    timeout: 120000,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  const page = await browser.newPage();
  await page.setViewport({ width: 1100, height: 700 });
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(e.message));
  const response = await page.goto(server.url + "/", { waitUntil: "load" });
  check(response.status() === 200, "GET / is 200");
  check((await page.title()) === "Flotilla chat", "the page title");
  await page.waitForFunction(
      () => document.getElementById("model").textContent === "stories260k-moe",
      { timeout: 20000 });
  check(true, "the page names the model from /v1/models");

  // Greedy, long enough that the reply streams in several pieces.
  await page.$eval("#temperature", (e) => { e.value = "0"; });
  await page.$eval("#max_tokens", (e) => { e.value = "200"; });
  await page.type("#prompt", "Once upon a time");
  // Record every length the reply shows, to see it grow while streaming.
  await page.evaluate(() => {
    window.lengths = [];
    new MutationObserver(() => {
      const r = document.querySelector(".msg.assistant .text");
      if (r) window.lengths.push(r.textContent.length);
    }).observe(document.getElementById("log"),
               { childList: true, subtree: true, characterData: true });
  });
  // A slow link (8 KB/s, Chromium's network emulation) so the reply's
  // events arrive over a few seconds, as from a big model, not in the one
  // read a 0.1 s local reply fits in: the page must show it growing.
  await page.emulateNetworkConditions({ download: 8 * 1024, upload: 1 << 20, latency: 0 });
  await page.click("#send");
  await page.waitForFunction(
      () => ["done", "error"].includes(document.getElementById("status").textContent),
      { timeout: 120000 });
  const status = await page.$eval("#status", (e) => e.textContent);
  const reply = await page.$eval(".msg.assistant .text", (e) => e.textContent);
  const lengths = await page.evaluate(() => window.lengths);
  check(status === "done", "the reply finished: " + status);
  check(reply.startsWith(", there was a little girl named Lily"),
        "the reply is the model's greedy story: " + JSON.stringify(reply.slice(0, 60)));
  const partial = new Set(lengths.filter((n) => n > 0 && n < reply.length));
  check(partial.size >= 3, `the reply grew on the page in ${partial.size} steps before it ended`);
  check(/tokens in/.test(await page.$eval("#stats", (e) => e.textContent)),
        "the page reports tokens and time");
  check(pageErrors.length === 0, "no script errors: " + pageErrors.join("; "));
  await page.screenshot({ path: screenshot });
  console.log("screenshot: " + screenshot);
} catch (e) {
  failed = true;
  console.error("FAILED: " + (e.stack || e));
  console.error("server output:\n" + server.output());
} finally {
  if (browser) await browser.close();
  const code = await server.stop();
  if (code !== 0) {
    failed = true;
    console.error(`the server exited ${code} on SIGTERM`);
  }
}
process.exit(failed ? 1 : 0);
