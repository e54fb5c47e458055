/*
 * pg_query.c - the PostgreSQL backend's reads (store_ops_t's query
 * functions): the SQLite backend's statements (sqlite_store.c) with
 * PostgreSQL's types and functions, the same filters (query_sql.h) in the
 * same slots (query_params.h). Each runs under the store's lock on its one
 * connection.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/hang_group_cands.h"
#include "collector/model/rollup.h"
#include "collector/store/pg/pg_store.h"
#include "collector/store/query_sql.h"
#include "collector/store/rollup_sql.h"
#include "collector/store/rows.h"

/* The read statements' filters: query_sql.h, in PostgreSQL's slots
   (pg_store.h). */
#define PG_TAGS_JSON                                                                               \
  "(SELECT coalesce(jsonb_agg(jsonb_build_object('key', t.key, 'value', t.value)"                  \
  " ORDER BY t.key, t.value), '[]'::jsonb) FROM batch_tags t WHERE t.batch_id = b.id)"

/* Top-stacks and stack rows read the day rows of $20..$21, the 10-minute
   rows of $26..$27 and $28..$29 (rollup_plan) and the raw events starting
   in $22..$23 and $24..$25: the same columns either way, summed per group,
   version, label and duration bin. */
#define GROUP_PART(table, kinds, lo, hi)                                                           \
  "SELECT r.group_sig AS g, r.version AS version, r.label AS label, r.dbin AS dbin,"               \
  " r.events AS events, r.samples::numeric AS samples, r.total_ns AS total_ns,"                    \
  " r.first_ns AS first_ns, r.last_ns AS last_ns, r.max_ns AS max_ns,"                             \
  " r.cpu_us::numeric AS cpu_us FROM " table " r"                                                  \
  " WHERE " kinds                                                                                  \
  QSQL_RANGE(lo, hi) QSQL_ROLLUP_FILTERS
#define TOP_SQL(kinds, raw, majority, impact)                                                      \
  QSQL_TOP_ROWS_CAPPED(                                                                            \
      GROUP_PART(ROLLUP_GROUPS_DAY, kinds, 20, 21) " UNION ALL " GROUP_PART(                       \
          ROLLUP_GROUPS_10M, kinds, 26, 27) " UNION ALL " GROUP_PART(ROLLUP_GROUPS_10M, kinds, 28, \
                                                                     29) " UNION ALL " raw,        \
      impact, majority, "x.g, gr.frames, x.version, x.label, x.dbin", " COLLATE \"C\"")
#define STACK_PART(table, lo, hi)                                                                  \
  "SELECT r.stack_sig AS s, r.samples AS n, r.cpu_us AS cpu, r.wall_ns AS wall,"                   \
  " r.first_ns AS first, r.last_end_ns AS last_end FROM " table " r"                               \
  " WHERE " QSQL_KIND_FILTER("r") QSQL_RANGE(lo, hi) QSQL_ROLLUP_FILTERS QSQL_GROUP_FILTER("r")
#define RAW_HANG(lo, hi)                                                                           \
  "SELECT e.group_sig COLLATE \"C\", coalesce(b.version, '') COLLATE \"C\","                       \
  " coalesce(e.label, '') COLLATE \"C\", perf_dbin(e.duration_ns),"                                \
  " 1, (SELECT coalesce(sum(c.samples), 0) FROM stack_counts c WHERE c.event_id = e.id),"          \
  " e.duration_ns, e.start_ns, e.start_ns, e.duration_ns, 0 FROM events e"                         \
  " JOIN batches b ON b.id = e.batch_id WHERE e.kind IN ('hang', 'fatal_hang')"                    \
  " AND e.group_sig IS NOT NULL" QSQL_RAW_RANGE(lo, hi) QSQL_TOP_FILTERS
