/*
 * test_collector_versions.c - GET /api/v1/versions/compare and GET
 * /api/v1/loops in the real perf-collector, fed hand-made batches
 * (batch_post.c) with loop stats:
 *  - rates: version 3.1 watched 1 h with 2 hangs, 3.2 watched 2 h with 6
 *    hangs -> exactly 2.0 and 3.0 hangs per hour, the busy fractions and
 *    the histograms summed over their batches (a stats-only batch among
 *    them), the hang group that grew and the one that shrank, with exact
 *    shares; another app's batches and the environment filter change it
 *    exactly; a version never watched has null rates;
 *  - intervals: each rate's exact 95% interval (hangs_per_hour_low,
 *    _high) against values computed independently, enough_data, and
 *    difference: not_enough_data (2 vs 2 hangs), higher, lower,
 *    within_noise;
 *  - loops: the same batches' loops summed over app, version,
 *    environment and none: exact watched hours, hangs per hour, busy
 *    fraction, histogram and batch counts; kind, group, label and a bad
 *    from refused with 400 naming them;
 *  - bad_parameters: app, a, b missing, a == b, a too long, kind,
 *    version -> 400 naming the parameter; loop stats of 10 buckets -> the
 *    batch refused with 400;
 *  - retention_and_old_db: a database made before loop stats gets its
 *    table at start; retention deletes an expired batch's loop stats.
 */
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
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

#define HOUR_NS 3600000000000ULL
#define BUCKETS 9

static void send_ok(const collector_t *c, const loop_batch_t *sp, unsigned seed) {
  reply_t *r = calloc(1, sizeof *r);
  CHECK(r);
  long status = batch_post_loop(c, sp, seed, r);
  CHECKF(status == 200, "batch %u -> %ld %.*s", seed, status, (int)r->body_len, r->body);
  free(r);
}

/* 3.1: 1 h watched in two batches (one stats-only), 2 hangs (1 db, 1 ui);
   3.2: 2 h in one batch, 6 hangs (5 db, 1 ui); other app 3.1: 1 h, 4
   hangs; shop 3.1 in staging: 1 h, no hang. */
static const uint64_t U1[BUCKETS] = {100, 20, 10, 3, 2, 0, 0, 0, 0};
static const uint64_t U2[BUCKETS] = {50, 5, 5, 1};
static const uint64_t U3[BUCKETS] = {400, 30, 20, 8, 5, 1, 0, 0, 0};

static void send_fixture(const collector_t *c) {
  send_ok(c,
          &(loop_batch_t){"shop", "3.1", "prod", HOUR_NS / 2, HOUR_NS / 8, U1, BUCKETS, 2, 1, 700},
          1);
  send_ok(c, &(loop_batch_t){"shop", "3.1", "prod", HOUR_NS / 2, HOUR_NS / 8, U2, 4, 0, 0, 0}, 2);
  send_ok(c, &(loop_batch_t){"shop", "3.2", "prod", 2 * HOUR_NS, HOUR_NS, U3, BUCKETS, 6, 5, 700},
          3);
  send_ok(c, &(loop_batch_t){"other", "3.1", "prod", HOUR_NS, HOUR_NS / 2, U1, BUCKETS, 4, 4, 700},
          4);
  send_ok(c, &(loop_batch_t){"shop", "3.1", "staging", HOUR_NS, 0, U2, 4, 0, 0, 0}, 5);
}

static json_t *loops(const collector_t *c, const char *query);

static json_t *compare(const collector_t *c, const char *query) {
  char path[1024];
  snprintf(path, sizeof path, "/api/v1/versions/compare?%s", query);
  long status = 0;
  json_t *o = get_json(c, path, &status);
  char *text = json_dumps(o, JSON_COMPACT);
  CHECKF(status == 200, "GET %s -> %ld %s", path, status, text ? text : "");
  free(text);
  return o;
}

static double real_of(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  CHECKF(json_is_number(v), "%s is not a number", key);
  return json_number_value(v);
}

/* A version's answer (name NULL: a loops answer, no version): exact
   hangs, watched hours, rate, busy fraction and units per bucket
   ("u0,u1,...,u8"). */
