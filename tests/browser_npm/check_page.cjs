// Opens one HTML page in headless Chromium (@sparticuz/chromium, driven by puppeteer-core) and
// prints, as one JSON object, what a reader of the page sees: its title, the text of every
// table's cells by table id, the rendered size of every element whose id is given on the
// command line by prefix (the plots' bars), the text of every <text> of the plots, the
// accessibility tree a screen reader reads (roles and names), and everything that went
// wrong: requests the page made (a self-contained page makes none besides itself), dialogs it
// opened, errors it raised or logged.
//
//   node check_page.cjs PAGE.html SCREENSHOT.png BAR_ID_PREFIX...
"use strict";
const chromium = require("@sparticuz/chromium").default;
const puppeteer = require("puppeteer-core");
const { pathToFileURL } = require("node:url");

async function main() {
  const [page_path, screenshot, ...prefixes] = process.argv.slice(2);
  const url = pathToFileURL(page_path).href;
  const browser = await puppeteer.launch({
    executablePath: await chromium.executablePath(),
    args: [...chromium.args, "--disable-background-networking", "--disable-component-update", "--no-first-run"],
    headless: true,
    defaultViewport: { width: 1280, height: 900 },
  });
  const seen = { requests: [], dialogs: [], errors: [] };
  try {
    const page = await browser.newPage();
    await page.setRequestInterception(true);
    page.on("request", (request) => {
      if (request.url() === url) return request.continue();
      seen.requests.push(request.url());
      return request.abort();
    });
    page.on("dialog", async (dialog) => {
      seen.dialogs.push(dialog.message());
      await dialog.dismiss();
    });
    page.on("pageerror", (error) => seen.errors.push(String(error)));
    page.on("console", (message) => {
      if (message.type() === "error") seen.errors.push(message.text());
    });
    await page.goto(url, { waitUntil: "load" });
    const found = await page.evaluate((prefixes) => {
      const tables = {};
      for (const table of document.querySelectorAll("table[id]")) {
        tables[table.id] = [...table.tBodies[0].rows].map((row) => [...row.cells].map((cell) => cell.innerText));
      }
      const bars = {};
      for (const element of document.querySelectorAll("[id]")) {
        if (prefixes.some((prefix) => element.id.startsWith(prefix))) {
          const box = element.getBoundingClientRect();
          bars[element.id] = { width: box.width, height: box.height, x: box.x, y: box.y };
        }
      }
      const labels = {};
      for (const figure of document.querySelectorAll("figure[id]")) {
        labels[figure.id] = [...figure.querySelectorAll("text")].map((text) => text.textContent);
      }
      const scripts = document.querySelectorAll("script").length;
      const cards = [...document.querySelectorAll("#summary li")].map((card) => card.textContent);
      return { title: document.title, tables, bars, labels, scripts, cards, text: document.body.innerText };
    }, prefixes);
    // what a screen reader is given: the accessibility tree, its nodes' roles and names
    const accessibility = await page.accessibility.snapshot({ interestingOnly: false });
    await page.screenshot({ path: screenshot, fullPage: true });
    console.log(JSON.stringify({ ...found, ...seen, accessibility, browser: await browser.version() }));
  } finally {
    await browser.close();
  }
}

main().catch((error) => {
  console.error(String(error && error.stack ? error.stack : error));
  process.exit(1);
});