#define RAW_CPU(lo, hi)                                                                            \
  "SELECT j.sig, j.version, j.label, perf_dbin(j.d), 1, sum(j.n), j.d, j.s, j.s, j.d, sum(j.w)"    \
  " FROM (SELECT e.id AS id, c.stack_sig AS sig, coalesce(b.version, '') COLLATE \"C\" AS "        \
  "version,"                                                                                       \
  " coalesce(e.label, '') COLLATE \"C\" AS label, e.duration_ns AS d, e.start_ns AS s,"            \
  " c.samples AS n, " ROLLUP_CPU(                                                                  \
      "c") " AS w FROM events e"                                                                   \
           " JOIN batches b ON b.id = e.batch_id JOIN stack_counts c ON c.event_id = e.id"         \
           " WHERE " QSQL_CPU_KIND("e") QSQL_RAW_RANGE(lo, hi) QSQL_TOP_FILTERS QSQL_RAW_BOUND     \
      ") j GROUP BY j.id, j.sig, j.version, j.label, j.d, j.s"
#define RAW_STACK(lo, hi)                                                                          \
  "SELECT c.stack_sig, c.samples, " ROLLUP_CPU("c") ", " ROLLUP_WALL_SHARE(                        \
      "c", "e") ", e.start_ns, e.start_ns + e.duration_ns FROM events e JOIN batches b ON b.id = " \
                "e.batch_id"                                                                       \
                " JOIN stack_counts c ON c.event_id = e.id WHERE " QSQL_KIND_FILTER("e")           \
                    QSQL_RAW_RANGE(lo, hi) QSQL_TOP_FILTERS QSQL_GROUP_FILTER("e")

static const char TOP_HANG[] =
    TOP_SQL("r.kind IN ('hang', 'fatal_hang')", RAW_HANG(22, 23) " UNION ALL " RAW_HANG(24, 25),
            "(SELECT p.samples FROM hang_group_path p WHERE p.group_sig = x.g)", "x.total_ns");
static const char TOP_CPU[] = TOP_SQL(
    QSQL_CPU_KIND("r"), RAW_CPU(22, 23) " UNION ALL " RAW_CPU(24, 25), "NULL::bytea", "x.cpu_us");
/* The stack rows' sources in the order a bounded read takes them. */
#define STACK_PARTS                                                                                \
  STACK_PART(ROLLUP_STACKS_DAY, 20, 21)                                                            \
  " UNION ALL " STACK_PART(ROLLUP_STACKS_10M, 26, 27) " UNION ALL " STACK_PART(                    \
      ROLLUP_STACKS_10M, 28, 29) " UNION ALL " RAW_STACK(22, 23) " UNION ALL " RAW_STACK(24, 25)
static const char STACK_ROWS[] = QSQL_STACK_ROWS_CAPPED(
    "SELECT x.s AS s, sum(x.n) AS n, sum(x.cpu) AS cpu, coalesce(sum(x.wall), 0) AS wall,"
    " min(x.first) AS first, max(x.last_end) AS last_end, count(*) AS rows"
    " FROM (" QSQL_BOUNDED(STACK_PARTS) ") x GROUP BY x.s",
    " COLLATE \"C\"");
static const char ANY_EVENT[] = "SELECT EXISTS (SELECT 1 FROM events WHERE start_ns >= $1::bigint"
                                " AND start_ns <= $2::bigint)";
static const char EVENT_ROWS[] =
    "SELECT " QSQL_EVENT_COLUMNS(PG_TAGS_JSON) " FROM events e JOIN batches b ON b.id = e.batch_id"
                                               " WHERE " QSQL_LISTED_KIND("e")
                                                   QSQL_TOP_FILTERS QSQL_LOOP_FILTER
    " ORDER BY e.start_ns DESC, e.id DESC LIMIT $7::bigint";
static const char EVENT_ONE[] =
    "SELECT " QSQL_EVENT_COLUMNS(PG_TAGS_JSON) " FROM events e JOIN batches b ON b.id = e.batch_id"
                                               " WHERE e.id = $1::bigint";
/* One row per signature and thread: a database of a collector that stored
   a row per device stack may hold several. */
static const char EVENT_COUNTS[] =
    "SELECT c.stack_sig, s.frames, c.tid, sum(c.samples)::bigint, sum(c.cpu_us)::bigint"
    " FROM stack_counts c LEFT JOIN stacks s ON s.signature = c.stack_sig"
    " WHERE c.event_id = $1::bigint GROUP BY c.stack_sig, c.tid, s.frames"
    " ORDER BY coalesce(sum(c.cpu_us), 0) DESC, sum(c.samples) DESC, min(c.id)";
