// dashboard_test.mjs - the collector's dashboard in a real browser: headless
// Debian chromium driven by playwright-core. Run by tests/test_dashboard.c
// (ctest dashboard_browser) against a perf-collector (with an API keys
// file) that holds the demo app's real batches:
//
//   node dashboard_test.mjs <collector url> <api key> <screenshot.png>
//
// Checks: / redirects to the dashboard; without a key the page says 401;
// with the key the hang table's first row and the flame graph show the
// demo's hang function (as top-stacks returns it), the tooltip (samples and
// hang time) and the zoom work; the stack tables' column headers say what
// each figure is per kind (hangs: Hangs, Samples, Hang time, Mean hang, p95
// hang; CPU: Events, Samples, CPU time, the events' wall time, mean and
// p95), with tooltips naming the unit, and the first row's cells are the
// API's figures (hang time, samples; CPU time from cpu_us, samples, the
// events' wall time); the CPU view shows convolve_kernel first, its flame
// graph as wide as CPU time with a tooltip of CPU time and samples, its
// folded export asked with value=cpu_us; a stack row filters the events;
// an event's detail shows the hang's duration and stack; the hand-made
// "stack-truth" hang (test_dashboard.c) shows its inline frame marked
// "[inline]" with its file:line and the "<truncated: depth>" marker, in
// the API and on the page, and its two device stacks of the same names as
// one stack of 4 samples; the drops line says what the SDKs dropped for
// the filters (the stack-truth batch's 12 rate-limited and 3 spool-quota
// events with app=truth or tag=team:truth, the API's sums without
// filters, "no events dropped" for a tag no batch has), and the tag
// filter narrows the events to the stack-truth hang; the chart of events
// over time has one bar per /api/v1/timeseries point for the same query
// (each with its point's events); the filters and the selected group are in
// the page's URL, and a link carrying them (kind=cpu, app, range, limit;
// group) opens with those filters in the inputs and exactly the API's rows;
// a full-page screenshot is written. The version comparison (test_dashboard.c's
// app "rates": 3.1 with 2 hangs in 1 h watched, 3.2 with 6 in 2 h, 3.0
// with 2 in 10 s, 3.3 with 5 in 6 min): a link with app, a and b shows
// exactly 2.00 and 3.00 hangs per hour with their 95% intervals
// (0.24–7.22, 1.10–6.53), the hours, hangs, busy shares and both
// histograms as the API answers them, slow_query grown from 50.0% to 83.3%
// of the hangs and render shrunk to 16.7%; no rate marked and "Not enough
// data" said for 2 vs 6 and for 2 vs 2 hangs (720.00 per hour after 10 s
// watched, said "10 s"); 3.3 red against 3.2 (intervals apart), and 3.2
// green once the form swaps them (written to the URL); a == b shows the
// API's 400;
// the panel's screenshot is written beside the page's ("-compare.png"), and
// the diff flame graph's ("-diff.png").
// In-app headlines (test_dashboard.c's app "inapp"): its hang and CPU rows
// read "in read ←" reload_config and "in __memset_avx2_unaligned_erms ←"
// fill_buffers as the API's headline says, libc's frames muted when the
// stack expands and in the event's detail; the demo's rows, innermost in
// the app already, are headed by checksum_profile_slowly and convolve_kernel.
// Every kind (test_dashboard.c's app "kinds"): a fatal hang and a manual
// capture, each under its own kind (Hangs lists the fatal hang too) with
// its own badge in the list and the detail, their chart, no stack route
// asked for them; the detail cleared by a kind, a filter or a range that
// leaves its event out, kept by one that keeps it; no hang rate in the
// CPU view.
// The always-on CPU profile (test_dashboard.c's app "prof": three windows
// of two versions, 90 and 30 minutes ago): the Profile kind's table
// (Windows, Samples, CPU time) and its first row as top-stacks answers;
// the flame graph as wide as CPU time, its root the windows' 1.3 s, a
// frame's tooltip in CPU time, the search's share of CPU time and the
// sandwich's totals in microseconds; the windows listed with their badge
// under Profile only (not under Hangs), their chart; a window's detail
// in CPU time; the diff of version 2.0 against 1.0 and of the last hour
// against the hour before, each frame's delta the API's (gzip_body from
// 37.5% to 80%, from 25% to 66.7%); the exports asked with kind=profile
// (folded in CPU microseconds); the filters suggest the windows' app and
// versions.
// Any JS error (console or uncaught) fails the test.
// Exit 0 on success, 1 with the reason on stderr otherwise.
import { chromium } from 'playwright-core';
import { readFileSync } from 'node:fs';

const CHROMIUM = process.env.PERF_CHROMIUM || '/usr/bin/chromium';
const HANG_FUNCTION = 'checksum_profile_slowly';
const HANG_CHAIN = ['checksum_profile_slowly', 'parse_profile_blob', 'load_user_profile'];
const CPU_FUNCTION = 'convolve_kernel';
const TIMEOUT_MS = 30000; // per step: generous for a loaded 2-core machine

const [url, key, screenshotPath] = process.argv.slice(2);
if (!url || !key || !screenshotPath) {
  console.error('usage: node dashboard_test.mjs <collector url> <api key> <screenshot.png>');
  process.exit(2);
}

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

// The API as the dashboard reads it, for the expected values.
async function apiJson(path) {
  const resp = await fetch(`${url}${path}`, { headers: { Authorization: `Bearer ${key}` } });
  check(resp.ok, `GET ${path} -> ${resp.status}`);
  return resp.json();
}

// The dashboard's duration format (app.js fmtMs).
function formatMs(ms) {
  return ms >= 100 ? `${Math.round(ms).toLocaleString('en-US')} ms` : `${ms.toFixed(1)} ms`;
}

// The stack table's header cells and the first row's cells by column.
async function stackTable(page) {
  const headers = await page.locator('#top-stacks-head th').evaluateAll((hs) =>
    hs.map((h) => ({ id: h.dataset.testid, text: h.textContent, title: h.title })));
  const cells = await page.locator('[data-testid="stack-row"]').first().locator('td').evaluateAll((ts) =>
    Object.fromEntries(ts.filter((t) => t.dataset.testid).map((t) => [t.dataset.testid, t.textContent])));
  return { headers, cells };
}

// The headers, their tooltips' words, and the first row's cells against want.
function checkTable(kind, table, wantHeaders, wantTips, wantCells) {
  const texts = table.headers.map((h) => h.text);
  check(JSON.stringify(texts) === JSON.stringify(wantHeaders),
    `${kind} headers ${JSON.stringify(texts)} = ${JSON.stringify(wantHeaders)}`);
  for (const [id, words] of Object.entries(wantTips)) {
    const h = table.headers.find((x) => x.id === `col-${id}`);
    check(h && words.every((w) => h.title.includes(w)), `${kind} ${id} tooltip "${h && h.title}" says ${words}`);
  }
  for (const [id, text] of Object.entries(wantCells))
    check(table.cells[`cell-${id}`] === text, `${kind} first row ${id}: "${table.cells[`cell-${id}`]}" = "${text}"`);
}

const consoleErrors = [];
const requests = []; // every URL the page asked for, in order
let expecting401 = false; // the 401 step: the browser logs the refused fetches
let expecting400 = false; // the comparison's a == b step: the same for its 400

async function main() {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
      '--disable-background-networking', '--disable-extensions', '--disable-component-update',
      '--no-first-run', '--no-default-browser-check', '--mute-audio'],
    timeout: 60000,
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
    page.setDefaultTimeout(TIMEOUT_MS);
    page.on('request', (req) => requests.push(req.url()));
    page.on('pageerror', (err) => consoleErrors.push(`uncaught: ${err.message}`));
    page.on('console', (msg) => {
      if (msg.type() !== 'error') return;
      if (expecting401 && /status of 401/.test(msg.text())) return;
      if (expecting400 && /status of 400/.test(msg.text())) return;
      consoleErrors.push(`console: ${msg.text()} (${msg.location().url})`);
    });
    await run(page);
    check(consoleErrors.length === 0, `no JS errors, got:\n  ${consoleErrors.join('\n  ')}`);
  } finally {
    await browser.close();
  }
}

async function waitReady(page) {
  await page.waitForSelector('body[data-state="ready"]');
}

// The chart against the API: as many bars as points for the chart's own
// query (data-query), each with its point's start and events. The points.
async function checkChart(page) {
  const query = await page.getByTestId('chart').getAttribute('data-query');
  check(query && /(^|&)bucket=(minute|hour|day)(&|$)/.test(query), `chart query ${query}`);
  const { points } = await apiJson(`/api/v1/timeseries?${query}`);
  const bars = await page.locator('[data-testid="chart-bar"]')
    .evaluateAll((rs) => rs.map((r) => `${r.dataset.start}:${r.dataset.events}`));
  const want = points.map((p) => `${p.start_ms}:${p.events}`);
  check(JSON.stringify(bars) === JSON.stringify(want),
    `chart bars ${JSON.stringify(bars)} = API points ${JSON.stringify(want)} (${query})`);
  return points;
}

// Thread states in the words of the SDK's reports, from the API's rows:
// "waiting in read() (pipe) 50%, running 25%" (the page's own statesText
// computed independently here).
function expectedStates(rows) {
  const merged = new Map();
  for (const r of rows) {
    let words = r.state;
    if (r.state !== 'running' && r.state !== 'unknown') {
      words = !r.syscall ? 'waiting outside a system call'
        : `waiting in ${r.syscall.startsWith('syscall ') ? r.syscall : `${r.syscall}()`}${r.fd ? ` (${r.fd})` : ''}`;
    }
    merged.set(words, (merged.get(words) || 0) + r.samples);
  }
  const total = [...merged.values()].reduce((n, v) => n + v, 0);
  return [...merged.entries()].sort((a, b) => b[1] - a[1])
    .map(([w, n]) => `${w} ${Math.round((100 * n) / total)}%`).join(', ');
}

async function firstStackFunction(page) {
  return page.locator('[data-testid="stack-row"]').first()
    .locator('[data-testid="stack-function"]').textContent();
}

// The Alerts panel: the rows of GET /api/v1/alerts/deliveries in its
// order (the test made one: a new CPU group of app "alerted", delivered
// to a test webhook), each with its state, the webhook's status, the
// attempts and the link to its view; the rules listed without their URLs.
async function checkAlerts(page) {
  const { deliveries, rules } = await apiJson('/api/v1/alerts/deliveries?limit=50');
  check(deliveries.length === 1 && deliveries[0].state === 'delivered', 'the test made one alert');
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="alert-row"]').length === n,
    deliveries.length);
  const rows = await page.locator('[data-testid="alert-row"]').evaluateAll((trs) => trs.map((tr) => ({
    key: tr.dataset.key,
    state: tr.querySelector('[data-testid="alert-state"]').textContent,
    status: tr.querySelector('[data-testid="alert-status"]').textContent,
    attempts: tr.querySelector('[data-testid="alert-attempts"]').textContent,
    link: tr.querySelector('[data-testid="alert-link"]')?.getAttribute('href'),
    text: tr.querySelector('[data-testid="alert-link"]')?.textContent,
  })));
  deliveries.forEach((d, i) => {
    const row = rows[i];
    check(row.key === d.alert_key && row.state === d.state && row.status === String(d.status) &&
      row.attempts === String(d.attempts) && row.link === d.link && row.text === d.summary,
    `alert row ${i} ${JSON.stringify(row)} shows ${JSON.stringify(d)}`);
  });
  check(rows[0].link.startsWith('http://dashboard.test:4318/?app=alerted&kind=cpu&range=all&group='),
    `the alert links its group's view: ${rows[0].link}`);
  const ruleTexts = await page.locator('[data-testid="alert-rule"]').allTextContents();
  check(JSON.stringify(ruleTexts) === JSON.stringify(rules.map((r) => `#${r.id} new_group, slack, app alerted`)),
    `rules ${JSON.stringify(ruleTexts)}`);
  check(!(await page.getByTestId('alerts-panel').textContent()).includes('127.0.0.1'),
    'no webhook URL on the page');
}