static void check_version(const json_t *v, const char *name, long long hangs, double hours,
                          double rate, double busy, const char *units) {
  if (name) CHECK(strcmp(json_string_value(json_object_get(v, "version")), name) == 0);
  if (!name) name = "loops";
  CHECKF(json_integer_value(json_object_get(v, "hangs")) == hangs, "%s: hangs", name);
  CHECKF(real_of(v, "watched_hours") == hours, "%s: watched_hours %g, want %g", name,
         real_of(v, "watched_hours"), hours);
  CHECKF(real_of(v, "hangs_per_hour") == rate, "%s: hangs_per_hour %g, want %g", name,
         real_of(v, "hangs_per_hour"), rate);
  CHECKF(real_of(v, "busy_fraction") == busy, "%s: busy_fraction %g, want %g", name,
         real_of(v, "busy_fraction"), busy);
  const json_t *h = json_object_get(v, "histogram");
  CHECK_EQ_INT(json_array_size(h), BUCKETS);
  char got[256] = "";
  size_t len = 0;
  for (size_t i = 0; i < BUCKETS; i++)
    len += (size_t)snprintf(
        got + len, sizeof got - len, "%s%lld", i ? "," : "",
        (long long)json_integer_value(json_object_get(json_array_get(h, i), "units")));
  CHECKF(strcmp(got, units) == 0, "%s: units %s, want %s", name, got, units);
}

/* A moved group: its innermost frame, hangs in a and b, change. */
static void check_moved(const json_t *list, size_t i, const char *frame, long long na, long long nb,
                        double change) {
  const json_t *g = json_array_get(list, i);
  CHECKF(g, "no group %zu", i);
  const char *top = json_string_value(json_array_get(json_object_get(g, "frames"), 0));
  CHECKF(top && strcmp(top, frame) == 0, "group %zu: frame %s, want %s", i, top ? top : "?", frame);
  CHECK_EQ_INT(json_integer_value(json_object_get(g, "hangs_a")), na);
  CHECK_EQ_INT(json_integer_value(json_object_get(g, "hangs_b")), nb);
  double got = real_of(g, "change");
  CHECKF(got > change - 1e-9 && got < change + 1e-9, "group %s: change %g, want %g", frame, got,
         change);
}

/* /metrics: the fixture's 5 batches with loop stats, 5 h watched. */
static void check_metrics(const collector_t *c) {
  reply_t *r = calloc(1, sizeof *r);
  CHECK(r);
  CHECK_EQ_INT(get_key(c, GOOD_KEY, "/metrics", r), 200);
  CHECKF(strstr(r->body, "\nperf_collector_loop_stats_batches_total 5\n") &&
             strstr(r->body, "\nperf_collector_loop_watched_seconds_total 18000.000\n"),
         "/metrics: %.*s", (int)r->body_len, r->body);
  free(r);
}

static void case_rates(void) {
  collector_t c;
  collector_start(&c, NULL);
  send_fixture(&c);
  send_fixture(&c); /* again: duplicates, counted once everywhere */
  check_metrics(&c);
  json_t *o = compare(&c, "app=shop&a=3.1&b=3.2&environment=prod");
  json_t *vs = json_object_get(o, "versions");
  CHECK_EQ_INT(json_array_size(vs), 2);
  check_version(json_array_get(vs, 0), "3.1", 2, 1.0, 2.0, 0.25, "150,25,15,4,2,0,0,0,0");
  check_version(json_array_get(vs, 1), "3.2", 6, 2.0, 3.0, 0.5, "400,30,20,8,5,1,0,0,0");
  CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(vs, 0), "stats_batches")), 2);
  const json_t *h0 = json_array_get(json_object_get(json_array_get(vs, 0), "histogram"), 4);
  CHECK_EQ_INT(json_integer_value(json_object_get(h0, "lower_ms")), 500);
  CHECK_EQ_INT(json_integer_value(json_object_get(h0, "upper_ms")), 1000);
  const json_t *h8 = json_array_get(json_object_get(json_array_get(vs, 0), "histogram"), 8);
  CHECK(json_is_null(json_object_get(h8, "upper_ms")));
  /* db: 1 of 2 -> 5 of 6 hangs; ui: 1 of 2 -> 1 of 6 */
  json_t *stacks = json_object_get(o, "stacks");
  CHECK_EQ_INT(json_array_size(json_object_get(stacks, "grew")), 1);
  CHECK_EQ_INT(json_array_size(json_object_get(stacks, "shrank")), 1);
  check_moved(json_object_get(stacks, "grew"), 0, "slow_query", 1, 5, 5.0 / 6 - 0.5);
  check_moved(json_object_get(stacks, "shrank"), 0, "render", 1, 1, 1.0 / 6 - 0.5);
  /* 2 hangs in 3.1: too few to tell 2.0 from 3.0 per hour */
  const char *diff = json_string_value(json_object_get(o, "difference"));
  CHECKF(diff && strcmp(diff, "not_enough_data") == 0, "3.1 vs 3.2: difference %s",
         diff ? diff : "(none)");
  json_decref(o);

  /* Every environment: 3.1 adds staging's hour without hangs. */
  o = compare(&c, "app=shop&a=3.1&b=3.2");
  vs = json_object_get(o, "versions");
  check_version(json_array_get(vs, 0), "3.1", 2, 2.0, 1.0, 0.125, "200,30,20,5,2,0,0,0,0");
  json_decref(o);
  /* The other app's 3.1: 4 hangs over 1 h; shop's 9.9 was never watched. */
  o = compare(&c, "app=other&a=3.1&b=9.9");
  vs = json_object_get(o, "versions");
  check_version(json_array_get(vs, 0), "3.1", 4, 1.0, 4.0, 0.5, "100,20,10,3,2,0,0,0,0");
  json_t *never = json_array_get(vs, 1);
  CHECK(json_is_null(json_object_get(never, "hangs_per_hour")));
  CHECK(json_is_null(json_object_get(never, "busy_fraction")));
  CHECK(real_of(never, "watched_hours") == 0.0);
  json_decref(o);
  collector_stop_healthy(&c);
}