static const char DROPS[] =
    "SELECT coalesce(sum(b.dropped_rate_limited), 0), coalesce(sum(b.dropped_queue_full), 0),"
    " coalesce(sum(b.dropped_sink_failed), 0), coalesce(sum(b.dropped_spool_quota), 0),"
    " coalesce(sum(b.dropped_oversized), 0), count(*) FROM (SELECT b.* FROM batches b WHERE "
    "true" QSQL_DROPS_FILTERS QSQL_NEWEST("b.received_ns") ") b";
static const char TIME_BUCKETS[] =
    "SELECT x.k, count(*), coalesce(sum(x.d::float8), 0) FROM (SELECT e.start_ns / $7::bigint AS k,"
    " e.duration_ns AS d FROM events e JOIN batches b ON b.id = e.batch_id WHERE " QSQL_KIND_FILTER(
        "e")
        QSQL_TOP_FILTERS QSQL_NEWEST("e.start_ns") ") x GROUP BY 1 ORDER BY 1 LIMIT $8::bigint";
static const char STATE_ROWS[] =
    "SELECT x.state, x.syscall, x.fd, sum(x.samples), count(*) FROM (SELECT x.state AS state,"
    " x.syscall AS syscall, x.fd AS fd, x.samples AS samples FROM event_states x"
    " JOIN events e ON e.id = x.event_id JOIN batches b ON b.id = e.batch_id"
    " WHERE " QSQL_KIND_FILTER("e") QSQL_TOP_FILTERS
    " AND ($8::text IS NULL OR e.group_sig = $8 OR EXISTS (SELECT 1 FROM"
    " stack_counts c WHERE c.event_id = e.id AND c.stack_sig = $8))" QSQL_NEWEST(
        "e.start_ns") ") x GROUP BY 1, 2, 3 ORDER BY 4 DESC, 1, 2, 3";
/* The loop stats of a table of loop_stats' columns (query_sql.h), summed
   over the batches of the filters. */
#define LOOP_SUMS_FROM(table)                                                                      \
  "SELECT coalesce(sum(l.watched_ns::float8), 0), coalesce(sum(l.busy_ns::float8), 0),"            \
  " coalesce(sum(l.u0::float8), 0), coalesce(sum(l.u1::float8), 0),"                               \
  " coalesce(sum(l.u2::float8), 0), coalesce(sum(l.u3::float8), 0),"                               \
  " coalesce(sum(l.u4::float8), 0), coalesce(sum(l.u5::float8), 0),"                               \
  " coalesce(sum(l.u6::float8), 0), coalesce(sum(l.u7::float8), 0),"                               \
  " coalesce(sum(l.u8::float8), 0), count(*) FROM (SELECT l.* FROM " table " l"                    \
  " JOIN batches b ON b.id = l.batch_id WHERE true" QSQL_DROPS_FILTERS QSQL_NEWEST(                \
      "b.received_ns") ") l"
static const char LOOP_SUMS[] = LOOP_SUMS_FROM("loop_stats");
static const char LOOP_SUMS_OF_LOOP[] = LOOP_SUMS_FROM(QSQL_STATS_OF_LOOP);
static const char HANG_COUNT[] =
    "SELECT count(*) FROM (SELECT 1 FROM events e JOIN batches b ON b.id = e.batch_id"
    " WHERE e.kind IN ('hang', 'fatal_hang')" QSQL_TOP_FILTERS QSQL_LOOP_FILTER QSQL_NEWEST(
        "e.start_ns") ") h";
static const char STATES_OF_EVENT[] =
    "SELECT tid, state, syscall, fd, samples FROM event_states WHERE event_id = $1::bigint"
    " ORDER BY samples DESC, id";

#define GROUP_EVENTS STORE_STR(STORE_GROUP_STACKS_EVENTS)
#define GROUP_ROWS STORE_STR(STORE_GROUP_STACKS_ROWS)

