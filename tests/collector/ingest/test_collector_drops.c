/*
 * test_collector_drops.c - what the SDK says it dropped, and its tags, in
 * the real perf-collector: hand-made batches (batch_post.c) with known
 * DropCounters and Resource.tags, over real HTTP:
 *  - drops: GET /api/v1/drops sums each reason and counts the batches,
 *    exactly, unfiltered and by app, version, environment, host, tags
 *    (AND) and time; a batch sent twice counts once; /metrics'
 *    perf_collector_sdk_events_dropped_total has the same sums;
 *  - tag_filters: tag=key:value narrows top-stacks, events, export/folded,
 *    flame and pprof (decoded: its samples and functions) to exact counts;
 *    events show their batch's tags;
 *  - bad_parameters: a tag without a colon, with an empty key, or more
 *    than 4 of them -> 400 naming "tag" on every route; kind on drops;
 *    a batch of 17 tags -> 400;
 *  - colon_keys: a key holding a colon matched with it escaped in the
 *    filter (tag=k8s\:ns:prod), apart from a key without one whose value
 *    holds colons;
 *  - retention: an expired batch's tags and drops go with it;
 *  - old_db: a database made before drops and tags (no batches.dropped_*,
 *    no batch_tags) opens, keeps its batches and takes new ones.
 */
#include <jansson.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "perf/v1/perf.pb-c.h"
#include "perf_sdk.h"
#include "pprof_check.h"

enum { RATE_LIMITED, QUEUE_FULL, SINK_FAILED, SPOOL_QUOTA, OVERSIZED, N_REASONS };
static const char *const REASONS[N_REASONS] = {"rate_limited", "queue_full", "sink_failed",
                                               "spool_quota", "oversized"};

/* ---- hand-made batches ------------------------------------------------------- */

typedef struct spec_s {
  const char *app, *version, *environment, *host;
  const char *tags[PERF_MAX_TAGS + 1][2]; /* key, value; NULL key ends */
  bool has_drops;                         /* false: no DropCounters in the batch at all */
  uint64_t drops[N_REASONS];
  bool hang;        /* a hang event, else a cpu event */
  const char *leaf; /* the innermost frame of its one stack (under <leaf>_root) */
  uint32_t samples;
} spec_t;

/* Batches A..E: A, B and E of team pay, C of team search, D untagged
   without drop counters. Sums: rate_limited 12, queue_full 2,
   sink_failed 4, spool_quota 3, oversized 9 over 5 batches. */
static const spec_t BATCHES[] = {
    {"shop",
     "1.0",
     "prod",
     "h1",
     {{"team", "pay"}, {"region", "eu"}},
     true,
     {5, 0, 0, 1, 0},
     false,
     "pay_eu_fn",
     3},
    {"shop",
     "1.1",
     "prod",
     "h2",
     {{"team", "pay"}, {"region", "us"}},
     true,
     {7, 2, 0, 0, 0},
     false,
     "pay_us_fn",
     4},
    {"other",
     "2.0",
     "dev",
     "h1",
     {{"team", "search"}},
     true,
     {0, 0, 4, 2, 9},
     false,
     "search_fn",
     5},
    {"shop", "1.0", "prod", "h3", {{NULL, NULL}}, false, {0}, true, "untagged_fn", 2},
    {"shop",
     "1.0",
     "prod",
     "h1",
     {{"region", "eu"}, {"team", "pay"}},
     true,
     {0},
     true,
     "pay_hang_fn",
     6},
};
#define A 0
#define C 2

/* The batch of s: one event, one stack (leaf, <leaf>_root: hangs of
   different batches never share a root, so never a group), s->samples. */
