// Drives a `rubric report` page in headless Chromium (Debian's) through playwright-core and
// prints what it observed as one JSON object; tests/report.rs checks it against the data.
// Usage: node report.mjs CONFIG_JSON
//   CONFIG_JSON: {"driver": DIR with node_modules/playwright-core, "chromium": PATH,
//                 "page": HTML FILE, "screenshot": PNG FILE, "query": TEXT, "row": N}
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import path from "node:path";

const config = JSON.parse(process.argv[2]);
const require = createRequire(path.join(config.driver, "package.json"));
const { chromium } = require("playwright-core");

const browser = await chromium.launch({
  executablePath: config.chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const out = { console_errors: [], page_errors: [], requests: [] };
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on("console", (m) => { if (m.type() === "error") out.console_errors.push(m.text()); });
  page.on("pageerror", (e) => out.page_errors.push(String(e)));
  page.on("request", (r) => out.requests.push(r.url()));
  await page.goto(pathToFileURL(config.page).href, { waitUntil: "load" });
  await page.waitForSelector("body[data-ready=true]", { timeout: 10000 });

  const rows = () => page.locator("#rows tbody tr.row").count();
  out.title = await page.title();
  out.cards = await page.$$eval(".stat-card", (cs) => cs.map((c) => ({ name: c.dataset.name, value: c.querySelector(".value").textContent, interval: c.querySelector(".interval").textContent })));
  out.histogram = await page.$$eval(".hist-bar[data-count]", (bs) => bs.map((b) => ({ count: Number(b.dataset.count), height: b.getBBox().height })));
  out.criterion_bars = await page.$$eval(".crit-bar", (gs) => gs.map((g) => ({ key: g.dataset.key, total: Number(g.dataset.total), width: g.getBBox().width, rects: g.querySelectorAll("rect").length })));
  out.axis_bars = await page.$$eval(".axis-bar", (gs) => gs.map((g) => g.dataset.key));
  out.keyed_charts = await page.$$eval(".keyed-chart", (cs) => cs.map((c) => ({ name: c.dataset.name, bars: c.querySelectorAll("rect.value-bar").length })));
  out.failures = await page.$$eval("#failures tr", (trs) => trs.slice(1).map((tr) => [...tr.children].map((td) => td.textContent)));
  out.judges = await page.$$eval("#judges tr", (trs) => trs.slice(1).map((tr) => [...tr.children].map((td) => td.textContent)));
  out.agreement_visible = await page.locator("#agreement-section").isVisible();
  out.agreement = await page.$$eval("#agreement tr", (trs) => trs.slice(1).map((tr) => [...tr.children].map((td) => td.textContent)));
  out.rows_initial = await rows();
  out.row_count_text = await page.textContent("#row-count");

  await page.fill("#filter-text", config.query);
  out.rows_after_query = await rows();
  out.rows_after_query_ids = await page.$$eval("#rows tbody tr.row", (trs) => trs.map((tr) => tr.children[1].textContent));
  await page.fill("#filter-text", "");
  out.rows_by_status = {};
  for (const st of ["scored", "unscored", "error", "unmet", "all"]) {
    await page.selectOption("#filter-status", st);
    out.rows_by_status[st] = await rows();
  }

  const row = page.locator(`#rows tbody tr.row[data-row="${config.row}"]`);
  await row.click();
  out.detail_open = await page.locator("tr.detail").count();
  out.detail_criteria = await page.$$eval("tr.detail tr.criterion", (trs) => trs.map((tr) => ({ id: tr.dataset.id, status: tr.children[0].textContent, evidence: tr.children[4].textContent })));
  out.detail_marks = await page.$$eval("tr.detail mark.evidence", (ms) => ms.map((m) => m.textContent));
  out.detail_marks_visible = await page.locator("tr.detail mark.evidence").first().isVisible().catch(() => false);
  await page.screenshot({ path: config.screenshot, fullPage: true });
  await row.click();
  out.detail_after_second_click = await page.locator("tr.detail").count();
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out));