/* The stack of each signature of $1, then the heaviest stacks of a few
   events of that group (store.h group_stacks), by the signature's place. */
static const char GROUP_STACKS[] =
    "SELECT q.i, s.frames FROM unnest($1::text[]) WITH ORDINALITY AS q(sig, i)"
    " CROSS JOIN LATERAL (SELECT 0 AS o, 0::bigint AS w, q.sig AS stack UNION ALL"
    " (SELECT 1, c.samples, c.stack_sig FROM (SELECT id FROM events WHERE group_sig = q.sig"
    " LIMIT " GROUP_EVENTS ") e JOIN stack_counts c ON c.event_id = e.id"
    " ORDER BY c.samples DESC LIMIT " GROUP_ROWS ")) x"
    " JOIN stacks s ON s.signature = x.stack ORDER BY q.i, x.o, x.w DESC";

/* Row i of a result (rows.h). */
typedef struct pg_row_s {
  const PGresult *r;
  int i;
} pg_row_t;

static const char *col_text(const void *row, int col) {
  const pg_row_t *p = row;
  return pg_str(p->r, p->i, col);
}

static int64_t col_i64(const void *row, int col) {
  const pg_row_t *p = row;
  return pg_i64(p->r, p->i, col);
}

static bool col_null(const void *row, int col) {
  const pg_row_t *p = row;
  return PQgetisnull(p->r, p->i, col);
}

#define PG_COLUMNS(result, index)                                                                  \
  ((store_columns_t){&(pg_row_t){result, index}, col_text, col_i64, col_null})

static void bind_text(void *stmt, int slot, const char *text, size_t len) {
  if (text)
    pg_textn(stmt, slot, text, len);
  else
    pg_text(stmt, slot, NULL);
}

static void bind_i64(void *stmt, int slot, int64_t value) {
  pg_int(stmt, slot, value);
}

/* q's filters into their slots (query_params.h) and the rows a bounded
   read sums; the statement's own slots and the plan's NULL, typed as text,
   until the caller binds them (every slot up to the rows' is sent, and
   PostgreSQL must know each one's type). */
static void bind_filters(const store_t *st, pg_params_t *p, const store_top_query_t *q) {
  store_binder_t b = {p, bind_text, bind_i64};
  store_bind_filters(&b, q);
  store_bind_rows(&b, st->read_rows_max);
  for (int slot = STORE_SLOT_OWN; slot < STORE_SLOT_HOST; slot++)
    pg_text(p, slot, NULL);
  for (int slot = STORE_SLOT_DAY; slot < STORE_SLOT_LOOP; slot++)
    pg_text(p, slot, NULL);
}

static double pg_f64(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? 0 : strtod(PQgetvalue(r, row, col), NULL);
}

/* A read's statement, run once more on a new session when the
   connection was lost (a server restart, a proxy's cut, noticed by the
   statement that met it): a read changes nothing, so running it again is
   safe. */
static PGresult *read_run(store_t *st, const char *sql, const pg_params_t *p, const char *what) {
  PGresult *r = pg_run(st, sql, p, what);
  if (!r && PQstatus(st->conn) != CONNECTION_OK) r = pg_run(st, sql, p, what);
  return r;
}

/* Run sql with p under the lock; rows to each(r, i, user) until it stops
   (non-zero): STORE_OK, or STORE_ERROR (failed, or stopped). */
typedef int (*row_each_fn)(const PGresult *r, int i, void *ctx);

/* scan's work, the lock held. */
static int scan_locked(store_t *st, const char *sql, const pg_params_t *p, const char *what,
                       row_each_fn each, void *ctx) {
  PGresult *r = read_run(st, sql, p, what);
  int stopped = 0, n = r ? PQntuples(r) : 0;
  for (int i = 0; !stopped && i < n; i++)
    stopped = each(r, i, ctx);
  PQclear(r);
  return r && !stopped ? STORE_OK : STORE_ERROR;
}

static int scan(store_t *st, const char *sql, const pg_params_t *p, const char *what,
                row_each_fn each, void *ctx) {
  pthread_mutex_lock(&st->lock);
  int rc = scan_locked(st, sql, p, what, each, ctx);
  pthread_mutex_unlock(&st->lock);
  return rc;
}