static long send_spec(const collector_t *c, const spec_t *s, unsigned seed, reply_t *r) {
  char root[64];
  snprintf(root, sizeof root, "%s_root", s->leaf);
  char *strings[] = {"", (char *)s->leaf, root};
  uint32_t ids[] = {1, 2};
  Perf__V1__Stack st = PERF__V1__STACK__INIT;
  st.n_frames = 2, st.frames = ids;
  Perf__V1__Stack *sts[] = {&st};
  Perf__V1__StackCount sc = PERF__V1__STACK_COUNT__INIT;
  sc.stack = 1, sc.samples = s->samples, sc.tid = 7;
  Perf__V1__StackCount *scs[] = {&sc};
  Perf__V1__Event ev = PERF__V1__EVENT__INIT;
  ev.kind = s->hang ? PERF__V1__EVENT_KIND__EVENT_KIND_HANG : PERF__V1__EVENT_KIND__EVENT_KIND_CPU;
  ev.start_unix_nanos = 1700000000000000000LL + (int64_t)seed * 1000000;
  ev.duration_nanos = 1000000;
  ev.tid = 7;
  ev.n_stack_counts = 1, ev.stack_counts = scs, ev.dominant_stack = 1;
  Perf__V1__Event *evs[] = {&ev};
  Perf__V1__KeyValue kv[ARRAY_LEN(s->tags)];
  Perf__V1__KeyValue *kvs[ARRAY_LEN(s->tags)];
  Perf__V1__Resource res;
  Perf__V1__Batch b;
  batch_begin(&b, &res, s->app, s->version, s->environment, s->host);
  for (size_t i = 0; i < ARRAY_LEN(s->tags) && s->tags[i][0]; i++) {
    perf__v1__key_value__init(&kv[i]);
    kv[i].key = (char *)s->tags[i][0];
    kv[i].value = (char *)s->tags[i][1];
    kvs[res.n_tags++] = &kv[i];
  }
  res.tags = kvs;
  Perf__V1__DropCounters d = PERF__V1__DROP_COUNTERS__INIT;
  d.rate_limited = s->drops[RATE_LIMITED], d.queue_full = s->drops[QUEUE_FULL];
  d.sink_failed = s->drops[SINK_FAILED], d.spool_quota = s->drops[SPOOL_QUOTA];
  d.oversized = s->drops[OVERSIZED];
  b.drops = s->has_drops ? &d : NULL;
  batch_frames_t frames;
  batch_set_frames(&b, &frames, strings, ARRAY_LEN(strings));
  b.n_stacks = 1, b.stacks = sts;
  b.n_events = 1, b.events = evs;
  return batch_post_answer(c, &b, seed, r);
}

/* The reply's body is text (a trailing newline aside). */
static bool body_is(const reply_t *r, const char *text) {
  size_t n = strlen(text);
  return strncmp(r->body, text, n) == 0 && (!r->body[n] || strcmp(r->body + n, "\n") == 0);
}

static void send_ok(const collector_t *c, size_t which, const char *answer) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  long status = send_spec(c, &BATCHES[which], (unsigned)which + 1, r);
  CHECKF(status == 200 && body_is(r, answer), "batch %zu -> %ld %.300s", which, status, r->body);
  free(r);
}

static void send_all(const collector_t *c) {
  for (size_t i = 0; i < ARRAY_LEN(BATCHES); i++)
    send_ok(c, i, "stored");
}

/* ---- answers ----------------------------------------------------------------- */

/* GET /api/v1/drops?query: exactly the sums (rate_limited .. oversized)
   and the batches. */
static void check_drops(const collector_t *c, const char *query, const long long want[6]) {
  char path[512];
  snprintf(path, sizeof path, "/api/v1/drops%s%s", *query ? "?" : "", query);
  json_t *o = get_ok(c, path);
  char *text = json_dumps(o, JSON_COMPACT);
  CHECKF(json_object_size(o) == N_REASONS + 1, "%s: %s", path, text);
  for (int i = 0; i < N_REASONS; i++) {
    json_t *v = json_object_get(o, REASONS[i]);
    CHECKF(json_is_integer(v) && json_integer_value(v) == want[i], "%s: %s should be %lld in %s",
           path, REASONS[i], want[i], text);
  }
  CHECKF(json_integer_value(json_object_get(o, "batches")) == want[5], "%s: batches %lld in %s",
         path, want[5], text);
  free(text);
  json_decref(o);
}

static void check_all_drops(const collector_t *c) {
  struct {
    const char *query;
    long long want[6];
  } cases[] = {
      {"", {12, 2, 4, 3, 9, 5}},
      {"app=shop", {12, 2, 0, 1, 0, 4}},
      {"tag=team:pay", {12, 2, 0, 1, 0, 3}},
      {"tag=team:pay&tag=region:us", {7, 2, 0, 0, 0, 1}},
      {"tag=region:eu&host=h1", {5, 0, 0, 1, 0, 2}},
      {"version=1.1", {7, 2, 0, 0, 0, 1}},
      {"environment=dev&from=0", {0, 0, 4, 2, 9, 1}},
      {"host=h3", {0, 0, 0, 0, 0, 1}},
      {"tag=team:none", {0, 0, 0, 0, 0, 0}},
      {"tag=team:pay&tag=team:search", {0, 0, 0, 0, 0, 0}},
      {"from=0&to=1000", {0, 0, 0, 0, 0, 0}}, /* received now, not in 1970 */
      {"app=&tag=", {12, 2, 4, 3, 9, 5}},     /* empty: any */
  };
  for (size_t i = 0; i < ARRAY_LEN(cases); i++)
    check_drops(c, cases[i].query, cases[i].want);
}

