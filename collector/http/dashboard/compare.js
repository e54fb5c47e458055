// compare.js - the dashboard's version comparison (GET /api/v1/versions/compare):
// for the app and filters of the header, versions A and B side by side:
// watched hours, hangs, hangs per hour of watched time, busy share; their
// units of work by duration (the SDKs' loop stats) as two histograms; and
// the hang stacks whose share of the hangs grew or shrank the most from A
// to B. With the header's loop filter: that loop's watched time and hangs. app.js owns the loading (its API client and filters) and the URL
// (?a=&b=); this file turns an answer into the panel's content.

// Whole numbers with thousands separators; '—' for null.
function fmtCount(n) {
  return n === null || n === undefined ? '—' : Number(n).toLocaleString('en-US');
}

// 2.00 (hangs per hour); '—' when the version was never watched.
export function fmtRate(rate) {
  return typeof rate === 'number' ? rate.toFixed(2) : '—';
}

function fmtHours(h) {
  return `${h.toFixed(2)} h`;
}

function fmtShare(x) {
  return typeof x === 'number' ? `${(100 * x).toFixed(1)}%` : '—';
}

// "< 50 ms", "50–100 ms", "500 ms–1 s", "≥ 10 s": a bucket's bounds.
export function bucketName(b) {
  const t = (ms) => (ms >= 1000 ? `${ms / 1000} s` : `${ms} ms`);
  if (b.upper_ms === null) return `≥ ${t(b.lower_ms)}`;
  if (b.lower_ms === 0) return `< ${t(b.upper_ms)}`;
  const lo = b.lower_ms >= 1000 || b.upper_ms < 1000 ? t(b.lower_ms).replace(/ (ms|s)$/, '') : t(b.lower_ms);
  return `${lo}–${t(b.upper_ms)}`;
}

// B's rate against A's: "worse" (higher), "better" or "".
function verdict(a, b) {
  if (typeof a.hangs_per_hour !== 'number' || typeof b.hangs_per_hour !== 'number') return '';
  if (b.hangs_per_hour > a.hangs_per_hour) return 'worse';
  return b.hangs_per_hour < a.hangs_per_hour ? 'better' : '';
}

function versionsTable(el, a, b) {
  const row = (v, cls) => el('tr', { 'data-testid': 'compare-version', 'data-version': v.version },
    el('td', { class: 'strong', text: v.version }),
    el('td', { class: 'num', 'data-testid': 'compare-watched', text: fmtHours(v.watched_hours) }),
    el('td', { class: 'num', 'data-testid': 'compare-hangs', text: fmtCount(v.hangs) }),
    el('td', { class: `num strong ${cls}`, 'data-testid': 'compare-rate', text: fmtRate(v.hangs_per_hour) }),
    el('td', { class: 'num', 'data-testid': 'compare-busy', text: fmtShare(v.busy_fraction) }));
  const head = el('tr', {}, ...['Version', 'Watched', 'Hangs', 'Hangs / hour', 'Busy']
    .map((t, i) => el('th', { class: i ? 'num' : '', text: t })));
  return el('table', { class: 'grid wide', 'data-testid': 'compare-versions' },
    el('thead', {}, head), el('tbody', {}, row(a, ''), row(b, verdict(a, b))));
}

// The two histograms as one table: a bucket per row, A's and B's units
// with bars scaled to each version's share of its units.
function histogramTable(el, a, b) {
  const totals = [a, b].map((v) => v.histogram.reduce((n, h) => n + h.units, 0) || 1);
  const cell = (v, i, side) => {
    const units = v.histogram[i].units;
    const bar = el('span', { class: `hist-bar ${side}` });
    bar.style.width = `${Math.round((80 * units) / totals[side === 'a' ? 0 : 1])}px`;
    return el('td', { class: 'num', 'data-testid': `compare-units-${side}` }, el('span', { text: `${fmtCount(units)} ` }), bar);
  };
  const rows = a.histogram.map((h, i) => el('tr', { 'data-testid': 'compare-bucket' },
    el('td', { text: bucketName(h) }), cell(a, i, 'a'), cell(b, i, 'b')));
  return el('div', {},
    el('h3', { text: 'Units of work by duration' }),
    el('table', { class: 'grid', 'data-testid': 'compare-histogram' },
      el('thead', {}, el('tr', {}, el('th', { text: 'Duration' }),
        el('th', { class: 'num', text: a.version }), el('th', { class: 'num', text: b.version }))),
      el('tbody', {}, ...rows)));
}

// A group's headline (the API's: its innermost in-app frame, else its
// innermost), with "in <innermost> ←" before it when they differ.
function headlineCell(el, g) {
  const h = g.headline || { function: g.frames[0], in_app_index: 0 };
  const name = el('span', { class: 'fn-name', 'data-testid': 'compare-function', title: h.module || '',
    text: h.function || '?' });
  if (!(h.in_app_index > 0)) return el('td', { class: 'fn' }, name);
  return el('td', { class: 'fn' }, el('span', { class: 'inner', 'data-testid': 'compare-innermost',
    text: `in ${g.frames[0]} ←` }), name);
}

// The hang stacks that grew (or shrank): headline, share in A -> B.
function movedTable(el, title, testid, groups) {
  const rows = groups.map((g) => el('tr', { class: 'moved', 'data-testid': `${testid}-row`, 'data-group': g.group },
    headlineCell(el, g),
    el('td', { class: 'num', 'data-testid': 'compare-share', text: `${fmtShare(g.share_a)} → ${fmtShare(g.share_b)}` }),
    el('td', { class: 'num', text: `${fmtCount(g.hangs_a)} → ${fmtCount(g.hangs_b)}` }),
    el('td', { class: 'num strong', text: `${g.change > 0 ? '+' : ''}${(100 * g.change).toFixed(1)} pts` })));
  const body = rows.length ? el('table', { class: 'grid', 'data-testid': testid },
    el('thead', {}, el('tr', {}, el('th', { text: 'Function (innermost in-app frame)' }),
      el('th', { class: 'num', text: 'Share of hangs' }), el('th', { class: 'num', text: 'Hangs' }),
      el('th', { class: 'num', text: 'Change' }))),
    el('tbody', {}, ...rows)) : el('p', { class: 'empty', 'data-testid': testid, text: 'None.' });
  return el('div', {}, el('h3', { text: title }), body);
}

// The panel's content for an answer of /api/v1/versions/compare.
export function renderComparison(el, box, answer) {
  const [a, b] = answer.versions;
  // With a loop: the rates are that loop's, the groups that moved every
  // loop's (the collector's rollups keep no loop).
  const note = answer.loop ? el('p', { class: 'loop-note', 'data-testid': 'compare-loop-note',
    text: `Hangs and watched time of loop ${answer.loop}; the stacks below are of every loop's hangs.` }) : null;
  box.replaceChildren(el('div', { class: 'compare-grid compare' },
    versionsTable(el, a, b),
    histogramTable(el, a, b),
    el('div', {}, note,
      movedTable(el, `Grew in ${b.version}`, 'compare-grew', answer.stacks.grew),
      movedTable(el, `Shrank in ${b.version}`, 'compare-shrank', answer.stacks.shrank))));
}

// What the panel says when it cannot compare yet.
export function renderPrompt(el, box, text) {
  box.replaceChildren(el('p', { class: 'empty', 'data-testid': 'compare-prompt', text }));
}