async function run(page) {
  // The expected values, from the API the page reads.
  const hang = (await apiJson('/api/v1/top-stacks?kind=hang')).stacks[0];
  const cpu = (await apiJson('/api/v1/top-stacks?kind=cpu')).stacks[0];
  check(hang && hang.frames[0] === HANG_FUNCTION, `top hang stack is in ${HANG_FUNCTION}`);
  check(cpu && cpu.frames[0] === CPU_FUNCTION, `top cpu stack is in ${CPU_FUNCTION}`);
  const hangEvents = (await apiJson('/api/v1/events?kind=hang')).events
    .filter((e) => e.group === hang.signature);
  check(hangEvents.length >= 1, 'a hang event in the top group');

  // No key yet: the page loads (assets need no auth) and says 401.
  expecting401 = true;
  const resp = await page.goto(`${url}/`);
  check(resp.ok() && new URL(page.url()).pathname === '/dashboard/', `/ -> /dashboard/ (${page.url()})`);
  await page.waitForSelector('body[data-state="error"]');
  const message = page.getByTestId('message');
  await message.waitFor({ state: 'visible' });
  check(/401/.test(await message.textContent()), 'the message names the 401');

  // The key, saved and used.
  await page.getByTestId('api-key').fill(key);
  await page.getByTestId('save-key').click();
  await waitReady(page);
  expecting401 = false;
  check(await message.isHidden(), 'the 401 message is gone');
  check(await page.evaluate(() => localStorage.getItem('perf-collector.api-key')) === key,
    'the key is in localStorage');
  await checkAlerts(page);

  // The chart: the 24 h default by the hour, the API's points exactly.
  const hangPoints = await checkChart(page);
  const hangQuery = await page.getByTestId('chart').getAttribute('data-query');
  check(/(^|&)kind=hang(&|$)/.test(hangQuery) && /(^|&)bucket=hour(&|$)/.test(hangQuery) &&
    /(^|&)from=\d+(&|$)/.test(hangQuery), `hang chart query ${hangQuery}`);
  const hangCount = hangPoints.reduce((n, p) => n + p.events, 0);
  const storedHangs = (await apiJson('/api/v1/events?kind=hang&limit=1000')).events.length;
  check(hangPoints.length >= 1 && hangCount === storedHangs,
    `chart: ${hangCount} hangs in ${hangPoints.length} bars, ${storedHangs} stored`);

  // Hangs: the first row and the flame graph show the hang function.
  check(await firstStackFunction(page) === HANG_FUNCTION, `first hang row is ${HANG_FUNCTION}`);
  const hangNode = page.locator(`[data-testid="flame-node"][data-name="${HANG_FUNCTION}"]`);
  await hangNode.first().waitFor();
  check(await hangNode.first().getAttribute('data-samples') === String(hang.samples),
    `the flame node has the group's ${hang.samples} samples`);

  // The hang table's columns: what each figure is, and the API's figures.
  checkTable('hang', await stackTable(page),
    ['Function (innermost in-app frame)', 'Impact', 'Hangs', 'Samples', 'Hang time', 'Mean hang', 'p95 hang',
      'First seen', 'Last seen', 'Versions'],
    { samples: ['count'], 'hang-time': ['hang_ms', 'durations'], 'event-mean': ['event_mean_ms'] },
    { events: hang.events.toLocaleString('en-US'), samples: hang.samples.toLocaleString('en-US'),
      'hang-time': formatMs(hang.hang_ms), 'event-mean': formatMs(hang.event_mean_ms),
      'event-p95': formatMs(hang.event_p95_ms) });

  // The stack expands to all its frames.
  await page.locator('[data-testid="stack-toggle"]').first().click();
  const frames = page.locator('[data-testid="stack-frames"]').first();
  await frames.waitFor({ state: 'visible' });
  const frameText = await frames.textContent();
  for (const name of hang.frames) check(frameText.includes(name), `expanded stack has ${name}`);

  // Hover: the tooltip names the frame with its samples and share.
  await hangNode.first().hover();
  const tip = page.getByTestId('flame-tooltip');
  await tip.waitFor({ state: 'visible' });
  const tipText = await tip.textContent();
  check(tipText.includes(HANG_FUNCTION) && tipText.includes('%') &&
    tipText.includes(`${hang.samples.toLocaleString('en-US')} samples`) && tipText.includes('ms hang time'),
  `tooltip: ${tipText}`);

  // Colours: the app's frames warm, the others blue, as the API judges them.
  const hangFlame = await apiJson('/api/v1/flame?kind=hang&from=0');
  const judged = new Map();
  const judge = (node) => {
    if (node.in_app !== undefined && !judged.has(node.name)) judged.set(node.name, node.in_app);
    for (const c of node.children) judge(c);
  };
  judge(hangFlame);
  const drawn = await page.locator('[data-testid="flame-node"][data-in-app]').evaluateAll((nodes) =>
    nodes.map((n) => [n.dataset.name, n.dataset.inApp]));
  const systemDrawn = drawn.filter(([, app]) => app === 'false');
  check(judged.get(HANG_FUNCTION) === true && systemDrawn.length >= 1 &&
    drawn.every(([name, app]) => String(judged.get(name)) === app),
  `flame colours: in_app as the API's (${JSON.stringify(drawn.slice(0, 4))})`);
  const fills = await page.locator('[data-testid="flame-node"][data-in-app] rect').evaluateAll((rs) =>
    rs.map((r) => [r.parentNode.dataset.inApp, getComputedStyle(r).fill]));
  const blue = ([, fill]) => { const m = /rgb\((\d+), (\d+), (\d+)/.exec(fill); return m && Number(m[3]) > Number(m[1]); };
  check(fills.every((f) => (f[0] === 'false') === blue(f)), `flame colours: blue exactly for the system's frames ${JSON.stringify(fills.slice(0, 4))}`);

  // Search: the frames whose name holds the text are marked and the rest
  // dimmed; the matched share is the API tree's (each matching frame's
  // samples, less what a matching frame above it counts); the text is in
  // the URL; Escape clears it.
  await page.getByTestId('flame-search').fill('profile');
  const found = page.getByTestId('flame-match');
  await found.waitFor({ state: 'visible' });
  const hangTree = await apiJson('/api/v1/flame?kind=hang&from=0');
  let matched = 0;
  const matchedNames = new Set();
  const walk = (node, under) => {
    const hit = node.name !== 'all' && node.name.toLowerCase().includes('profile');
    if (hit) matchedNames.add(node.name);
    if (hit && !under) matched += node.samples;
    for (const c of node.children) walk(c, under || hit);
  };
  walk(hangTree, false);
  const wantShare = `${((100 * matched) / hangTree.samples).toFixed(1)}% of all in ${matchedNames.size} functions`;
  const foundText = await found.textContent();
  check(matchedNames.size >= 2 && foundText.includes(wantShare), `search: "${foundText}", want "${wantShare}"`);
  const marked = await page.locator('[data-testid="flame-node"].match').evaluateAll((nodes) =>
    nodes.map((n) => n.getAttribute('data-name')));
  check(marked.length >= 2 && marked.every((n) => n.toLowerCase().includes('profile')), `marked frames: ${marked}`);
  const unmarkedUndimmed = await page.locator('[data-testid="flame-node"]:not(.match):not(.dim)')
    .evaluateAll((nodes) => nodes.map((n) => n.getAttribute('data-name')));
  check(unmarkedUndimmed.every((n) => n === 'all'), `frames neither marked nor dimmed: ${unmarkedUndimmed}`);
  check(new URL(page.url()).searchParams.get('search') === 'profile', `search in the URL: ${page.url()}`);
  await page.getByTestId('flame-search').press('Escape');
  await found.waitFor({ state: 'hidden' });
  check(await page.locator('[data-testid="flame-node"].match').count() === 0, 'Escape clears the search');

  // Keys: from the root, Down goes to its widest callee (the API tree's
  // by samples), Down again to that one's, Up back, Right to the next
  // frame of the row when there is one; Enter zooms into the focused frame
  // (it keeps the focus and spans the graph), Escape zooms out; the
  // focused frame's tooltip is shown.
  const focused = () => page.evaluate(() => {
    const e = document.activeElement;
    return e && e.dataset ? `${e.dataset.depth}:${e.dataset.name}` : '';
  });
  const widest = (node) => [...node.children].sort((a, b) => b.samples - a.samples)[0];
  await page.locator('[data-testid="flame-node"][data-depth="0"]').focus();
  check(await focused() === '0:all', `keys: the root focused (${await focused()})`);
  await page.keyboard.press('ArrowDown');
  const first = widest(hangTree), second = widest(first);
  check(await focused() === `1:${first.name}`, `keys: Down -> 1:${first.name} (${await focused()})`);
  await page.keyboard.press('ArrowDown');
  check(await focused() === `2:${second.name}`, `keys: Down -> 2:${second.name} (${await focused()})`);
  await tip.waitFor({ state: 'visible' });
  check((await tip.textContent()).startsWith(`${second.name}\n`) || (await tip.textContent()).startsWith(second.name),
    `keys: the focused frame's tooltip (${await tip.textContent()})`);
  await page.keyboard.press('ArrowUp');
  check(await focused() === `1:${first.name}`, `keys: Up -> 1:${first.name} (${await focused()})`);
  const row1 = await page.locator('[data-testid="flame-node"][data-depth="1"]').count();
  await page.keyboard.press('ArrowRight');
  check(row1 > 1 ? await focused() !== `1:${first.name}` : await focused() === `1:${first.name}`,
    `keys: Right on a row of ${row1} (${await focused()})`);
  await page.keyboard.press('ArrowLeft');
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('Enter');
  await page.getByTestId('flame-reset').waitFor({ state: 'visible' });
  check(await focused() === `2:${second.name}`, `keys: Enter zoomed, the focus kept (${await focused()})`);
  const keyZoomed = Number(await page.locator(`[data-testid="flame-node"][data-depth="2"][data-name="${second.name}"] rect`)
    .first().getAttribute('width'));
  const keySvg = Number(await page.locator('#flame svg').getAttribute('width'));
  check(keyZoomed >= keySvg - 2, `keys: the zoomed frame spans the graph (${keyZoomed} of ${keySvg})`);
  await page.keyboard.press('Escape');
  await page.getByTestId('flame-reset').waitFor({ state: 'hidden' });
  check(await focused() === '0:all', `keys: Escape zoomed out, the root focused (${await focused()})`);

  // Click: zoom into parse_profile_blob, then back.
  await page.locator('[data-testid="flame-node"][data-name="parse_profile_blob"]').first().click();
  await page.getByTestId('flame-reset').waitFor({ state: 'visible' });
  const svgWidth = Number(await page.locator('#flame svg').getAttribute('width'));
  const zoomedWidth = Number(await page.locator('[data-testid="flame-node"][data-name="parse_profile_blob"] rect')
    .first().getAttribute('width'));
  check(zoomedWidth >= svgWidth - 2, `zoomed frame spans the graph (${zoomedWidth} of ${svgWidth})`);
  // The zoomed function's sandwich: its total and self samples over the
  // whole tree (the API's, summed here), its callers above, callees below.
  await page.getByTestId('flame-sandwich').click();
  await page.getByTestId('sandwich').waitFor({ state: 'visible' });
  const blobTree = await apiJson('/api/v1/flame?kind=hang&from=0');
  let blobTotal = 0, blobSelf = 0;
  const blobCallers = new Set(), blobCallees = new Set();
  const visit = (node, parent, under) => {
    const hit = node.name === 'parse_profile_blob';
    if (hit) {
      blobSelf += node.samples - node.children.reduce((n, c) => n + c.samples, 0);
      if (!under) {
        blobTotal += node.samples;
        if (parent && parent.name !== 'all') blobCallers.add(parent.name);
        for (const c of node.children) blobCallees.add(c.name);
      }
    }
    for (const c of node.children) visit(c, node, under || hit);
  };
  visit(blobTree, null, false);
  const title = page.getByTestId('sandwich-title');
  const [gotTotal, gotSelf] = [Number(await title.getAttribute('data-total')), Number(await title.getAttribute('data-self'))];
  const callerNames = await page.locator('[data-testid="sandwich-caller-node"]').evaluateAll((ns) => ns.map((n) => n.dataset.name));
  const calleeNames = await page.locator('[data-testid="sandwich-callee-node"]').evaluateAll((ns) => ns.map((n) => n.dataset.name));
  check(blobTotal > 0 && gotTotal === blobTotal && gotSelf === blobSelf &&
    [...blobCallers].every((n) => callerNames.includes(n)) && [...blobCallees].every((n) => calleeNames.includes(n)) &&
    callerNames[0] === 'parse_profile_blob' && calleeNames[0] === 'parse_profile_blob',
  `sandwich: total ${gotTotal} (${blobTotal}), self ${gotSelf} (${blobSelf}), callers ${callerNames} ` +
    `(${[...blobCallers]}), callees ${calleeNames} (${[...blobCallees]})`);
  check(new URL(page.url()).searchParams.get('sandwich') === 'parse_profile_blob', `sandwich in the URL: ${page.url()}`);
  await page.getByTestId('sandwich-close').click();
  await page.getByTestId('sandwich').waitFor({ state: 'hidden' });
  await page.getByTestId('flame-reset').click();
  await page.getByTestId('flame-reset').waitFor({ state: 'hidden' });

  // CPU: the burn's function first, and in the flame graph.
  await page.locator('label:has(#kind-cpu)').click();
  await page.waitForFunction(() => document.getElementById('stacks-title').textContent.includes('CPU'));
  await waitReady(page);
  check(await firstStackFunction(page) === CPU_FUNCTION, `first cpu row is ${CPU_FUNCTION}`);
  checkTable('cpu', await stackTable(page),
    ['Function (innermost in-app frame)', 'Impact', 'Events', 'Samples', 'CPU time', 'Events\u2019 wall time',
      'Mean event', 'p95 event', 'First seen', 'Last seen', 'Versions'],
    { samples: ['count'], 'cpu-time': ['CPU time', 'cpu_us', 'ms'], 'event-total': ['not this stack', 'event_total_ms'] },
    { events: cpu.events.toLocaleString('en-US'), samples: cpu.samples.toLocaleString('en-US'),
      'cpu-time': formatMs(cpu.cpu_us / 1000), 'event-total': formatMs(cpu.event_total_ms),
      'event-mean': formatMs(cpu.event_mean_ms), 'event-p95': formatMs(cpu.event_p95_ms) });
  // The flame graph: as wide as CPU time, the API's figures on its nodes.
  const cpuFlame = await apiJson('/api/v1/flame?kind=cpu&from=0');
  const cpuNode = page.locator(`[data-testid="flame-node"][data-name="${CPU_FUNCTION}"]`).first();
  await cpuNode.waitFor();
  await page.waitForFunction((n) => {
    const root = document.querySelector('[data-testid="flame-node"][data-name="all"]');
    return root && root.dataset.cpuUs === String(n);
  }, cpuFlame.cpu_us);
  check(/width = CPU time/.test(await page.locator('#flame-hint').textContent()), 'cpu flame: width = CPU time');
  await cpuNode.hover();
  await tip.waitFor({ state: 'visible' });
  const cpuTip = await tip.textContent();
  const nodeCpu = Number(await cpuNode.getAttribute('data-cpu-us'));
  const nodeSamples = Number(await cpuNode.getAttribute('data-samples'));
  check(nodeCpu > 0 && cpuTip.includes(`${formatMs(nodeCpu / 1000)} CPU · ${nodeSamples.toLocaleString('en-US')} samples`),
    `cpu tooltip: ${cpuTip}`);
  await page.mouse.move(0, 0);
  // The CPU view's folded export counts CPU microseconds, as its flame graph.
  const [folded] = await Promise.all([
    page.waitForRequest((r) => r.url().includes('/api/v1/export/folded')),
    page.locator('#export-folded').click()]);
  const foldedQuery = new URL(folded.url()).searchParams;
  check(foldedQuery.get('kind') === 'cpu' && foldedQuery.get('value') === 'cpu_us',
    `cpu folded export: ${folded.url()}`);

  // Back to hangs: the row filters the events and highlights the flame graph.
  await page.locator('label:has(#kind-hang)').click();
  await page.waitForFunction(() => document.getElementById('stacks-title').textContent.includes('hang'));
  await waitReady(page);
  await page.locator('[data-testid="stack-row"]').first().click();
  await page.locator(`.frame.highlight[data-name="${HANG_FUNCTION}"]`).first().waitFor();
  // The flame graph is the group's own (/api/v1/flame?group=): all its samples, no others.
  await page.waitForFunction((n) => {
    const root = document.querySelector('[data-testid="flame-node"][data-name="all"]');
    return root && root.dataset.samples === String(n);
  }, hang.samples);
  // The group's thread states over its events (GET /api/v1/states?group=).
  const groupStates = await apiJson(`/api/v1/states?kind=hang&group=${hang.signature}`);
  check(groupStates.samples >= hang.samples && groupStates.states.length >= 1,
    `the group's states cover its samples (${JSON.stringify(groupStates)}, ${hang.samples})`);
  const wantGroupStates = `Thread states of the selected stack: ${expectedStates(groupStates.states)}`;
  await page.waitForFunction((t) => document.getElementById('stack-states').textContent === t, wantGroupStates);
  check(await page.getByTestId('stack-states').isVisible(), 'the stack view shows its thread states');
  await page.locator('#events-all').waitFor({ state: 'visible' });
  const rows = page.locator('[data-testid="event-row"]');
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="event-row"]').length === n,
    hangEvents.length);

  // The event's detail: kind, the hang's duration, its stack.
  const event = hangEvents[0];
  await rows.first().click();
  const detail = page.getByTestId('event-detail');
  await page.waitForFunction((id) => document.getElementById('event-detail').dataset.id === String(id), event.id);
  check(await page.getByTestId('detail-kind').textContent() === 'hang', 'detail kind');
  const duration = await page.getByTestId('detail-duration').textContent();
  check(duration === formatMs(event.duration_ms), `detail duration ${duration} = ${formatMs(event.duration_ms)}`);
  check((await page.getByTestId('detail-thread').textContent()).startsWith(String(event.tid)), 'detail thread');
  // Its thread states, as the SDK's reports say them (one thread: no tid).
  const eventStates = (await apiJson(`/api/v1/events/${event.id}`)).states;
  check(eventStates.length >= 1 && eventStates.every((r) => r.tid === event.tid),
    `the hang's states are its thread's (${JSON.stringify(eventStates)})`);
  await page.waitForFunction((t) => document.getElementById('detail-states').textContent === t,
    expectedStates(eventStates));
  const stackText = await detail.locator('[data-testid="detail-stack"]').first().textContent();
  for (const name of HANG_CHAIN) check(stackText.includes(name), `detail stack has ${name}`);
  // The demo names the request that hung (perf_sdk_loop_busy_label).
  const label = await page.getByTestId('detail-label').textContent();
  check(event.label === 'GET /profile' && label === event.label, `detail label ${label} (API ${event.label})`);
  // The demo's hang is its main loop's: the detail and the list's Loop column.
  const loop = await page.getByTestId('detail-loop').textContent();
  check(event.loop === 'main' && loop === 'main', `detail loop ${loop} (API ${event.loop})`);
  const rowLoop = await page.locator(`[data-testid="event-row"][data-id="${event.id}"] [data-testid="event-loop"]`)
    .textContent();
  check(rowLoop === 'main', `the event row's loop ${rowLoop}`);
  check((await apiJson('/api/v1/events?kind=hang&label=GET%20%2Fprofile')).events.length === 1,
    'one hang labelled GET /profile');

  // Stack truth: the hand-made hang, in the API then on the page.
  const truth = (await apiJson('/api/v1/events?kind=hang')).events.find((e) => e.reason === 'stack-truth');
  check(truth, 'the stack-truth hang is stored');
  const truthStacks = (await apiJson(`/api/v1/events/${truth.id}`)).stacks;
  check(truthStacks.length === 1 && truthStacks[0].samples === 4,
    `stack-truth: its two device stacks of the same names are one of 4 samples (${JSON.stringify(truthStacks)})`);
  const tf = truthStacks[0].frames;
  check(tf.length === 4, `stack-truth: 4 frames (${JSON.stringify(tf)})`);
  check(tf[0].inline === true && tf[0].function === 'stack_truth_inner' && tf[0].file === 'truth.c' &&
    tf[0].line === 11 && tf[0].address === '0x1234', `API inline frame ${JSON.stringify(tf[0])}`);
  check(tf[1].inline === undefined && tf[1].function === 'stack_truth_outer' && tf[1].line === 22 &&
    tf[1].address === '0x1234', `API physical frame ${JSON.stringify(tf[1])}`);
  check(tf[3].function === '<truncated: depth>' && tf[3].truncated === 'depth',
    `API end marker ${JSON.stringify(tf[3])}`);
  await page.locator('#events-all').click();
  const truthRow = page.locator(`[data-testid="event-row"][data-id="${truth.id}"]`);
  await truthRow.waitFor();
  await truthRow.click();
  await page.waitForFunction((id) => document.getElementById('event-detail').dataset.id === String(id), truth.id);
  const truthShown = detail.locator('[data-testid="detail-stack"]');
  check(await truthShown.count() === 1, `stack-truth detail: one stack (${await truthShown.count()})`);
  const truthHead = await truthShown.first().locator('.stack-head').textContent();
  // One stack of all 4 samples (the two device stacks added up), its hang
  // time beside the count.
  check(truthHead.startsWith('4 samples · ') && truthHead.includes('(100%)'),
    `stack-truth detail head: ${truthHead}`);
  const items = await truthShown.first().locator('ol.frames > li').allTextContents();
  check(items.length === 4, `stack-truth detail: 4 lines (${JSON.stringify(items)})`);
  check(items[0].startsWith('[inline] stack_truth_inner') && items[0].endsWith('truth.c:11'),
    `inline frame line: ${items[0]}`);
  check(!items[1].includes('[inline]') && items[1].startsWith('stack_truth_outer') &&
    items[1].endsWith('truth.c:22'), `physical frame line: ${items[1]}`);
  check(items[3] === '<truncated: depth>', `truncated line: ${items[3]}`);
  check(await detail.getByTestId('detail-truncated').isVisible(), 'the truncated marker is visible');
  check(await detail.getByTestId('inline-mark').first().isVisible(), 'the [inline] mark is visible');
  // The hand-made hang's four samples: exact words and shares.
  const truthStates = await page.getByTestId('detail-states').textContent();
  check(truthStates === 'waiting in read() (pipe) 50%, waiting in futex() 25%, running 25%',
    `stack-truth states: "${truthStates}"`);

  // Drops: the line for the filters, then the tag filter.
  const dropsLine = page.getByTestId('drops');
  const reasons = [['rate_limited', 'rate limit'], ['queue_full', 'queue full'],
    ['sink_failed', 'sink failed'], ['spool_quota', 'spool quota'], ['oversized', 'oversized']];
  const all = await apiJson('/api/v1/drops');
  const allParts = reasons.filter(([k]) => all[k] > 0).map(([k, w]) => `${w} ${all[k].toLocaleString('en-US')}`);
  const allText = allParts.length ? `events dropped: ${allParts.join(', ')}` : 'no events dropped';
  await dropsLine.waitFor({ state: 'visible' });
  check(await dropsLine.textContent() === allText, `drops line "${await dropsLine.textContent()}" = "${allText}"`);
  const truthDrops = 'events dropped: rate limit 12, spool quota 3';
  await page.locator('#app').fill('truth');
  await page.getByTestId('refresh').click();
  await page.waitForFunction((t) => document.getElementById('drops').textContent === t &&
    document.body.dataset.state === 'ready', truthDrops);
  check(await dropsLine.isVisible(), 'the drops line is visible');
  await page.locator('#app').fill('');
  const before = (await apiJson('/api/v1/events?kind=hang')).events.length;
  check(before >= 2, `more than the stack-truth hang without a tag filter (${before})`);
  await page.getByTestId('refresh').click();
  await waitReady(page);
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="event-row"]').length === n, before);
  await page.getByTestId('tag-filter').fill('team:truth');
  await page.getByTestId('refresh').click();
  await page.waitForFunction((t) => document.getElementById('drops').textContent === t &&
    document.body.dataset.state === 'ready', truthDrops);
  const tagged = await page.locator('[data-testid="event-row"]').evaluateAll((rs) => rs.map((r) => r.dataset.id));
  check(tagged.length === 1 && tagged[0] === String(truth.id),
    `tag team:truth: only the stack-truth event (${JSON.stringify(tagged)}, of ${before})`);
  await page.locator(`[data-testid="event-row"][data-id="${truth.id}"]`).click();
  await page.waitForFunction(() => document.getElementById('detail-tags').textContent === 'team:truth');
  // A registered loop's hang: named in its row and its detail.
  check(truth.loop === 'render-3', `the stack-truth hang's loop in the API: ${truth.loop}`);
  check(await page.getByTestId('detail-loop').textContent() === 'render-3', 'detail loop render-3');
  check(await page.locator(`[data-testid="event-row"][data-id="${truth.id}"] [data-testid="event-loop"]`)
    .textContent() === 'render-3', 'the stack-truth row\'s loop is render-3');
  await page.getByTestId('tag-filter').fill('team:nobody');
  await page.getByTestId('refresh').click();
  await page.waitForFunction(() => document.getElementById('drops').textContent === 'no events dropped' &&
    document.body.dataset.state === 'ready');
  check(await page.locator('[data-testid="event-row"]').count() === 0, 'tag team:nobody: no events');
  await page.getByTestId('tag-filter').fill('team:truth');
  await page.getByTestId('refresh').click();
  await page.waitForFunction((t) => document.getElementById('drops').textContent === t &&
    document.body.dataset.state === 'ready', truthDrops);

  // The label filter (the tag filter cleared): the demo's labelled hang
  // alone, then nothing for another label.
  await page.getByTestId('tag-filter').fill('');
  await page.getByTestId('label-filter').fill('GET /profile');
  await page.getByTestId('refresh').click();
  await waitReady(page);
  await page.waitForFunction((id) => {
    const rows = [...document.querySelectorAll('[data-testid="event-row"]')];
    return rows.length === 1 && rows[0].dataset.id === String(id);
  }, event.id);
  await page.getByTestId('label-filter').fill('GET /nothing');
  await page.getByTestId('refresh').click();
  await waitReady(page);
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="event-row"]').length === 0);
  await page.getByTestId('label-filter').fill('');
  await page.getByTestId('tag-filter').fill('team:truth');
  await page.getByTestId('refresh').click();
  await page.waitForFunction((t) => document.getElementById('drops').textContent === t &&
    document.body.dataset.state === 'ready', truthDrops);

  // The chart follows the filters: the stack-truth hang alone, one bar.
  await page.waitForFunction(() => /(^|&)tag=team%3Atruth(&|$)/
    .test(document.getElementById('chart').dataset.query || ''));
  const truthPoints = await checkChart(page);
  check(truthPoints.length === 1 && truthPoints[0].events === 1, `tag team:truth: one bar of one event`);
  // ... and the URL has the filters.
  const shown = new URL(page.url()).searchParams;
  check(shown.getAll('tag').join(' ') === 'team:truth' && !shown.has('label') && !shown.has('kind'),
    `the URL has the tag filter (${page.url()})`);

  // The stack-truth stack selected: its states in the stack view, exactly.
  check(await page.getByTestId('stack-states').isHidden(), 'no stack selected: no states line');
  await page.locator('[data-testid="stack-row"]').first().click();
  await page.waitForFunction((t) => document.getElementById('stack-states').textContent === t,
    'Thread states of the selected stack: waiting in read() (pipe) 50%, waiting in futex() 25%, running 25%');
  check(await page.getByTestId('stack-states').isVisible(), 'the stack-truth states are visible');
  await page.mouse.move(0, 0);
  await page.screenshot({ path: screenshotPath, fullPage: true });
  const png = readFileSync(screenshotPath);
  check(png.length > 10000 && png.subarray(1, 4).toString() === 'PNG', `a PNG screenshot (${png.length} bytes)`);

  await checkLinks(page, hang, event);
  await checkInApp(page);
  await checkKinds(page);
  await checkProfile(page);
  await checkTimeWindow(page);
  await checkPhone(page);
  const comparePng = await checkCompare(page);
  await checkLargeFlame(page);
  console.log(`dashboard ok: ${HANG_FUNCTION} (${hang.samples} samples), ${CPU_FUNCTION}, ` +
    `event ${event.id} ${duration}, "${allText}"; screenshots ${screenshotPath} (${png.length} bytes), ` +
    `${comparePng}`);
}