/* /metrics: perf_collector_sdk_events_dropped_total{reason} exactly. */
static void check_metrics(const collector_t *c, const long long want[N_REASONS]) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(get_key(c, GOOD_KEY, "/metrics", r), 200);
  CHECK(strstr(r->body, "# TYPE perf_collector_sdk_events_dropped_total counter\n") != NULL);
  for (int i = 0; i < N_REASONS; i++) {
    char line[160];
    snprintf(line, sizeof line, "\nperf_collector_sdk_events_dropped_total{reason=\"%s\"} %lld\n",
             REASONS[i], want[i]);
    CHECKF(strstr(r->body, line) != NULL, "no line %s in /metrics", line + 1);
  }
  free(r);
}

/* Every batch's drops summed, filtered, and in /metrics; the same batch
   again changes nothing. */
static void case_drops(void) {
  collector_t c;
  collector_start(&c, NULL);
  check_drops(&c, "", (const long long[6]){0, 0, 0, 0, 0, 0});
  send_all(&c);
  check_all_drops(&c);
  static const long long sums[N_REASONS] = {12, 2, 4, 3, 9};
  check_metrics(&c, sums);
  send_ok(&c, A, "duplicate");
  check_drops(&c, "", (const long long[6]){12, 2, 4, 3, 9, 5});
  check_metrics(&c, sums);
  collector_stop_healthy(&c);
}

/* ---- tag filters ------------------------------------------------------------- */

static size_t events_of(const collector_t *c, const char *query) {
  char path[256];
  snprintf(path, sizeof path, "/api/v1/events?%s", query);
  json_t *o = get_ok(c, path);
  size_t n = json_array_size(json_object_get(o, "events"));
  json_decref(o);
  return n;
}

/* The top-stacks of query: their innermost frames and samples as
   "leaf:samples,..." in the API's order. */
static void top_text(const collector_t *c, const char *query, char *out, size_t cap) {
  char path[256];
  snprintf(path, sizeof path, "/api/v1/top-stacks?%s", query);
  json_t *o = get_ok(c, path);
  size_t i, len = 0;
  json_t *s;
  out[0] = '\0';
  json_array_foreach(json_object_get(o, "stacks"), i, s) {
    len += (size_t)snprintf(out + len, cap - len, "%s%s:%lld", i ? "," : "",
                            json_string_value(json_array_get(json_object_get(s, "frames"), 0)),
                            (long long)json_integer_value(json_object_get(s, "samples")));
    CHECK(len < cap);
  }
  json_decref(o);
}

static void check_top(const collector_t *c, const char *query, const char *want) {
  char got[512];
  top_text(c, query, got, sizeof got);
  CHECKF(strcmp(got, want) == 0, "top-stacks?%s: %s, want %s", query, got, want);
}

static void check_text(const collector_t *c, const char *path, long want_status, const char *want) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  long status = get_key(c, GOOD_KEY, path, r);
  CHECKF(status == want_status && (!want || body_is(r, want)), "%s -> %ld %.400s", path, status,
         r->body);
  free(r);
}

/* The tags of the one event of query, as "key=value,...". */
static void check_event_tags(const collector_t *c, const char *query, const char *want) {
  char path[256], got[256] = "";
  snprintf(path, sizeof path, "/api/v1/events?%s", query);
  json_t *o = get_ok(c, path);
  json_t *events = json_object_get(o, "events");
  CHECKF(json_array_size(events) == 1, "%s: %zu events", path, json_array_size(events));
  json_t *tags = json_object_get(json_array_get(events, 0), "tags"), *t;
  CHECKF(json_is_array(tags), "%s: no tags array", path);
  size_t i, len = 0;
  json_array_foreach(tags, i, t) {
    CHECK(json_object_size(t) == 2);
    len += (size_t)snprintf(got + len, sizeof got - len, "%s%s=%s", i ? "," : "",
                            json_string_value(json_object_get(t, "key")),
                            json_string_value(json_object_get(t, "value")));
  }
  CHECKF(strcmp(got, want) == 0, "%s: tags %s, want %s", path, got, want);
  json_decref(o);
}