typedef struct cb_s {
  void *fn, *user;
  int hang;
  uint64_t rows_limit; /* top_rows, stack_rows: the store's read_rows_max */
} cb_t;

static int top_each(const PGresult *r, int i, void *ctx) {
  cb_t *cb = ctx;
  store_top_row_t row = store_top_row(&PG_COLUMNS(r, i));
  row.rows_limit = cb->rows_limit;
  if (cb->hang && !PQgetisnull(r, i, STORE_TOP_PATH_COLUMN)) {
    size_t len = 0;
    unsigned char *blob =
        PQunescapeBytea((const unsigned char *)PQgetvalue(r, i, STORE_TOP_PATH_COLUMN), &len);
    row.majority_len = hang_groups_majority_len(blob, len);
    PQfreemem(blob);
  }
  if (!row.group_sig || !row.names_json) return 0;
  return ((store_row_fn)cb->fn)(&row, cb->user);
}

/* rollup_plan's probe: does an event start in [lo, hi]? The lock is held. */
static int any_event(void *ctx, int64_t lo, int64_t hi) {
  pg_params_t p = {0};
  pg_int(&p, 1, lo);
  pg_int(&p, 2, hi);
  PGresult *r = read_run(ctx, ANY_EVENT, &p, "rollup plan");
  int any = r ? strcmp(PQgetvalue(r, 0, 0), "t") == 0 : -1;
  PQclear(r);
  return any;
}

/* Run sql (top-stacks or stack rows) with q's plan in $20..$29: the plan's
   probes and the query under one hold of the lock. */
static int scan_planned(store_t *st, const char *sql, pg_params_t *p, const store_top_query_t *q,
                        const char *what, row_each_fn each, void *ctx) {
  pthread_mutex_lock(&st->lock);
  rollup_plan_t plan;
  rollup_plan(q, any_event, st, &plan);
  store_binder_t b = {p, bind_text, bind_i64};
  store_bind_plan(&b, &plan);
  int rc = scan_locked(st, sql, p, what, each, ctx);
  pthread_mutex_unlock(&st->lock);
  return rc;
}

/* The store whose connection the reads use: its reader (pg_store.h). */
static store_t *reader_of(store_t *st) {
  return st->reader ? st->reader : st;
}

int pg_top_rows(store_t *st, const store_top_query_t *q, store_row_fn fn, void *user) {
  st = reader_of(st);
  int hang = !store_kind_cpu_time(q->kind);
  pg_params_t p = {0};
  bind_filters(st, &p, q);
  cb_t cb = {(void *)fn, user, hang, st->read_rows_max};
  return scan_planned(st, hang ? TOP_HANG : TOP_CPU, &p, q, "top rows", top_each, &cb);
}

static int stack_each(const PGresult *r, int i, void *ctx) {
  cb_t *cb = ctx;
  store_stack_row_t row = store_stack_row(&PG_COLUMNS(r, i));
  row.rows_limit = cb->rows_limit;
  if (!store_stack_row_usable(&row)) return 0;
  return ((store_stack_row_fn)cb->fn)(&row, cb->user);
}

int pg_stack_rows(store_t *st, const store_top_query_t *q, store_stack_row_fn fn, void *user) {
  st = reader_of(st);
  if (!q->kind) return STORE_ERROR;
  pg_params_t p = {0};
  bind_filters(st, &p, q);
  pg_text(&p, 8, q->group);
  cb_t cb = {(void *)fn, user, 0, st->read_rows_max};
  return scan_planned(st, STACK_ROWS, &p, q, "stack rows", stack_each, &cb);
}

static store_event_row_t event_row(const PGresult *r, int i) {
  return store_event_row(&PG_COLUMNS(r, i), 0);
}

static int event_each(const PGresult *r, int i, void *ctx) {
  cb_t *cb = ctx;
  store_event_row_t row = event_row(r, i);
  return ((store_event_row_fn)cb->fn)(&row, cb->user);
}

