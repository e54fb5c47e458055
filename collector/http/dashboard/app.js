// app.js - the perf-collector dashboard: filters, the slowest stacks
// (GET /api/v1/top-stacks), a flame graph (GET /api/v1/flame), the event list
// (GET /api/v1/events), an event's detail (GET /api/v1/events/<id>), the
// events the SDKs dropped before sending (GET /api/v1/drops) and a bar chart
// of events per time bucket (GET /api/v1/timeseries), thread states in an
// event's detail and for the selected stack (GET /api/v1/states), and two
// versions of an app compared (GET /api/v1/versions/compare, drawn by
// compare.js). The filters, the selected group and the compared versions
// live in the page's query string too, so a link reproduces the view
// (writeUrl, readUrl).
// Plain DOM and SVG, no framework, nothing loaded from elsewhere. The API key
// is kept in localStorage and sent as "Authorization: Bearer <key>".

import { renderAlerts } from './alerts.js';
import { renderComparison, renderPrompt } from './compare.js';

const KEY_STORAGE = 'perf-collector.api-key';
const SVG_NS = 'http://www.w3.org/2000/svg';
const FLAME_ROW = 20; // px per flame-graph level
const FLAME_MIN_WIDTH = 0.5; // px: narrower frames are not drawn
const DETAIL_STACKS_SHOWN = 3; // an event's stacks with most samples; the rest folded
// /api/v1/drops' reasons, in the order shown, with their words.
// The chart's bucket for a time range (ms; '' = all): at most a few hundred bars.
const BUCKET_MINUTE_UP_TO = 3600000; // 15 min, 1 h
const BUCKET_HOUR_UP_TO = 604800000; // 24 h, 7 days; longer and all: days
const CHART_HEIGHT = 96; // px
// The slowest stacks' figures per kind, after the function and impact columns:
// [testid, header, tooltip (what it counts, in which unit), cell text, strong].
// A stack's own time (hang time, CPU time) is apart from the durations of the
// events it was sampled in.
const STACK_COLUMNS = {
  hang: [
    ['events', 'Hangs', 'hangs in this group (a count)', (s) => fmtCount(s.events)],
    ['samples', 'Samples', 'samples of those hangs (a count)', (s) => fmtCount(s.samples)],
    ['hang-time', 'Hang time', "the group's own time: its hangs' durations summed " +
      "(every sample of a hang is in its group; API: hang_ms)", (s) => fmtMs(s.hang_ms), true],
    ['event-mean', 'Mean hang', "the hangs' mean duration (event_mean_ms)", (s) => fmtMs(s.event_mean_ms)],
    ['event-p95', 'p95 hang', "the hangs' 95th percentile duration (event_p95_ms)", (s) => fmtMs(s.event_p95_ms)],
  ],
  cpu: [
    ['events', 'Events', 'CPU events (bursts) that sampled this stack (a count)', (s) => fmtCount(s.events)],
    ['samples', 'Samples', "this stack's samples (a count)", (s) => fmtCount(s.samples)],
    ['cpu-time', 'CPU time', "this stack's own CPU time: the CPU time its samples stand for " +
      '(ms, from cpu_us)', (s) => fmtMs(s.cpu_us / 1000), true],
    ['event-total', 'Events\u2019 wall time', 'the durations of the CPU events this stack was ' +
      "sampled in, summed: wall-clock time, not this stack's (event_total_ms)", (s) => fmtMs(s.event_total_ms)],
    ['event-mean', 'Mean event', 'the mean duration of those CPU events (event_mean_ms)', (s) => fmtMs(s.event_mean_ms)],
    ['event-p95', 'p95 event', '95th percentile duration of those CPU events (event_p95_ms)',
      (s) => fmtMs(s.event_p95_ms)],
  ],
  // The always-on profile: a window is a minute of a process, so the
  // windows' durations say nothing of the stack; its CPU time does.
  profile: [
    ['events', 'Windows', 'profile windows (a minute of one process each) that sampled this stack (a count)',
      (s) => fmtCount(s.events)],
    ['samples', 'Samples', "this stack's samples (a count)", (s) => fmtCount(s.samples)],
    ['cpu-time', 'CPU time', "this stack's own CPU time over the windows: the CPU time its samples " +
      'stand for (ms, from cpu_us)', (s) => fmtMs(s.cpu_us / 1000), true],
  ],
};
// The kinds of event, as the API names them (the kind= of events and
// timeseries): the view's words, the badge's, and whether the collector sums
// the kind's stacks (top-stacks, flame and the exports take hang, cpu or
// profile only; a fatal hang is one of the hangs there). A kind without summed
// stacks says where its stacks are instead (noStacks), and the page sends
// it to no stack route.
const KINDS = {
  hang: { title: 'Hangs', badge: 'hang', stacks: true },
  fatal_hang: { title: 'Fatal hangs', badge: 'fatal hang', stacks: false,
    noStacks: 'Fatal hangs are summed with the other hangs: choose Hangs for their stacks and flame ' +
      'graph; each fatal hang\u2019s own stacks are in its detail.' },
  cpu: { title: 'CPU events', badge: 'cpu', stacks: true },
  profile: { title: 'Profile windows', badge: 'profile', stacks: true },
  manual: { title: 'Manual captures', badge: 'manual', stacks: false,
    noStacks: 'Manual captures (perf_sdk_capture_now) are not summed into stacks: each capture\u2019s ' +
      'threads and stacks are in its detail.' },
};
// The URL's values for the filters at their defaults are left out of it.
const DEFAULT_RANGE = '86400000';
const DEFAULT_LIMIT = '20';
const DROP_REASONS = [['rate_limited', 'rate limit'], ['queue_full', 'queue full'],
  ['sink_failed', 'sink failed'], ['spool_quota', 'spool quota'], ['oversized', 'oversized']];

const $ = (id) => document.getElementById(id);

const state = {
  kind: 'hang',
  stacks: [],
  selected: null, // the top-stacks entry clicked: filters events, highlights the flame graph
  flame: null, // the /api/v1/flame tree
  flameBy: 'samples', // what a frame's width is: 'cpu_us' (CPU time) or 'samples'
  zoom: [], // names from the root's child down to the zoomed frame; [] = whole tree
  flameFocus: null, // the path (names joined by NUL) of the frame to focus once drawn; '' the root
  flameSearch: '', // frames whose name holds this text (any case) are marked, the rest dimmed
  flameDiff: false, // the flame graph of version B against version A (/api/v1/flame/diff)
  periodDiff: false, // the flame graph of the time range against the one just before it
  restDiff: false, // the flame graph of version B against every version
  diffNames: null, // a diff's two sides in words: { shown: 'B 3.2', base: 'A 3.1' }
  window: null, // { from, to } (ms): a time range chosen on the chart, in place of the menu's
  sandwich: null, // the function whose callers and callees are shown, or null
  events: [],
  series: null, // the /api/v1/timeseries answer with its bucket, query and time span
  pendingGroup: null, // a group named by the URL, selected once the stacks are loaded
  detailId: null,
  generation: 0, // bumped by each refresh: answers of an older one are dropped
  eventsGeneration: 0, // the same for the event list (also reloaded on a selection)
};

// ---- the API ----------------------------------------------------------------

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function apiKey() {
  return localStorage.getItem(KEY_STORAGE) || '';
}

// params (arrays repeated, empty values left out) into search.
function setParams(search, params) {
  for (const [name, value] of Object.entries(params)) {
    if (Array.isArray(value)) for (const v of value) search.append(name, v);
    else if (value !== undefined && value !== null && value !== '') search.set(name, value);
  }
}

async function api(path, params = {}) {
  const url = new URL(path, window.location.origin);
  setParams(url.searchParams, params);
  const headers = {};
  if (apiKey()) headers.Authorization = `Bearer ${apiKey()}`;
  let resp;
  try {
    resp = await fetch(url, { headers });
  } catch (err) {
    throw new ApiError(0, `Cannot reach the collector at ${window.location.origin} (${err.message}).`);
  }
  if (resp.status === 401)
    throw new ApiError(401, 'The collector refused the API key (401 Unauthorized). ' +
      'Enter a valid key in "API key" and press "Use key".');
  if (!resp.ok) {
    let reason = resp.statusText;
    try {
      reason = (await resp.json()).error || reason;
    } catch (_) { /* not JSON: keep the status text */ }
    throw new ApiError(resp.status, `${url.pathname}: ${resp.status} ${reason}`);
  }
  return resp;
}

async function apiJson(path, params) {
  return (await api(path, params)).json();
}