// The chart chooses the time: a click on the newest hourly bar of the 24 h
// default looks at that hour (from and to in the URL, its own entry in the
// menu, minute bars), and every view follows (the chart's bars and the
// events are the API's for that hour); a drag across the chart picks the
// range under it; choosing an entry of the menu leaves it.
async function checkTimeWindow(page) {
  await page.goto(`${url}/dashboard/`);
  await waitReady(page);
  const bar = page.locator('[data-testid="chart-bar"]').last();
  const start = Number(await bar.getAttribute('data-start'));
  const end = start + 3600000;
  const box = await bar.boundingBox();
  await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
  await page.waitForFunction((s) => new URL(window.location.href).searchParams.get('from') === String(s), start);
  await waitReady(page);
  const q = new URL(page.url()).searchParams;
  check(q.get('to') === String(end) && !q.has('range'), `a bar clicked: the URL ${page.url()}`);
  const chartQuery = await page.getByTestId('chart').getAttribute('data-query');
  check(/(^|&)bucket=minute(&|$)/.test(chartQuery) && chartQuery.includes(`from=${start}`) &&
    chartQuery.includes(`to=${end}`), `a bar clicked: the chart's query ${chartQuery}`);
  const points = await checkChart(page);
  const want = (await apiJson(`/api/v1/events?kind=hang&from=${start}&to=${end}&limit=20`)).events
    .map((e) => String(e.id));
  const rows = await page.locator('[data-testid="event-row"]').evaluateAll((rs) => rs.map((r) => r.dataset.id));
  check(rows.length >= 1 && JSON.stringify(rows) === JSON.stringify(want) &&
    points.reduce((n, p) => n + p.events, 0) >= rows.length,
  `a bar clicked: events ${JSON.stringify(rows)}, the API's ${JSON.stringify(want)}`);
  const menu = await page.locator('#range option:checked').textContent();
  check(menu.includes('–'), `a bar clicked: the menu shows the range (${menu})`);
  // A drag over the middle half of the hour's chart.
  const svg = await page.locator('#chart svg').boundingBox();
  await page.mouse.move(svg.x + svg.width * 0.25, svg.y + 20);
  await page.mouse.down();
  await page.mouse.move(svg.x + svg.width * 0.75, svg.y + 20, { steps: 5 });
  await page.mouse.up();
  await page.waitForFunction((s) => new URL(window.location.href).searchParams.get('from') !== String(s), start);
  await waitReady(page);
  const dq = new URL(page.url()).searchParams;
  const [from, to] = [Number(dq.get('from')), Number(dq.get('to'))];
  check(from > start && to < end && to - from > 1500000 && to - from < 2100000,
    `a drag: ${from - start}..${to - start} ms into the hour`);
  await page.locator('#range').selectOption('86400000');
  await waitReady(page);
  check(!new URL(page.url()).searchParams.has('from') && await page.locator('#range option[data-window]').count() === 0,
    `the menu again: ${page.url()}`);
}