int pg_event_rows(store_t *st, const store_top_query_t *q, int64_t limit, store_event_row_fn fn,
                  void *user) {
  st = reader_of(st);
  pg_params_t p = {0};
  bind_filters(st, &p, q);
  pg_int(&p, 7, limit);
  cb_t cb = {(void *)fn, user, 0, 0};
  return scan(st, EVENT_ROWS, &p, "event rows", event_each, &cb);
}

static int count_each(const PGresult *r, int i, void *ctx) {
  cb_t *cb = ctx;
  store_count_row_t row = store_count_row(&PG_COLUMNS(r, i));
  if (!row.stack_sig) return 0;
  return ((store_count_row_fn)cb->fn)(&row, cb->user);
}

int pg_event_detail(store_t *st, int64_t id, store_event_row_fn on_event,
                    store_count_row_fn on_count, void *user) {
  st = reader_of(st);
  pg_params_t p = {0};
  pg_int(&p, 1, id);
  pthread_mutex_lock(&st->lock);
  PGresult *r = read_run(st, EVENT_ONE, &p, "event");
  int found = r && PQntuples(r) > 0, stopped = 0;
  if (found) {
    store_event_row_t row = event_row(r, 0);
    stopped = on_event(&row, user);
  }
  int ok = r != NULL;
  PQclear(r);
  if (ok && found && !stopped) {
    r = read_run(st, EVENT_COUNTS, &p, "event counts");
    cb_t cb = {(void *)on_count, user, 0, 0};
    for (int i = 0; r && !stopped && i < PQntuples(r); i++)
      stopped = count_each(r, i, &cb);
    ok = r != NULL;
    PQclear(r);
  }
  pthread_mutex_unlock(&st->lock);
  if (!ok || stopped) return STORE_ERROR;
  return found ? STORE_OK : STORE_NOT_FOUND;
}

static int drops_each(const PGresult *r, int i, void *ctx) {
  store_drops_t *out = ctx;
  for (int k = 0; k < STORE_DROP_COUNT; k++)
    out->dropped[k] = (uint64_t)pg_i64(r, i, k);
  out->batches = (uint64_t)pg_i64(r, i, STORE_DROP_COUNT);
  return 0;
}

int pg_drops(store_t *st, const store_top_query_t *q, store_drops_t *out) {
  st = reader_of(st);
  memset(out, 0, sizeof *out);
  pg_params_t p = {0};
  bind_filters(st, &p, q);
  out->rows_limit = st->read_rows_max;
  return scan(st, DROPS, &p, "drops", drops_each, out);
}

static int loop_each(const PGresult *r, int i, void *ctx) {
  store_loop_totals_t *out = ctx;
  out->sum.watched_ns = (uint64_t)pg_f64(r, i, 0);
  out->sum.busy_ns = (uint64_t)pg_f64(r, i, 1);
  for (int k = 0; k < STORE_LOOP_BUCKETS; k++)
    out->sum.units[k] = (uint64_t)pg_f64(r, i, 2 + k);
  out->batches = (uint64_t)pg_i64(r, i, 2 + STORE_LOOP_BUCKETS);
  return 0;
}

static int hangs_each(const PGresult *r, int i, void *ctx) {
  ((store_loop_totals_t *)ctx)->hangs = (uint64_t)pg_i64(r, i, 0);
  return 0;
}

int pg_loop_totals(store_t *st, const store_top_query_t *q, store_loop_totals_t *out) {
  st = reader_of(st);
  memset(out, 0, sizeof *out);
  pg_params_t p = {0};
  bind_filters(st, &p, q);
  out->rows_limit = st->read_rows_max;
  int rc = scan(st, q->loop ? LOOP_SUMS_OF_LOOP : LOOP_SUMS, &p, "loop stats", loop_each, out);
  return rc == STORE_OK ? scan(st, HANG_COUNT, &p, "hang count", hangs_each, out) : rc;
}

typedef struct bucket_ctx_s {
  int64_t bucket_ns;
  uint64_t rows_limit;
  store_bucket_row_fn fn;
  void *user;
} bucket_ctx_t;