/* A version's rate interval: exactly low..high per hour (the Garwood
   bounds, computed independently: mpmath, tests/collector/model/
   test_rate_interval.c), to 1e-7 relative, and enough_data. */
static void check_interval(const json_t *v, double low, double high, bool enough) {
  const char *name = json_string_value(json_object_get(v, "version"));
  if (!name) name = "loops";
  double got_low = real_of(v, "hangs_per_hour_low"), got_high = real_of(v, "hangs_per_hour_high");
  CHECKF(fabs(got_low - low) <= 1e-7 * low && fabs(got_high - high) <= 1e-7 * high,
         "%s: interval %.10g..%.10g, want %.10g..%.10g", name, got_low, got_high, low, high);
  CHECKF(json_is_boolean(json_object_get(v, "enough_data")) &&
             json_boolean_value(json_object_get(v, "enough_data")) == enough,
         "%s: enough_data, want %d", name, enough);
}

/* versions/compare?app=noise&a=..&b=..: its difference, exactly want. */
static json_t *check_difference(const collector_t *c, const char *a, const char *b,
                                const char *want) {
  char query[128];
  snprintf(query, sizeof query, "app=noise&a=%s&b=%s", a, b);
  json_t *o = compare(c, query);
  const char *got = json_string_value(json_object_get(o, "difference"));
  CHECKF(got && strcmp(got, want) == 0, "%s: difference %s, want %s", query, got ? got : "-", want);
  return o;
}

/* Rates with their 95% intervals and the rule that compares them: 2
   hangs in 1 h (0.2422..7.2247 per hour) and 2 in 10 s (87.20..2600.9:
   720 per hour, but only two hangs) are not enough data; 6 in 2 h
   against 8 in 0.1 h differ both ways; 6 against 8 in an hour each
   overlap; a version never watched has no interval. */
static void case_intervals(void) {
  collector_t c;
  collector_start(&c, NULL);
  const uint64_t ten_s = HOUR_NS / 360;
  const loop_batch_t fixture[] = {
      {"noise", "1.0", "prod", HOUR_NS, 0, U1, BUCKETS, 2, 1, 5},
      {"noise", "1.1", "prod", ten_s, 0, U1, BUCKETS, 2, 1, 5},
      {"noise", "2.0", "prod", 2 * HOUR_NS, 0, U1, BUCKETS, 6, 3, 5},
      {"noise", "2.1", "prod", HOUR_NS / 10, 0, U1, BUCKETS, 8, 3, 5},
      {"noise", "3.0", "prod", HOUR_NS, 0, U1, BUCKETS, 6, 3, 5},
      {"noise", "3.1", "prod", HOUR_NS, 0, U1, BUCKETS, 8, 3, 5},
  };
  for (unsigned i = 0; i < ARRAY_LEN(fixture); i++)
    send_ok(&c, &fixture[i], 10 + i);

  json_t *o = check_difference(&c, "1.0", "1.1", "not_enough_data");
  json_t *vs = json_object_get(o, "versions");
  check_version(json_array_get(vs, 0), "1.0", 2, 1.0, 2.0, 0.0, "100,20,10,3,2,0,0,0,0");
  check_interval(json_array_get(vs, 0), 0.2422092785, 7.224687668, false);
  check_interval(json_array_get(vs, 1), 0.2422092785 * 360, 7.224687668 * 360, false);
  json_decref(o);
  o = check_difference(&c, "2.0", "2.1", "higher");
  vs = json_object_get(o, "versions");
  check_interval(json_array_get(vs, 0), 2.201894253 / 2, 13.05947402 / 2, true);
  check_interval(json_array_get(vs, 1), 3.453832177 * 10, 15.76318922 * 10, true);
  json_decref(o);
  json_decref(check_difference(&c, "2.1", "2.0", "lower"));
  json_decref(check_difference(&c, "3.0", "3.1", "within_noise"));
  json_decref(check_difference(&c, "1.0", "2.1", "not_enough_data")); /* one side short */
  o = check_difference(&c, "2.0", "9.9", "not_enough_data");
  json_t *never = json_array_get(json_object_get(o, "versions"), 1);
  CHECK(json_is_null(json_object_get(never, "hangs_per_hour_low")) &&
        json_is_null(json_object_get(never, "hangs_per_hour_high")) &&
        json_is_false(json_object_get(never, "enough_data")));
  json_decref(o);
  /* loops: the same interval for one version's loop */
  o = loops(&c, "app=noise&version=2.0");
  check_interval(o, 2.201894253 / 2, 13.05947402 / 2, true);
  json_decref(o);
  collector_stop_healthy(&c);
}