// On a phone's screen (390 px) the filters scroll away with the page
// rather than staying over the content; on a wide one they stay on top,
// and at 1400 px and wider every filter sits on one line (their boxes'
// middles level, none past the window's right edge).
async function checkPhone(page) {
  const position = () => page.evaluate(() => getComputedStyle(document.querySelector('header')).position);
  check(await position() === 'sticky', 'wide: the header stays on top');
  for (const width of [1400, 1440]) {
    await page.setViewportSize({ width, height: 1000 });
    const boxes = await page.evaluate(() => [...document.querySelectorAll('#filters > :not(datalist)')]
      .map((e) => {
        const r = e.getBoundingClientRect();
        return { middle: Math.round((r.top + r.bottom) / 2), right: Math.round(r.right) };
      }));
    const middles = boxes.map((b) => b.middle);
    check(boxes.length >= 9 && Math.max(...middles) - Math.min(...middles) <= 2 &&
      boxes.every((b) => b.right <= width),
      `${width} px: the filters on one line (${JSON.stringify(boxes)})`);
  }
  for (const width of [1400, 800, 390]) await checkLayout(page, width);
  await page.setViewportSize({ width: 390, height: 844 });
  check(await position() === 'static', 'phone: the header scrolls away');
  await page.evaluate(() => window.scrollTo(0, 2000));
  const bottom = await page.evaluate(() => document.querySelector('header').getBoundingClientRect().bottom);
  check(bottom <= 0, `phone: scrolled, the header is off the screen (bottom ${bottom})`);
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.setViewportSize({ width: 1440, height: 1000 });
}

// At a width: no two panels (nor the header and a panel) overlap, by
// their element boxes; every table fits its panel (no sideways scroll:
// at 390 px the tables keep their main columns, the rest hidden); the
// page itself is no wider than the window.
async function checkLayout(page, width) {
  await page.setViewportSize({ width, height: 1000 });
  await page.evaluate(() => window.scrollTo(0, 0));
  const got = await page.evaluate(() => {
    const box = (e) => e.getBoundingClientRect();
    const shown = (e) => { const r = box(e); return r.width > 0 && r.height > 0; };
    const parts = [document.querySelector('header'), ...document.querySelectorAll('main > section.panel')]
      .filter(shown).map((e) => ({ name: e.className || e.tagName, r: box(e) }));
    const overlaps = [];
    for (let i = 0; i < parts.length; i++) {
      for (let j = i + 1; j < parts.length; j++) {
        const a = parts[i].r, b = parts[j].r;
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 1 && h > 1) overlaps.push(`${parts[i].name} / ${parts[j].name}`);
      }
    }
    const wide = [...document.querySelectorAll('main section.panel table')].filter(shown)
      .filter((t) => t.closest('section.panel').scrollWidth > t.closest('section.panel').clientWidth + 1)
      .map((t) => `${t.id}: ${t.closest('section.panel').scrollWidth} > ${t.closest('section.panel').clientWidth}`);
    return { overlaps, wide, page: document.documentElement.scrollWidth };
  });
  check(got.overlaps.length === 0 && got.wide.length === 0 && got.page <= width,
    `${width} px: overlapping ${JSON.stringify(got.overlaps)}, tables wider than their panel ` +
    `${JSON.stringify(got.wide)}, page ${got.page} px wide`);
}

// The rows of the events list: "<id>:<badge's kind>:<badge's text>".
async function eventRows(page) {
  return page.locator('[data-testid="event-row"]').evaluateAll((rs) => rs.map((r) => {
    const b = r.querySelector('[data-testid="kind-badge"]');
    return `${r.dataset.id}:${b.dataset.kind}:${b.textContent}`;
  }));
}

// Whether the detail panel shows no event (its prompt, no id).
async function detailCleared(page) {
  return page.evaluate(() => !document.getElementById('detail-empty').hidden &&
    document.getElementById('detail-body').hidden && !document.getElementById('event-detail').dataset.id);
}

