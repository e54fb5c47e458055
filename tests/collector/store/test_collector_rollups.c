/*
 * test_collector_rollups.c - the rollups (collector/model/rollup.h) in the real
 * perf-collector, fed hand-made batches (batch_post.c) of hang and cpu
 * events over two apps, three versions, three labels and three hours,
 * every batch from host h1:
 *  - same_answers: top-stacks (hang, cpu), the flame graph and the folded
 *    export (samples, and CPU time for cpu) answer exactly the same from
 *    the rollups (no host filter) and from the raw rows (host=h1: the
 *    rollups do not keep hosts), whole and filtered by app, version, label
 *    and time ranges that cut buckets: samples, CPU time (cpu events with
 *    weights beside one without) and the hang stacks' wall time to the
 *    nanosecond;
 *    the rollups are what answers (a row changed in them shows, and only
 *    without the host filter); percentiles within a bin of the exact one;
 *    first with every rollup row still in the delta tables
 *    (--rollup-fold-interval an hour: the reads add them), then folded
 *    when the collector stopped;
 *  - folded_while_running: the fold thread (every second by default)
 *    empties the delta tables while the collector runs, the same sums and
 *    answers before and after;
 *  - retention: batches made old and deleted by retention leave rollups
 *    that still give the raw rows' answers (rows left to
 *    fold by a collector killed before its fold folded first);
 *  - reopen: a database whose rollups are gone (an older collector's), or
 *    of the shape before CPU time (no cpu_us, wall time not an integer:
 *    SQLite's tables, PostgreSQL's schema version 7), gets them built at
 *    start from the raw rows (rollup_sql.h): the same rows ingest had made
 *    from the batches (rollup_batch.c), the same answers.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "perf/v1/perf.pb-c.h"

#define BATCHES 36
#define HANGS 3
#define CPUS 2
#define STACKS 6
#define T0_NS 1700000100000000000LL /* not on a bucket's edge */
#define SPAN_NS (3LL * 3600 * 1000000000)
#define NO_LIMIT ((const char *[]){"--rate-limit", "0", NULL})
/* No fold before the collector stops. */
#define NO_FOLD ((const char *[]){"--rate-limit", "0", "--rollup-fold-interval", "3600", NULL})
#define RETAIN                                                                                     \
  ((const char *[]){"--retention-days", "1", "--retention-interval", "1", "--rate-limit", "0",     \
                    "--rollup-fold-interval", "3600", NULL})