// Whether a kind's stacks are measured in CPU time: CPU bursts and the
// always-on profile's windows (hangs in wall time).
function cpuTime(kind) {
  return kind === 'cpu' || kind === 'profile';
}

// ---- the filters in the URL ---------------------------------------------------

// The header's filters and the selected group into the page's query string
// (defaults left out), without a new history entry.
function writeUrl() {
  const q = new URLSearchParams();
  if (state.kind !== 'hang') q.set('kind', state.kind);
  for (const name of ['app', 'version', 'environment', 'label', 'loop']) {
    const value = $(name).value.trim();
    if (value) q.set(name, value);
  }
  for (const tag of $('tags').value.split(/\s+/).filter(Boolean)) q.append('tag', tag);
  const range = $('range').value;
  if (state.window) {
    q.set('from', String(state.window.from));
    q.set('to', String(state.window.to));
  } else if (range !== DEFAULT_RANGE) q.set('range', range || 'all');
  const limit = $('limit').value.trim();
  if (limit && limit !== DEFAULT_LIMIT) q.set('limit', limit);
  const group = state.selected ? state.selected.signature : state.pendingGroup;
  if (group) q.set('group', group);
  for (const side of ['a', 'b']) {
    const version = $(`compare-${side}`).value.trim();
    if (version) q.set(side, version);
  }
  if (state.flameSearch) q.set('search', state.flameSearch);
  if (state.flameDiff) q.set('diff', '1');
  else if (state.periodDiff) q.set('diff', 'period');
  else if (state.restDiff) q.set('diff', 'all');
  if (state.sandwich) q.set('sandwich', state.sandwich);
  const text = q.toString();
  history.replaceState(null, '', `${window.location.pathname}${text ? `?${text}` : ''}`);
}

// The filters of a link (as writeUrl writes them) into the header; a range
// the menu does not offer and a kind the page does not know are ignored.
function readUrl() {
  const q = new URLSearchParams(window.location.search);
  const kind = q.get('kind');
  if (Object.hasOwn(KINDS, kind)) {
    state.kind = kind;
    $(`kind-${kind}`).checked = true;
  }
  for (const name of ['app', 'version', 'environment', 'label', 'loop']) if (q.has(name)) $(name).value = q.get(name);
  if (q.has('tag')) $('tags').value = q.getAll('tag').join(' ');
  const range = q.get('range') === 'all' ? '' : q.get('range');
  if (range !== null && [...$('range').options].some((o) => o.value === range)) $('range').value = range;
  const [from, to] = [Number(q.get('from')), Number(q.get('to'))];
  if (q.has('from') && q.has('to') && Number.isInteger(from) && Number.isInteger(to) && from >= 0 && to > from) {
    setWindow({ from, to });
  }
  if (q.has('limit')) $('limit').value = q.get('limit');
  for (const side of ['a', 'b']) if (q.has(side)) $(`compare-${side}`).value = q.get(side);
  state.pendingGroup = q.get('group') || null;
  state.flameSearch = q.get('search') || '';
  $('flame-search').value = state.flameSearch;
  state.flameDiff = q.get('diff') === '1';
  state.periodDiff = q.get('diff') === 'period';
  $('flame-period').checked = state.periodDiff;
  state.restDiff = q.get('diff') === 'all';
  $('flame-rest').checked = state.restDiff;
  state.sandwich = q.get('sandwich') || null;
  $('flame-diff').checked = state.flameDiff;
}

// The filters of the header as API parameters (kind, app, version,
// environment, tag (repeated), label, from; limit when withLimit).
function filterParams(withLimit) {
  const params = { kind: state.kind };
  for (const name of ['app', 'version', 'environment']) params[name] = $(name).value.trim();
  params.tag = $('tags').value.split(/\s+/).filter(Boolean);
  params.label = $('label').value.trim();
  const range = $('range').value;
  if (state.window) {
    params.from = String(state.window.from);
    params.to = String(state.window.to);
  } else if (range) params.from = String(Date.now() - Number(range));
  if (withLimit) {
    const limit = Number($('limit').value);
    params.limit = Number.isInteger(limit) && limit >= 1 && limit <= 1000 ? String(limit) : '20';
  }
  return params;
}

// The loop filter ('' for any). Only the events list and the version
// comparison take it: the other views are answered from the collector's
// rollups, which keep no loop (the API refuses loop= there), so they show
// every loop and say so (renderLoopNotes).
function loopFilter() {
  return $('loop').value.trim();
}

function renderLoopNotes() {
  const loop = loopFilter();
  for (const id of ['chart-loop-note', 'stacks-loop-note', 'flame-loop-note']) {
    $(id).textContent = loop ? `every loop: the loop filter (${loop}) applies to the events and the version comparison only` : '';
    $(id).hidden = !loop;
  }
}

// ---- messages ---------------------------------------------------------------

function showMessage(text, level = 'error') {
  const box = $('message');
  box.textContent = text;
  box.className = `message ${level}`;
  box.hidden = false;
}

function clearMessage() {
  $('message').hidden = true;
  $('message').textContent = '';
}

function reportError(err) {
  showMessage(err instanceof ApiError ? err.message : `Unexpected error: ${err.message}`);
  if (err.status === 401) $('api-key').focus();
}

// ---- formatting ---------------------------------------------------------------

function fmtMs(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return '—';
  return ms >= 100 ? `${Math.round(ms).toLocaleString('en-US')} ms` : `${ms.toFixed(1)} ms`;
}