// The view of a kind chosen by its radio, loaded.
async function chooseKind(page, kind) {
  await page.locator(`label:has(#kind-${kind})`).click();
  await page.waitForFunction((k) => new URLSearchParams(window.location.search).get('kind') === (k === 'hang' ? null : k) &&
    document.body.dataset.state === 'ready', kind);
}

// Every kind (test_dashboard.c's app "kinds": a fatal hang 2 h ago, a
// manual capture 1 h ago): each listed under its own kind with its own
// badge in the list and the detail; no stack route is asked for a kind
// it does not sum (the page would log their 400s as errors too); the
// chart counts the kind; the detail cleared when a kind, a filter or the
// range leaves its event out, and kept when the list still holds it;
// the CPU view speaks of CPU (no hang rate in it).
async function checkKinds(page) {
  const api = async (kind) => (await apiJson(`/api/v1/events?app=kinds&kind=${kind}`)).events;
  const [fatal] = await api('fatal_hang');
  const [manual] = await api('manual');
  check(fatal && manual && (await api('hang')).length === 1 && (await api('cpu')).length === 0,
    'kinds: one fatal hang (also a hang), one manual capture, no cpu event');
  await page.goto(`${url}/dashboard/?app=kinds&range=all`);
  await waitReady(page);
  check(JSON.stringify(await eventRows(page)) === JSON.stringify([`${fatal.id}:fatal_hang:fatal hang`]),
    `kinds, hangs: the fatal hang's row ${JSON.stringify(await eventRows(page))}`);
  const detailBadge = async () => page.getByTestId('detail-kind').locator('[data-testid="kind-badge"]')
    .evaluate((b) => `${b.dataset.kind}:${b.textContent}`);
  const show = async (id) => {
    await page.locator(`[data-testid="event-row"][data-id="${id}"]`).click();
    await page.waitForFunction((i) => document.getElementById('event-detail').dataset.id === String(i), id);
  };
  await show(fatal.id);
  check(await detailBadge() === 'fatal_hang:fatal hang', `kinds: the fatal hang's detail badge ${await detailBadge()}`);
  check(await page.locator('#detail-reason').textContent() === fatal.reason, 'kinds: the fatal hang\'s reason');
  // The same filters again: the list still holds the event, the detail stays.
  await page.getByTestId('refresh').click();
  await waitReady(page);
  check(await page.evaluate(() => document.getElementById('event-detail').dataset.id) === String(fatal.id),
    'kinds: a refresh that keeps the event keeps its detail');

  // Fatal hangs alone: the list, the chart; no stacks of their own.
  requests.length = 0;
  await chooseKind(page, 'fatal_hang');
  check(JSON.stringify(await eventRows(page)) === JSON.stringify([`${fatal.id}:fatal_hang:fatal hang`]),
    'kinds, fatal hangs: its row');
  check(await page.evaluate(() => document.getElementById('event-detail').dataset.id) === String(fatal.id),
    'kinds: fatal hangs still hold the fatal hang: its detail stays');
  check(await page.getByTestId('stacks-none').isVisible() && await page.getByTestId('flame-none').isVisible(),
    'kinds, fatal hangs: the stacks and flame panels say where their stacks are');
  check(await page.locator('#chart-title').textContent() === 'Fatal hangs over time', 'kinds: fatal chart title');
  check(JSON.stringify((await checkChart(page)).map((p) => p.events)) === '[1]', 'kinds: one fatal hang in the chart');

  // Manual: the fatal hang's detail goes (a mode switch), the capture listed.
  await chooseKind(page, 'manual');
  check(await detailCleared(page), 'kinds: switching to manual clears the fatal hang\'s detail');
  check(JSON.stringify(await eventRows(page)) === JSON.stringify([`${manual.id}:manual:manual`]),
    `kinds, manual: the capture's row ${JSON.stringify(await eventRows(page))}`);
  check(await page.locator('#chart-title').textContent() === 'Manual captures over time', 'kinds: manual chart title');
  check(JSON.stringify((await checkChart(page)).map((p) => p.events)) === '[1]', 'kinds: one capture in the chart');
  await show(manual.id);
  check(await detailBadge() === 'manual:manual', `kinds: the capture's detail badge ${await detailBadge()}`);
  check(await page.locator('#detail-reason').textContent() === 'user report', 'kinds: the capture\'s reason');
  const stackRoutes = requests.filter((r) => /\/api\/v1\/(top-stacks|flame|export\/|states)/.test(r));
  check(stackRoutes.every((r) => /[?&]kind=(hang|cpu)(&|$)/.test(r)),
    `kinds: no stack route asked for another kind: ${JSON.stringify(stackRoutes)}`);

  // CPU: the capture's detail goes; every label speaks of CPU.
  await chooseKind(page, 'cpu');
  check(await detailCleared(page), 'kinds: switching to CPU clears the capture\'s detail');
  const words = await page.locator('main').innerText();
  check(!/hangs? (per|\/) hour/i.test(words), `kinds, CPU: no hang rate on the page: ${words.slice(0, 400)}`);
  check(/CPU/.test(await page.getByTestId('compare').innerText()), 'kinds, CPU: the comparison panel speaks of CPU');

  // A filter, then the range, that leave the shown event out.
  await chooseKind(page, 'hang');
  await show(fatal.id);
  await page.getByTestId('label-filter').fill('no such label');
  await page.getByTestId('refresh').click();
  await waitReady(page);
  check(await detailCleared(page), 'kinds: a label filter that leaves the fatal hang out clears its detail');
  await page.getByTestId('label-filter').fill('');
  await page.getByTestId('refresh').click();
  await waitReady(page);
  await show(fatal.id);
  await page.locator('#range').selectOption('900000'); // the last 15 min: not 2 h ago
  await waitReady(page);
  await page.waitForFunction(() => !document.querySelector('[data-testid="event-row"]'));
  check(await detailCleared(page), 'kinds: a range that leaves the fatal hang out clears its detail');
}

// The always-on profile's view (the header's comment says what it checks).
async function checkProfile(page) {
  const top = (await apiJson('/api/v1/top-stacks?kind=profile&app=prof')).stacks;
  const flame = await apiJson('/api/v1/flame?kind=profile&app=prof');
  const windows = (await apiJson('/api/v1/events?kind=profile&app=prof')).events;
  check(JSON.stringify(top.map((t) => `${t.frames[0]}:${t.events}:${t.samples}:${t.cpu_us}`)) ===
    '["gzip_body:3:70:700000","parse_json:3:60:600000"]' && flame.cpu_us === 1300000 && flame.samples === 130 &&
    windows.length === 3 && windows.every((w) => w.kind === 'profile' && w.duration_ms === 60000),
  `profile API: ${JSON.stringify(top)} ${flame.cpu_us} ${windows.length}`);
  requests.length = 0;
  await page.goto(`${url}/dashboard/?kind=profile&app=prof&range=all`);
  await waitReady(page);
  check(await page.locator('#kind-profile').isChecked(), 'profile: the kind checked from the link');
  // The filters suggest the profile windows' app and versions.
  await page.waitForFunction(() => document.querySelector('#apps option[value="prof"]') &&
    document.querySelector('#versions option[value="1.0"]') && document.querySelector('#versions option[value="2.0"]'));
  check(await page.locator('#stacks-title').textContent() === 'Hottest stacks of the CPU profile',
    `profile: stacks title ${await page.locator('#stacks-title').textContent()}`);
  checkTable('profile', await stackTable(page),
    ['Function (innermost in-app frame)', 'Impact', 'Windows', 'Samples', 'CPU time', 'First seen', 'Last seen',
      'Versions'],
    { events: ['profile windows', 'count'], 'cpu-time': ['CPU time', 'cpu_us', 'ms'] },
    { events: '3', samples: '70', 'cpu-time': '700 ms' });
  check(await firstStackFunction(page) === 'gzip_body', 'profile: gzip_body first');
  // The flame graph: CPU time, the windows' sum of weight_micros at its root.
  const root = page.locator('[data-testid="flame-node"][data-name="all"]');
  check(await root.getAttribute('data-cpu-us') === '1300000' && await root.getAttribute('data-samples') === '130',
    `profile flame root: ${await root.getAttribute('data-cpu-us')} us`);
  check(/width = CPU time/.test(await page.locator('#flame-hint').textContent()), 'profile flame: width = CPU time');
  const gzip = page.locator('[data-testid="flame-node"][data-name="gzip_body"]').first();
  check(await gzip.getAttribute('data-cpu-us') === '700000', 'profile flame: gzip_body 700000 us');
  await gzip.hover();
  const tip = page.getByTestId('flame-tooltip');
  await tip.waitFor({ state: 'visible' });
  const tipText = await tip.textContent();
  check(tipText.includes('700 ms CPU · 70 samples, 53.8% of all, 53.8% of prof_loop'), `profile tooltip: ${tipText}`);
  await page.mouse.move(0, 0);
  await page.getByTestId('flame-search').fill('gzip');
  await page.waitForFunction(() => document.getElementById('flame-match').textContent ===
    '"gzip": 53.8% of all in 1 function');
  await page.getByTestId('flame-search').press('Escape');
  await gzip.click();
  await page.getByTestId('flame-sandwich').click();
  await page.getByTestId('sandwich').waitFor({ state: 'visible' });
  const title = page.getByTestId('sandwich-title');
  check(await title.getAttribute('data-total') === '700000' && await title.getAttribute('data-self') === '700000' &&
    (await title.textContent()).startsWith('gzip_body: 53.8% of all'), `profile sandwich: ${await title.textContent()}`);
  await page.getByTestId('sandwich-close').click();
  await page.getByTestId('flame-reset').click();
  // The windows: listed under Profile with their badge, counted in the chart.
  const rows = await eventRows(page);
  check(JSON.stringify(rows) === JSON.stringify(windows.map((w) => `${w.id}:profile:profile`)),
    `profile: the windows' rows ${JSON.stringify(rows)}`);
  check(await page.locator('#chart-title').textContent() === 'Profile windows over time', 'profile: chart title');
  check((await checkChart(page)).reduce((n, p) => n + p.events, 0) === 3, 'profile: three windows in the chart');
  const { id } = windows[0];
  await page.locator(`[data-testid="event-row"][data-id="${id}"]`).click();
  await page.waitForFunction((i) => document.getElementById('event-detail').dataset.id === String(i), id);
  check(await page.locator('#detail-stacks-title').textContent() === 'Stacks: CPU time and samples',
    'profile: a window\'s detail in CPU time');
  // The exports of the view: kind=profile, the folded one in CPU microseconds.
  const [folded] = await Promise.all([
    page.waitForRequest((r) => r.url().includes('/api/v1/export/folded')), page.locator('#export-folded').click()]);
  const fq = new URL(folded.url()).searchParams;
  check(fq.get('kind') === 'profile' && fq.get('value') === 'cpu_us', `profile folded export: ${folded.url()}`);
  const [pprof] = await Promise.all([
    page.waitForRequest((r) => r.url().includes('/api/v1/export/pprof')), page.locator('#export-pprof').click()]);
  check(new URL(pprof.url()).searchParams.get('kind') === 'profile', `profile pprof export: ${pprof.url()}`);
  const stackRoutes = requests.filter((r) => /\/api\/v1\/(top-stacks|flame|export\/|states)/.test(r));
  check(stackRoutes.length >= 3 && stackRoutes.every((r) => /[?&]kind=profile(&|$)/.test(r)),
    `profile: every stack route asked for kind=profile: ${JSON.stringify(stackRoutes)}`);
  // Not slow moments: the Hangs view of the app lists none of them.
  await chooseKind(page, 'hang');
  check((await eventRows(page)).length === 0, 'profile: no window under Hangs');

  // Version 2.0 against 1.0: the flame diff, each frame's delta the API's.
  const deltaOf = (node, name) => {
    if (node.name === name) return node.delta;
    for (const c of node.children) {
      const d = deltaOf(c, name);
      if (d !== undefined) return d;
    }
    return undefined;
  };
  await page.goto(`${url}/dashboard/?kind=profile&app=prof&range=all&a=1.0&b=2.0&diff=1`);
  await waitReady(page);
  check(await page.getByTestId('compare-a').isVisible() && /Diff B against A/.test(await page.getByTestId('compare-body').textContent()),
    `profile: the versions' form and its prompt: ${await page.getByTestId('compare-body').textContent()}`);
  await page.waitForFunction(() => document.querySelector('[data-testid="flame-node"][data-delta]') !== null);
  const vdiff = await apiJson('/api/v1/flame/diff?kind=profile&app=prof&version=2.0&base_version=1.0');
  check(vdiff.cpu_us === 500000 && vdiff.base_cpu_us === 800000, `profile version diff API ${vdiff.cpu_us} ${vdiff.base_cpu_us}`);
  for (const [name, cls, want] of [['gzip_body', 'grew', 0.8 - 0.375], ['parse_json', 'shrank', 0.2 - 0.625]]) {
    const api = deltaOf(vdiff, name);
    const node = page.locator(`[data-testid="flame-node"][data-name="${name}"]`).first();
    const got = Number(await node.getAttribute('data-delta'));
    check(Math.abs(api - want) < 1e-6 && Math.abs(got - api) < 1e-9 && (await node.getAttribute('class')).split(' ').includes(cls),
      `profile version diff: ${name} ${got} (API ${api}, want ${want})`);
  }
  check(/B 2\.0 against A 1\.0/.test(await page.locator('#flame-hint').textContent()), 'profile version diff: the hint');
  // The last hour against the hour before.
  const hourMs = 3600000;
  const to = Date.now(), from = to - hourMs;
  await page.goto(`${url}/dashboard/?kind=profile&app=prof&from=${from}&to=${to}&diff=period`);
  await waitReady(page);
  await page.waitForFunction(() => document.querySelector('[data-testid="flame-node"][data-delta]') !== null);
  const pdiff = await apiJson(`/api/v1/flame/diff?kind=profile&app=prof&from=${from}&to=${to}` +
    `&base_from=${from - hourMs}&base_to=${from}`);
  check(pdiff.cpu_us === 900000 && pdiff.base_cpu_us === 400000, `profile period diff API ${pdiff.cpu_us} ${pdiff.base_cpu_us}`);
  for (const [name, want] of [['gzip_body', 600000 / 900000 - 0.25], ['parse_json', 300000 / 900000 - 0.75]]) {
    const api = deltaOf(pdiff, name);
    const got = Number(await page.locator(`[data-testid="flame-node"][data-name="${name}"]`).first().getAttribute('data-delta'));
    check(Math.abs(api - want) < 1e-6 && Math.abs(got - api) < 1e-9, `profile period diff: ${name} ${got} (API ${api}, want ${want})`);
  }
}