/* Both delta tables hold rows (some), or neither does. */
static void check_deltas(const collector_t *c, bool some) {
  CHECK(some == (db_count(c->db, "SELECT count(*) FROM rollup_groups_delta") > 0));
  CHECK(some == (db_count(c->db, "SELECT count(*) FROM rollup_stacks_delta") > 0));
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;

static uint32_t rnd(uint32_t n) {
  g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
  return (uint32_t)(g_rng % n);
}

/* Batch b: HANGS hangs and CPUS cpu events starting somewhere in the
   three hours, each sampled in 1-3 of STACKS stacks (leaf_k <- work_j <-
   main_loop); the first cpu event's samples weigh 1..999 us each
   (Event.sample_weights_micros), the second's nothing (an older SDK's). */
static void send_batch(const collector_t *c, unsigned b) {
  static const char *const APPS[] = {"app1", "app2"}, *const VERSIONS[] = {"v1", "v2", "v3"},
                           *const LABELS[] = {"", "tick", "io"};
  char *strings[] = {"", "leaf_a", "leaf_b", "leaf_c", "work_x", "work_y", "main_loop"};
  uint32_t frames[STACKS][3];
  Perf__V1__Stack st[STACKS], *sts[STACKS];
  for (int s = 0; s < STACKS; s++) {
    frames[s][0] = 1 + (uint32_t)(s % 3), frames[s][1] = 4 + (uint32_t)(s / 3), frames[s][2] = 6;
    perf__v1__stack__init(&st[s]);
    st[s].n_frames = 3, st[s].frames = frames[s];
    sts[s] = &st[s];
  }
  Perf__V1__Event ev[HANGS + CPUS], *evs[HANGS + CPUS];
  Perf__V1__StackCount sc[HANGS + CPUS][3], *scs[HANGS + CPUS][3];
  enum { MAX_SAMPLES = 3 * 20 };
  int64_t offsets[MAX_SAMPLES];
  uint32_t sample_stacks[MAX_SAMPLES], sample_tids[MAX_SAMPLES];
  uint64_t weights[MAX_SAMPLES];
  for (int i = 0; i < HANGS + CPUS; i++) {
    perf__v1__event__init(&ev[i]);
    ev[i].kind =
        i < HANGS ? PERF__V1__EVENT_KIND__EVENT_KIND_HANG : PERF__V1__EVENT_KIND__EVENT_KIND_CPU;
    ev[i].start_unix_nanos = T0_NS + (int64_t)rnd(10800) * 1000000000LL + rnd(1000000);
    ev[i].duration_nanos = (50 + (int64_t)rnd(5000)) * 1000000LL + rnd(1000);
    ev[i].tid = 7;
    ev[i].cpu_percent = 80;
    ev[i].label = (char *)LABELS[rnd(3)];
    uint32_t n = 1 + rnd(3), first = rnd(STACKS);
    for (uint32_t k = 0; k < n; k++) {
      perf__v1__stack_count__init(&sc[i][k]);
      /* A cpu event's first two counts: one stack on two threads. */
      sc[i][k].stack = 1 + (first + (i < HANGS ? k : k / 2)) % STACKS;
      sc[i][k].samples = 1 + rnd(20);
      sc[i][k].tid = 7 + k % 2;
      scs[i][k] = &sc[i][k];
    }
    ev[i].n_stack_counts = n, ev[i].stack_counts = scs[i], ev[i].dominant_stack = first + 1;
    evs[i] = &ev[i];
    if (i != HANGS) continue;
    /* The weighted cpu event's samples, one per sample of its counts. */
    size_t m = 0;
    for (uint32_t k = 0; k < n; k++)
      for (uint32_t j = 0; j < sc[i][k].samples; j++, m++) {
        offsets[m] = 1000, sample_stacks[m] = sc[i][k].stack, sample_tids[m] = sc[i][k].tid;
        weights[m] = 1 + rnd(999);
      }
    ev[i].n_sample_offsets_micros = m, ev[i].sample_offsets_micros = offsets;
    ev[i].n_sample_stacks = m, ev[i].sample_stacks = sample_stacks;
    ev[i].n_sample_tids = m, ev[i].sample_tids = sample_tids;
    ev[i].n_sample_weights_micros = m, ev[i].sample_weights_micros = weights;
  }
  Perf__V1__Resource res;
  Perf__V1__Batch batch;
  const char *app = APPS[rnd(2)];
  batch_begin(&batch, &res, app, VERSIONS[rnd(3)], "prod", "h1");
  batch_frames_t f;
  batch_set_frames(&batch, &f, strings, ARRAY_LEN(strings));
  batch.n_stacks = STACKS, batch.stacks = sts;
  batch.n_events = HANGS + CPUS, batch.events = evs;
  batch_post(c, &batch, b);
}

/* endpoint?query from the rollups and, with host=h1, from the raw rows:
   the same bytes. The rollups' answer (malloc'ed). */
static char *same_both_ways(const collector_t *c, const char *endpoint, const char *query) {
  char path[2048];
  snprintf(path, sizeof path, "%s?%s&limit=1000", endpoint, query);
  char *rolled = get_text(c, path);
  snprintf(path, sizeof path, "%s?%s&limit=1000&host=h1", endpoint, query);
  char *raw = get_text(c, path);
  CHECKF(strcmp(rolled, raw) == 0, "%s?%s:\nrollups: %.1500s\nraw:     %.1500s", endpoint, query,
         rolled, raw);
  free(raw);
  return rolled;
}

/* Every query of the comparison: whole, filtered, ranges cutting buckets
   (a minute past T0, mid-way, and a range inside one bucket). */
static void check_all_queries(const collector_t *c, bool expect_rows) {
  char ranges[6][96];
  long long t0_ms = T0_NS / 1000000, span_ms = SPAN_NS / 1000000;
  ranges[0][0] = '\0';
  snprintf(ranges[1], sizeof ranges[1], "&from=%lld", t0_ms + 61000);
  snprintf(ranges[2], sizeof ranges[2], "&from=%lld&to=%lld", t0_ms + 1234567,
           t0_ms + span_ms / 2 + 7);
  snprintf(ranges[3], sizeof ranges[3], "&from=%lld&to=%lld", t0_ms + 3 * 60000, t0_ms + 7 * 60000);
  /* the midnight inside the three hours: whole days before and after it */
  long long midnight_ms = (t0_ms / 86400000 + 1) * 86400000;
  snprintf(ranges[4], sizeof ranges[4], "&to=%lld", midnight_ms - 1);
  snprintf(ranges[5], sizeof ranges[5], "&from=%lld", midnight_ms);
  static const char *const FILTERS[] = {"", "&app=app1", "&version=v2", "&label=tick",
                                        "&app=app2&version=v3&label=io"};
  static const char *const KINDS[] = {"kind=hang", "kind=cpu"};
  size_t groups = 0;
  for (size_t k = 0; k < ARRAY_LEN(KINDS); k++)
    for (size_t f = 0; f < ARRAY_LEN(FILTERS); f++)
      for (size_t r = 0; r < ARRAY_LEN(ranges); r++) {
        char query[1024];
        snprintf(query, sizeof query, "%s%s%s", KINDS[k], FILTERS[f], ranges[r]);
        char *top = same_both_ways(c, "/api/v1/top-stacks", query);
        json_t *o = json_loads(top, 0, NULL);
        CHECK(o != NULL);
        groups += json_array_size(json_object_get(o, "stacks"));
        json_decref(o);
        free(top);
        free(same_both_ways(c, "/api/v1/flame", query));
        free(same_both_ways(c, "/api/v1/export/folded", query));
        if (k == 1) {
          char cpu[1100];
          snprintf(cpu, sizeof cpu, "%s&value=cpu_us", query);
          free(same_both_ways(c, "/api/v1/export/folded", cpu));
        }
      }
  CHECK(expect_rows ? groups > 0 : groups == 0);
}

/* The exact nearest-rank p95 of group sig's hang durations (ms), from the
   raw rows. */
static double exact_p95_ms(const collector_t *c, const char *sig) {
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM events WHERE group_sig = '%s'", sig);
  long long n = db_count(c->db, sql);
  CHECK(n > 0);
  long long rank = (95 * n + 99) / 100;
  snprintf(sql, sizeof sql,
           "SELECT duration_ns FROM events WHERE group_sig = '%s' ORDER BY duration_ns"
           " LIMIT 1 OFFSET %lld",
           sig, rank - 1);
  return (double)db_count(c->db, sql) / 1e6;
}

/* Every event, sample and CPU microsecond counted in both levels, as the
   reads see them. */
static void check_sums(const collector_t *c) {
  long long hangs = db_count(c->db, "SELECT count(*) FROM events WHERE kind = 'hang'");
  long long samples = db_count(c->db, "SELECT sum(samples) FROM stack_counts");
  long long cpu_us = db_count(c->db, "SELECT sum(cpu_us) FROM stack_counts");
  long long cpu_samples =
      db_count(c->db, "SELECT sum(c.samples) FROM stack_counts c"
                      " JOIN events e ON e.id = c.event_id WHERE e.kind = 'cpu'");
  CHECK(hangs > 0 && samples > 0 && cpu_us > 0 && cpu_samples > 0);
  CHECK_EQ_INT(rolled_sum(c->db, "rollup_groups", "events", "kind = 'hang'"), hangs);
  CHECK_EQ_INT(rolled_sum(c->db, "rollup_groups_day", "events", "kind = 'hang'"), hangs);
  CHECK_EQ_INT(rolled_sum(c->db, "rollup_stacks", "samples", "true"), samples);
  CHECK_EQ_INT(rolled_sum(c->db, "rollup_stacks_day", "samples", "true"), samples);
  CHECK_EQ_INT(rolled_sum(c->db, "rollup_stacks", "cpu_us", "true"), cpu_us);
  CHECK_EQ_INT(rolled_sum(c->db, "rollup_stacks_day", "cpu_us", "true"), cpu_us);
  CHECK_EQ_INT(rolled_sum(c->db, "rollup_groups", "cpu_us", "kind = 'cpu'"), cpu_us);
  CHECK_EQ_INT(rolled_sum(c->db, "rollup_groups_day", "samples", "kind = 'cpu'"), cpu_samples);
}

static void case_same_answers(void) {
  collector_t c;
  collector_start(&c, NO_FOLD);
  for (unsigned b = 1; b <= BATCHES; b++)
    send_batch(&c, b);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM events"), BATCHES * (HANGS + CPUS));
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM events WHERE kind = 'hang'"), BATCHES * HANGS);
  check_sums(&c);
  /* Nothing folded yet: the reads answer from the delta rows. */
  check_deltas(&c, true);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM rollup_groups"), 0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM rollup_stacks_day"), 0);
  check_all_queries(&c, true);
  /* Stopped: the last fold. Rolled up: fewer rows than events. */
  collector_stop_healthy(&c);
  check_deltas(&c, false);
  check_sums(&c);
  CHECK(db_count(c.db, "SELECT count(*) FROM rollup_stacks_day") <
        db_count(c.db, "SELECT count(*) FROM rollup_stacks"));
  collector_restart(&c, NO_FOLD);
  check_all_queries(&c, true);

  /* The rollups answer (without a range: whole days, the day rows): a
     change there shows without the host filter only. */
  long status = 0;
  json_t *before = get_json(&c, "/api/v1/top-stacks?kind=hang&limit=1000", &status);
  CHECK_EQ_INT(status, 200);
  long long events = 0;
  size_t i;
  json_t *g;
  json_array_foreach(json_object_get(before, "stacks"), i, g) {
    events += json_integer_value(json_object_get(g, "events"));
    /* p95 within a bin (1/16) of the exact one, exact at the top bin */
    const char *sig = json_string_value(json_object_get(g, "signature"));
    double p95 = json_real_value(json_object_get(g, "event_p95_ms")), exact = exact_p95_ms(&c, sig);
    CHECKF(p95 >= exact * (1 - 1.0 / 16) && p95 <= exact * (1 + 1.0 / 16),
           "group %s: p95 %.3f ms, exact %.3f", sig, p95, exact);
  }
  CHECK_EQ_INT(events, BATCHES * HANGS);
  json_decref(before);
  db_exec(c.db, "UPDATE rollup_groups_day SET events = events + 1000 WHERE kind = 'hang'");
  long long rows = db_count(c.db, "SELECT count(*) FROM rollup_groups_day WHERE kind = 'hang'");
  long long got[2] = {0, 0};
  for (int raw = 0; raw < 2; raw++) {
    json_t *o = get_json(&c,
                         raw ? "/api/v1/top-stacks?kind=hang&limit=1000&host=h1"
                             : "/api/v1/top-stacks?kind=hang&limit=1000",
                         &status);
    CHECK_EQ_INT(status, 200);
    json_array_foreach(json_object_get(o, "stacks"), i, g) got[raw] +=
        json_integer_value(json_object_get(g, "events"));
    json_decref(o);
  }
  CHECK_EQ_INT(got[0], BATCHES * HANGS + 1000 * rows);
  CHECK_EQ_INT(got[1], BATCHES * HANGS);
  db_exec(c.db, "UPDATE rollup_groups_day SET events = events - 1000 WHERE kind = 'hang'");
  check_all_queries(&c, true);
  collector_stop_healthy(&c);
}

