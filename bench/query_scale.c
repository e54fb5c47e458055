/*
 * query_scale.c - collector_bench's scale rounds (query_scale.h).
 */
#include "query_scale.h"

#include <libpq-fe.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "collector/store/rollup_sql.h"

#define HOUR_NS "3600000000000" /* a copy's shift: whole rollup buckets */
#define ROLLUP_RUNS 7
#define RAW_RUNS_SMALL 3 /* up to 20 M samples; beyond, one run */
#define TARGET_MS 200.0

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One statement (or several) on the store; a count when it returns one. */
typedef struct db_s {
  sqlite3 *lite;
  PGconn *pg;
} db_t;

static int db_run(db_t *d, const char *sql, long long *count) {
  if (d->lite) {
    if (!count) {
      char *err = NULL;
      if (sqlite3_exec(d->lite, sql, NULL, NULL, &err) == SQLITE_OK) return 0;
      fprintf(stderr, "collector_bench: %s: %s\n", sql, err ? err : "?");
      sqlite3_free(err);
      return -1;
    }
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(d->lite, sql, -1, &s, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW)
      *count = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return rc == SQLITE_ROW ? 0 : -1;
  }
  PGresult *r = PQexec(d->pg, sql);
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
  if (!ok) fprintf(stderr, "collector_bench: %s: %s", sql, PQerrorMessage(d->pg));
  if (ok && count) *count = PQntuples(r) ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
  PQclear(r);
  return ok ? 0 : -1;
}

static long long db_count(db_t *d, const char *sql) {
  long long n = -1;
  return db_run(d, sql, &n) == 0 ? n : -1;
}

/* The day rollups made again from the 10-minute ones (the copies moved
   rows by whole hours, so their day rows are not the originals' moved). */
static int rebuild_days(db_t *d) {
  bool pg = d->pg != NULL;
  const char *mark = pg ? "CREATE TEMP TABLE IF NOT EXISTS rollup_dirty_days(day_ns bigint"
                          " PRIMARY KEY); DELETE FROM rollup_dirty_days;"
                          "INSERT INTO rollup_dirty_days SELECT DISTINCT " ROLLUP_BUCKET_AT(
                              "bucket_ns", ROLLUP_DAY_SQL) " FROM rollup_groups;"
                                                           "DELETE FROM rollup_groups_day;"
                                                           " DELETE FROM rollup_stacks_day;"
                        : "CREATE TEMP TABLE IF NOT EXISTS rollup_dirty_days(day_ns INTEGER"
                          " PRIMARY KEY); DELETE FROM rollup_dirty_days;"
                          "INSERT INTO rollup_dirty_days SELECT DISTINCT " ROLLUP_BUCKET_AT(
                              "bucket_ns", ROLLUP_DAY_SQL) " FROM rollup_groups;"
                                                           "DELETE FROM rollup_groups_day;"
                                                           " DELETE FROM rollup_stacks_day;";
  if (db_run(d, mark, NULL) != 0) return -1;
  if (pg)
    return db_run(d, ROLLUP_GROUPS_DAYS(", shard", ", 0") ";" ROLLUP_STACKS_DAYS(", shard", ", 0"),
                  NULL);
  return db_run(d, ROLLUP_GROUPS_DAYS("", "") ";" ROLLUP_STACKS_DAYS("", ""), NULL);
}

/* Copy k of the original rows (event ids <= off, rollup buckets <=
   last_bucket, batches in src_batches), k hours later. */
