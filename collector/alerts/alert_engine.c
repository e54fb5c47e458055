/*
 * alert_engine.c - the alert thread (see alert_engine.h): its queue, the
 * rules read at each evaluation, the per-rule rate, the claims and the
 * deliveries with their retries.
 */
#include "collector/alerts/alert_engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/alerts/alert_eval.h"
#include "collector/alerts/alert_payload.h"
#include "collector/alerts/alert_send.h"
#include "collector/base/log.h"
#include "collector/model/metrics.h"
#include "sdk/base/clock.h"
#include "sdk/base/worker.h"

#define MINUTE_NS INT64_C(60000000000)
#define BACKOFF_MAX_MS 60000u
#define STOP_GRACE_NS INT64_C(2000000000)

typedef struct pending_s {
  char *app, *version;
} pending_t;

/* A rule's alerts sent in its current minute (the rate). */
typedef struct rule_rate_s {
  int64_t rule_id, minute_start_ns;
  unsigned sent;
} rule_rate_t;

/* When an app was evaluated last: its next new_group scan starts there
   (less ALERT_SCAN_SLACK_NS). At most ALERT_APPS_KEPT apps, the one
   evaluated longest ago replaced. */
#define ALERT_APPS_KEPT 256
typedef struct app_scan_s {
  char *app;
  int64_t last_ns;
} app_scan_t;

typedef struct rules_s {
  store_alert_rule_t *v;
  size_t n, cap;
} rules_t;

struct alert_engine_s {
  const store_ops_t *ops;
  store_t *store;
  const alert_config_t *cfg;
  perf__worker_t *worker;
  /* Under the worker's lock: */
  pending_t queue[ALERT_QUEUE_MAX];
  size_t head, n;
  /* The alert thread's own: */
  rule_rate_t *rates;
  size_t n_rates;
  app_scan_t apps[ALERT_APPS_KEPT];
};