/* With the default fold interval (1 s) the fold thread empties the delta
   tables while the collector runs, and the rollups then hold every sample:
   the same answers before and after. */
static void case_folded_while_running(void) {
  collector_t c;
  collector_start(&c, NO_LIMIT);
  for (unsigned b = 1; b <= BATCHES; b++)
    send_batch(&c, b);
  check_sums(&c);
  check_all_queries(&c, true);
  double end = now_s() + 30;
  while ((db_count(c.db, "SELECT count(*) FROM rollup_groups_delta") > 0 ||
          db_count(c.db, "SELECT count(*) FROM rollup_stacks_delta") > 0) &&
         now_s() < end)
    usleep(50000);
  check_deltas(&c, false);
  CHECK(db_count(c.db, "SELECT count(*) FROM rollup_groups") > 0);
  check_sums(&c);
  check_all_queries(&c, true);
  collector_stop_healthy(&c);
}

/* The rollup rows back in the delta tables, as a collector killed before
   its fold leaves them. */
static void unfold(const collector_t *c) {
  db_exec(c->db, "INSERT INTO rollup_groups_delta SELECT bucket_ns, app, version, environment,"
                 " kind, group_sig, label, dbin, events, samples, total_ns, first_ns, last_ns,"
                 " max_ns, cpu_us FROM rollup_groups;"
                 "INSERT INTO rollup_stacks_delta SELECT bucket_ns, app, version, environment,"
                 " kind, group_sig, stack_sig, label, samples, wall_ns, first_ns, last_end_ns,"
                 " cpu_us FROM rollup_stacks;"
                 "DELETE FROM rollup_groups; DELETE FROM rollup_stacks;"
                 "DELETE FROM rollup_groups_day; DELETE FROM rollup_stacks_day");
  check_deltas(c, true);
}