static int copy_once(db_t *d, int k, long long off, long long last_bucket) {
  char sql[4096];
  bool pg = d->pg != NULL;
  const char *shift_fmt = "(%d * " HOUR_NS ")";
  char shift[64], rcv[96];
  snprintf(shift, sizeof shift, shift_fmt, k);
  snprintf(rcv, sizeof rcv, ", received_ns + %s", shift); /* PostgreSQL's day partitions' key */
  snprintf(sql, sizeof sql,
           "%s"
           "INSERT INTO batches(id, received_ns, app, version, environment, host, pid)"
           " SELECT m.new, b.received_ns + %s, b.app, b.version, b.environment, b.host, b.pid"
           " FROM batches b JOIN map m ON m.old = b.id;"
           "INSERT INTO events(id, batch_id, kind, start_ns, duration_ns, tid, cpu_percent,"
           " reason, dominant_stack_sig, group_sig, label%s) SELECT e.id + %d * %lld, m.new,"
           " e.kind, e.start_ns + %s, e.duration_ns, e.tid, e.cpu_percent, e.reason,"
           " e.dominant_stack_sig, e.group_sig, e.label%s FROM events e JOIN map m"
           " ON m.old = e.batch_id WHERE e.id <= %lld;"
           "INSERT INTO stack_counts(event_id, stack_sig, tid, samples, cpu_us%s)"
           " SELECT event_id + %d * %lld, stack_sig, tid, samples, cpu_us%s FROM stack_counts"
           " WHERE event_id <= %lld;"
           "INSERT INTO rollup_groups SELECT bucket_ns + %s, app, version, environment, kind,"
           " group_sig, label, dbin,%s events, samples, total_ns, first_ns + %s, last_ns + %s,"
           " max_ns, cpu_us FROM rollup_groups WHERE bucket_ns <= %lld;"
           "INSERT INTO rollup_stacks SELECT bucket_ns + %s, app, version, environment, kind,"
           " group_sig, stack_sig, label,%s samples, wall_ns, first_ns + %s, last_end_ns + %s,"
           " cpu_us FROM rollup_stacks WHERE bucket_ns <= %lld;",
           pg ? ""
              : "DROP TABLE IF EXISTS temp.map; CREATE TEMP TABLE map AS SELECT id AS old,"
                " randomblob(16) AS new FROM src_batches;",
           shift, pg ? ", received_ns" : "", k, off, shift, pg ? rcv : "", off,
           pg ? ", received_ns" : "", k, off, pg ? rcv : "", off, shift, pg ? " shard," : "", shift,
           shift, last_bucket, shift, pg ? " shard," : "", shift, shift, last_bucket);
  if (pg) {
    char map[512];
    snprintf(map, sizeof map,
             "DROP TABLE IF EXISTS map; CREATE TEMP TABLE map AS SELECT id AS old,"
             " decode(md5(id::text || '%d'), 'hex') AS new FROM src_batches;"
             "SELECT perf_day_partitions(d) FROM (SELECT DISTINCT (received_ns + %s)"
             " / 86400000000000 AS d FROM batches JOIN map ON map.old = batches.id) AS days;",
             k, shift);
    if (db_run(d, map, NULL) != 0) return -1;
  }
  return db_run(d, sql, NULL);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median ms of runs GETs of base+path (the first one also counts the
   groups returned into *groups when not NULL). */
static double time_get(const scale_env_t *env, const char *base, const char *path, int runs,
                       size_t *groups) {
  char url[512];
  snprintf(url, sizeof url, "%s%s", base, path);
  double ms[ROLLUP_RUNS];
  for (int i = 0; i < runs; i++) {
    char *body = NULL;
    double t0 = now_s();
    if (env->get(url, groups && i == 0 ? &body : NULL) != 200) return free(body), -1;
    ms[i] = (now_s() - t0) * 1e3;
    if (body) {
      *groups = 0;
      for (const char *p = body; (p = strstr(p, "\"signature\"")); p++)
        (*groups)++;
      free(body);
    }
  }
  qsort(ms, (size_t)runs, sizeof ms[0], cmp_double);
  return ms[runs / 2];
}

/* The store at its size: each query from the rollups and from raw rows. */
static void time_round(const scale_env_t *env, const char *db_name, const char *where,
                       long long samples, long long rollup_rows, const char *host) {
  char base[64];
  pid_t pid = env->start(db_name, base, sizeof base);
  if (pid < 0) {
    fprintf(stderr, "collector_bench: perf-collector did not start on %s\n", where);
    return;
  }
  static const char *const QUERIES[] = {"/api/v1/top-stacks?kind=hang",
                                        "/api/v1/top-stacks?kind=cpu", "/api/v1/flame?kind=cpu"};
  int raw_runs = samples <= 20000000 ? RAW_RUNS_SMALL : 1;
  printf("%s, %lld samples stored (%lld rollup rows):\n", where, samples, rollup_rows);
  double worst_top = 0;
  for (size_t q = 0; q < sizeof QUERIES / sizeof QUERIES[0]; q++) {
    char raw_path[256];
    snprintf(raw_path, sizeof raw_path, "%s&host=%s", QUERIES[q], host);
    size_t groups = 0;
    time_get(env, base, QUERIES[q], 1, NULL); /* warm-up */
    double rolled =
        time_get(env, base, QUERIES[q], ROLLUP_RUNS, strstr(QUERIES[q], "top") ? &groups : NULL);
    double raw = time_get(env, base, raw_path, raw_runs, NULL);
    printf("  %-30s rollups %9.1f ms (median of %d)   raw rows %9.1f ms (median of %d)"
           "   raw / rollups %7.1fx\n",
           QUERIES[q] + 8, rolled, ROLLUP_RUNS, raw, raw_runs, rolled > 0 ? raw / rolled : 0);
    if (strstr(QUERIES[q], "top") && rolled > worst_top) worst_top = rolled;
  }
  if (samples >= 10000000 && samples < 20000000)
    printf("target: top-stacks <= %.0f ms at 10 M samples (%s): %.1f %s\n", TARGET_MS, where,
           worst_top, worst_top <= TARGET_MS ? "PASS" : "MISS");
  kill(pid, SIGTERM);
  waitpid(pid, NULL, 0);
}

static void scale_one(const scale_env_t *env, db_t *d, const char *db_name, const char *where,
                      const uint64_t *targets, size_t n) {
  long long samples = db_count(d, "SELECT coalesce(sum(samples), 0) FROM stack_counts");
  long long off = db_count(d, "SELECT coalesce(max(id), 0) FROM events");
  long long last_bucket = db_count(d, "SELECT coalesce(max(bucket_ns), 0) FROM rollup_groups");
  long long first_bucket = db_count(d, "SELECT coalesce(min(bucket_ns), 0) FROM rollup_groups");
  char host[256] = "";
  if (d->lite) {
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(d->lite, "SELECT host FROM batches LIMIT 1", -1, &s, NULL) ==
            SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0))
      snprintf(host, sizeof host, "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
  } else {
    PGresult *r = PQexec(d->pg, "SELECT host FROM batches LIMIT 1");
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r))
      snprintf(host, sizeof host, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
  }
  if (samples <= 0 || off <= 0 || !host[0] || last_bucket - first_bucket >= 3600000000000LL) {
    fprintf(stderr, "collector_bench: %s: nothing to copy (or the ingest spans an hour)\n", where);
    return;
  }
  if (db_run(d,
             d->lite ? "CREATE TEMP TABLE src_batches AS SELECT id FROM batches"
                     : "CREATE TEMP TABLE src_batches AS SELECT id FROM batches",
             NULL) != 0)
    return;
  long long per_copy = samples;
  int k = 1;
  for (size_t t = 0; t < n; t++) {
    double t0 = now_s();
    while ((uint64_t)samples < targets[t]) {
      if (db_run(d, "BEGIN", NULL) != 0 || copy_once(d, k, off, last_bucket) != 0 ||
          db_run(d, "COMMIT", NULL) != 0)
        return;
      samples += per_copy;
      k++;
    }
    if (rebuild_days(d) != 0) return;
    if (d->pg) {
      char sql[128];
      snprintf(sql, sizeof sql, "SELECT setval('events_id_seq', %lld); ANALYZE", off * k);
      db_run(d, sql, NULL);
    } else {
      db_run(d, "ANALYZE", NULL);
    }
    long long rows = db_count(d, "SELECT (SELECT count(*) FROM rollup_groups) +"
                                 " (SELECT count(*) FROM rollup_stacks) +"
                                 " (SELECT count(*) FROM rollup_groups_day) +"
                                 " (SELECT count(*) FROM rollup_stacks_day)");
    printf("(filled by %d copies in %.1f s)\n", k - 1, now_s() - t0);
    time_round(env, db_name, where, samples, rows, host);
  }
}

void query_scale(const scale_env_t *env, const uint64_t *targets, size_t n) {
  if (env->sqlite_path) {
    db_t d = {0};
    if (sqlite3_open(env->sqlite_path, &d.lite) == SQLITE_OK) {
      sqlite3_exec(d.lite, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
      scale_one(env, &d, env->sqlite_path, "SQLite", targets, n);
    }
    sqlite3_close(d.lite);
  }
  if (env->pg_dir && env->pg_name) {
    char uri[512];
    snprintf(uri, sizeof uri, "postgresql:///%s?host=%s&user=perf", env->pg_name, env->pg_dir);
    db_t d = {0};
    d.pg = PQconnectdb(uri);
    if (PQstatus(d.pg) == CONNECTION_OK) scale_one(env, &d, uri, "PostgreSQL", targets, n);
    PQfinish(d.pg);
  }
}
