// alerts.js - the dashboard's Alerts panel: the alerts the collector's rules
// raised (GET /api/v1/alerts/deliveries, newest first), each with its time,
// state (delivered, failed, suppressed past the rule's rate, pending), the
// webhook's last status and attempts, its summary and the link to the view
// it is about; then the rules that raise them (the same answer's, without
// their webhooks' URLs). app.js owns the loading; this file turns the
// answer into the panel's content.

function fmtTime(iso) {
  return iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, ' UTC') : '—';
}

function ruleText(r) {
  const filters = [r.filters.app && `app ${r.filters.app}`, r.filters.kind && `${r.filters.kind} only`]
    .filter(Boolean).join(', ');
  return `#${r.id} ${r.kind}, ${r.format}${filters ? `, ${filters}` : ''}`;
}

// deliveries and rules: the API's lists.
export function renderAlerts(el, deliveries, rules) {
  const body = document.getElementById('alerts').tBodies[0];
  body.replaceChildren();
  document.getElementById('alerts-empty').hidden = deliveries.length > 0;
  for (const d of deliveries) {
    const summary = d.link
      ? el('a', { href: d.link, 'data-testid': 'alert-link', text: d.summary })
      : el('span', { text: d.summary });
    body.append(el('tr', { 'data-testid': 'alert-row', 'data-key': d.alert_key },
      el('td', { class: 'time', text: fmtTime(d.time) }),
      el('td', {}, el('span', { class: `alert-state alert-${d.state}`, 'data-testid': 'alert-state', text: d.state })),
      el('td', { class: 'num wide', 'data-testid': 'alert-status', text: d.status ? String(d.status) : '—' }),
      el('td', { class: 'num wide', 'data-testid': 'alert-attempts', text: String(d.attempts) }),
      el('td', { class: 'num wide', text: `#${d.rule}` }),
      el('td', { class: 'reason' }, summary)));
  }
  const list = document.getElementById('alert-rules');
  list.replaceChildren();
  if (!rules.length) list.append(el('li', { class: 'hint', text: 'No alert rules.' }));
  for (const r of rules) list.append(el('li', { 'data-testid': 'alert-rule', text: ruleText(r) }));
}
