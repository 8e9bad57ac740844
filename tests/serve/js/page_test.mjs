// The page at / in headless chromium (playwright-core): it streams a
// completion, colours each token by its origin, shows tok/s and acceptance,
// and loads nothing from anywhere but the server.
import { chromium } from "playwright-core";
import assert from "node:assert/strict";

const [port, key] = process.argv.slice(2);
const base = `http://127.0.0.1:${port}`;
const browser = await chromium.launch({ executablePath: process.env.MTPSPEC_CHROMIUM,
                                        args: ["--no-sandbox", "--headless=new"] });
try {
  const page = await browser.newPage();
  const foreign = [];
  page.on("request", (r) => { if (!r.url().startsWith(base)) foreign.push(r.url()); });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(base + "/");
  await page.fill("#key", key);
  await page.fill("#prompt", "Once upon a time");
  await page.fill("#max", "60");
  await page.fill("#temp", "0");
  await page.click("#go");
  await page.waitForFunction(() => document.body.dataset.done === "1", null, { timeout: 60000 });
  assert.equal(await page.textContent("#error"), "", "the page reported an error");
  const spans = await page.$$eval("#out span", (els) =>
    els.map((e) => ({ origin: e.dataset.origin, cls: e.className, text: e.textContent })));
  assert.ok(spans.length > 0, "no tokens shown");
  for (const s of spans) {
    const want = s.origin === "target" ? "t-target"
               : /^mtp[0-3]$/.test(s.origin) ? "t-" + s.origin
               : /^mtp\d+$/.test(s.origin) ? "t-mtpN" : "t-lookup";
    assert.equal(s.cls, want, "origin " + s.origin + " coloured " + s.cls);
  }
  // The same request through the API: the page shows exactly its text.
  const r = await fetch(base + "/v1/completions", {
    method: "POST", headers: { Authorization: "Bearer " + key, "Content-Type": "application/json" },
    body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 60, temperature: 0 }) });
  const j = await r.json();
  assert.equal(spans.map((s) => s.text).join(""), j.choices[0].text);
  assert.equal(Number(await page.textContent("#toks")), j.usage.completion_tokens);
  assert.ok(Number(await page.textContent("#rate")) > 0, "no tok/s shown");
  assert.match(await page.textContent("#accept"), /^0: \d\.\d\d, 1: \d\.\d\d, 2: \d\.\d\d$/);
  // Origins this random drafter may not produce: the page's mapping itself.
  const classes = await page.evaluate(() =>
    ["target", "mtp0", "mtp1", "mtp3", "mtp7", "prompt", "history"].map(originClass));
  assert.deepEqual(classes, ["t-target", "t-mtp0", "t-mtp1", "t-mtp3", "t-mtpN", "t-lookup",
                             "t-lookup"]);
  assert.deepEqual(foreign, [], "the page loaded foreign resources");
  assert.deepEqual(errors, []);
  console.log(`page: ok (${spans.length} coloured pieces, origins ` +
              [...new Set(spans.map((s) => s.origin))].join(",") + ")");
} finally {
  await browser.close();
}