// Links: a URL's filters in the inputs and exactly the API's rows for them;
// a group in the URL selected; the filters written back to the URL.
async function checkLinks(page, hang, event) {
  const app = event.app;
  const appQ = encodeURIComponent(app);
  await page.goto(`${url}/dashboard/?kind=cpu&app=${appQ}&range=all&limit=5`);
  await waitReady(page);
  check(await page.locator('#kind-cpu').isChecked(), 'link: kind cpu checked');
  check(await page.locator('#app').inputValue() === app, `link: app ${app}`);
  check(await page.locator('#range').inputValue() === '', 'link: range all');
  check(await page.locator('#limit').inputValue() === '5', 'link: limit 5');
  check(await page.getByTestId('tag-filter').inputValue() === '', 'link: no tag');
  check((await page.locator('#stacks-title').textContent()).includes('CPU'), 'link: the CPU view');
  const cpuStacks = (await apiJson(`/api/v1/top-stacks?kind=cpu&app=${appQ}&limit=5`)).stacks;
  const stackSigs = await page.locator('[data-testid="stack-row"]').evaluateAll((rs) => rs.map((r) => r.dataset.signature));
  check(cpuStacks.length >= 1 && JSON.stringify(stackSigs) === JSON.stringify(cpuStacks.map((x) => x.signature)),
    `link: stack rows ${JSON.stringify(stackSigs)} = API's`);
  check(await firstStackFunction(page) === CPU_FUNCTION, `link: first cpu row is ${CPU_FUNCTION}`);
  const cpuEvents = (await apiJson(`/api/v1/events?kind=cpu&app=${appQ}&limit=5`)).events;
  const eventIds = await page.locator('[data-testid="event-row"]').evaluateAll((rs) => rs.map((r) => r.dataset.id));
  check(cpuEvents.length >= 1 && JSON.stringify(eventIds) === JSON.stringify(cpuEvents.map((e) => String(e.id))),
    `link: event rows ${JSON.stringify(eventIds)} = API's`);
  const chartQuery = await page.getByTestId('chart').getAttribute('data-query');
  check(chartQuery === `kind=cpu&app=${appQ}&bucket=day`, `link: chart query ${chartQuery}`);
  const cpuPoints = await checkChart(page);
  check(cpuPoints.length >= 1, 'link: cpu events in the chart');

  // A group in the link: its row selected, its events listed.
  await page.goto(`${url}/dashboard/?app=${appQ}&range=all&group=${hang.signature}`);
  await waitReady(page);
  check(await page.locator('#kind-hang').isChecked(), 'group link: kind hang');
  const selected = await page.locator('.stack-row.selected').evaluateAll((rs) => rs.map((r) => r.dataset.signature));
  check(JSON.stringify(selected) === JSON.stringify([hang.signature]), `group link: selected ${JSON.stringify(selected)}`);
  const groupEvents = (await apiJson(`/api/v1/events?kind=hang&app=${appQ}&limit=20`)).events
    .filter((e) => e.group === hang.signature).map((e) => String(e.id));
  const groupRows = await page.locator('[data-testid="event-row"]').evaluateAll((rs) => rs.map((r) => r.dataset.id));
  check(groupEvents.length >= 1 && JSON.stringify(groupRows) === JSON.stringify(groupEvents),
    `group link: event rows ${JSON.stringify(groupRows)} = ${JSON.stringify(groupEvents)}`);
  check(new URL(page.url()).searchParams.get('group') === hang.signature, 'group link: the group stays in the URL');

  // Filters changed on the page: written back, the selection gone with a refresh.
  await page.getByTestId('label-filter').fill('GET /profile');
  await page.getByTestId('refresh').click();
  await waitReady(page);
  const written = new URL(page.url()).searchParams;
  check(written.get('label') === 'GET /profile' && written.get('app') === app && written.get('range') === 'all' &&
    !written.has('group') && !written.has('limit'), `the URL after a refresh: ${page.url()}`);
  await page.waitForFunction((id) => {
    const rows = [...document.querySelectorAll('[data-testid="event-row"]')];
    return rows.length === 1 && rows[0].dataset.id === String(id);
  }, event.id);
}

// Headlines that point at the app (test_dashboard.c's app "inapp"): its
// hang and its CPU stack are innermost in libc, called from the app. Each
// row reads "in <libc's function> ←" then the app's function (the API's
// headline); the expanded stack and the event's detail mute libc's frames.
// The demo's rows, innermost in the app already, are headed by that frame.
async function checkInApp(page) {
  const views = [['hang', 'read', 'reload_config'], ['cpu', '__memset_avx2_unaligned_erms', 'fill_buffers']];
  for (const [kind, inner, fn] of views) {
    const top = (await apiJson(`/api/v1/top-stacks?kind=${kind}&app=inapp`)).stacks;
    check(top.length === 1, `inapp ${kind}: one stack (${JSON.stringify(top)})`);
    const g = top[0];
    check(g.headline.function === fn && g.headline.module === '/usr/bin/shopd' &&
      g.headline.in_app_index === 1 && g.headline.innermost.function === inner &&
      g.headline.innermost.module === '/lib/x86_64-linux-gnu/libc.so.6' &&
      JSON.stringify(g.in_app) === '[false,true,true]', `inapp ${kind} headline: ${JSON.stringify(g)}`);
    await page.goto(`${url}/dashboard/?kind=${kind}&app=inapp&range=all`);
    await waitReady(page);
    const row = page.locator(`[data-testid="stack-row"][data-signature="${g.signature}"]`);
    check(await row.locator('[data-testid="stack-function"]').textContent() === fn, `inapp ${kind}: the row is ${fn}`);
    check(await row.locator('[data-testid="stack-innermost"]').textContent() === `in ${inner} ←`,
      `inapp ${kind}: in ${inner} ← beside it`);
    check((await row.locator('td.fn').textContent()).replace(/\s+/g, ' ').trim() === `▸in ${inner} ←${fn}`,
      `inapp ${kind}: the cell reads "in ${inner} ← ${fn}": ${await row.locator('td.fn').textContent()}`);
    // The flame's waiting frames (grey) are the API's: libc's read() in the
    // hang, none in the CPU profile (memset works).
    const waitingOf = (node) => [...(node.waiting ? [node.name] : []), ...(node.children || []).flatMap(waitingOf)];
    const apiWaiting = waitingOf(await apiJson(`/api/v1/flame?kind=${kind}&app=inapp`));
    check(JSON.stringify(apiWaiting) === (kind === 'hang' ? '["read"]' : '[]'),
      `inapp ${kind}: the API's waiting frames ${JSON.stringify(apiWaiting)}`);
    const shownWaiting = await page.locator('[data-testid="flame-node"][data-waiting="true"]')
      .evaluateAll((gs) => gs.map((g) => [g.dataset.name, getComputedStyle(g.querySelector('rect')).fill]));
    const grey = (fill) => {
      const [r, g, b] = fill.match(/\d+/g).map(Number);
      return Math.max(r, g, b) - Math.min(r, g, b) <= 16;
    };
    check(JSON.stringify(shownWaiting.map(([n]) => n)) === JSON.stringify(apiWaiting) &&
      shownWaiting.every(([, fill]) => grey(fill)),
    `inapp ${kind}: the flame's waiting frames, grey: ${JSON.stringify(shownWaiting)}`);
    await row.locator('[data-testid="stack-toggle"]').click();
    const classes = await page.locator('[data-testid="stack-frames"]:visible li')
      .evaluateAll((lis) => lis.map((li) => li.className));
    check(JSON.stringify(classes) === '["system","in-app","in-app"]', `inapp ${kind}: frames ${JSON.stringify(classes)}`);
    if (kind === 'hang') {
      await page.locator('[data-testid="event-row"]').first().click();
      await page.waitForFunction(() => document.getElementById('event-detail').dataset.id);
      const detail = await page.locator('[data-testid="detail-frame"]')
        .evaluateAll((lis) => lis.map((li) => li.className));
      check(JSON.stringify(detail) === '["system","in-app","in-app"]', `inapp detail frames ${JSON.stringify(detail)}`);
    }
  }
  // The demo's hang and CPU rows: their innermost frame is the app's own.
  for (const [kind, fn] of [['hang', HANG_FUNCTION], ['cpu', CPU_FUNCTION]]) {
    const g = (await apiJson(`/api/v1/top-stacks?kind=${kind}&app=demo_app`)).stacks[0];
    check(g.headline.function === fn && g.headline.in_app_index === 0, `demo ${kind} headline ${JSON.stringify(g.headline)}`);
    await page.goto(`${url}/dashboard/?kind=${kind}&app=demo_app&range=all`);
    await waitReady(page);
    check(await firstStackFunction(page) === fn, `demo ${kind}: the first row is ${fn}`);
    check(await page.locator('[data-testid="stack-row"]').first().locator('[data-testid="stack-innermost"]').count() === 0,
      `demo ${kind}: nothing before ${fn}`);
  }
}

// The texts of one locator's matches.
async function texts(page, selector) {
  return page.locator(selector).evaluateAll((nodes) => nodes.map((n) => n.textContent));
}