function fmtTime(unixMs) {
  const d = new Date(unixMs);
  const two = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ` +
    `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

function fmtCpu(percent) {
  return typeof percent === 'number' && percent >= 0 ? `${percent}%` : '—';
}

function fmtCount(n) {
  return Number(n).toLocaleString('en-US');
}

function basename(path) {
  return String(path || '').split('/').pop();
}

// A DOM element with attributes ("text" sets textContent) and children.
function el(tag, attrs = {}, ...children) {
  const node = tag.startsWith('svg:') ? document.createElementNS(SVG_NS, tag.slice(4))
    : document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === 'text') node.textContent = value;
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(name, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

// ---- loading ------------------------------------------------------------------

async function refresh() {
  clearMessage();
  document.body.dataset.state = 'loading';
  state.selected = null;
  state.zoom = [];
  $('stack-states').hidden = true; // the selection's, gone with it
  writeUrl();
  renderLoopNotes();
  const gen = ++state.generation;
  const results = await Promise.allSettled([loadStacks(gen), loadFlame(gen),
    loadEvents(++state.eventsGeneration), loadDrops(gen), loadSeries(gen), loadCompare(gen),
    loadAlerts(gen)]);
  if (gen !== state.generation) return;
  const failed = results.find((r) => r.status === 'rejected');
  if (!failed && state.pendingGroup) await selectPendingGroup();
  // For scripts and tests: "ready" once everything shown is this filter's.
  document.body.dataset.state = failed ? 'error' : 'ready';
  if (failed) reportError(failed.reason);
  else loadSuggestions().catch(() => { /* suggestions are a convenience */ });
}

// The alerts of every app (not the header's filters: an alert is news of
// its own) and the rules (without their webhooks' URLs).
async function loadAlerts(gen) {
  const { deliveries, rules } = await apiJson('/api/v1/alerts/deliveries', { limit: 50 });
  if (gen !== state.generation) return;
  renderAlerts(el, deliveries, rules);
}

async function loadStacks(gen) {
  state.stacks = [];
  renderStacks();
  if (!KINDS[state.kind].stacks) return;
  const { stacks } = await apiJson('/api/v1/top-stacks', filterParams(true));
  if (gen !== state.generation) return;
  state.stacks = stacks;
  renderStacks();
}

async function loadFlame(gen) {
  state.flame = null;
  renderFlame();
  if (!KINDS[state.kind].stacks) return;
  // A hang group selected: its own flame graph, where inside it the time went.
  const params = filterParams(false);
  if (state.selected && state.kind === 'hang') params.group = state.selected.signature;
  // Versions A and B chosen and the diff asked for: B's stacks against A's.
  const [a, b] = [$('compare-a').value.trim(), $('compare-b').value.trim()];
  $('flame-diff-label').hidden = !(a && b);
  $('flame-rest-label').hidden = !b;
  // A time range (not "all"): its stacks against those of the same length
  // of time just before it.
  $('flame-period-label').hidden = params.from === undefined;
  let names = null;
  if (state.flameDiff && a && b) {
    Object.assign(params, { version: b, base_version: a });
    names = { shown: `B ${b}`, base: `A ${a}` };
  } else if (state.restDiff && b) {
    // base_version empty: any version (an array: setParams keeps its empty value).
    Object.assign(params, { version: b, base_version: [''] });
    names = { shown: `B ${b}`, base: 'every version' };
  } else if (state.periodDiff && params.from !== undefined) {
    const to = params.to === undefined ? Date.now() : Number(params.to);
    const from = Number(params.from);
    Object.assign(params, { to: String(to), base_from: String(from - (to - from)), base_to: String(from) });
    names = { shown: 'this period', base: 'the period before' };
  }
  const tree = await apiJson(names ? '/api/v1/flame/diff' : '/api/v1/flame', params);
  if (gen !== state.generation) return;
  state.flame = tree;
  state.diffNames = names;
  // A CPU profile is as wide as its CPU time (samples only for SDKs that
  // sent no CPU time); hangs by samples.
  state.flameBy = cpuTime(params.kind) && tree.cpu_us > 0 ? 'cpu_us' : 'samples';
  renderFlame();
}

async function loadEvents(gen) {
  const params = filterParams(true);
  params.loop = loopFilter();
  let events = (await apiJson('/api/v1/events', params)).events;
  const sel = state.selected;
  if (sel && state.kind === 'hang') {
    events = events.filter((e) => e.group === sel.signature);
  } else if (sel) {
    // A CPU stack is one of an event's sampled stacks: read each event's detail.
    const details = await Promise.all(events.map((e) => apiJson(`/api/v1/events/${e.id}`)));
    const ids = new Set(details.filter((d) => d.stacks.some((s) => s.signature === sel.signature))
      .map((d) => d.id));
    events = events.filter((e) => ids.has(e.id));
  }
  if (gen !== state.eventsGeneration) return;
  state.events = events;
  // The detail shown belongs to the list: an event the new filters, kind,
  // range or selected stack leave out is no longer shown.
  if (state.detailId !== null && !events.some((e) => e.id === state.detailId)) clearDetail();
  renderEvents();
}

// The group a link named, when the stacks shown have it (else it is dropped).
async function selectPendingGroup() {
  const stack = state.stacks.find((s) => s.signature === state.pendingGroup);
  state.pendingGroup = null;
  if (stack) await selectStack(stack);
  else writeUrl();
}

// The chart's bucket for the time range chosen (its length in ms; '' = all).
function bucketForRange(range) {
  if (range && Number(range) <= BUCKET_MINUTE_UP_TO) return 'minute';
  if (range && Number(range) <= BUCKET_HOUR_UP_TO) return 'hour';
  return 'day';
}

// A time range chosen on the chart (null: the menu's again). The menu
// shows it as its own entry, which choosing another entry leaves.
function setWindow(w) {
  state.window = w;
  const menu = $('range');
  let custom = menu.querySelector('option[data-window]');
  if (!w) {
    if (custom) custom.remove();
    return;
  }
  if (!custom) {
    custom = el('option', { 'data-window': '1' });
    menu.append(custom);
  }
  custom.value = String(w.to - w.from);
  custom.textContent = `${fmtTime(w.from)} – ${fmtTime(w.to)}`;
  menu.value = custom.value;
  custom.selected = true;
}

// Events per bucket for the filters and kind (not the selected group).
async function loadSeries(gen) {
  state.series = null;
  renderChart();
  const params = filterParams(false);
  params.bucket = bucketForRange(state.window ? String(state.window.to - state.window.from) : $('range').value);
  const to = state.window ? state.window.to : Date.now();
  const search = new URLSearchParams();
  setParams(search, params);
  const answer = await apiJson('/api/v1/timeseries', params);
  if (gen !== state.generation) return;
  state.series = { ...answer, bucket: params.bucket, query: search.toString(),
    from: params.from === undefined ? null : Number(params.from), to };
  renderChart();
}

// Versions A and B of the app, with the other filters (not kind, version
// or label: the comparison is of the hangs of two versions) and the loop
// (that loop's hangs per hour of its own watched time). Only the views of
// hangs compare: the CPU and manual views say that they do not.
async function loadCompare(gen) {
  const box = $('compare-body');
  const app = $('app').value.trim();
  const a = $('compare-a').value.trim();
  const b = $('compare-b').value.trim();
  delete box.dataset.query;
  const hangs = state.kind === 'hang' || state.kind === 'fatal_hang';
  const profile = state.kind === 'profile';
  $('compare-hint').textContent = hangs ? 'hangs per hour of watched time with their 95% intervals, ' +
    'for the app and filters above'
    : profile ? 'the profile of version B against A: the flame graph\u2019s diff'
      : `${KINDS[state.kind].title} are not compared by version`;
  $('compare-form').hidden = !hangs && !profile;
  if (profile) {
    // The profile has no rate: its versions differ by where their CPU time goes.
    renderPrompt(el, box, a && b ? `Version ${b} against ${a}: check \u201cDiff B against A\u201d in the flame graph ` +
      'for each frame\u2019s share of the CPU time in both.' : 'Enter versions A and B, then check ' +
      '\u201cDiff B against A\u201d in the flame graph.');
    return;
  }
  if (!hangs) {
    renderPrompt(el, box, `${KINDS[state.kind].title} have no rate per version: choose Hangs or Fatal hangs ` +
      'to compare versions.');
    return;
  }
  if (!app || !a || !b) {
    renderPrompt(el, box, app ? 'Enter versions A and B to compare.' : 'Choose an app above, then versions A and B.');
    return;
  }
  box.replaceChildren();
  const params = filterParams(false);
  for (const name of ['kind', 'version', 'label']) delete params[name];
  Object.assign(params, { a, b, loop: loopFilter() });
  const search = new URLSearchParams();
  setParams(search, params);
  const answer = await apiJson('/api/v1/versions/compare', params);
  if (gen !== state.generation) return;
  box.dataset.query = search.toString();
  renderComparison(el, box, answer);
}

// What the SDKs dropped for these filters (any kind: drops are the batches').
async function loadDrops(gen) {
  $('drops').hidden = true;
  $('drops').textContent = '';
  const params = filterParams(false);
  delete params.kind;
  delete params.label; // drops belong to batches, not to units of work
  const drops = await apiJson('/api/v1/drops', params);
  if (gen !== state.generation) return;
  renderDrops(drops);
}

// "events dropped: rate limit 12, spool quota 3" (the reasons with any),
// or "no events dropped".
function dropsText(drops) {
  const parts = DROP_REASONS.filter(([key]) => drops[key] > 0)
    .map(([key, words]) => `${words} ${fmtCount(drops[key])}`);
  return parts.length ? `events dropped: ${parts.join(', ')}` : 'no events dropped';
}

function renderDrops(drops) {
  const line = $('drops');
  line.textContent = dropsText(drops);
  line.classList.toggle('none', !DROP_REASONS.some(([key]) => drops[key] > 0));
  line.title = `dropped by the SDKs before sending, reported in ${fmtCount(drops.batches)} batches`;
  line.hidden = false;
}

// App, version and environment values seen lately, offered in the filters
// (in the Profile view, those of the profile windows: the events list
// leaves them out unless asked for by their kind).
async function loadSuggestions() {
  const { events } = await apiJson('/api/v1/events',
    { limit: '1000', kind: state.kind === 'profile' ? 'profile' : '' });
  for (const [field, list] of [['app', 'apps'], ['version', 'versions'], ['environment', 'environments'],
    ['loop', 'loops']]) {
    const values = [...new Set(events.map((e) => e[field]).filter(Boolean))].sort();
    $(list).replaceChildren(...values.map((v) => el('option', { value: v })));
  }
}

// ---- the slowest stacks -------------------------------------------------------

// What the impact bar and the order show: a stack's own time.
function impactOf(stack) {
  return state.kind === 'hang' ? stack.hang_ms : stack.cpu_us;
}

// Which screens show a stack column (style.css): its own time always, the
// counts from 700 px, the events' durations from 1100 px.
function columnClass(id, strong) {
  if (strong) return '';
  return id.startsWith('event-') ? ' extra' : ' wide';
}

// The header row of the kind shown (none for a kind without summed stacks).
function renderStackHead() {
  if (!KINDS[state.kind].stacks) {
    $('top-stacks-head').replaceChildren();
    return;
  }
  const fnTip = state.kind === 'hang'
    ? 'the innermost frame of the app\'s own code on the part of the stack the hangs share'
    : 'the innermost frame of the app\'s own code on the stack';
  $('top-stacks-head').replaceChildren(
    el('th', { class: 'fn', id: 'fn-header', 'data-testid': 'col-function',
      text: 'Function (innermost in-app frame)', title: fnTip }),
    el('th', { class: 'impact wide', 'data-testid': 'col-impact', text: 'Impact',
      title: state.kind === 'hang' ? 'hang time' : 'CPU time' }),
    ...STACK_COLUMNS[state.kind].map(([id, header, tip, , strong]) =>
      el('th', { class: `num${columnClass(id, strong)}`, 'data-testid': `col-${id}`, title: tip, text: header })),
    el('th', { class: 'extra', 'data-testid': 'col-first-seen', text: 'First seen' }),
    el('th', { class: 'extra', 'data-testid': 'col-last-seen', text: 'Last seen' }),
    el('th', { class: 'extra', 'data-testid': 'col-versions', text: 'Versions' }));
}

function renderStacks() {
  const body = $('top-stacks').tBodies[0];
  body.replaceChildren();
  renderStackHead();
  const kind = KINDS[state.kind];
  $('top-stacks').hidden = !kind.stacks;
  $('stacks-none').hidden = kind.stacks;
  $('stacks-none').textContent = kind.noStacks || '';
  document.querySelector('.exports').hidden = !kind.stacks;
  if (!kind.stacks) {
    $('stacks-title').textContent = `${kind.title}: no summed stacks`;
    $('stacks-hint').textContent = '';
    $('stacks-empty').hidden = true;
    return;
  }
  $('stacks-title').textContent = state.kind === 'hang' ? 'Slowest hang stacks'
    : state.kind === 'profile' ? 'Hottest stacks of the CPU profile' : 'Hottest CPU stacks';
  $('export-folded').title = state.kind === 'hang' ? 'folded stacks, samples per stack'
    : 'folded stacks, CPU microseconds per stack (flamegraph.pl --countname=us)';
  $('stacks-hint').textContent = state.kind === 'hang'
    ? 'sorted by hang time; click a row to see its events'
    : state.kind === 'profile'
      ? 'the always-on profile of the time range: sorted by CPU time; click a row to see its windows'
      : 'sorted by CPU time (the stack\u2019s own, not its events\u2019 durations); click a row to see its events';
  $('stacks-empty').hidden = state.stacks.length > 0;
  const maxImpact = Math.max(1e-9, ...state.stacks.map(impactOf));
  state.stacks.forEach((stack, index) => {
    const row = stackRow(stack, index, impactOf(stack) / maxImpact);
    const frames = stackFramesRow(stack);
    body.append(row, frames);
  });
}

// What a row leads with: the API's headline, the innermost in-app frame
// (or the innermost frame when no frame is in-app).
function headlineOf(stack) {
  const h = stack.headline;
  return h ? { fn: h.function, module: h.module, at: h.in_app_index } : { fn: stack.frames[0], module: null, at: 0 };
}

// Beside the headline: before it, where the thread was when the headline
// is deeper than the innermost frame ("in read ←": read, called from the
// headline); else, under it, its caller.
function headlineContext(stack) {
  if (headlineOf(stack).at > 0) {
    return el('span', { class: 'inner', 'data-testid': 'stack-innermost', title: 'the innermost frame',
      text: `in ${stack.frames[0]} ←` });
  }
  return stack.frames.length > 1 ? el('span', { class: 'caller', text: `called from ${stack.frames[1]}` }) : null;
}

function stackRow(stack, index, share) {
  const toggle = el('button', { type: 'button', class: 'toggle', 'aria-expanded': 'false',
    title: 'Show the whole stack', 'data-testid': 'stack-toggle', text: '▸' });
  const head = headlineOf(stack);
  const context = headlineContext(stack);
  const name = el('span', { class: 'fn-name', 'data-testid': 'stack-function', title: head.module || '',
    text: head.fn || '?' });
  const bar = el('span', { class: 'impact-bar' });
  bar.style.width = `${Math.max(2, share * 100).toFixed(1)}%`;
  const row = el('tr', { class: 'stack-row', tabindex: '0', 'data-testid': 'stack-row',
    'data-signature': stack.signature, 'data-index': String(index) },
  el('td', { class: 'fn' }, toggle, ...(head.at > 0 ? [context, name] : [name, context])),
  el('td', { class: 'impact wide' }, el('span', { class: 'bar-track' }, bar)),
  ...STACK_COLUMNS[state.kind].map(([id, , , cell, strong]) =>
    el('td', { class: `num${strong ? ' strong' : columnClass(id, strong)}`, 'data-testid': `cell-${id}`,
      text: cell(stack) })),
  el('td', { class: 'time extra', text: fmtTime(stack.first_seen) }),
  el('td', { class: 'time extra', text: fmtTime(stack.last_seen) }),
  el('td', { class: 'extra', text: stack.versions.join(', ') }));
  toggle.addEventListener('click', (ev) => {
    ev.stopPropagation();
    const open = toggle.getAttribute('aria-expanded') !== 'true';
    toggle.setAttribute('aria-expanded', String(open));
    toggle.textContent = open ? '▾' : '▸';
    row.nextElementSibling.hidden = !open;
  });
  row.addEventListener('click', () => selectStack(stack));
  row.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') selectStack(stack); });
  return row;
}

function stackFramesRow(stack) {
  // Frames outside the app (in_app false) muted when the app has any, as
  // in an event's detail.
  const marks = stack.in_app && stack.in_app.some(Boolean) ? stack.in_app : null;
  const list = el('ol', { class: 'frames', start: '0' },
    ...stack.frames.map((name, i) => el('li', { class: marks && !marks[i] ? 'system' : 'in-app', text: name })));
  const row = el('tr', { class: 'frames-row', 'data-testid': 'stack-frames' },
    el('td', { colspan: String(5 + STACK_COLUMNS[state.kind].length) }, list));
  row.hidden = true;
  return row;
}

async function selectStack(stack) {
  const same = state.selected && state.selected.signature === stack.signature;
  state.selected = same ? null : stack;
  for (const row of $('top-stacks').querySelectorAll('.stack-row'))
    row.classList.toggle('selected', !same && row.dataset.signature === stack.signature);
  renderFlame();
  writeUrl();
  try {
    if (state.kind === 'hang') await loadFlame(state.generation); // the group's own, or all again
    await Promise.all([loadEvents(++state.eventsGeneration), loadStackStates()]);
  } catch (err) {
    reportError(err);
  }
}

// ---- events over time ---------------------------------------------------------

// Bars of events per bucket on a time axis from the range's start (or the
// first bucket's, for all) to now (or the last bucket's end).
function renderChart() {
  const box = $('chart');
  box.replaceChildren();
  const s = state.series;
  $('chart-title').textContent = `${KINDS[state.kind].title} over time`;
  $('chart-hint').textContent = '';
  if (!s) return;
  box.dataset.query = s.query;
  const events = s.points.reduce((n, p) => n + p.events, 0);
  const totalMs = s.points.reduce((n, p) => n + p.event_total_ms, 0);
  $('chart-hint').textContent = `events per ${s.bucket}: ${fmtCount(events)} ${events === 1 ? 'event' : 'events'}` +
    ` lasting ${fmtMs(totalMs)} in all; drag across the chart or click a bar to look at that time`;
  if (!s.points.length) {
    box.append(el('p', { class: 'empty', text: 'No events for these filters.' }));
    return;
  }
  const width = Math.max(300, box.clientWidth);
  const top = 14;
  const base = CHART_HEIGHT - 16;
  const last = s.points[s.points.length - 1].start_ms + s.bucket_ms;
  const x0 = s.from === null ? s.points[0].start_ms : Math.floor(s.from / s.bucket_ms) * s.bucket_ms;
  const x1 = s.from === null ? last : Math.max(s.to, last);
  const span = Math.max(1, x1 - x0);
  const slot = (s.bucket_ms / span) * width;
  const most = Math.max(...s.points.map((p) => p.events));
  const svg = el('svg:svg', { width: String(width), height: String(CHART_HEIGHT),
    viewBox: `0 0 ${width} ${CHART_HEIGHT}`, role: 'img', 'aria-label': `Events per ${s.bucket}` });
  svg.append(el('svg:line', { class: 'axis', x1: '0', x2: String(width), y1: String(base), y2: String(base) }));
  for (const p of s.points) {
    const h = Math.max(1, (p.events / most) * (base - top));
    const x = ((p.start_ms - x0) / span) * width;
    const bar = el('svg:rect', { class: `bar ${state.kind}`, 'data-testid': 'chart-bar',
      'data-start': String(p.start_ms), 'data-events': String(p.events),
      x: x.toFixed(2), y: (base - h).toFixed(2), width: Math.max(1, slot - 1).toFixed(2), height: h.toFixed(2) });
    bar.append(el('svg:title', { text: `${fmtTime(p.start_ms)}: ${fmtCount(p.events)} events lasting ${fmtMs(p.event_total_ms)}` }));
    svg.append(bar);
  }
  svg.append(el('svg:text', { x: '0', y: '10', text: `${fmtCount(most)} max` }),
    el('svg:text', { x: '0', y: String(CHART_HEIGHT - 3), text: fmtTime(x0) }),
    el('svg:text', { x: String(width), y: String(CHART_HEIGHT - 3), 'text-anchor': 'end', text: fmtTime(x1) }));
  brushChart(svg, (px) => x0 + (Math.min(width, Math.max(0, px)) / width) * span, s.points, s.bucket_ms);
  box.append(svg);
}

// Drag across the chart to look at that time range, or click a bar for its
// bucket: every view follows (the filters' time range becomes it).
function brushChart(svg, timeAt, points, bucketMs) {
  const band = el('svg:rect', { class: 'brush', 'data-testid': 'chart-brush', y: '0',
    height: String(CHART_HEIGHT - 16), width: '0', visibility: 'hidden' });
  svg.append(band);
  let start = null;
  const xOf = (ev) => ev.clientX - svg.getBoundingClientRect().left;
  svg.addEventListener('pointerdown', (ev) => {
    start = xOf(ev);
    svg.setPointerCapture(ev.pointerId);
  });
  svg.addEventListener('pointermove', (ev) => {
    if (start === null) return;
    const x = xOf(ev);
    band.setAttribute('x', String(Math.min(start, x)));
    band.setAttribute('width', String(Math.abs(x - start)));
    band.setAttribute('visibility', 'visible');
  });
  svg.addEventListener('pointerup', (ev) => {
    if (start === null) return;
    const x = xOf(ev);
    const from = Math.min(start, x), to = Math.max(start, x);
    start = null;
    band.setAttribute('visibility', 'hidden');
    if (to - from >= 4) {
      setWindow({ from: Math.floor(timeAt(from)), to: Math.ceil(timeAt(to)) });
    } else {
      const t = timeAt(x);
      const p = points.find((q) => q.start_ms <= t && t < q.start_ms + bucketMs);
      if (!p) return;
      setWindow({ from: p.start_ms, to: p.start_ms + bucketMs });
    }
    refresh();
  });
}

// ---- the flame graph ----------------------------------------------------------

// Does the flame-graph path lie on the selected stack (an ancestor of its
// innermost frame, or below it)?
function onSelectedStack(path) {
  if (!state.selected) return false;
  const rootFirst = [...state.selected.frames].reverse();
  const n = Math.min(path.length, rootFirst.length);
  for (let i = 0; i < n; i++) if (path[i] !== rootFirst[i]) return false;
  return true;
}

// A frame's colour says whose it is: reds to yellows for the app's own
// frames (in_app), blues for libraries and the system, greys for a blocking
// call of the C library (waiting: read, poll, a futex wait, a sleep); a
// name's hash picks the shade, so one function keeps its colour.
function frameColor(node) {
  let h = 0;
  for (const c of node.name) h = (h * 31 + c.codePointAt(0)) >>> 0;
  if (node.waiting) return `hsl(${250 + (h % 20)}, 6%, ${68 + ((h >>> 8) % 10)}%)`;
  if (node.in_app === false) return `hsl(${195 + (h % 35)}, 45%, ${70 + ((h >>> 8) % 12)}%)`;
  return `hsl(${10 + (h % 40)}, 85%, ${55 + ((h >>> 8) % 15)}%)`;
}

// Does a frame's name hold the search text (any case)?
function matchesSearch(name) {
  return state.flameSearch !== '' && name.toLowerCase().includes(state.flameSearch.toLowerCase());
}

// The part of the whole tree's width in frames that match the search: each
// matching frame's, less what a matching frame above it already counts;
// and how many distinct names match. A walk with its own stack: stored
// stacks are up to 512 frames deep.
function searchShare(root) {
  let matched = 0;
  const names = new Set();
  const todo = [[root, false]];
  while (todo.length) {
    const [node, under] = todo.pop();
    const hit = node !== root && matchesSearch(node.name);
    if (hit) names.add(node.name);
    if (hit && !under) matched += flameValue(node);
    for (const child of node.children || []) todo.push([child, under || hit]);
  }
  return { share: flameValue(root) ? matched / flameValue(root) : 0, names: names.size };
}

// Is the tree shown a diff (/api/v1/flame/diff: each node has its delta)?
function isDiff() {
  return state.flame !== null && state.flame.delta !== undefined;
}

// A flame-graph node's width (in a diff: the mean of its share in B and
// in A, so a frame that left B still shows), and its figures in words.
function flameValue(node) {
  return isDiff() ? (node.share + node.base_share) / 2 : node[state.flameBy];
}

// A diff frame's colour: red where B's share grew, blue where it shrank,
// deeper with the change (full at 10 points), grey where it held.
function diffColor(delta) {
  const depth = Math.min(1, Math.abs(delta) / 0.1);
  if (depth < 0.005) return 'hsl(220, 10%, 85%)';
  return `hsl(${delta > 0 ? 0 : 215}, 75%, ${Math.round(90 - 40 * depth)}%)`;
}

function flameWords(node) {
  if (node.cpu_us !== undefined) return `${fmtMs(node.cpu_us / 1000)} CPU · ${fmtCount(node.samples)} samples`;
  return `${fmtCount(node.samples)} samples · ${fmtMs(node.hang_ms)} hang time`;
}

function renderFlame() {
  const box = $('flame');
  box.replaceChildren();
  $('flame-reset').hidden = state.zoom.length === 0;
  if (!KINDS[state.kind].stacks) {
    $('flame-hint').textContent = '';
    box.append(el('p', { class: 'empty', 'data-testid': 'flame-none',
      text: `${KINDS[state.kind].title} have no flame graph of their own: each event\u2019s stacks are in its detail.` }));
    return;
  }
  const root = state.flame;
  // The collector keeps the heaviest stacks and sums the rest into one <truncated> stack.
  const omitted = root && root.truncated ? `; ${root.stacks_omitted} lighter stacks summed into <truncated>` : '';
  $('flame-hint').textContent = isDiff()
    ? `${state.diffNames.shown} against ${state.diffNames.base}: width = the mean of the ` +
      `two sides' shares; red grew in ${state.diffNames.shown}, blue shrank; click a frame to zoom${omitted}`
    : `root at the top; width = ${state.flameBy === 'cpu_us' ? 'CPU time' : 'samples'}; ` +
      'orange: the app, blue: libraries and the system, grey: waiting in a blocking call; click to zoom' +
      omitted;
  const found = $('flame-match');
  found.hidden = !root || !state.flameSearch;
  const zoomed = state.zoom.length ? state.zoom[state.zoom.length - 1] : null;
  $('flame-sandwich').hidden = !zoomed;
  $('flame-sandwich').textContent = zoomed ? `Sandwich of ${zoomed}` : 'Sandwich';
  renderSandwich();
  if (!root) return;
  if (!flameValue(root)) {
    box.append(el('p', { class: 'empty', text: 'No samples for these filters.' }));
    return;
  }
  if (state.flameSearch) {
    const { share, names } = searchShare(root);
    found.textContent = names ? `"${state.flameSearch}": ${(100 * share).toFixed(1)}% of all in ` +
      `${names} function${names === 1 ? '' : 's'}` : `"${state.flameSearch}": no frame`;
  }
  const width = Math.max(300, box.clientWidth);
  // Walk down to the zoomed frame: its ancestors are drawn full width.
  const chain = [root];
  for (const name of state.zoom) {
    const next = (chain[chain.length - 1].children || []).find((c) => c.name === name);
    if (!next) break;
    chain.push(next);
  }
  const focus = chain[chain.length - 1];
  const rects = [];
  chain.forEach((node, depth) => rects.push({ node, depth, x: 0, w: width, path: state.zoom.slice(0, depth),
    ancestor: node !== focus, parent: depth ? chain[depth - 1] : null }));
  layoutChildren(focus, chain.length - 1, 0, width, state.zoom.slice(0, chain.length - 1), rects);
  const depth = Math.max(...rects.map((r) => r.depth)) + 1;
  const svg = el('svg:svg', { width: String(width), height: String(depth * FLAME_ROW),
    viewBox: `0 0 ${width} ${depth * FLAME_ROW}`, role: 'group', 'aria-label': 'Flame graph' });
  const nodes = rects.map((r) => flameNode(r, flameValue(root), flameValue(focus)));
  rects.forEach((r, i) => {
    nodes[i].addEventListener('keydown', (ev) => flameKey(ev, rects, nodes, i));
    nodes[i].addEventListener('focus', () => showTooltip(null, r.node, r.parent, flameValue(root), flameValue(focus),
      nodes[i]));
    nodes[i].addEventListener('blur', () => { $('flame-tooltip').hidden = true; });
  });
  svg.append(...nodes);
  box.append(svg);
  // After a zoom by key, the zoomed frame keeps the focus.
  if (state.flameFocus !== null) {
    const at = rects.findIndex((r) => r.path.join('\u0000') === state.flameFocus);
    state.flameFocus = null;
    if (at >= 0) nodes[at].focus();
  }
}

// The keys of a focused frame: Up its caller, Down its widest callee,
// Left and Right the frames beside it on its row, Home the root; Enter or
// Space zooms into it, Escape zooms out to the whole graph.
function flameKey(ev, rects, nodes, i) {
  const r = rects[i];
  const rowOf = (depth) => rects.map((x, k) => [x, k]).filter(([x]) => x.depth === depth)
    .sort((a, b) => a[0].x - b[0].x);
  let to = -1;
  if (ev.key === 'ArrowUp') {
    to = rects.findIndex((x) => x.depth === r.depth - 1 && x.node === r.parent);
  } else if (ev.key === 'ArrowDown') {
    const kids = rects.map((x, k) => [x, k]).filter(([x]) => x.depth === r.depth + 1 && x.parent === r.node);
    kids.sort((a, b) => b[0].w - a[0].w || a[0].x - b[0].x);
    if (kids.length) to = kids[0][1];
  } else if (ev.key === 'ArrowLeft' || ev.key === 'ArrowRight') {
    const row = rowOf(r.depth);
    const at = row.findIndex(([, k]) => k === i) + (ev.key === 'ArrowLeft' ? -1 : 1);
    if (at >= 0 && at < row.length) to = row[at][1];
  } else if (ev.key === 'Home') {
    to = 0;
  } else if (ev.key === 'Enter' || ev.key === ' ') {
    ev.preventDefault();
    state.zoom = r.path;
    state.flameFocus = r.path.join('\u0000');
    $('flame-tooltip').hidden = true;
    renderFlame();
    return;
  } else if (ev.key === 'Escape' && state.zoom.length) {
    ev.preventDefault();
    state.zoom = [];
    state.flameFocus = '';
    renderFlame();
    return;
  } else {
    return;
  }
  ev.preventDefault();
  if (to >= 0) nodes[to].focus();
}

function layoutChildren(node, depth, x, width, path, rects) {
  let offset = x;
  for (const child of node.children || []) {
    const w = (flameValue(child) / flameValue(node)) * width;
    if (w >= FLAME_MIN_WIDTH) {
      const childPath = [...path, child.name];
      rects.push({ node: child, depth: depth + 1, x: offset, w, path: childPath, ancestor: false, parent: node });
      layoutChildren(child, depth + 1, offset, w, childPath, rects);
    }
    offset += w;
  }
}

function flameNode(r, total, focusTotal) {
  const name = r.node.name;
  const isRoot = r.depth === 0;
  const highlighted = !isRoot && onSelectedStack(r.path);
  const match = !isRoot && matchesSearch(name);
  const classes = ['frame'];
  if (r.ancestor) classes.push('ancestor');
  if (match) classes.push('match');
  if (highlighted) classes.push('highlight');
  else if ((state.selected || (state.flameSearch && !match)) && !isRoot) classes.push('dim');
  const g = el('svg:g', { class: classes.join(' '), 'data-testid': 'flame-node', 'data-name': name,
    'data-samples': String(r.node.samples), 'data-cpu-us': r.node.cpu_us === undefined ? null : String(r.node.cpu_us),
    'data-hang-ms': r.node.hang_ms === undefined ? null : String(r.node.hang_ms),
    'data-delta': r.node.delta === undefined ? null : String(r.node.delta),
    'data-in-app': r.node.in_app === undefined ? null : String(r.node.in_app),
    'data-waiting': r.node.waiting ? 'true' : null,
    'data-depth': String(r.depth), tabindex: '0', role: 'button',
    'aria-label': isRoot ? `all: ${flameWords(r.node)}` : `${name}: ${flameWords(r.node)}`,
    transform: `translate(${r.x.toFixed(2)},${r.depth * FLAME_ROW})` });
  const rect = el('svg:rect', { width: Math.max(0, r.w - 1).toFixed(2), height: String(FLAME_ROW - 2), rx: '2' });
  rect.style.fill = isRoot ? '#adb5bd' : match ? '#d63bd6' : isDiff() ? diffColor(r.node.delta) : frameColor(r.node);
  if (isDiff() && !isRoot && Math.abs(r.node.delta) >= 0.0005) classes.push(r.node.delta > 0 ? 'grew' : 'shrank');
  g.setAttribute('class', classes.join(' '));
  g.append(rect);
  const chars = Math.floor((r.w - 8) / 7);
  if (chars >= 3) {
    const label = isRoot ? `all (${flameWords(r.node)})` : name;
    g.append(el('svg:text', { x: '4', y: String(FLAME_ROW - 7),
      text: label.length > chars ? `${label.slice(0, chars - 1)}…` : label }));
  }
  g.addEventListener('mousemove', (ev) => showTooltip(ev, r.node, r.parent, total, focusTotal));
  g.addEventListener('mouseleave', () => { $('flame-tooltip').hidden = true; });
  g.addEventListener('click', () => {
    state.zoom = r.path;
    $('flame-tooltip').hidden = true;
    renderFlame();
  });
  return g;
}

// A frame's name, its CPU time and samples (CPU) or samples and hang time
// (hangs), and its share of the whole, of the zoomed frame and of its
// caller by width.
function showTooltip(ev, node, parent, total, focusTotal, at) {
  const tip = $('flame-tooltip');
  const pct = (v, of) => `${((100 * v) / of).toFixed(1)}%`;
  const value = flameValue(node);
  let text = `${node.name}${node.waiting ? ' (waiting in a blocking call)' : ''}\n` +
    `${flameWords(node)}, ${pct(value, total)} of all`;
  if (isDiff()) {
    const points = 100 * node.delta;
    text = `${node.name}\n${state.diffNames.shown}: ${pct(node.share, 1)} of its time ` +
      `(${flameWords(node)})\n${state.diffNames.base}: ${pct(node.base_share, 1)} ` +
      `(${fmtCount(node.base_samples)} samples)\n${points >= 0 ? '+' : ''}${points.toFixed(1)} points`;
  }
  if (focusTotal !== total) text += `, ${pct(value, focusTotal)} of the zoomed frame`;
  if (parent && parent.name !== 'all') text += `, ${pct(value, flameValue(parent))} of ${parent.name}`;
  tip.textContent = text;
  tip.hidden = false;
  const pad = 14;
  // A mouse's position, or (focused by key) the frame's lower left corner.
  const box = at ? at.getBoundingClientRect() : null;
  const cx = ev ? ev.clientX : box.left, cy = ev ? ev.clientY : box.bottom;
  const x = Math.min(cx + pad, window.innerWidth - tip.offsetWidth - 4);
  const y = cy + pad + tip.offsetHeight > window.innerHeight ? cy - tip.offsetHeight - pad : cy + pad;
  tip.style.left = `${x}px`;
  tip.style.top = `${y}px`;
}

// ---- the sandwich: one function's callers and callees ------------------------

// A tree of merged paths: { name, value, children: Map name -> tree }.
function pathTree(name) {
  return { name, value: 0, children: new Map() };
}

function pathChild(tree, name) {
  let kid = tree.children.get(name);
  if (!kid) tree.children.set(name, kid = pathTree(name));
  return kid;
}

// Add node's subtree under into (values by flameValue), with its own stack.
function addSubtree(into, node) {
  const todo = [[into, node]];
  while (todo.length) {
    const [to, from] = todo.pop();
    for (const c of from.children || []) {
      const kid = pathChild(to, c.name);
      kid.value += flameValue(c);
      todo.push([kid, c]);
    }
  }
}

// fn across the whole tree: its total (each frame of it not under another
// frame of it: recursion counted once), its self time (its frames' width
// less their callees'), the callers of those outermost frames merged from
// fn outwards, and their callees merged. A walk with its own stack.
function sandwichOf(root, fn) {
  const callers = pathTree(fn), callees = pathTree(fn);
  let total = 0, self = 0;
  const todo = [[root, null, false]];
  while (todo.length) {
    const [node, up, under] = todo.pop(); // up: { node, up } towards the root
    const hit = node !== root && node.name === fn;
    if (hit) {
      const v = flameValue(node);
      self += Math.max(0, v - (node.children || []).reduce((n, c) => n + flameValue(c), 0));
      if (!under) {
        total += v;
        addSubtree(callees, node);
        let at = callers;
        for (let a = up; a && a.node !== root; a = a.up) {
          at = pathChild(at, a.node.name);
          at.value += v;
        }
      }
    }
    for (const c of node.children || []) todo.push([c, { node, up }, under || hit]);
  }
  callers.value = callees.value = total;
  return { total, self, callers, callees };
}

// A path tree as flame-graph rects: the root row first, each child under
// (or, inverted, over) its parent, as wide as its value.
function drawPathTree(box, tree, inverted, testid) {
  box.replaceChildren();
  const width = Math.max(300, box.clientWidth || $('flame').clientWidth);
  const rects = [];
  const todo = [[tree, 0, 0, width]];
  while (todo.length) {
    const [node, depth, x, w] = todo.pop();
    rects.push({ node, depth, x, w });
    let offset = x;
    for (const c of [...node.children.values()].sort((a, b) => b.value - a.value)) {
      const cw = node.value ? (c.value / node.value) * w : 0;
      if (cw >= FLAME_MIN_WIDTH) todo.push([c, depth + 1, offset, cw]);
      offset += cw;
    }
  }
  const depth = Math.max(...rects.map((r) => r.depth)) + 1;
  const svg = el('svg:svg', { width: String(width), height: String(depth * FLAME_ROW),
    viewBox: `0 0 ${width} ${depth * FLAME_ROW}`, role: 'img', 'aria-label': testid });
  for (const r of rects) {
    const y = (inverted ? depth - 1 - r.depth : r.depth) * FLAME_ROW;
    const g = el('svg:g', { class: 'frame', 'data-testid': `${testid}-node`, 'data-name': r.node.name,
      'data-value': String(r.node.value), transform: `translate(${r.x.toFixed(2)},${y})` });
    const rect = el('svg:rect', { width: Math.max(0, r.w - 1).toFixed(2), height: String(FLAME_ROW - 2), rx: '2' });
    rect.style.fill = r.depth === 0 ? '#d63bd6' : frameColor({ name: r.node.name });
    g.append(rect);
    const chars = Math.floor((r.w - 8) / 7);
    if (chars >= 3) {
      g.append(el('svg:text', { x: '4', y: String(FLAME_ROW - 7),
        text: r.node.name.length > chars ? `${r.node.name.slice(0, chars - 1)}…` : r.node.name }));
    }
    g.append(el('svg:title', { text: `${r.node.name}: ${((100 * r.node.value) / tree.value).toFixed(1)}% of ${tree.name}` }));
    svg.append(g);
  }
  box.append(svg);
}

// The sandwich of state.sandwich over the flame graph's whole tree.
function renderSandwich() {
  const box = $('sandwich');
  const root = state.flame;
  box.hidden = !state.sandwich || !root || !flameValue(root);
  if (box.hidden) return;
  const fn = state.sandwich;
  const { total, self, callers, callees } = sandwichOf(root, fn);
  const all = flameValue(root);
  const pct = (v) => `${((100 * v) / all).toFixed(1)}%`;
  const title = $('sandwich-title');
  title.dataset.total = String(total);
  title.dataset.self = String(self);
  title.textContent = total
    ? `${fn}: ${pct(total)} of all in it and its callees, ${pct(self)} in itself; callers above, callees below`
    : `${fn}: not in this flame graph`;
  drawPathTree($('sandwich-callers'), callers, true, 'sandwich-caller');
  drawPathTree($('sandwich-callees'), callees, false, 'sandwich-callee');
}

// ---- events and their detail --------------------------------------------------

function renderEvents() {
  const body = $('events').tBodies[0];
  body.replaceChildren();
  const sel = state.selected;
  $('events-hint').textContent = sel ? `of the stack in ${headlineOf(sel).fn}`
    : `${KINDS[state.kind].title.toLowerCase()}, newest first`;
  $('events-all').hidden = !sel;
  $('events-empty').hidden = state.events.length > 0;
  for (const e of state.events) {
    const row = el('tr', { class: 'event-row', tabindex: '0', 'data-testid': 'event-row', 'data-id': String(e.id) },
      el('td', { class: 'time', text: fmtTime(e.start_ms) }),
      el('td', {}, kindBadge(e.kind)),
      el('td', { class: 'num strong', text: fmtMs(e.duration_ms) }),
      el('td', { class: 'num wide', text: String(e.tid) }),
      el('td', { class: 'loop wide', 'data-testid': 'event-loop', text: e.loop || '—' }),
      el('td', { class: 'num wide', text: fmtCpu(e.cpu_percent) }),
      el('td', { class: 'extra', text: `${e.app} ${e.version} (${e.environment})` }),
      el('td', { class: 'reason', text: e.label || e.reason || '' }));
    row.classList.toggle('selected', e.id === state.detailId);
    row.addEventListener('click', () => showEvent(e.id));
    row.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') showEvent(e.id); });
    body.append(row);
  }
}

async function showEvent(id) {
  state.detailId = id;
  for (const row of $('events').querySelectorAll('.event-row'))
    row.classList.toggle('selected', Number(row.dataset.id) === id);
  try {
    const ev = await apiJson(`/api/v1/events/${id}`);
    if (state.detailId === id) renderDetail(ev); // not cleared or replaced meanwhile
  } catch (err) {
    reportError(err);
  }
}

// No event shown: the panel's prompt again.
function clearDetail() {
  state.detailId = null;
  $('detail-empty').hidden = false;
  $('detail-body').hidden = true;
  delete $('event-detail').dataset.id;
}

// An event's kind as a badge: its own words and colour per kind.
function kindBadge(kind) {
  return el('span', { class: `badge ${kind}`, 'data-testid': 'kind-badge', 'data-kind': kind,
    text: Object.hasOwn(KINDS, kind) ? KINDS[kind].badge : kind });
}

function renderDetail(ev) {
  $('detail-empty').hidden = true;
  $('detail-body').hidden = false;
  $('event-detail').dataset.id = String(ev.id);
  $('detail-kind').replaceChildren(kindBadge(ev.kind));
  $('detail-duration').textContent = fmtMs(ev.duration_ms);
  $('detail-duration').dataset.ms = String(ev.duration_ms);
  // CPU events sample the hottest threads, not only the event's own.
  const others = ev.threads.filter((t) => t.tid !== ev.tid);
  const sampled = others.map((t) => `${t.tid} (${fmtCount(t.samples)} samples)`).join(', ');
  $('detail-thread').textContent = `${ev.tid}${sampled ? ` · also sampled: ${sampled}` : ''}`;
  $('detail-cpu').textContent = fmtCpu(ev.cpu_percent);
  $('detail-start').textContent = fmtTime(ev.start_ms);
  $('detail-app').textContent = `${ev.app} ${ev.version} (${ev.environment})`;
  $('detail-loop').textContent = ev.loop || '—';
  $('detail-label').textContent = ev.label || '—';
  $('detail-reason').textContent = ev.reason || '—';
  $('detail-tags').textContent = (ev.tags || []).map((t) => `${t.key}:${t.value}`).join(' ') || '—';
  $('detail-stacks-title').textContent = cpuTime(ev.kind) ? 'Stacks: CPU time and samples'
    : ev.kind === 'hang' || ev.kind === 'fatal_hang' ? 'Stacks: samples and their share of the hang' : 'Stacks: samples';
  const total = ev.stacks.reduce((n, s) => n + weightOf(s), 0) || 1;
  const shown = ev.stacks.slice(0, DETAIL_STACKS_SHOWN).map((s) => detailStack(s, total));
  const rest = ev.stacks.slice(DETAIL_STACKS_SHOWN);
  $('detail-stacks').replaceChildren(...shown);
  if (rest.length) {
    // The long tail folded away: the event's main stacks stay readable.
    const samples = rest.reduce((n, s) => n + s.samples, 0);
    $('detail-stacks').append(el('details', { class: 'more-stacks' },
      el('summary', { text: `${rest.length} more stacks (${fmtCount(samples)} samples)` }),
      ...rest.map((s) => detailStack(s, total))));
  }
  if (ev.stacks.length === 0) $('detail-stacks').append(el('p', { class: 'empty', text: 'No samples.' }));
  $('detail-states').textContent = threadStatesText(ev.states || []);
}

// ---- thread states --------------------------------------------------------------

// One state in words, as the SDK's reports say it: "running",
// "waiting in read() (pipe)", "waiting in syscall 100000".
function stateWords(s) {
  if (s.state === 'running' || s.state === 'unknown') return s.state;
  if (!s.syscall) return 'waiting outside a system call';
  const call = s.syscall.startsWith('syscall ') ? s.syscall : `${s.syscall}()`;
  return `waiting in ${call}${s.fd ? ` (${s.fd})` : ''}`;
}

// States summed as "waiting in read() (pipe) 62%, running 38%": most
// samples first, each share rounded (rows of one state may repeat: merged).
function statesText(rows) {
  const merged = new Map();
  for (const r of rows) {
    const words = stateWords(r);
    merged.set(words, (merged.get(words) || 0) + r.samples);
  }
  const total = [...merged.values()].reduce((n, v) => n + v, 0);
  if (!total) return '';
  return [...merged.entries()].sort((a, b) => b[1] - a[1])
    .map(([words, n]) => `${words} ${Math.round((100 * n) / total)}%`).join(', ');
}

// An event's states per thread ("thread 7: ..."; one thread: just its text).
function threadStatesText(states) {
  const tids = [...new Set(states.map((s) => s.tid))];
  if (tids.length === 0) return '—';
  if (tids.length === 1) return statesText(states);
  return tids.map((tid) => `thread ${tid}: ${statesText(states.filter((s) => s.tid === tid))}`)
    .join(' · ');
}

// The selected stack's (or group's) states over the filtered events.
async function loadStackStates() {
  const box = $('stack-states');
  const sel = state.selected;
  box.hidden = true;
  if (!sel) return;
  const params = filterParams(false);
  params.group = sel.signature;
  const body = await apiJson('/api/v1/states', params);
  if (state.selected !== sel) return;
  const text = statesText(body.states);
  box.textContent = text ? `Thread states of the selected stack: ${text}` : '';
  box.hidden = !text;
}

// A stack's share of its event: its CPU time in a CPU profile (cpu_us),
// else its samples.
function weightOf(stack) {
  return stack.cpu_us !== undefined ? stack.cpu_us : stack.samples;
}

function detailStack(stack, total) {
  let what = `${fmtCount(stack.samples)} samples`;
  if (stack.cpu_us !== undefined) what = `${fmtMs(stack.cpu_us / 1000)} CPU · ${what}`;
  else if (stack.hang_ms !== undefined) what = `${what} · ${fmtMs(stack.hang_ms)}`;
  const head = el('div', { class: 'stack-head' },
    el('strong', { text: what }),
    el('span', { text: ` (${((100 * weightOf(stack)) / total).toFixed(0)}%) · thread ${stack.tid}` }));
  const app = stack.frames.some((f) => f.in_app);
  const frames = el('ol', { class: 'frames', start: '0' },
    ...stack.frames.map((f, i) => detailFrame(f, stack.names[i], app)));
  return el('div', { class: 'detail-stack', 'data-testid': 'detail-stack', 'data-signature': stack.signature },
    head, frames);
}

// One frame of an event's stack: an inline frame marked "[inline]" (the
// pc of the physical frame it sits in), the source line as file:line, and
// a stack that ended early closed by its "<truncated: reason>" frame;
// when the stack has frames of the app's own (app), the others muted.
function detailFrame(f, name, app) {
  if (f.truncated) {
    return el('li', { class: 'truncated', 'data-testid': 'detail-truncated', text: f.function });
  }
  const parts = [];
  if (f.inline) parts.push(el('span', { class: 'inline-mark', 'data-testid': 'inline-mark', text: '[inline] ' }));
  parts.push(el('span', { class: 'fn-name', title: f.system_name || '', text: f.function || name || '?' }));
  const where = f.inline ? ` ${basename(f.module)} ${f.address}`
    : ` ${basename(f.module)}${f.function ? ` +${f.offset}` : ` ${f.address}`}`;
  parts.push(el('span', { class: 'module', text: where }));
  if (f.file && f.line) {
    parts.push(el('span', { class: 'source', 'data-testid': 'frame-source', title: f.file,
      text: ` ${basename(f.file)}:${f.line}` }));
  }
  const classes = [f.inline ? 'inline' : '', app && !f.in_app ? 'system' : 'in-app'].filter(Boolean);
  return el('li', { class: classes.join(' '), 'data-testid': 'detail-frame' }, ...parts);
}

// ---- exports ------------------------------------------------------------------

// The folded export of the CPU and profile views counts CPU microseconds
// (the flame graph's width; flamegraph.pl --countname=us), the hang view's
// samples.
async function download(format) {
  const path = `/api/v1/export/${format}`;
  const params = filterParams(false);
  if (format === 'folded' && cpuTime(state.kind)) params.value = 'cpu_us';
  try {
    const blob = await (await api(path, params)).blob();
    const link = el('a', { href: URL.createObjectURL(blob),
      download: `perf-${state.kind}.${format === 'pprof' ? 'pb.gz' : 'folded'}` });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10000);
  } catch (err) {
    if (err.status === 404) showMessage(`This collector has no ${format} export (404).`);
    else reportError(err);
  }
}

// ---- wiring -------------------------------------------------------------------

function init() {
  $('api-key').value = apiKey();
  $('auth').addEventListener('submit', (ev) => {
    ev.preventDefault();
    localStorage.setItem(KEY_STORAGE, $('api-key').value.trim());
    refresh();
  });
  $('filters').addEventListener('submit', (ev) => {
    ev.preventDefault();
    refresh();
  });
  for (const radio of document.querySelectorAll('input[name="kind"]')) {
    radio.addEventListener('change', () => {
      state.kind = radio.value;
      refresh();
    });
  }
  $('range').addEventListener('change', () => {
    if (!$('range').selectedOptions[0].dataset.window) setWindow(null);
    refresh();
  });
  $('compare-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    refresh();
  });
  $('flame-reset').addEventListener('click', () => {
    state.zoom = [];
    renderFlame();
  });
  $('flame-sandwich').addEventListener('click', () => {
    state.sandwich = state.zoom[state.zoom.length - 1] || null;
    writeUrl();
    renderSandwich();
  });
  $('sandwich-close').addEventListener('click', () => {
    state.sandwich = null;
    writeUrl();
    renderSandwich();
  });
  // The diffs exclude each other: checking one unchecks the others.
  const diffBoxes = ['flame-diff', 'flame-rest', 'flame-period'];
  for (const box of diffBoxes) {
    $(box).addEventListener('change', () => {
      if ($(box).checked) for (const other of diffBoxes) if (other !== box) $(other).checked = false;
      state.flameDiff = $('flame-diff').checked;
      state.restDiff = $('flame-rest').checked;
      state.periodDiff = $('flame-period').checked;
      state.zoom = [];
      writeUrl();
      loadFlame(state.generation).catch(reportError);
    });
  }
  $('flame-search').addEventListener('input', () => {
    state.flameSearch = $('flame-search').value.trim();
    writeUrl();
    renderFlame();
  });
  $('flame-search').addEventListener('keydown', (ev) => {
    if (ev.key !== 'Escape') return;
    $('flame-search').value = '';
    state.flameSearch = '';
    writeUrl();
    renderFlame();
  });
  // "/" anywhere but in a text field: search the flame graph.
  document.addEventListener('keydown', (ev) => {
    const t = ev.target;
    if (ev.key !== '/' || ev.ctrlKey || ev.metaKey || ev.altKey ||
      (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT'))) return;
    ev.preventDefault();
    $('flame-search').focus();
  });
  $('events-all').addEventListener('click', () => {
    state.selected = null;
    $('stack-states').hidden = true;
    for (const row of $('top-stacks').querySelectorAll('.stack-row')) row.classList.remove('selected');
    renderFlame();
    writeUrl();
    loadEvents(++state.eventsGeneration).catch(reportError);
  });
  for (const link of document.querySelectorAll('.exports a')) {
    link.addEventListener('click', (ev) => {
      ev.preventDefault();
      download(link.dataset.format);
    });
  }
  let resizeTimer = 0;
  window.addEventListener('resize', () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      renderFlame();
      renderChart();
    }, 100);
  });
  readUrl();
  refresh();
}

init();
