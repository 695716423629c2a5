// The `setwise ui` page in a real browser (Playwright driving Debian's headless
// Chromium): it loads, a run of each protocol completes with the right intersection,
// progress shows during a larger run, a bad CSV shows a clear error, and the report
// page renders. Run by scripts/test-browser, which starts the server and sets
// SETWISE_UI_URL, SETWISE_REPORT_HTML, SETWISE_SCREENSHOTS, CHROMIUM and PLAYWRIGHT_DIR.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import path from "node:path";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run scripts/test-browser`);
  return v;
};
const { chromium } = createRequire(path.join(env("PLAYWRIGHT_DIR"), "node_modules", "/"))("playwright");
const url = env("SETWISE_UI_URL");
const shots = env("SETWISE_SCREENSHOTS");
const shot = (page, name) => page.screenshot({ path: path.join(shots, name), fullPage: true });

let browser, page;
before(async () => {
  browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  // The page must work with nothing from outside: any request elsewhere fails the test.
  page.on("request", (r) => {
    if (!r.url().startsWith(url) && !r.url().startsWith("file:") && !r.url().startsWith("data:")) {
      throw new Error(`external request ${r.url()}`);
    }
  });
});
after(async () => browser && (await browser.close()));

const receiverStatus = () => page.locator("#receiver .status");

async function runAndWait(timeout) {
  await page.click("#run");
  await page.waitForFunction(() => {
    const s = document.querySelector("#run-status").textContent;
    return s.startsWith("done") || document.querySelector("#run-status").classList.contains("error");
  }, null, { timeout });
  assert.equal(await page.locator("#run-status.error").count(), 0, await page.locator("#run-status").textContent());
}

test("the page loads with both parties' sets checked", async () => {
  await page.goto(url);
  assert.match(await page.title(), /setwise/);
  await page.waitForFunction(() => document.querySelector("#protocol").options.length >= 5);
  await page.waitForFunction(() => /distinct items/.test(document.querySelector("#sender .status").textContent));
  assert.match(await receiverStatus().textContent(), /^4 distinct items/);
  await shot(page, "ui-before.png");
});

for (const protocol of ["ecdh", "vole", "mqrpmt", "compact", "fhe", "auto"]) {
  test(`a ${protocol} run shows the right intersection`, async () => {
    await page.selectOption("#protocol", protocol);
    await page.selectOption("#operation", "intersection");
    await runAndWait(120_000);
    assert.equal(await page.locator("#match").textContent(), "✓ same as the plain computation");
    assert.equal(await page.locator("#learned-items").textContent(), "bob@example.org\ndave@example.org");
    assert.ok((await page.locator("#steps tr").count()) >= 3, "the steps are listed");
    assert.match(await page.locator("#leak").textContent(), /.{40,}/);
    if (protocol === "ecdh") await shot(page, "ui-after.png");
  });
}

test("a larger run shows progress while it runs", async () => {
  const n = 32768;
  for (const party of ["receiver", "sender"]) {
    await page.fill(`#${party} .gen-n`, String(n));
    await page.click(`#${party} .gen`);
  }
  await page.waitForFunction((n) => document.querySelector("#sender .status").textContent.startsWith(`${n} distinct`), n);
  await page.selectOption("#protocol", "ecdh");
  await page.selectOption("#operation", "intersection");
  await page.click("#run");
  await page.waitForFunction(
    () => [...document.querySelectorAll(".bar .what")].some((e) => /of .* (sent|received)/.test(e.textContent)),
    null,
    { timeout: 120_000 },
  );
  await shot(page, "ui-during.png");
  await page.waitForFunction(() => document.querySelector("#run-status").textContent.startsWith("done"), null, {
    timeout: 300_000,
  });
  assert.match(await page.locator("#learned").textContent(), new RegExp(`: ${n / 2} common items`));
  assert.equal(await page.locator("#match").textContent(), "✓ same as the plain computation");
  await shot(page, "ui-after-large.png");
});

test("a bad CSV shows a clear error and blocks the run", async () => {
  await page.setInputFiles("#receiver .file", {
    name: "bad.csv",
    mimeType: "text/csv",
    buffer: Buffer.from("id,name\nann,1\nbob\n"),
  });
  await page.waitForFunction(() => document.querySelector("#receiver .status").classList.contains("error"));
  assert.equal(await receiverStatus().textContent(), "bad CSV: line 3 has 1 fields, the header has 2");
  assert.ok(await page.locator("#run").isDisabled());
  await shot(page, "ui-bad-csv.png");
});

test("the report page renders without anything from outside", async () => {
  const report = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  const outside = [];
  report.on("request", (r) => r.url().startsWith("file:") || outside.push(r.url()));
  await report.goto(pathToFileURL(env("SETWISE_REPORT_HTML")).href);
  assert.match(await report.locator("h1").textContent(), /^setwise ecdh intersection$/);
  assert.equal(await report.locator("svg rect").count() >= 6, true);
  assert.deepEqual(outside, []);
  await report.screenshot({ path: path.join(shots, "report.png"), fullPage: true });
  await report.close();
});