/* export/pprof?kind=cpu&<query>: total samples, a function in it and one
   not (NULL: none). */
static void check_pprof(const collector_t *c, const char *query, int64_t samples, const char *has,
                        const char *lacks) {
  char path[256];
  snprintf(path, sizeof path, "/api/v1/export/pprof?kind=cpu&%s", query);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(get_key(c, GOOD_KEY, path, r), 200);
  CHECK(r->body_len == r->total_len);
  pprof_profile_t *p = pprof_decode_checked(r->body, r->body_len);
  CHECKF(pprof_value_total(p, 0) == samples, "%s: %lld samples", path,
         (long long)pprof_value_total(p, 0));
  CHECKF(!has || pprof_has_function(p, has), "%s: no %s", path, has);
  CHECKF(!pprof_has_function(p, lacks), "%s: has %s", path, lacks);
  perftools__profiles__profile__free_unpacked(p, NULL);
  free(r);
}

static void case_tag_filters(void) {
  collector_t c;
  collector_start(&c, NULL);
  send_all(&c);
  CHECK_EQ_INT(events_of(&c, "limit=100"), 5);
  CHECK_EQ_INT(events_of(&c, "tag=team:pay"), 3);
  CHECK_EQ_INT(events_of(&c, "tag=team:pay&kind=cpu"), 2);
  CHECK_EQ_INT(events_of(&c, "tag=team:pay&tag=region:eu"), 2);
  CHECK_EQ_INT(events_of(&c, "tag=region:eu&tag=team:pay&tag=team:pay"), 2);
  CHECK_EQ_INT(events_of(&c, "tag=team:search&app=shop"), 0);
  CHECK_EQ_INT(events_of(&c, "tag=team:"), 0); /* an empty value is a value */
  CHECK_EQ_INT(events_of(&c, "host=h1"), 3);
  check_event_tags(&c, "tag=team:pay&tag=region:us", "region=us,team=pay");
  check_event_tags(&c, "tag=team:search", "team=search");
  check_event_tags(&c, "host=h3", "");

  check_top(&c, "kind=cpu", "search_fn:5,pay_us_fn:4,pay_eu_fn:3");
  check_top(&c, "kind=cpu&tag=team:pay", "pay_us_fn:4,pay_eu_fn:3");
  check_top(&c, "kind=cpu&tag=team:pay&tag=region:eu", "pay_eu_fn:3");
  check_top(&c, "kind=hang", "pay_hang_fn:6,untagged_fn:2");
  check_top(&c, "kind=hang&tag=team:pay", "pay_hang_fn:6");
  check_top(&c, "kind=hang&tag=team:search", "");

  check_text(&c, "/api/v1/export/folded?kind=cpu&tag=team:pay", 200,
             "pay_eu_fn_root;pay_eu_fn 3\npay_us_fn_root;pay_us_fn 4\n");
  check_text(&c, "/api/v1/export/folded?kind=cpu&tag=region:us&tag=team:pay", 200,
             "pay_us_fn_root;pay_us_fn 4\n");
  check_text(&c, "/api/v1/export/folded?kind=cpu&tag=region:asia", 200, "");
  json_t *flame = get_ok(&c, "/api/v1/flame?kind=cpu&tag=team:pay");
  CHECK_EQ_INT(json_integer_value(json_object_get(flame, "samples")), 7);
  json_decref(flame);
  flame = get_ok(&c, "/api/v1/flame?kind=cpu&tag=team:search");
  CHECK_EQ_INT(json_integer_value(json_object_get(flame, "samples")), 5);
  json_decref(flame);
  check_pprof(&c, "tag=team:pay", 7, "pay_eu_fn", "search_fn");
  check_pprof(&c, "tag=team:pay&tag=region:us", 4, "pay_us_fn", "pay_eu_fn");
  check_pprof(&c, "tag=team:nobody", 0, NULL, "pay_eu_fn");
  collector_stop_healthy(&c);
}

/* ---- bad parameters ---------------------------------------------------------- */

