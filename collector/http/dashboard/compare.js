// compare.js - the dashboard's version comparison (GET /api/v1/versions/compare):
// for the app and filters of the header, versions A and B side by side:
// watched time, hangs, hangs per hour of watched time with its 95%
// interval, busy share, and a line saying whether B differs from A beyond
// noise (the API's difference: B's rate is red or green only when the two
// intervals do not overlap, never on a side with too little data); their
// units of work by duration (the SDKs' loop stats) as two histograms; and
// the hang stacks whose share of the hangs grew or shrank the most from A
// to B. With the header's loop filter: that loop's watched time and hangs. app.js owns the loading (its API client and filters) and the URL
// (?a=&b=); this file turns an answer into the panel's content.

// The API's rule for enough data (docs/api.md "Hang rates and their
// intervals"), in the words of the not-enough-data line.
const MIN_HANGS = 5;
const MIN_WATCHED_MINUTES = 6;

// Whole numbers with thousands separators; '—' for null.
function fmtCount(n) {
  return n === null || n === undefined ? '—' : Number(n).toLocaleString('en-US');
}

// 2.00 (hangs per hour); '—' when the version was never watched.
export function fmtRate(rate) {
  return typeof rate === 'number' ? rate.toFixed(2) : '—';
}

// Watched time: hours, or minutes and seconds when under an hour (a
// 10 s watch is not "0.00 h").
function fmtWatched(h) {
  if (h >= 1 || h === 0) return `${h.toFixed(2)} h`;
  if (h >= 1 / 60) return `${(h * 60).toFixed(1)} min`;
  return `${Math.round(h * 3600)} s`;
}

// "0.24–7.22": a rate's 95% interval; '—' when the version was never watched.
function fmtInterval(v) {
  return typeof v.hangs_per_hour_low === 'number'
    ? `${fmtRate(v.hangs_per_hour_low)}–${fmtRate(v.hangs_per_hour_high)}` : '—';
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

// B's rate against A's, as the API judged it (difference): "worse" when
// B's interval lies wholly above A's, "better" wholly below, else "".
function verdict(difference) {
  return { higher: 'worse', lower: 'better' }[difference] || '';
}

// The line under the table: what the comparison can say, in words.
function verdictText(answer, a, b) {
  switch (answer.difference) {
    case 'higher': return `${b.version} hangs more often than ${a.version}: their 95% intervals do not overlap.`;
    case 'lower': return `${b.version} hangs less often than ${a.version}: their 95% intervals do not overlap.`;
    case 'within_noise': return `No difference beyond noise: the 95% intervals of ${a.version} and ${b.version} overlap.`;
    default: {
      const short = [a, b].filter((v) => !v.enough_data)
        .map((v) => `${v.version}: ${fmtCount(v.hangs)} ${v.hangs === 1 ? 'hang' : 'hangs'} in ${fmtWatched(v.watched_hours)}`);
      return `Not enough data to compare (${short.join('; ')}): a version needs at least ` +
        `${MIN_HANGS} hangs over ${MIN_WATCHED_MINUTES} minutes watched.`;
    }
  }
}

function versionsTable(el, answer, a, b) {
  const row = (v, cls) => el('tr', { 'data-testid': 'compare-version', 'data-version': v.version,
    'data-enough': String(Boolean(v.enough_data)) },
  el('td', { class: 'strong', text: v.version }),
  el('td', { class: 'num', 'data-testid': 'compare-watched', text: fmtWatched(v.watched_hours) }),
  el('td', { class: 'num', 'data-testid': 'compare-hangs', text: fmtCount(v.hangs) }),
  el('td', { class: `num strong ${cls}`.trim(), 'data-testid': 'compare-rate', text: fmtRate(v.hangs_per_hour) }),
  el('td', { class: v.enough_data ? 'num' : 'num thin', 'data-testid': 'compare-interval', text: fmtInterval(v),
    title: v.enough_data ? '' : 'not enough data: too few hangs or too little watched time' }),
  el('td', { class: 'num', 'data-testid': 'compare-busy', text: fmtShare(v.busy_fraction) }));
  const head = el('tr', {}, ...[['Version'], ['Watched'], ['Hangs', 'a count'],
    ['Hangs / hour', 'hangs over watched hours'],
    ['95% interval', 'where the hang rate lies with 95% confidence (exact Poisson interval of the count)'],
    ['Busy']].map(([t, tip], i) => el('th', { class: i ? 'num' : '', title: tip, text: t })));
  return el('div', { class: 'wide' },
    el('table', { class: 'grid wide', 'data-testid': 'compare-versions' },
      el('thead', {}, head), el('tbody', {}, row(a, ''), row(b, verdict(answer.difference)))),
    el('p', { class: `verdict ${answer.difference || ''}`, 'data-testid': 'compare-verdict',
      'data-difference': answer.difference || '', text: verdictText(answer, a, b) }));
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
    versionsTable(el, answer, a, b),
    histogramTable(el, a, b),
    el('div', {}, note,
      movedTable(el, `Grew in ${b.version}`, 'compare-grew', answer.stacks.grew),
      movedTable(el, `Shrank in ${b.version}`, 'compare-shrank', answer.stacks.shrank))));
}

// What the panel says when it cannot compare yet.
export function renderPrompt(el, box, text) {
  box.replaceChildren(el('p', { class: 'empty', 'data-testid': 'compare-prompt', text }));
}