/* GET /api/v1/loops?query: its "loops" object (a new reference). */
static json_t *loops(const collector_t *c, const char *query) {
  char path[1024];
  snprintf(path, sizeof path, "/api/v1/loops?%s", query);
  long status = 0;
  json_t *o = get_json(c, path, &status);
  CHECKF(status == 200, "GET %s -> %ld", path, status);
  json_t *l = json_incref(json_object_get(o, "loops"));
  CHECKF(l, "GET %s: no loops", path);
  json_decref(o);
  return l;
}

static void case_loops(void) {
  collector_t c;
  collector_start(&c, NULL);
  send_fixture(&c);
  send_fixture(&c); /* again: duplicates, counted once */
  /* shop in prod: 3.1's hour and 3.2's two, 2 + 6 hangs, a quarter hour
     and an hour busy */
  json_t *l = loops(&c, "app=shop&environment=prod");
  double busy = (double)(HOUR_NS / 8 + HOUR_NS / 8 + HOUR_NS) / (double)(3 * HOUR_NS);
  check_version(l, NULL, 8, 3.0, 8.0 / 3.0, busy, "550,55,35,12,7,1,0,0,0");
  CHECK_EQ_INT(json_integer_value(json_object_get(l, "stats_batches")), 3);
  json_decref(l);
  l = loops(&c, "app=shop&version=3.2");
  check_version(l, NULL, 6, 2.0, 3.0, 0.5, "400,30,20,8,5,1,0,0,0");
  CHECK_EQ_INT(json_integer_value(json_object_get(l, "stats_batches")), 1);
  json_decref(l);
  /* everything: shop's 4 h (staging's without hangs) and other's hour */
  l = loops(&c, "");
  busy = (double)(HOUR_NS / 8 + HOUR_NS / 8 + HOUR_NS + HOUR_NS / 2) / (double)(5 * HOUR_NS);
  check_version(l, NULL, 12, 5.0, 12.0 / 5.0, busy, "700,80,50,16,9,1,0,0,0");
  CHECK_EQ_INT(json_integer_value(json_object_get(l, "stats_batches")), 5);
  json_decref(l);
  /* nothing watched: null rates */
  l = loops(&c, "app=nobody");
  CHECK(json_is_null(json_object_get(l, "hangs_per_hour")));
  CHECK(json_is_null(json_object_get(l, "busy_fraction")));
  CHECK_EQ_INT(json_integer_value(json_object_get(l, "stats_batches")), 0);
  json_decref(l);
  check_bad_parameter(&c, "/api/v1/loops", "kind=hang", "kind");
  check_bad_parameter(&c, "/api/v1/loops", "group=abc", "group");
  check_bad_parameter(&c, "/api/v1/loops", "label=x", "label");
  check_bad_parameter(&c, "/api/v1/loops", "from=x", "from");
  collector_stop_healthy(&c);
}

/* GET /api/v1/versions/compare?query -> 400 whose error names param. */
static void check_bad(const collector_t *c, const char *query, const char *param) {
  check_bad_parameter(c, "/api/v1/versions/compare", query, param);
}