static void case_bad_parameters(void) {
  collector_t c;
  collector_start(&c, NULL);
  static const char *const routes[] = {
      "/api/v1/top-stacks?kind=hang&",   "/api/v1/events?",
      "/api/v1/export/folded?kind=cpu&", "/api/v1/flame?kind=cpu&",
      "/api/v1/export/pprof?kind=cpu&",  "/api/v1/drops?",
  };
  static const struct {
    const char *query, *error;
  } bad[] = {
      {"tag=team", "{\"error\":\"parameter tag: must be key:value\"}"},
      {"tag=team:pay&tag=nocolon", "{\"error\":\"parameter tag: must be key:value\"}"},
      {"tag=:pay", "{\"error\":\"parameter tag: the key before the colon is empty\"}"},
      {"tag=a:1&tag=b:2&tag=c:3&tag=d:4&tag=e:5",
       "{\"error\":\"parameter tag: at most 4 tags at once\"}"},
  };
  for (size_t i = 0; i < ARRAY_LEN(routes); i++)
    for (size_t k = 0; k < ARRAY_LEN(bad); k++) {
      char path[256];
      snprintf(path, sizeof path, "%s%s", routes[i], bad[k].query);
      check_text(&c, path, 400, bad[k].error);
    }
  /* Four tags are fine; a value may hold colons (split at the first). */
  check_text(&c, "/api/v1/drops?tag=a:1&tag=b:2&tag=c:3&tag=url:http://x", 200, NULL);
  check_text(&c, "/api/v1/drops?kind=cpu", 400,
             "{\"error\":\"parameter kind: not a filter of drops\"}");
  check_text(&c, "/api/v1/drops?group=abc", 400,
             "{\"error\":\"parameter group: not a filter of drops\"}");
  check_text(&c, "/api/v1/drops?to=abc", 400,
             "{\"error\":\"parameter to: must be unix milliseconds, 0..9223372036854\"}");
  /* A batch of 17 tags (the SDK sends at most 16): refused whole,
  nothing stored; 16 are stored. */
  spec_t many = BATCHES[A];
  static char keys[PERF_MAX_TAGS + 1][8];
  for (size_t i = 0; i < ARRAY_LEN(many.tags); i++) {
    snprintf(keys[i], sizeof keys[i], "k%zu", i);
    many.tags[i][0] = keys[i], many.tags[i][1] = "v";
  }
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(send_spec(&c, &many, 9, r), 400);
  CHECKF(body_is(r, "resource has 17 tags (at most 16)"), "%s", r->body);
  check_drops(&c, "", (const long long[6]){0, 0, 0, 0, 0, 0});
  many.tags[PERF_MAX_TAGS][0] = NULL;
  CHECK_EQ_INT(send_spec(&c, &many, 10, r), 200);
  free(r);
  check_drops(&c, "tag=k15:v&tag=k0:v", (const long long[6]){5, 0, 0, 1, 0, 1});
  check_drops(&c, "tag=k16:v", (const long long[6]){0, 0, 0, 0, 0, 0});
  collector_stop_healthy(&c);
}

/* ---- retention and an old database ---------------------------------------- */

/* The same database again (collector_start makes a new one), with extra
   flags (NULL-ended, at most 4). */
static void restart(collector_t *c, const char *const *extra) {
  collector_restart(c, extra);
}

/* Batch C received in 1970: the retention job deletes it with its tag
   and its drops; A's stay. */
static void case_retention(void) {
  collector_t c;
  collector_start(&c, NULL);
  send_ok(&c, A, "stored");
  send_ok(&c, C, "stored");
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batch_tags"), 3);
  db_exec(c.db, "UPDATE batches SET received_ns = 1 WHERE app = 'other'");
  restart(&c, (const char *[]){"--retention-days", "1", "--retention-interval", "1", NULL});
  double end = now_s() + 30;
  while (db_count(c.db, "SELECT count(*) FROM batches") != 1 && now_s() < end)
    usleep(50000);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 1);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batch_tags"), 2);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batch_tags WHERE key = 'team'"
                              " AND value = 'search'"),
               0);
  check_drops(&c, "", (const long long[6]){5, 0, 0, 1, 0, 1});
  check_drops(&c, "tag=team:search", (const long long[6]){0, 0, 0, 0, 0, 0});
  collector_stop_healthy(&c);
}

/* A database of the schema before drops and tags: the collector adds the
   columns (0 for the batches it had) and the table, and takes new ones. */
