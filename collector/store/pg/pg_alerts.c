/*
 * pg_alerts.c - the PostgreSQL store's alert rules and alerts (store.h
 * alert_rule_add .. new_groups; the SQL is alert_sql.h's, the tables
 * migration 11's). Rules and alerts on the store's connection, the two
 * reads of batches and groups on the reads' connection, each under its
 * store's lock. The unique (rule_id, alert_key) makes a claim once on
 * every collector of the database.
 */
#include <stdlib.h>

#include "collector/store/pg/pg_store.h"

#undef SQL_SLOT /* alert_sql.h's text and numbers are cast where used */
#define SQL_SLOT(n) "$" n "::text"
#include "collector/store/alert_sql.h"

typedef void (*pg_row_fn)(const PGresult *r, int row, void *ctx, int *stop);

/* sql with p on st (its lock taken): each row to each; *n_rows (may be
   NULL) how many came. STORE_OK or STORE_ERROR (said). */
static int run_rows(store_t *st, const char *sql, const pg_params_t *p, const char *what,
                    pg_row_fn each, void *ctx, int *n_rows) {
  pthread_mutex_lock(&st->lock);
  PGresult *r = pg_run(st, sql, p, what);
  int n = r ? PQntuples(r) : 0, stop = 0;
  if (n_rows) *n_rows = n;
  for (int i = 0; each && !stop && i < n; i++)
    each(r, i, ctx, &stop);
  PQclear(r);
  pthread_mutex_unlock(&st->lock);
  return r && !stop ? STORE_OK : STORE_ERROR;
}

static void first_id(const PGresult *r, int row, void *ctx, int *stop) {
  (void)stop;
  if (ctx) *(int64_t *)ctx = pg_i64(r, row, 0);
}

int pg_alert_rule_add(store_t *st, const store_alert_rule_t *rule, int64_t *id) {
  pg_params_t p = {0};
  pg_text(&p, 1, rule->kind);
  pg_text(&p, 2, rule->url);
  pg_text(&p, 3, rule->format);
  pg_text(&p, 4, rule->app);
  pg_text(&p, 5, rule->event_kind);
  pg_int(&p, 6, rule->created_ns);
  int n = 0, rc = run_rows(st, ASQL_RULE_ADD, &p, "alert rule", first_id, id, &n);
  return rc == STORE_OK && n != 1 ? STORE_ERROR : rc;
}

int pg_alert_rule_delete(store_t *st, int64_t id) {
  pg_params_t p = {0};
  pg_int(&p, 1, id);
  int n = 0, rc = run_rows(st, ASQL_RULE_DELETE, &p, "alert rule delete", NULL, NULL, &n);
  return rc == STORE_OK && n == 0 ? STORE_NOT_FOUND : rc;
}

typedef struct each_s {
  void *fn, *user;
} each_t;

static void rule_each(const PGresult *r, int i, void *ctx, int *stop) {
  each_t *e = ctx;
  store_alert_rule_t rule = {pg_i64(r, i, 0), pg_str(r, i, 1), pg_str(r, i, 2), pg_str(r, i, 3),
                             pg_str(r, i, 4), pg_str(r, i, 5), pg_i64(r, i, 6)};
  *stop = ((store_alert_rule_fn)e->fn)(&rule, e->user);
}

int pg_alert_rules(store_t *st, store_alert_rule_fn fn, void *user) {
  each_t e = {(void *)fn, user};
  return run_rows(st, ASQL_RULES, NULL, "alert rules", rule_each, &e, NULL);
}

int pg_alert_claim(store_t *st, const store_alert_t *a, int64_t *id) {
  pg_params_t p = {0};
  pg_int(&p, 1, a->rule_id);
  pg_text(&p, 2, a->alert_key);
  pg_text(&p, 3, a->state);
  pg_int(&p, 4, a->time_ns);
  pg_text(&p, 5, a->summary);
  pg_text(&p, 6, a->link);
  int n = 0, rc = run_rows(st, ASQL_CLAIM, &p, "alert claim", first_id, id, &n);
  return rc == STORE_OK && n == 0 ? STORE_DUPLICATE : rc;
}

int pg_alert_update(store_t *st, const store_alert_t *a) {
  pg_params_t p = {0};
  pg_int(&p, 1, a->id);
  pg_text(&p, 2, a->state);
  pg_int(&p, 3, a->status);
  pg_int(&p, 4, a->attempts);
  pg_int(&p, 5, a->time_ns);
  return run_rows(st, ASQL_UPDATE, &p, "alert update", NULL, NULL, NULL);
}

static void alert_each(const PGresult *r, int i, void *ctx, int *stop) {
  each_t *e = ctx;
  store_alert_t a = {pg_i64(r, i, 0), pg_i64(r, i, 1), pg_str(r, i, 2),
                     pg_str(r, i, 3), pg_i64(r, i, 4), pg_i64(r, i, 5),
                     pg_i64(r, i, 6), pg_str(r, i, 7), pg_str(r, i, 8)};
  *stop = ((store_alert_fn)e->fn)(&a, e->user);
}

int pg_alert_rows(store_t *st, int64_t rule_id, int64_t limit, store_alert_fn fn, void *user) {
  pg_params_t p = {0};
  pg_int(&p, 1, rule_id);
  pg_int(&p, 2, limit);
  each_t e = {(void *)fn, user};
  return run_rows(st, ASQL_ROWS, &p, "alerts", alert_each, &e, NULL);
}

static void version_each(const PGresult *r, int i, void *ctx, int *stop) {
  each_t *e = ctx;
  *stop = ((store_version_fn)e->fn)(pg_str(r, i, 0), pg_i64(r, i, 1), e->user);
}

int pg_app_versions(store_t *st, const char *app, store_version_fn fn, void *user) {
  pg_params_t p = {0};
  pg_text(&p, 1, app);
  each_t e = {(void *)fn, user};
  return run_rows(st->reader ? st->reader : st, ASQL_APP_VERSIONS, &p, "app versions", version_each,
                  &e, NULL);
}

static void new_group_each(const PGresult *r, int i, void *ctx, int *stop) {
  each_t *e = ctx;
  store_new_group_t g = {pg_str(r, i, 0), pg_str(r, i, 1), pg_str(r, i, 2), pg_i64(r, i, 3)};
  *stop = ((store_new_group_fn)e->fn)(&g, e->user);
}

int pg_new_groups(store_t *st, const char *app, int64_t since_ns, int64_t scan_ns,
                  store_new_group_fn fn, void *user) {
  pg_params_t p = {0};
  pg_text(&p, 1, app);
  pg_int(&p, 2, since_ns);
  pg_int(&p, 3, scan_ns);
  each_t e = {(void *)fn, user};
  return run_rows(st->reader ? st->reader : st, ASQL_NEW_GROUPS(""), &p, "new groups",
                  new_group_each, &e, NULL);
}