static int bucket_each(const PGresult *r, int i, void *ctx) {
  bucket_ctx_t *b = ctx;
  store_bucket_row_t row = {pg_i64(r, i, 0) * b->bucket_ns, (uint64_t)pg_i64(r, i, 1),
                            pg_f64(r, i, 2), b->rows_limit};
  return b->fn(&row, b->user);
}

int pg_time_buckets(store_t *st, const store_top_query_t *q, int64_t bucket_ns, int64_t limit,
                    store_bucket_row_fn fn, void *user) {
  st = reader_of(st);
  if (!q->kind || bucket_ns <= 0) return STORE_ERROR;
  pg_params_t p = {0};
  bind_filters(st, &p, q);
  pg_int(&p, 7, bucket_ns);
  pg_int(&p, 8, limit);
  bucket_ctx_t ctx = {bucket_ns, st->read_rows_max, fn, user};
  return scan(st, TIME_BUCKETS, &p, "time buckets", bucket_each, &ctx);
}

static int state_each(const PGresult *r, int i, void *ctx) {
  cb_t *cb = ctx;
  store_state_count_t row = {cb->hang ? (uint32_t)pg_i64(r, i, 0) : 0, pg_str(r, i, cb->hang),
                             pg_str(r, i, cb->hang + 1), pg_str(r, i, cb->hang + 2),
                             (uint64_t)pg_i64(r, i, cb->hang + 3)};
  return ((store_state_row_fn)cb->fn)(&row, cb->user);
}

/* state_rows': a state's sums, the rows summed (column 4) and the limit. */
static int state_sum_each(const PGresult *r, int i, void *ctx) {
  cb_t *cb = ctx;
  store_state_sum_t row = {
      {0, pg_str(r, i, 0), pg_str(r, i, 1), pg_str(r, i, 2), (uint64_t)pg_i64(r, i, 3)},
      (uint64_t)pg_i64(r, i, 4),
      cb->rows_limit};
  return ((store_state_sum_fn)cb->fn)(&row, cb->user);
}

int pg_event_states(store_t *st, int64_t id, store_state_row_fn fn, void *user) {
  st = reader_of(st);
  pg_params_t p = {0};
  pg_int(&p, 1, id);
  cb_t cb = {(void *)fn, user, 1, 0}; /* hang: the rows start with the tid */
  return scan(st, STATES_OF_EVENT, &p, "event states", state_each, &cb);
}

int pg_state_rows(store_t *st, const store_top_query_t *q, store_state_sum_fn fn, void *user) {
  st = reader_of(st);
  if (!q->kind) return STORE_ERROR;
  pg_params_t p = {0};
  bind_filters(st, &p, q);
  pg_text(&p, 8, q->group);
  cb_t cb = {(void *)fn, user, 0, st->read_rows_max};
  return scan(st, STATE_ROWS, &p, "state rows", state_sum_each, &cb);
}

typedef struct group_stacks_s {
  store_group_stack_fn fn;
  void *user;
  size_t n;
  bool enough[STORE_GROUP_STACKS_SIGS];
} group_stacks_t;

static int group_stack_each(const PGresult *r, int i, void *ctx) {
  group_stacks_t *g = ctx;
  int64_t at = pg_i64(r, i, 0) - 1;
  const char *frames = pg_str(r, i, 1);
  if (at < 0 || (size_t)at >= g->n || g->enough[at] || !frames) return 0;
  g->enough[at] = g->fn((size_t)at, frames, g->user) != 0;
  return 0;
}

int pg_group_stacks(store_t *st, const char *const *sigs, size_t n, store_group_stack_fn fn,
                    void *user) {
  st = reader_of(st);
  if (n > STORE_GROUP_STACKS_SIGS) return STORE_ERROR;
  pg_array_t a = {0};
  for (size_t i = 0; i < n; i++)
    pg_array_text(&a, sigs[i]);
  pg_params_t p = {0};
  if (pg_own_arrays(&p, 1, &a, 1) != 0) return pg_params_free(&p), STORE_ERROR;
  group_stacks_t g = {fn, user, n, {false}};
  int rc = scan(st, GROUP_STACKS, &p, "group stacks", group_stack_each, &g);
  pg_params_free(&p);
  return rc;
}