static void case_old_db(void) {
  collector_t c;
  collector_start(&c, NULL);
  collector_stop_healthy(&c);
  db_exec(c.db, "DROP TABLE batch_tags; DROP TABLE batches;"
                "CREATE TABLE batches(id BLOB PRIMARY KEY, received_ns INTEGER NOT NULL,"
                " app TEXT, version TEXT, environment TEXT, host TEXT, pid INTEGER);"
                "INSERT INTO batches VALUES(x'00', strftime('%s', 'now') * 1000000000, 'shop',"
                " '0.9', 'prod', 'h1', 1);"
                "INSERT INTO events(batch_id, kind, start_ns, duration_ns, tid, cpu_percent)"
                " VALUES(x'00', 'manual', 1700000000000000000, 1000, 1, -1);");
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM pragma_table_info('batches')"), 7);
  restart(&c, NULL);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM pragma_table_info('batches')"), 12);
  check_drops(&c, "", (const long long[6]){0, 0, 0, 0, 0, 1});
  check_event_tags(&c, "kind=", "");
  send_ok(&c, A, "stored");
  send_ok(&c, C, "stored");
  check_drops(&c, "", (const long long[6]){5, 0, 4, 3, 9, 3});
  check_drops(&c, "app=shop", (const long long[6]){5, 0, 0, 1, 0, 2});
  check_drops(&c, "tag=team:pay", (const long long[6]){5, 0, 0, 1, 0, 1});
  CHECK_EQ_INT(events_of(&c, "tag=region:eu"), 1);
  CHECK_EQ_INT(events_of(&c, "limit=10"), 3);
  collector_stop_healthy(&c);
  /* Opened once more: nothing added twice, nothing lost. */
  restart(&c, NULL);
  check_drops(&c, "", (const long long[6]){5, 0, 4, 3, 9, 3});
  collector_stop_healthy(&c);
}

/* Keys holding a colon (a batch from a client other than this SDK, which
   refuses them at init): matched by escaping the colon in the filter's
   key (%5C is the backslash), told apart from a key without one whose
   value holds colons; two backslashes are one; a lone backslash is
   itself. */
static void case_colon_keys(void) {
  static const spec_t SPECS[] = {
      {"kube",
       "1",
       "prod",
       "k1",
       {{"k8s:ns", "prod:eu"}},
       true,
       {1, 0, 0, 0, 0},
       false,
       "ns_fn",
       3},
      {"kube",
       "1",
       "prod",
       "k2",
       {{"k8s", "ns:prod:eu"}},
       true,
       {2, 0, 0, 0, 0},
       false,
       "k8s_fn",
       4},
      {"kube", "1", "prod", "k3", {{"a\\b", "x"}}, true, {4, 0, 0, 0, 0}, false, "slash_fn", 5},
  };
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  for (size_t i = 0; i < ARRAY_LEN(SPECS); i++)
    CHECK_EQ_INT(send_spec(&c, &SPECS[i], 900 + (unsigned)i, r), 200);
  free(r);
  check_event_tags(&c, "tag=k8s%5C:ns:prod:eu", "k8s:ns=prod:eu");
  check_event_tags(&c, "tag=k8s:ns:prod:eu", "k8s=ns:prod:eu");
  check_event_tags(&c, "tag=a%5C%5Cb:x", "a\\b=x");
  check_event_tags(&c, "tag=a%5Cb:x", "a\\b=x");
  CHECK_EQ_INT(events_of(&c, "tag=k8s%5C:ns:prod"), 0);
  check_top(&c, "kind=cpu&tag=k8s%5C:ns:prod:eu", "ns_fn:3");
  check_top(&c, "kind=cpu&tag=k8s:ns:prod:eu", "k8s_fn:4");
  check_text(&c, "/api/v1/export/folded?kind=cpu&tag=k8s%5C:ns:prod:eu", 200,
             "ns_fn_root;ns_fn 3\n");
  check_drops(&c, "tag=k8s%5C:ns:prod:eu", (const long long[6]){1, 0, 0, 0, 0, 1});
  check_drops(&c, "tag=a%5C%5Cb:x&tag=k8s%5C:ns:prod:eu", (const long long[6]){0});
  check_bad_parameter(&c, "/api/v1/events", "tag=k8s%5C:ns", "tag");
  char query[400] = "tag=";
  for (int i = 0; i < 300; i++)
    strcat(query, "a");
  strcat(query, "%5C:b:c");
  check_bad_parameter(&c, "/api/v1/events", query, "tag");
  collector_stop_healthy(&c);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE(drops),     TEST_CASE(tag_filters), TEST_CASE(bad_parameters),
      TEST_CASE(retention), TEST_CASE(old_db),      TEST_CASE(colon_keys),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