static bool same_text(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* ---- notifications ------------------------------------------------------------ */

void alert_engine_notify(alert_engine_t *e, const char *app, const char *version) {
  if (!e || !app || !*app) return;
  if (version && !*version) version = NULL;
  perf__worker_lock(e->worker);
  bool queued = false;
  for (size_t i = 0; i < e->n && !queued; i++) {
    const pending_t *p = &e->queue[(e->head + i) % ALERT_QUEUE_MAX];
    queued = strcmp(p->app, app) == 0 && same_text(p->version, version);
  }
  if (!queued && e->n == ALERT_QUEUE_MAX) {
    metrics_alert_evaluation_dropped();
  } else if (!queued) {
    pending_t p = {strdup(app), version ? strdup(version) : NULL};
    if (!p.app || (version && !p.version)) {
      free(p.app), free(p.version);
      metrics_alert_evaluation_dropped();
    } else {
      e->queue[(e->head + e->n++) % ALERT_QUEUE_MAX] = p;
      perf__worker_notify_locked(e->worker);
    }
  }
  perf__worker_unlock(e->worker);
}

/* ---- rules -------------------------------------------------------------------- */

static void rules_free(rules_t *r) {
  for (size_t i = 0; i < r->n; i++) {
    store_alert_rule_t *x = &r->v[i];
    free((char *)x->kind), free((char *)x->url), free((char *)x->format);
    free((char *)x->app), free((char *)x->event_kind);
  }
  free(r->v);
}

static char *dup_or_null(const char *s) {
  return s ? strdup(s) : NULL;
}

static int on_rule(const store_alert_rule_t *rule, void *user) {
  rules_t *r = user;
  if (r->n == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 16;
    store_alert_rule_t *grown = realloc(r->v, cap * sizeof *grown);
    if (!grown) return 1;
    r->v = grown, r->cap = cap;
  }
  store_alert_rule_t *x = &r->v[r->n++];
  *x = (store_alert_rule_t){rule->id,
                            dup_or_null(rule->kind),
                            dup_or_null(rule->url),
                            dup_or_null(rule->format),
                            dup_or_null(rule->app),
                            dup_or_null(rule->event_kind),
                            rule->created_ns};
  return !x->kind || !x->url || !x->format;
}

/* ---- rate --------------------------------------------------------------------- */

/* Whether rule_id may send another alert now (and it is counted). */
static bool rate_take(alert_engine_t *e, int64_t rule_id, int64_t now_ns) {
  rule_rate_t *r = NULL;
  for (size_t i = 0; i < e->n_rates && !r; i++)
    if (e->rates[i].rule_id == rule_id) r = &e->rates[i];
  if (!r) {
    rule_rate_t *grown = realloc(e->rates, (e->n_rates + 1) * sizeof *grown);
    if (!grown) return false;
    e->rates = grown;
    r = &e->rates[e->n_rates++];
    *r = (rule_rate_t){rule_id, now_ns, 0};
  }
  if (now_ns - r->minute_start_ns >= MINUTE_NS) r->minute_start_ns = now_ns, r->sent = 0;
  if (r->sent >= e->cfg->per_minute) return false;
  r->sent++;
  return true;
}

/* ---- delivery ------------------------------------------------------------------ */

/* POST body until a 2xx, an answer not worth retrying, the retries spent
   or a stop; the alert's row follows each attempt. */
static void deliver(alert_engine_t *e, store_alert_t *row, const char *url, const char *body) {
  unsigned backoff_ms = e->cfg->backoff_ms;
  for (;;) {
    long status = alert_post(url, body, strlen(body), e->cfg->timeout_s);
    row->attempts++;
    row->status = status;
    row->time_ns = perf__wall_ns();
    bool done = status >= 200 && status < 300;
    bool last = done || !alert_retryable(status) || row->attempts > (int64_t)e->cfg->retries ||
                perf__worker_stopping(e->worker);
    row->state = done ? "delivered" : last ? "failed" : "pending";
    if (e->ops->alert_update(e->store, row) != STORE_OK)
      collector_log("alert %lld: its delivery could not be stored", (long long)row->id);
    if (last) {
      metrics_alert(row->state);
      return;
    }
    perf__worker_sleep_until(e->worker, perf__now_ns() + (int64_t)backoff_ms * 1000000);
    backoff_ms = backoff_ms > BACKOFF_MAX_MS / 2 ? BACKOFF_MAX_MS : 2 * backoff_ms;
  }
}

typedef struct raising_s {
  alert_engine_t *e;
  int64_t now_ns;
} raising_t;

static void on_alert(const alert_t *a, void *user) {
  raising_t *r = user;
  alert_engine_t *e = r->e;
  if (perf__worker_stopping(e->worker)) return;
  bool allowed = rate_take(e, a->rule->id, r->now_ns);
  store_alert_t row = {0,         a->rule->id, a->key, allowed ? "pending" : "suppressed", 0, 0,
                       r->now_ns, a->summary,  a->link};
  int rc = e->ops->alert_claim(e->store, &row, &row.id);
  if (rc != STORE_OK) {
    if (allowed && e->rates) /* nothing sent: the rate is not spent */
      for (size_t i = 0; i < e->n_rates; i++)
        if (e->rates[i].rule_id == a->rule->id && e->rates[i].sent) e->rates[i].sent--;
    return; /* STORE_DUPLICATE: raised before; STORE_ERROR: said by the store */
  }
  if (!allowed) {
    metrics_alert("suppressed");
    return;
  }
  char *body = alert_payload(a);
  if (!body) {
    row.state = "failed";
    e->ops->alert_update(e->store, &row);
    metrics_alert("failed");
    return;
  }
  deliver(e, &row, a->rule->url, body);
  free(body);
}

/* The batches app's new_group scan reads from now, and now noted as its
   last evaluation (kept when the evaluation failed: read again). */
static app_scan_t *app_scan(alert_engine_t *e, const char *app, int64_t now_ns, int64_t *scan_ns) {
  app_scan_t *oldest = &e->apps[0];
  for (size_t i = 0; i < ALERT_APPS_KEPT; i++) {
    app_scan_t *a = &e->apps[i];
    if (a->app && strcmp(a->app, app) == 0) {
      *scan_ns = a->last_ns - ALERT_SCAN_SLACK_NS;
      return a;
    }
    if (!a->app || (oldest->app && a->last_ns < oldest->last_ns)) oldest = a;
  }
  *scan_ns = now_ns - ALERT_SCAN_NS;
  char *copy = strdup(app);
  if (!copy) return NULL;
  free(oldest->app);
  *oldest = (app_scan_t){copy, *scan_ns + ALERT_SCAN_SLACK_NS};
  return oldest;
}

static void evaluate(alert_engine_t *e, const pending_t *p) {
  rules_t rules = {0};
  int rc = e->ops->alert_rules(e->store, on_rule, &rules);
  if (rc == STORE_OK && rules.n) {
    raising_t r = {e, perf__wall_ns()};
    int64_t scan_ns;
    app_scan_t *seen = app_scan(e, p->app, r.now_ns, &scan_ns);
    rc = alert_evaluate(e->ops, e->store, e->cfg->public_url, rules.v, rules.n, p->app, p->version,
                        scan_ns, on_alert, &r);
    if (rc == STORE_OK && seen) seen->last_ns = r.now_ns;
  }
  if (rc != STORE_OK) collector_log("alerts of app %s: the store failed (said above)", p->app);
  rules_free(&rules);
}

/* ---- the thread ----------------------------------------------------------------- */

static void run(perf__worker_t *w, void *arg) {
  alert_engine_t *e = arg;
  for (;;) {
    perf__worker_lock(w);
    while (!perf__worker_stopping(w) && e->n == 0)
      perf__worker_wait(w, 0);
    if (perf__worker_stopping(w)) {
      perf__worker_unlock(w);
      return;
    }
    pending_t p = e->queue[e->head];
    e->head = (e->head + 1) % ALERT_QUEUE_MAX;
    e->n--;
    perf__worker_unlock(w);
    evaluate(e, &p);
    free(p.app), free(p.version);
  }
}

alert_engine_t *alert_engine_start(const store_ops_t *ops, store_t *store,
                                   const alert_config_t *cfg) {
  alert_engine_t *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->ops = ops, e->store = store, e->cfg = cfg;
  if (perf__worker_start("perf-alerts", run, e, &e->worker) != 0) {
    collector_log("cannot start the alert thread");
    free(e);
    return NULL;
  }
  return e;
}

void alert_engine_stop(alert_engine_t *e) {
  if (!e) return;
  int64_t deadline = perf__now_ns() + (int64_t)e->cfg->timeout_s * 1000000000 + STOP_GRACE_NS;
  if (perf__worker_stop(e->worker, deadline) != 0) return; /* still in a POST: it keeps e */
  for (size_t i = 0; i < e->n; i++) {
    pending_t *p = &e->queue[(e->head + i) % ALERT_QUEUE_MAX];
    free(p->app), free(p->version);
  }
  for (size_t i = 0; i < ALERT_APPS_KEPT; i++)
    free(e->apps[i].app);
  free(e->rates);
  free(e);
}