static void case_bad_parameters(void) {
  collector_t c;
  collector_start(&c, NULL);
  check_bad(&c, "", "app");
  check_bad(&c, "a=1&b=2", "app");
  check_bad(&c, "app=shop&b=2", "a");
  check_bad(&c, "app=shop&a=&b=2", "a");
  check_bad(&c, "app=shop&a=1", "b");
  check_bad(&c, "app=shop&a=1&b=1", "b");
  check_bad(&c, "app=shop&a=1&b=2&kind=hang", "kind");
  check_bad(&c, "app=shop&a=1&b=2&version=1", "version");
  check_bad(&c, "app=shop&a=1&b=2&from=x", "from");
  check_bad(&c, "app=shop&a=1&b=2&from=5&to=4", "to");
  char q[600] = "app=shop&b=2&a=";
  size_t len = strlen(q);
  memset(q + len, 'v', 257);
  q[len + 257] = '\0';
  check_bad(&c, q, "a");
  /* A batch with more buckets than the protocol's 9 is refused whole. */
  uint64_t ten[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  reply_t *r = calloc(1, sizeof *r);
  CHECK(r);
  long status =
      batch_post_loop(&c, &(loop_batch_t){"shop", "1", "prod", HOUR_NS, 0, ten, 10, 0, 0, 0}, 9, r);
  CHECKF(status == 400 && strstr(r->body, "loop_stats.busy_units_by_bucket has 10 buckets"),
         "-> %ld %.*s", status, (int)r->body_len, r->body);
  /* Batch.loops: each entry names its loop and has at most 9 buckets. */
  Perf__V1__LoopStats named = PERF__V1__LOOP_STATS__INIT, *loops[] = {&named};
  loop_batch_t lb = {"shop", "1", "prod", HOUR_NS, 0, NULL, 0, 0, 0, 0};
  status = batch_post_loops(&c, &lb, loops, 1, 10, r);
  CHECKF(status == 400 && strstr(r->body, "loops[0].loop is empty"), "-> %ld %.*s", status,
         (int)r->body_len, r->body);
  named.loop = "worker";
  named.n_busy_units_by_bucket = 10;
  named.busy_units_by_bucket = ten;
  status = batch_post_loops(&c, &lb, loops, 1, 11, r);
  CHECKF(status == 400 && strstr(r->body, "loops[0].busy_units_by_bucket has 10 buckets"),
         "-> %ld %.*s", status, (int)r->body_len, r->body);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 0);
  free(r);
  collector_stop_healthy(&c);
}

static void case_retention_and_old_db(void) {
  collector_t c;
  collector_start(&c, NULL);
  collector_stop_healthy(&c);
  /* (PostgreSQL: its versioned schema has the table; its rows go.) */
  db_exec(c.db, rig_pg() ? "DELETE FROM loop_stats"
                         : "DROP TABLE loop_stats; DROP TABLE loop_stats_by_loop");
  collector_restart(&c, NULL); /* a database of before: the tables are made */
  send_fixture(&c);
  /* Another app's batch that names its loops: their rows go with it. */
  Perf__V1__LoopStats named[2] = {PERF__V1__LOOP_STATS__INIT, PERF__V1__LOOP_STATS__INIT};
  Perf__V1__LoopStats *loops[] = {&named[0], &named[1]};
  named[0].loop = "main", named[0].watched_nanos = HOUR_NS / 2;
  named[1].loop = "worker", named[1].watched_nanos = HOUR_NS / 2;
  reply_t *r = calloc(1, sizeof *r);
  CHECK(r);
  CHECK_EQ_INT(
      batch_post_loops(&c, &(loop_batch_t){"other", "3.1", "prod", HOUR_NS, 0, NULL, 0, 0, 0, 0},
                       loops, 2, 6, r),
      200);
  free(r);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM loop_stats"), 6);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM loop_stats_by_loop"), 2);
  db_exec(c.db, "UPDATE batches SET received_ns = 1 WHERE app = 'other'");
  collector_restart(&c,
                    (const char *[]){"--retention-days", "1", "--retention-interval", "1", NULL});
  double end = now_s() + 30;
  while (db_count(c.db, "SELECT count(*) FROM batches") != 4 && now_s() < end)
    usleep(50000);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM loop_stats"), 4);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM loop_stats_by_loop"), 0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM loop_stats l JOIN batches b"
                              " ON b.id = l.batch_id WHERE b.app = 'other'"),
               0);
  json_t *o = compare(&c, "app=shop&a=3.1&b=3.2&environment=prod");
  check_version(json_array_get(json_object_get(o, "versions"), 1), "3.2", 6, 2.0, 3.0, 0.5,
                "400,30,20,8,5,1,0,0,0");
  json_decref(o);
  collector_stop_healthy(&c);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE(rates),
      TEST_CASE(loops),
      TEST_CASE(intervals),
      TEST_CASE(bad_parameters),
      TEST_CASE(retention_and_old_db),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