static void case_retention(void) {
  collector_t c;
  collector_start(&c, NO_LIMIT);
  for (unsigned b = 1; b <= BATCHES; b++)
    send_batch(&c, b);
  collector_stop_healthy(&c);
  check_sums(&c);
  unfold(&c);
  check_sums(&c);
  /* A third of the batches received in 1970: retention deletes them. */
  long long all = db_count(c.db, "SELECT count(*) FROM batches");
  CHECK_EQ_INT(all, BATCHES);
  db_exec(c.db, rig_pg() ? "UPDATE batches SET received_ns = 1 WHERE get_byte(id, 0) % 3 = 0"
                         : "UPDATE batches SET received_ns = 1 WHERE rowid % 3 = 0");
  long long old = db_count(c.db, "SELECT count(*) FROM batches WHERE received_ns = 1");
  CHECK(old > 0 && old < all);
  /* Retention's first run, at start, before any fold of the thread: the
     rebuild folds the delta rows first (else they would count twice). */
  collector_start(&c, RETAIN);
  double end = now_s() + 30;
  while (db_count(c.db, "SELECT count(*) FROM batches") != all - old && now_s() < end)
    usleep(100000);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), all - old);
  check_deltas(&c, false);
  check_sums(&c);
  check_all_queries(&c, true);
  /* Everything old: the rollups empty. */
  collector_stop_healthy(&c);
  db_exec(c.db, "UPDATE batches SET received_ns = 1");
  collector_start(&c, RETAIN);
  end = now_s() + 30;
  while (db_count(c.db, "SELECT count(*) FROM batches") != 0 && now_s() < end)
    usleep(100000);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM rollup_groups"), 0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM rollup_stacks"), 0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM rollup_groups_day"), 0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM rollup_stacks_day"), 0);
  check_all_queries(&c, false);
  collector_stop_healthy(&c);
}