// The version comparison panel against the API and the exact values of
// test_dashboard.c's "rates" batches. Returns the panel's screenshot path.
async function checkCompare(page) {
  await page.goto(`${url}/dashboard/?range=all`);
  await waitReady(page);
  check(await page.getByTestId('compare-prompt').textContent() === 'Choose an app above, then versions A and B.',
    'compare: the prompt without an app');

  const answer = await apiJson('/api/v1/versions/compare?app=rates&a=3.1&b=3.2');
  check(answer.versions[0].hangs_per_hour === 2 && answer.versions[1].hangs_per_hour === 3,
    `compare API: 2 and 3 hangs per hour (${JSON.stringify(answer.versions.map((v) => v.hangs_per_hour))})`);
  await page.goto(`${url}/dashboard/?app=rates&range=all&a=3.1&b=3.2`);
  await waitReady(page);
  check(await page.getByTestId('compare-a').inputValue() === '3.1' &&
    await page.getByTestId('compare-b').inputValue() === '3.2', 'compare link: versions in the inputs');
  check(await page.getByTestId('compare-body').getAttribute('data-query') === 'app=rates&a=3.1&b=3.2',
    'compare link: the panel\'s query');
  const rows = await compareRows(page);
  check(JSON.stringify(rows) === JSON.stringify(['3.1|1.00 h|2|2.00|0.24–7.22|25.0%', '3.2|2.00 h|6|3.00|1.10–6.53|50.0%']),
    `compare rows ${JSON.stringify(rows)}`);
  // 2 hangs against 6: 3.2's rate is higher, but 3.1's two hangs say too little.
  check(JSON.stringify(await rateClasses(page)) === '["num strong","num strong"]',
    `2 vs 6 hangs: no rate marked (${JSON.stringify(await rateClasses(page))})`);
  await checkVerdict(page, 'not_enough_data',
    'Not enough data to compare (3.1: 2 hangs in 1.00 h): a version needs at least 5 hangs over 6 minutes watched.');
  const buckets = await page.locator('[data-testid="compare-bucket"]').evaluateAll((rs) => rs.map((r) =>
    [...r.cells].map((c) => c.textContent.trim()).join('|')));
  const wantBuckets = answer.versions[0].histogram.map((h, i) =>
    `${['< 50 ms', '50–100 ms', '100–250 ms', '250–500 ms', '500 ms–1 s', '1–2 s', '2–5 s', '5–10 s', '≥ 10 s'][i]}|` +
    `${h.units}|${answer.versions[1].histogram[i].units}`);
  check(JSON.stringify(buckets) === JSON.stringify(wantBuckets) && buckets[0] === '< 50 ms|100|400' &&
    buckets[4] === '500 ms–1 s|2|5', `compare histogram ${JSON.stringify(buckets)}`);
  const grew = await texts(page, '[data-testid="compare-grew-row"] [data-testid="compare-function"]');
  const grewShare = await texts(page, '[data-testid="compare-grew-row"] [data-testid="compare-share"]');
  const shrank = await texts(page, '[data-testid="compare-shrank-row"] [data-testid="compare-function"]');
  const shrankShare = await texts(page, '[data-testid="compare-shrank-row"] [data-testid="compare-share"]');
  check(JSON.stringify([grew, grewShare, shrank, shrankShare]) ===
    JSON.stringify([['slow_query'], ['50.0% → 83.3%'], ['render'], ['50.0% → 16.7%']]),
    `compare stacks ${JSON.stringify([grew, grewShare, shrank, shrankShare])}`);
  // The diff flame graph: B's hang stacks against A's in one tree, each
  // frame with the API's change in share, red where it grew, blue where it
  // shrank; the choice is in the URL.
  await page.getByTestId('flame-diff').check();
  await page.waitForFunction(() => document.querySelector('[data-testid="flame-node"][data-delta]') !== null);
  const diffTree = await apiJson('/api/v1/flame/diff?kind=hang&app=rates&version=3.2&base_version=3.1');
  const deltaOf = (node, name) => {
    if (node.name === name) return node.delta;
    for (const c of node.children) {
      const d = deltaOf(c, name);
      if (d !== undefined) return d;
    }
    return undefined;
  };
  for (const [name, cls] of [['slow_query', 'grew'], ['render', 'shrank']]) {
    const want = deltaOf(diffTree, name);
    const node = page.locator(`[data-testid="flame-node"][data-name="${name}"]`).first();
    const got = Number(await node.getAttribute('data-delta'));
    const classes = await node.getAttribute('class');
    check(want !== undefined && Math.abs(got - want) < 1e-9 && (cls === 'grew' ? want > 0.3 : want < -0.3) &&
      classes.split(' ').includes(cls), `diff flame: ${name} delta ${got} (API ${want}), class "${classes}"`);
  }
  check(new URL(page.url()).searchParams.get('diff') === '1', `diff in the URL: ${page.url()}`);
  // B against every version (3.2 against 3.0-3.3's stacks together): the
  // API's deltas (base_version empty), the version diff unchecked by it.
  await page.getByTestId('flame-rest').check();
  await page.waitForFunction(() => /every version/.test(document.getElementById('flame-hint').textContent));
  check(!(await page.getByTestId('flame-diff').isChecked()), 'rest diff: the version diff unchecked');
  const restTree = await apiJson('/api/v1/flame/diff?kind=hang&app=rates&version=3.2&base_version=');
  for (const name of ['slow_query', 'render']) {
    const want = deltaOf(restTree, name);
    const got = Number(await page.locator(`[data-testid="flame-node"][data-name="${name}"]`).first()
      .getAttribute('data-delta'));
    check(want !== undefined && Math.abs(got - want) < 1e-9, `rest diff: ${name} delta ${got} (API ${want})`);
  }
  check(new URL(page.url()).searchParams.get('diff') === 'all', `rest diff in the URL: ${page.url()}`);
  await page.getByTestId('flame-diff').check();
  await page.waitForFunction(() => /B 3\.2 against A 3\.1/.test(document.getElementById('flame-hint').textContent));
  check(!(await page.getByTestId('flame-rest').isChecked()), 'version diff: the rest diff unchecked');
  check(/B 3\.2 against A 3\.1/.test(await page.locator('#flame-hint').textContent()), 'diff flame: the hint names B and A');
  const diffPng = screenshotPath.replace(/\.png$/, '-diff.png');
  await page.locator('.flame-panel').screenshot({ path: diffPng });
  check(readFileSync(diffPng).subarray(1, 4).toString() === 'PNG', `a PNG of the diff flame graph (${diffPng})`);
  await page.getByTestId('flame-diff').uncheck();
  await page.waitForFunction(() => document.querySelector('[data-testid="flame-node"]') !== null &&
    document.querySelector('[data-testid="flame-node"][data-delta]') === null);

  // The period diff (app "periods", test_dashboard.c): the last hour's
  // hang stacks against the hour before, each frame with the API's change
  // (new_path from none to 75% of the hang time, old_path from all to
  // 25%), the choice in the URL; it and the version diff exclude each other.
  const hourMs = 3600000;
  const periodTo = Date.now(), periodFrom = periodTo - hourMs;
  await page.goto(`${url}/dashboard/?app=periods&from=${periodFrom}&to=${periodTo}`);
  await waitReady(page);
  await page.getByTestId('flame-period').check();
  await page.waitForFunction(() => document.querySelector('[data-testid="flame-node"][data-delta]') !== null);
  const periodTree = await apiJson(`/api/v1/flame/diff?kind=hang&app=periods&from=${periodFrom}&to=${periodTo}` +
    `&base_from=${periodFrom - hourMs}&base_to=${periodFrom}`);
  for (const [name, cls, want] of [['new_path', 'grew', 0.75], ['old_path', 'shrank', -0.75]]) {
    const api = deltaOf(periodTree, name);
    const node = page.locator(`[data-testid="flame-node"][data-name="${name}"]`).first();
    const got = Number(await node.getAttribute('data-delta'));
    const classes = await node.getAttribute('class');
    check(api !== undefined && Math.abs(api - want) < 1e-9 && Math.abs(got - api) < 1e-9 &&
      classes.split(' ').includes(cls), `period diff: ${name} delta ${got} (API ${api}, want ${want}), "${classes}"`);
  }
  check(new URL(page.url()).searchParams.get('diff') === 'period', `period diff in the URL: ${page.url()}`);
  check(/this period against the period before/.test(await page.locator('#flame-hint').textContent()),
    'period diff: the hint names both sides');
  await page.getByTestId('flame-period').uncheck();
  await page.waitForFunction(() => document.querySelector('[data-testid="flame-node"]') !== null &&
    document.querySelector('[data-testid="flame-node"][data-delta]') === null);
  await page.goto(`${url}/dashboard/?app=rates&range=all&a=3.1&b=3.2`);
  await waitReady(page);

  const png = screenshotPath.replace(/\.png$/, '-compare.png');
  await page.getByTestId('compare').screenshot({ path: png });
  const bytes = readFileSync(png);
  check(bytes.length > 5000 && bytes.subarray(1, 4).toString() === 'PNG', `a PNG of the panel (${bytes.length} bytes)`);

  await checkLoopFilter(page);

  // 2 hangs against 2: 720 and 2 per hour, neither marked: not enough data
  // (3.0 watched 10 s: said in seconds, not "0.00 h").
  await page.goto(`${url}/dashboard/?app=rates&range=all&a=3.0&b=3.1`);
  await waitReady(page);
  const noise = await compareRows(page);
  check(JSON.stringify(noise) === JSON.stringify(['3.0|10 s|2|720.00|87.20–2600.89|10.0%',
    '3.1|1.00 h|2|2.00|0.24–7.22|25.0%']), `2 vs 2 hangs: rows ${JSON.stringify(noise)}`);
  check(JSON.stringify(await rateClasses(page)) === '["num strong","num strong"]',
    `2 vs 2 hangs: no rate marked (${JSON.stringify(await rateClasses(page))})`);
  await checkVerdict(page, 'not_enough_data', 'Not enough data to compare (3.0: 2 hangs in 10 s; 3.1: 2 hangs ' +
    'in 1.00 h): a version needs at least 5 hangs over 6 minutes watched.');
  const enough = await page.locator('[data-testid="compare-version"]').evaluateAll((rs) => rs.map((r) => r.dataset.enough));
  check(JSON.stringify(enough) === '["false","false"]', `2 vs 2 hangs: neither has enough data (${JSON.stringify(enough)})`);

  // 6 hangs in 2 h against 5 in 6 minutes: the intervals apart, 3.3 red.
  await page.goto(`${url}/dashboard/?app=rates&range=all&a=3.2&b=3.3`);
  await waitReady(page);
  const apart = await compareRows(page);
  check(JSON.stringify(apart) === JSON.stringify(['3.2|2.00 h|6|3.00|1.10–6.53|50.0%',
    '3.3|6.0 min|5|50.00|16.23–116.68|50.0%']), `3.2 vs 3.3: rows ${JSON.stringify(apart)}`);
  check(JSON.stringify(await rateClasses(page)) === '["num strong","num strong worse"]',
    `3.3 is marked worse (${JSON.stringify(await rateClasses(page))})`);
  await checkVerdict(page, 'higher', '3.3 hangs more often than 3.2: their 95% intervals do not overlap.');

  // The form: B against A, in the URL; 3.2 now the better one.
  await page.getByTestId('compare-a').fill('3.3');
  await page.getByTestId('compare-b').fill('3.2');
  await page.getByTestId('compare-go').click();
  await waitReady(page);
  const q = new URL(page.url()).searchParams;
  check(q.get('a') === '3.3' && q.get('b') === '3.2' && q.get('app') === 'rates', `compare form: the URL ${page.url()}`);
  const swapped = await texts(page, '[data-testid="compare-rate"]');
  check(JSON.stringify(swapped) === JSON.stringify(['50.00', '3.00']), `swapped rates ${JSON.stringify(swapped)}`);
  check(JSON.stringify(await rateClasses(page)) === '["num strong","num strong better"]', '3.2 is marked better');
  await checkVerdict(page, 'lower', '3.2 hangs less often than 3.3: their 95% intervals do not overlap.');
  // The same version twice: the API's 400, said on the page.
  expecting400 = true;
  await page.getByTestId('compare-b').fill('3.3');
  await page.getByTestId('compare-go').click();
  await page.waitForSelector('body[data-state="error"]');
  expecting400 = false;
  const message = await page.getByTestId('message').textContent();
  check(message === '/api/v1/versions/compare: 400 parameter b: must differ from a', `compare 400: "${message}"`);
  return `${png} (${bytes.length} bytes)`;
}

