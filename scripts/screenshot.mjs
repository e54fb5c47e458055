// scripts/screenshot.mjs - the dashboard of a running collector as Debian's
// Chromium shows it (1400 px wide unless told), written to a PNG: the README's picture
// (scripts/demo.sh --screenshot PNG runs it on the demo's collector).
//
//   node scripts/screenshot.mjs <collector url> <api key> <out.png> [width]
//
// playwright-core is the browser test's (npm ci --prefix
// tests/collector/http/dashboard). The page is taken once it says it is
// ready (body[data-state="ready"]) with the hang stacks listed and the
// flame graph drawn; anything else (an error state, a JS error) fails
// with the reason, exit 1.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

const require = createRequire(new URL('../tests/collector/http/dashboard/package.json', import.meta.url));
const { chromium } = require('playwright-core');

const [url, key, out, widthArg] = process.argv.slice(2);
const width = widthArg === undefined ? 1400 : Number(widthArg);
if (!url || !key || !out || !Number.isInteger(width) || width < 320 || width > 4000) {
  console.error('usage: node scripts/screenshot.mjs <collector url> <api key> <out.png> [width: 320..4000, default 1400]');
  process.exit(2);
}

const browser = await chromium.launch({
  executablePath: process.env.PERF_CHROMIUM || '/usr/bin/chromium',
  args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
    '--no-first-run', '--no-default-browser-check', '--mute-audio'],
  timeout: 60000,
});
const errors = [];
try {
  const page = await browser.newPage({ viewport: { width, height: 1000 } });
  page.setDefaultTimeout(30000);
  page.on('pageerror', (err) => errors.push(`uncaught: ${err.message}`));
  page.on('console', (msg) => { if (msg.type() === 'error') errors.push(msg.text()); });
  // The key is in localStorage (where the page's own field saves it) before
  // the page's first script runs, so no request leaves without it.
  await page.addInitScript((k) => localStorage.setItem('perf-collector.api-key', k), key);
  await page.goto(`${url}/dashboard/?kind=hang`);
  await page.waitForSelector('body[data-state="ready"]');
  await page.locator('.flame-panel').waitFor({ state: 'visible' });
  if (errors.length) throw new Error(`the page logged errors:\n  ${errors.join('\n  ')}`);
  await page.screenshot({ path: out, fullPage: false });
  const png = readFileSync(out);
  if (png.length < 10000 || png.subarray(1, 4).toString() !== 'PNG') {
    throw new Error(`${out}: not a PNG of the page (${png.length} bytes)`);
  }
  console.log(`${out}: ${png.length} bytes`);
} catch (err) {
  console.error(`screenshot: ${err.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