#define GROUP_ROW                                                                                  \
  "bucket_ns, app, version, environment, kind, group_sig, label, dbin, events, samples,"           \
  " total_ns, first_ns, last_ns, max_ns, cpu_us"
#define STACK_KEY(a, b)                                                                            \
  " ON " a ".bucket_ns = " b ".bucket_ns AND " a ".app = " b ".app AND " a ".version = " b         \
  ".version AND " a ".environment = " b ".environment AND " a ".kind = " b ".kind AND " a          \
  ".group_sig = " b ".group_sig AND " a ".stack_sig = " b ".stack_sig AND " a ".label = " b        \
  ".label"

/* Rows of the level lvl's tables (made at ingest, kept in snap_groups<lvl>
   and snap_stacks<lvl>) missing from or unlike the rebuilt ones, wall time
   to the nanosecond. */
static long long unlike(const char *db, const char *lvl) {
  char sql[2048];
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM (SELECT " GROUP_ROW " FROM snap_groups%s EXCEPT SELECT " GROUP_ROW
           " FROM rollup_groups%s) x",
           lvl, lvl);
  long long n = db_count(db, sql);
  snprintf(
      sql, sizeof sql,
      "SELECT count(*) FROM snap_stacks%s a LEFT JOIN rollup_stacks%s b" STACK_KEY(
          "a",
          "b") " WHERE b.bucket_ns IS NULL OR a.samples <> b.samples OR a.first_ns <> b.first_ns"
               " OR a.last_end_ns <> b.last_end_ns OR a.wall_ns <> b.wall_ns"
               " OR a.cpu_us <> b.cpu_us",
      lvl, lvl);
  return n + db_count(db, sql);
}

/* The rollups as ingest made them (snap_*) against the ones a start built
   from the raw rows: the same rows, the same answers. */
static void check_rebuilt(const collector_t *c, long long groups, long long stacks,
                          long long days) {
  CHECK_EQ_INT(db_count(c->db, "SELECT count(*) FROM rollup_groups"), groups);
  CHECK_EQ_INT(db_count(c->db, "SELECT count(*) FROM rollup_stacks"), stacks);
  CHECK_EQ_INT(db_count(c->db, "SELECT count(*) FROM rollup_stacks_day"), days);
  CHECK_EQ_INT(unlike(c->db, ""), 0);
  CHECK_EQ_INT(unlike(c->db, "_day"), 0);
  check_all_queries(c, true);
}

/* A level's tables (or the delta tables) back to their shape before CPU
   time (PostgreSQL): no cpu_us, wall time a double. */