// The comparison's rows as "cell|cell|...", its rate cells' classes, and
// its verdict line against the API's difference and the words wanted.
async function compareRows(page) {
  return page.locator('[data-testid="compare-version"]').evaluateAll((rs) => rs.map((r) =>
    [...r.cells].map((c) => c.textContent).join('|')));
}

async function rateClasses(page) {
  return page.locator('[data-testid="compare-rate"]').evaluateAll((cs) => cs.map((c) => c.className));
}

async function checkVerdict(page, difference, words) {
  const query = await page.getByTestId('compare-body').getAttribute('data-query');
  const answer = await apiJson(`/api/v1/versions/compare?${query}`);
  const line = page.getByTestId('compare-verdict');
  const got = [await line.getAttribute('data-difference'), await line.textContent()];
  check(answer.difference === difference && got[0] === difference && got[1] === words,
    `compare ${query}: API ${answer.difference}, line ${JSON.stringify(got)}, want ${difference} "${words}"`);
}

// The loop filter: the comparison of loop main (the "rates" batches came
// from an SDK that named no loop: they are main's), of a loop no batch
// had, and the events of the stack-truth hang's loop (render-3); the chart,
// the stacks and the flame graph answer for every loop and say so, and no
// request of the page fails (a 400 would be a console error).
async function checkLoopFilter(page) {
  await page.goto(`${url}/dashboard/?app=rates&range=all&a=3.1&b=3.2&loop=main`);
  await waitReady(page);
  check(await page.getByTestId('loop-filter').inputValue() === 'main', 'loop link: main in the input');
  check(await page.getByTestId('compare-body').getAttribute('data-query') === 'app=rates&a=3.1&b=3.2&loop=main',
    'loop link: the comparison\'s query has the loop');
  const mainRows = await compareRows(page);
  check(JSON.stringify(mainRows) === JSON.stringify(['3.1|1.00 h|2|2.00|0.24–7.22|25.0%', '3.2|2.00 h|6|3.00|1.10–6.53|50.0%']),
    `loop main: compare rows ${JSON.stringify(mainRows)}`);
  check(await page.getByTestId('compare-loop-note').isVisible(), 'loop main: the comparison names the loop');
  for (const view of ['chart', 'stacks', 'flame']) {
    const note = page.getByTestId(`${view}-loop-note`);
    check(await note.isVisible() && (await note.textContent()).includes('(main)'), `loop main: the ${view} says so`);
  }
  const chartQuery = await page.getByTestId('chart').getAttribute('data-query');
  check(!/(^|&)loop=/.test(chartQuery), `loop main: the chart's query has no loop (${chartQuery})`);
  await page.getByTestId('loop-filter').fill('worker-x');
  await page.getByTestId('refresh').click();
  await waitReady(page);
  check(new URL(page.url()).searchParams.get('loop') === 'worker-x', `loop worker-x in the URL: ${page.url()}`);
  await page.waitForFunction(() => /(^|&)loop=worker-x(&|$)/.test(document.getElementById('compare-body').dataset.query || ''));
  const noneRows = await compareRows(page);
  check(JSON.stringify(noneRows) === JSON.stringify(['3.1|0.00 h|0|—|—|—', '3.2|0.00 h|0|—|—|—']),
    `loop worker-x: compare rows ${JSON.stringify(noneRows)}`);

  await page.goto(`${url}/dashboard/?range=all&loop=render-3`);
  await waitReady(page);
  const want = (await apiJson('/api/v1/events?kind=hang&loop=render-3&limit=20')).events.map((e) => String(e.id));
  const got = await page.locator('[data-testid="event-row"]').evaluateAll((rs) => rs.map((r) => r.dataset.id));
  const loops = await texts(page, '[data-testid="event-row"] [data-testid="event-loop"]');
  check(want.length >= 1 && JSON.stringify(got) === JSON.stringify(want) && loops.every((l) => l === 'render-3'),
    `loop render-3: event rows ${JSON.stringify(got)} = ${JSON.stringify(want)}, loops ${JSON.stringify(loops)}`);
  check(await page.getByTestId('compare-prompt').isVisible(), 'loop render-3 without an app: the compare prompt');
  await page.getByTestId('loop-filter').fill('');
  await page.getByTestId('refresh').click();
  await waitReady(page);
  check(await page.getByTestId('stacks-loop-note').isHidden() && !new URL(page.url()).searchParams.has('loop'),
    'no loop: no note, no loop in the URL');
}

main().then(() => process.exit(0), (err) => {
  console.error(`dashboard test failed: ${err.stack || err}`);
  if (consoleErrors.length) console.error(`JS errors:\n  ${consoleErrors.join('\n  ')}`);
  process.exit(1);
});

// A flame tree of `fanout` callees a frame, `depth` deep below "all"
// (fanout 10, depth 5: 111,110 frames), as /api/v1/flame answers: frame k
// of a caller is named fn<level>_<k>, so one name is in many places as a
// function called from many callers is; a leaf weighs 1 to 7 ms of CPU and
// a caller the sum of its callees. With keep, only the frames keep(node,
// parentWidth) allows, laid out as the page lays them out (its width).
function bigTree(fanout, depth) {
  let leaf = 0;
  const make = (level, k) => {
    const node = { name: level ? `fn${level}_${k}` : 'all', in_app: level % 2 === 1, children: [] };
    if (level === depth) {
      node.cpu_us = 1000 * ((leaf++ % 7) + 1);
    } else {
      for (let c = 0; c < fanout; c++) node.children.push(make(level + 1, c));
      node.cpu_us = node.children.reduce((n, c) => n + c.cpu_us, 0);
    }
    node.samples = node.cpu_us / 1000;
    return node;
  };
  const root = make(0, 0);
  Object.assign(root, { truncated: false, stacks_omitted: 0 });
  return root;
}

// The frames the page draws of tree at width: each child as wide as its
// share of its caller's width, drawn (and its callees considered) when at
// least minWidth px wide (app.js layoutChildren, the same arithmetic).
function drawnFrames(node, width, minWidth) {
  let n = 1;
  for (const c of node.children) {
    const w = (c.cpu_us / node.cpu_us) * width;
    if (w >= minWidth) n += drawnFrames(c, w, minWidth);
  }
  return n;
}

// The tree cut to the frames drawn at width.
function prunedTree(node, width, minWidth) {
  const kids = [];
  for (const c of node.children) {
    const w = (c.cpu_us / node.cpu_us) * width;
    if (w >= minWidth) kids.push(prunedTree(c, w, minWidth));
  }
  return { ...node, children: kids };
}

// Sum of the CPU time of the frames named fn that no frame named fn is
// above (recursion counted once), and how many frames have the name.
function nameTotal(node, fn, under = false) {
  const hit = node.name === fn;
  let total = hit && !under ? node.cpu_us : 0, frames = hit ? 1 : 0;
  for (const c of node.children) {
    const [t, f] = nameTotal(c, fn, under || hit);
    total += t;
    frames += f;
  }
  return [total, frames];
}

// 100,000 frames stay responsive: the page draws exactly the frames at
// least FLAME_MIN_WIDTH (0.5 px) wide, not one per frame; a search walks
// every frame and gives the exact share of the frames matched; the
// sandwich of a function in 10,000 places totals them exactly; and
// answering a search on the whole tree costs at most a few times (bound
// 10x, generous for a loaded machine) what it costs on the tree cut to
// its drawn frames, in the same page: a page that drew or laid out every
// frame would be hundreds of times slower.
async function checkLargeFlame(page) {
  const big = bigTree(10, 5);
  let frames = 0;
  for (const todo = [big]; todo.length; frames++) todo.push(...todo.pop().children);
  check(frames === 111111, `the big tree has 111,111 frames with its root (${frames})`);
  let tree = big;
  await page.route(/\/api\/v1\/flame\?/, (route) => route.fulfill({ json: tree }));
  try {
    await page.goto(`${url}/dashboard/?kind=cpu&range=all`);
    await waitReady(page);
    const width = await page.evaluate(() => Math.max(300, document.getElementById('flame').clientWidth));
    const want = drawnFrames(big, width, 0.5);
    const drawn = await page.locator('[data-testid="flame-node"]').count();
    check(drawn === want, `a ${frames}-frame tree at ${width} px: ${drawn} frames drawn = ${want}`);
    check(drawn < 2000, `far fewer frames drawn than in the tree (${drawn})`);

    // A search: fn3_4 is in 100 places.
    const [total, places] = nameTotal(big, 'fn3_4');
    check(places === 100, `fn3_4 in 100 places (${places})`);
    const words = `"fn3_4": ${((100 * total) / big.cpu_us).toFixed(1)}% of all in 1 function`;
    const searchTime = async (text, expect) => {
      await page.getByTestId('flame-search').fill('');
      await page.waitForFunction(() => document.getElementById('flame-match').hidden);
      const t0 = Date.now();
      await page.getByTestId('flame-search').fill(text);
      await page.waitForFunction((w) => document.getElementById('flame-match').textContent === w, expect);
      return Date.now() - t0;
    };
    const bigMs = await searchTime('fn3_4', words);
    const matched = await page.locator('[data-testid="flame-node"].match').count();
    const drawnMatches = (function count(node, w) {
      let n = node.name === 'fn3_4' ? 1 : 0;
      for (const c of node.children) {
        const cw = (c.cpu_us / node.cpu_us) * w;
        if (cw >= 0.5) n += count(c, cw);
      }
      return n;
    })(big, width);
    check(matched === drawnMatches, `the search highlights the ${drawnMatches} drawn fn3_4 frames (${matched})`);

    // The sandwich of fn4_2, in 1,000 places.
    const [fnTotal, fnPlaces] = nameTotal(big, 'fn4_2');
    check(fnPlaces === 1000, `fn4_2 in 1,000 places (${fnPlaces})`);
    await page.goto(`${url}/dashboard/?kind=cpu&range=all&sandwich=fn4_2`);
    await waitReady(page);
    await page.waitForFunction(() => !document.getElementById('sandwich').hidden);
    const title = page.locator('#sandwich-title');
    check(Number(await title.getAttribute('data-total')) === fnTotal,
      `the sandwich of fn4_2 totals ${fnTotal} us (${await title.getAttribute('data-total')})`);

    // The same search on the tree cut to its drawn frames.
    tree = prunedTree(big, width, 0.5);
    const [cutTotal] = nameTotal(tree, 'fn3_4');
    await page.goto(`${url}/dashboard/?kind=cpu&range=all`);
    await waitReady(page);
    check(await page.locator('[data-testid="flame-node"]').count() === want, 'the cut tree draws the same frames');
    const cutMs = await searchTime('fn3_4', `"fn3_4": ${((100 * cutTotal) / tree.cpu_us).toFixed(1)}% of all in 1 function`);
    console.log(`large flame: ${frames} frames, ${drawn} drawn at ${width} px; search ${bigMs} ms ` +
      `against ${cutMs} ms on the drawn frames alone (${(bigMs / Math.max(1, cutMs)).toFixed(2)}x)`);
    check(bigMs <= 10 * Math.max(cutMs, 50),
      `a search on ${frames} frames (${bigMs} ms) within 10x of one on the ${drawn} drawn (${cutMs} ms)`);
  } finally {
    await page.unroute(/\/api\/v1\/flame\?/);
  }
}