#define PG_BEFORE_CPU_TIME(groups, stacks)                                                         \
  "ALTER TABLE " groups " DROP COLUMN cpu_us; ALTER TABLE " stacks " DROP COLUMN cpu_us;"          \
  "ALTER TABLE " stacks " ALTER COLUMN wall_ns TYPE double precision;"

static void case_reopen(void) {
  collector_t c;
  collector_start(&c, NO_LIMIT);
  for (unsigned b = 1; b <= BATCHES / 2; b++)
    send_batch(&c, b);
  collector_stop_healthy(&c);
  long long groups = db_count(c.db, "SELECT count(*) FROM rollup_groups");
  long long stacks = db_count(c.db, "SELECT count(*) FROM rollup_stacks");
  long long days = db_count(c.db, "SELECT count(*) FROM rollup_stacks_day");
  CHECK(groups > 0 && stacks > 0 && days > 0);
  /* What ingest made, to compare with what the raw rows make. */
  db_exec(c.db, "CREATE TABLE snap_groups AS SELECT * FROM rollup_groups;"
                "CREATE TABLE snap_stacks AS SELECT * FROM rollup_stacks;"
                "CREATE TABLE snap_groups_day AS SELECT * FROM rollup_groups_day;"
                "CREATE TABLE snap_stacks_day AS SELECT * FROM rollup_stacks_day");

  /* Rollups of the shape before CPU time, their sums wrong: made again. */
  if (rig_pg()) {
    db_exec(c.db,
            PG_BEFORE_CPU_TIME("rollup_groups", "rollup_stacks")
                PG_BEFORE_CPU_TIME("rollup_groups_day", "rollup_stacks_day") PG_BEFORE_CPU_TIME(
                    "rollup_groups_delta",
                    "rollup_stacks_delta") "UPDATE rollup_groups SET events = events + 7;"
                                           "UPDATE schema_version SET version = 7");
  } else {
    db_exec(c.db, "UPDATE rollup_groups SET events = events + 7;"
                  "DROP TABLE rollup_stacks_day; CREATE TABLE rollup_stacks_day("
                  "bucket_ns INTEGER NOT NULL, app TEXT NOT NULL, version TEXT NOT NULL,"
                  " environment TEXT NOT NULL, kind TEXT NOT NULL, group_sig TEXT NOT NULL,"
                  " stack_sig TEXT NOT NULL, label TEXT NOT NULL, samples INTEGER NOT NULL,"
                  " wall_ns REAL NOT NULL, first_ns INTEGER NOT NULL, last_end_ns INTEGER NOT NULL,"
                  " PRIMARY KEY(bucket_ns, app, version, environment, kind, group_sig, stack_sig,"
                  " label)) WITHOUT ROWID");
  }
  CHECK_EQ_INT(db_count(c.db, "SELECT sum(events) FROM rollup_groups"),
               db_count(c.db, "SELECT sum(events) FROM snap_groups") + 7 * groups);
  collector_restart(&c, NO_LIMIT);
  if (rig_pg()) CHECK_EQ_INT(db_count(c.db, "SELECT max(version) FROM schema_version"), 11);
  check_rebuilt(&c, groups, stacks, days);
  collector_stop_healthy(&c);

  /* No rollups at all (a collector before them): built. */
  static const char DROP[] = "DROP TABLE rollup_groups; DROP TABLE rollup_stacks;"
                             "DROP TABLE rollup_groups_day; DROP TABLE rollup_stacks_day;";
  if (rig_pg()) { /* the previous schema version (the migration test has the rest) */
    db_exec(c.db, DROP);
    db_exec(c.db, "DROP TABLE stack_epoch; DROP FUNCTION perf_dbin;"
                  "DROP TABLE rollup_groups_delta; DROP TABLE rollup_stacks_delta; DROP SEQUENCE "
                  "wal_flush_mark; DROP TABLE loop_stats_by_loop;"
                  "UPDATE schema_version SET version = 3");
  } else {
    db_exec(c.db, DROP);
  }
  collector_restart(&c, NO_LIMIT);
  check_rebuilt(&c, groups, stacks, days);
  for (unsigned b = BATCHES / 2 + 1; b <= BATCHES; b++)
    send_batch(&c, b);
  check_all_queries(&c, true);
  collector_stop_healthy(&c);
}

static const test_case_t g_cases[] = {
    TEST_CASE(same_answers),
    TEST_CASE(folded_while_running),
    TEST_CASE(retention),
    TEST_CASE(reopen),
};

int main(int argc, char **argv) {
  return collector_test_main(argc, argv, g_cases, ARRAY_LEN(g_cases));
}
