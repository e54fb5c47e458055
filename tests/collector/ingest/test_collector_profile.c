/*
 * test_collector_profile.c - the always-on CPU profile (EVENT_KIND_PROFILE)
 * in the real perf-collector, from hand-made batches (batch_post.c): three
 * windows of app "prof", two of version 1.0 (a minute apart) and one of
 * 2.0, whose stack counts (per stack, thread and state) carry their CPU
 * time in weight_micros.
 *  - stored: every read with kind=profile gives the exact CPU time and
 *    samples of the counts: top-stacks, the flame graph (its root the sum
 *    of every weight_micros), the folded export, per version and per time
 *    range, the same from the rollups and from the raw rows (a host
 *    filter); the states; one window's detail;
 *  - diff: the flame diff of the two versions and of the two minutes,
 *    each node's figures, shares and delta;
 *  - pprof: the export of version 1.0's two minutes: its sample values,
 *    types, and `go tool pprof -top`;
 *  - not_slow: a profile creates no hang or CPU group, raises no hang
 *    rate, is left out of the events list unless asked for by its kind,
 *    and counts in timeseries only under its kind;
 *  - rebuilt: a window deleted by retention: its bucket's rollups made
 *    again from the raw rows keep the other windows' CPU time, as groups
 *    of kind profile only;
 *  - replayed: a window's batch sent again is stored once;
 *  - bad: a profile with a per-sample array, a count's state out of
 *    range, a weight over the bound: 400 naming the field, nothing stored;
 *    weight_micros and state on a CPU event's counts are not read.
 */
#include <jansson.h>
#include <math.h>
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
#include "pprof_check.h"
#include "tempdir.h"
#include "test_util.h"

/* The first window starts on a 10-minute bucket; each lasts a minute. */
#define T0_MS 1700000400000LL
#define MINUTE_MS 60000LL

enum {
  RUNNING = PERF__V1__SAMPLE_STATE__SAMPLE_STATE_RUNNING,
  LOCK = PERF__V1__SAMPLE_STATE__SAMPLE_STATE_LOCK
};

/* A stack count of a window: stack (1 parse, 2 render, 3 lock_wait, each
   called by prof_main), thread, samples, CPU microseconds, state. */
typedef profile_count_t count_t;

/* Version 1.0's first minute: parse on thread 10 running and on a lock,
   render on threads 10 and 11, lock_wait on 11. */
static const count_t V1_A[] = {{1, 10, 30, 300000, RUNNING},
                               {2, 10, 10, 100000, RUNNING},
                               {2, 11, 5, 50000, RUNNING},
                               {3, 11, 4, 4000, LOCK},
                               {1, 10, 2, 2000, LOCK}};
/* Its second minute. */
static const count_t V1_B[] = {{1, 10, 20, 200000, RUNNING}};
/* Version 2.0's second minute (another process). */
static const count_t V2[] = {{2, 20, 40, 400000, RUNNING}, {1, 20, 10, 100000, RUNNING}};

/* A batch of one profile window of app "prof" (host "h1", environment
   unset), its counts, started at start_ms and lasting a minute; edit
   (NULL: none) changes the event before it is sent. The status, the
   answer in *r. */
static long send_window(const collector_t *c, const char *version, int64_t start_ms,
                        const count_t *counts, size_t n, void (*edit)(Perf__V1__Event *),
                        unsigned seed, reply_t *r) {
  static const char *const LEAVES[] = {"parse", "render", "lock_wait"};
  profile_window_t w = {"prof",
                        version,
                        "h1",
                        "prof_main",
                        LEAVES,
                        ARRAY_LEN(LEAVES),
                        start_ms * 1000000,
                        MINUTE_MS * 1000000,
                        counts,
                        n};
  return batch_post_profile(c, &w, edit, seed, r);
}

/* The three windows, each answered 200. */
static void send_all(const collector_t *c, reply_t *r) {
  CHECK_EQ_INT(send_window(c, "1.0", T0_MS, V1_A, ARRAY_LEN(V1_A), NULL, 1, r), 200);
  CHECK_EQ_INT(send_window(c, "1.0", T0_MS + MINUTE_MS, V1_B, ARRAY_LEN(V1_B), NULL, 2, r), 200);
  CHECK_EQ_INT(send_window(c, "2.0", T0_MS + MINUTE_MS, V2, ARRAY_LEN(V2), NULL, 3, r), 200);
}

static long long int_of(const json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  CHECKF(json_is_integer(v), "%s is not an integer", key);
  return (long long)json_integer_value(v);
}

/* GET path?query as text, exactly want. */
static void check_text(const collector_t *c, const char *path, const char *query,
                       const char *want) {
  char url[512];
  snprintf(url, sizeof url, "%s?%s", path, query);
  char *got = get_text(c, url);
  CHECKF(strcmp(got, want) == 0, "%s:\n%.1500s\nwant:\n%s", url, got, want);
  free(got);
}

/* top-stacks?kind=profile&query as "leaf:events:samples:cpu_us,...". */
static void check_top(const collector_t *c, const char *query, const char *want) {
  char path[256], got[512] = "";
  snprintf(path, sizeof path, "/api/v1/top-stacks?kind=profile&%s", query);
  json_t *o = get_ok(c, path);
  size_t i, len = 0;
  json_t *s;
  json_array_foreach(json_object_get(o, "stacks"), i, s) {
    CHECK(json_object_get(s, "hang_ms") == NULL);
    len += (size_t)snprintf(got + len, sizeof got - len, "%s%s:%lld:%lld:%lld", i ? "," : "",
                            json_string_value(json_array_get(json_object_get(s, "frames"), 0)),
                            int_of(s, "events"), int_of(s, "samples"), int_of(s, "cpu_us"));
    CHECK(len < sizeof got);
  }
  json_decref(o);
  CHECKF(strcmp(got, want) == 0, "%s: %s, want %s", path, got, want);
}

/* The flame graph of prof_main's three leaves (each "samples:cpu_us",
   NULL: not there) and its root's totals, exactly. */
static void check_flame(const collector_t *c, const char *query, long long samples,
                        long long cpu_us, const char *leaves) {
  char want[1024], kids[768] = "";
  size_t len = 0;
  /* leaves: "name:samples:cpu_us,..." in the flame's order (CPU time first) */
  char *copy = strdup(leaves);
  for (char *l = strtok(copy, ","); l; l = strtok(NULL, ",")) {
    char name[32];
    long long n, us;
    CHECK(sscanf(l, "%31[^:]:%lld:%lld", name, &n, &us) == 3);
    len += (size_t)snprintf(kids + len, sizeof kids - len,
                            "%s{\"name\":\"%s\",\"in_app\":false,\"samples\":%lld,\"cpu_us\":%lld,"
                            "\"children\":[]}",
                            len ? "," : "", name, n, us);
  }
  free(copy);
  snprintf(want, sizeof want,
           "{\"name\":\"all\",\"samples\":%lld,\"cpu_us\":%lld,\"truncated\":false,"
           "\"stacks_omitted\":0,\"children\":[{\"name\":\"prof_main\",\"in_app\":false,"
           "\"samples\":%lld,\"cpu_us\":%lld,\"children\":[%s]}]}",
           samples, cpu_us, samples, cpu_us, kids);
  char q[256];
  snprintf(q, sizeof q, "kind=profile&%s", query);
  check_text(c, "/api/v1/flame", q, want);
}

/* states?query: its samples, and each state's "state:samples" in order,
   its share samples / total. */
static void check_states(const collector_t *c, const char *query, long long total,
                         const char *want) {
  char path[256], got[256] = "";
  snprintf(path, sizeof path, "/api/v1/states?%s", query);
  json_t *o = get_ok(c, path);
  CHECK_EQ_INT(int_of(o, "samples"), total);
  size_t i, len = 0;
  json_t *s;
  json_array_foreach(json_object_get(o, "states"), i, s) {
    len += (size_t)snprintf(got + len, sizeof got - len, "%s%s:%lld", i ? "," : "",
                            json_string_value(json_object_get(s, "state")), int_of(s, "samples"));
    double share = json_real_value(json_object_get(s, "share"));
    CHECKF(fabs(share - (double)int_of(s, "samples") / (double)total) < 1e-6, "share %f", share);
  }
  json_decref(o);
  CHECKF(strcmp(got, want) == 0, "%s: %s, want %s", path, got, want);
}

static void case_stored(void) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  send_all(&c, r);
  /* parse: 30 + 2 + 20 + 10 samples, render: 10 + 5 + 40, lock_wait: 4;
     every weight_micros summed: 1156000 us. */
  const char *all = "parse:62:602000,render:55:550000,lock_wait:4:4000";
  check_flame(&c, "app=prof", 121, 1156000, all);
  /* From the raw rows (the rollups keep no host): the same answer. */
  check_flame(&c, "app=prof&host=h1", 121, 1156000, all);
  check_top(&c, "app=prof", "parse:3:62:602000,render:2:55:550000,lock_wait:1:4:4000");
  check_top(&c, "app=prof&host=h1", "parse:3:62:602000,render:2:55:550000,lock_wait:1:4:4000");
  /* Per version. */
  check_flame(&c, "version=1.0", 71, 656000, "parse:52:502000,render:15:150000,lock_wait:4:4000");
  check_flame(&c, "version=2.0", 50, 500000, "render:40:400000,parse:10:100000");
  check_top(&c, "version=2.0", "render:1:40:400000,parse:1:10:100000");
  /* Per time range: the first minute, then the second (both versions). */
  char q[160];
  snprintf(q, sizeof q, "app=prof&from=%lld&to=%lld", T0_MS, T0_MS + MINUTE_MS - 1);
  check_flame(&c, q, 51, 456000, "parse:32:302000,render:15:150000,lock_wait:4:4000");
  snprintf(q, sizeof q, "app=prof&from=%lld&to=%lld", T0_MS + MINUTE_MS, T0_MS + 2 * MINUTE_MS);
  check_flame(&c, q, 70, 700000, "render:40:400000,parse:30:300000");
  check_text(&c, "/api/v1/export/folded", "kind=profile&app=prof&value=cpu_us",
             "prof_main;lock_wait 4000\nprof_main;parse 602000\nprof_main;render 550000\n");
  check_text(&c, "/api/v1/export/folded", "kind=profile&app=prof",
             "prof_main;lock_wait 4\nprof_main;parse 62\nprof_main;render 55\n");
  /* The states: running 30 + 10 + 5 + 20 + 40 + 10, on a lock 4 + 2. */
  check_states(&c, "kind=profile&app=prof", 121, "running:115,lock:6");
  /* The first window's detail: one stack per signature and thread (parse
     on thread 10 running and on a lock is one), its states per thread. */
  snprintf(q, sizeof q, "/api/v1/events?kind=profile&app=prof&to=%lld", T0_MS + MINUTE_MS - 1);
  json_t *list = get_ok(&c, q);
  CHECK_EQ_INT(json_array_size(json_object_get(list, "events")), 1);
  json_t *ev = json_array_get(json_object_get(list, "events"), 0);
  CHECK(!strcmp(json_string_value(json_object_get(ev, "kind")), "profile"));
  CHECK(json_real_value(json_object_get(ev, "duration_ms")) == 60000.0);
  snprintf(q, sizeof q, "/api/v1/events/%lld", int_of(ev, "id"));
  json_decref(list);
  json_t *d = get_ok(&c, q);
  char got[512] = "";
  size_t i, len = 0;
  json_t *s;
  json_array_foreach(json_object_get(d, "stacks"), i, s) {
    len += (size_t)snprintf(got + len, sizeof got - len, "%s%s@%lld:%lld:%lld", i ? "," : "",
                            json_string_value(json_array_get(json_object_get(s, "names"), 0)),
                            int_of(s, "tid"), int_of(s, "samples"), int_of(s, "cpu_us"));
    CHECK(json_object_get(s, "hang_ms") == NULL);
  }
  CHECKF(!strcmp(got, "parse@10:32:302000,render@10:10:100000,render@11:5:50000,"
                      "lock_wait@11:4:4000"),
         "detail stacks %s", got);
  len = 0;
  got[0] = '\0';
  json_array_foreach(json_object_get(d, "states"), i, s) {
    len += (size_t)snprintf(got + len, sizeof got - len, "%s%lld:%s:%lld", i ? "," : "",
                            int_of(s, "tid"), json_string_value(json_object_get(s, "state")),
                            int_of(s, "samples"));
  }
  CHECKF(!strcmp(got, "10:running:40,11:running:5,11:lock:4,10:lock:2"), "detail states %s", got);
  json_decref(d);
  free(r);
  collector_stop_healthy(&c);
}

/* The node of a flame tree named name among node's children. */
static json_t *child(json_t *node, const char *name) {
  size_t i;
  json_t *k;
  json_array_foreach(json_object_get(node, "children"), i, k) {
    if (!strcmp(json_string_value(json_object_get(k, "name")), name)) return k;
  }
  CHECKF(false, "no node %s", name);
  return NULL;
}

/* A diff node's CPU times and its shares of each side's total. */
static void check_diff_node(json_t *n, long long cpu, long long base_cpu, double total,
                            double base_total) {
  const char *name = json_string_value(json_object_get(n, "name"));
  CHECKF(int_of(n, "cpu_us") == cpu && int_of(n, "base_cpu_us") == base_cpu,
         "%s: cpu_us %lld base_cpu_us %lld, want %lld %lld", name, int_of(n, "cpu_us"),
         int_of(n, "base_cpu_us"), cpu, base_cpu);
  double share = cpu / total, base_share = base_cpu / base_total;
  double got_share = json_real_value(json_object_get(n, "share"));
  double got_base = json_real_value(json_object_get(n, "base_share"));
  double got_delta = json_real_value(json_object_get(n, "delta"));
  /* the API writes six decimals */
  CHECKF(fabs(got_share - share) < 1e-6 && fabs(got_base - base_share) < 1e-6 &&
             fabs(got_delta - (share - base_share)) < 2e-6,
         "%s: share %f base %f delta %f, want %f %f %f", name, got_share, got_base, got_delta,
         share, base_share, share - base_share);
}

static void case_diff(void) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  send_all(&c, r);
  /* 2.0 against 1.0: render grew from 150000 of 656000 us to 400000 of 500000. */
  json_t *o = get_ok(&c, "/api/v1/flame/diff?kind=profile&app=prof&version=2.0&base_version=1.0");
  check_diff_node(o, 500000, 656000, 500000, 656000);
  CHECK_EQ_INT(int_of(o, "samples"), 50);
  CHECK_EQ_INT(int_of(o, "base_samples"), 71);
  json_t *main_node = child(o, "prof_main");
  check_diff_node(main_node, 500000, 656000, 500000, 656000);
  check_diff_node(child(main_node, "render"), 400000, 150000, 500000, 656000);
  check_diff_node(child(main_node, "parse"), 100000, 502000, 500000, 656000);
  check_diff_node(child(main_node, "lock_wait"), 0, 4000, 500000, 656000);
  json_decref(o);
  /* The second minute against the first, both versions. */
  char path[256];
  snprintf(path, sizeof path,
           "/api/v1/flame/diff?kind=profile&app=prof&from=%lld&to=%lld&base_from=%lld&base_to=%lld",
           T0_MS + MINUTE_MS, T0_MS + 2 * MINUTE_MS - 1, T0_MS, T0_MS + MINUTE_MS - 1);
  o = get_ok(&c, path);
  check_diff_node(o, 700000, 456000, 700000, 456000);
  main_node = child(o, "prof_main");
  check_diff_node(child(main_node, "render"), 400000, 150000, 700000, 456000);
  check_diff_node(child(main_node, "parse"), 300000, 302000, 700000, 456000);
  check_diff_node(child(main_node, "lock_wait"), 0, 4000, 700000, 456000);
  json_decref(o);
  free(r);
  collector_stop_healthy(&c);
}

/* The name of the innermost function of sample s. */
static const char *leaf_of(const pprof_profile_t *p, const Perftools__Profiles__Sample *s) {
  for (size_t k = 0; k < p->n_location; k++)
    if (p->location[k]->id == s->location_id[0])
      for (size_t f = 0; f < p->n_function; f++)
        if (p->function[f]->id == p->location[k]->line[0]->function_id)
          return pprof_string(p, p->function[f]->name);
  return "?";
}

static void case_pprof(void) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  send_all(&c, r);
  char path[256];
  snprintf(path, sizeof path,
           "/api/v1/export/pprof?kind=profile&app=prof&version=1.0&from=%lld&to=%lld", T0_MS,
           T0_MS + 2 * MINUTE_MS - 1);
  CHECK_EQ_INT(get_key(&c, GOOD_KEY, path, r), 200);
  pprof_profile_t *p = pprof_decode_checked(r->body, r->body_len);
  CHECK_EQ_INT(p->n_sample_type, 2);
  CHECK(!strcmp(pprof_string(p, p->sample_type[0]->type), "samples") &&
        !strcmp(pprof_string(p, p->sample_type[0]->unit), "count"));
  CHECK(!strcmp(pprof_string(p, p->sample_type[1]->type), "cpu") &&
        !strcmp(pprof_string(p, p->sample_type[1]->unit), "microseconds"));
  CHECK(!strcmp(pprof_string(p, p->default_sample_type), "cpu"));
  char got[256] = "";
  size_t len = 0;
  for (size_t i = 0; i < p->n_sample; i++)
    len += (size_t)snprintf(got + len, sizeof got - len, "%s%s:%lld:%lld", i ? "," : "",
                            leaf_of(p, p->sample[i]), (long long)p->sample[i]->value[0],
                            (long long)p->sample[i]->value[1]);
  CHECKF(!strcmp(got, "parse:52:502000,render:15:150000,lock_wait:4:4000"), "pprof %s", got);
  CHECK_EQ_INT(pprof_value_total(p, 1), 656000);
  CHECK_EQ_INT(p->time_nanos, T0_MS * 1000000);
  CHECK_EQ_INT(p->duration_nanos, 2 * MINUTE_MS * 1000000);
  perftools__profiles__profile__free_unpacked(p, NULL);
  /* An independent reader: go tool pprof's CPU view. */
  const char *dir = tempdir_make("perf-prof");
  char file[300];
  snprintf(file, sizeof file, "%s/profile.pb.gz", dir);
  FILE *f = fopen(file, "wb");
  CHECK(f != NULL && fwrite(r->body, 1, r->body_len, f) == r->body_len && fclose(f) == 0);
  static const char *const top[] = {"-top", "-nodecount=1000", NULL};
  char *out = pprof_tool(dir, top, file);
  CHECKF(strstr(out, "Type: cpu") && strstr(out, "656ms total") && pprof_top_lists(out, "parse") &&
             pprof_top_lists(out, "render") && pprof_top_lists(out, "lock_wait"),
         "go tool pprof -top:\n%s", out);
  free(out);
  free(r);
  collector_stop_healthy(&c);
}

/* The number of events of query's list. */
static size_t listed(const collector_t *c, const char *query) {
  char path[256];
  snprintf(path, sizeof path, "/api/v1/events?%s", query);
  json_t *o = get_ok(c, path);
  size_t n = json_array_size(json_object_get(o, "events"));
  json_decref(o);
  return n;
}

/* top-stacks?query lists no group and counts none. */
static void check_top_empty(const collector_t *c, const char *query) {
  char path[256];
  snprintf(path, sizeof path, "/api/v1/top-stacks?%s", query);
  json_t *o = get_ok(c, path);
  CHECK_EQ_INT(json_array_size(json_object_get(o, "stacks")), 0);
  CHECK_EQ_INT(int_of(o, "groups_total"), 0);
  json_decref(o);
}

static void case_not_slow(void) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  send_all(&c, r);
  /* No hang or CPU group, in top-stacks or in the database. */
  check_top_empty(&c, "kind=hang");
  check_top_empty(&c, "kind=cpu");
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM hang_groups"), 0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM events WHERE group_sig IS NOT NULL"), 0);
  CHECK_EQ_INT(rolled_sum(c.db, "rollup_groups", "events", "kind <> 'profile'"), 0);
  /* The events list: profiles only under their kind. */
  CHECK_EQ_INT(listed(&c, "app=prof"), 0);
  CHECK_EQ_INT(listed(&c, "kind=profile&app=prof"), 3);
  CHECK_EQ_INT(listed(&c, "kind=cpu"), 0);
  /* The time series: the windows under their kind only. */
  char path[256];
  snprintf(path, sizeof path, "/api/v1/timeseries?kind=profile&bucket=minute&from=%lld&to=%lld",
           T0_MS, T0_MS + 2 * MINUTE_MS);
  json_t *o = get_ok(&c, path);
  json_t *points = json_object_get(o, "points");
  CHECK_EQ_INT(json_array_size(points), 2);
  CHECK_EQ_INT(int_of(json_array_get(points, 0), "events"), 1);
  CHECK_EQ_INT(int_of(json_array_get(points, 1), "events"), 2);
  json_decref(o);
  o = get_ok(&c, "/api/v1/timeseries?kind=hang&bucket=minute");
  CHECK_EQ_INT(json_array_size(json_object_get(o, "points")), 0);
  json_decref(o);
  /* No hang rate: the versions compared have no hangs. */
  o = get_ok(&c, "/api/v1/versions/compare?app=prof&a=1.0&b=2.0");
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(o, "versions"), i, v) CHECK_EQ_INT(int_of(v, "hangs"), 0);
  CHECK_EQ_INT(json_array_size(json_object_get(json_object_get(o, "stacks"), "grew")), 0);
  json_decref(o);
  free(r);
  collector_stop_healthy(&c);
}

static void case_rebuilt(void) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  send_all(&c, r);
  /* A fourth window in the same 10-minute bucket, its batch the newest. */
  CHECK_EQ_INT(send_window(&c, "1.0", T0_MS + 2 * MINUTE_MS, V1_B, ARRAY_LEN(V1_B), NULL, 4, r),
               200);
  CHECK_EQ_INT(rolled_sum(c.db, "rollup_groups", "cpu_us", "kind = 'profile'"), 1356000);
  collector_stop_healthy(&c);
  /* Received in 1970: retention deletes it and rebuilds its bucket's
     rollups from the raw rows left (rollup_sql.h). */
  db_exec(c.db, "UPDATE batches SET received_ns = 1 WHERE received_ns = (SELECT"
                " max(received_ns) FROM batches)");
  collector_restart(&c,
                    (const char *[]){"--retention-days", "1", "--retention-interval", "1", NULL});
  double end = now_s() + 30;
  while (db_count(c.db, "SELECT count(*) FROM batches") != 3 && now_s() < end)
    usleep(100000);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 3);
  CHECK_EQ_INT(rolled_sum(c.db, "rollup_groups", "cpu_us", "kind = 'profile'"), 1156000);
  CHECK_EQ_INT(rolled_sum(c.db, "rollup_stacks", "cpu_us", "kind = 'profile'"), 1156000);
  CHECK_EQ_INT(rolled_sum(c.db, "rollup_groups", "events", "kind <> 'profile'"), 0);
  check_top(&c, "app=prof", "parse:3:62:602000,render:2:55:550000,lock_wait:1:4:4000");
  check_flame(&c, "app=prof", 121, 1156000, "parse:62:602000,render:55:550000,lock_wait:4:4000");
  free(r);
  collector_stop_healthy(&c);
}

static void case_replayed(void) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  send_all(&c, r);
  CHECK_EQ_INT(send_window(&c, "1.0", T0_MS, V1_A, ARRAY_LEN(V1_A), NULL, 1, r), 200);
  CHECKF(strstr(r->body, "duplicate") != NULL, "replay: %s", r->body);
  CHECK_EQ_INT(listed(&c, "kind=profile&app=prof"), 3);
  /* One row per signature and thread: 4 + 1 + 2. */
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stack_counts"), 7);
  check_flame(&c, "app=prof", 121, 1156000, "parse:62:602000,render:55:550000,lock_wait:4:4000");
  free(r);
  collector_stop_healthy(&c);
}

/* One sample as the other kinds carry them (the decoder takes their
   arrays only whole: one entry per sample in each). */
static uint32_t g_stacks[] = {1};
static int64_t g_offsets[] = {0};
static uint64_t g_weights[] = {1000};
static Perf__V1__SampleState g_states[] = {PERF__V1__SAMPLE_STATE__SAMPLE_STATE_RUNNING};

static void add_samples(Perf__V1__Event *e) {
  e->n_sample_offsets_micros = 1, e->sample_offsets_micros = g_offsets;
  e->n_sample_stacks = 1, e->sample_stacks = g_stacks;
}

/* A CPU event's weights and states too. */
static void add_weighted_samples(Perf__V1__Event *e) {
  add_samples(e);
  e->n_sample_weights_micros = 1, e->sample_weights_micros = g_weights;
  e->n_sample_states = 1, e->sample_states = g_states;
}

static void bad_state(Perf__V1__Event *e) {
  e->stack_counts[1]->state = (Perf__V1__SampleState)7;
}

static void heavy_weight(Perf__V1__Event *e) {
  e->stack_counts[0]->weight_micros = (uint64_t)UINT32_MAX + 1;
}

/* A batch edited by edit: 400 whose error says want. */
static void check_refused(const collector_t *c, void (*edit)(Perf__V1__Event *), unsigned seed,
                          const char *want, reply_t *r) {
  CHECK_EQ_INT(send_window(c, "1.0", T0_MS, V1_A, ARRAY_LEN(V1_A), edit, seed, r), 400);
  CHECKF(strstr(r->body, want) != NULL, "answer %s, want %s", r->body, want);
}

/* A CPU event whose counts carry weight_micros and a state: neither is
   read (its CPU time is its samples' weights: none here). */
static long send_cpu_with_profile_fields(const collector_t *c, reply_t *r) {
  batch_one_event_t o;
  static const uint8_t id[16] = {0x70, 0x72, 0x6f, 0x66, 9};
  batch_one_event_init(&o, id, "cpuapp", "/opt/cpu", "spin");
  static uint32_t frame_ids[] = {1};
  Perf__V1__Frame fr = PERF__V1__FRAME__INIT, *frs[] = {&fr};
  fr.module = 1, fr.function = 1, fr.address = 0x1000;
  o.b.n_frames = 1, o.b.frames = frs;
  o.st.n_frames = 1, o.st.frames = frame_ids;
  o.sc.tid = 5, o.sc.samples = 3, o.sc.weight_micros = 777, o.sc.state = 9;
  o.ev.kind = PERF__V1__EVENT_KIND__EVENT_KIND_CPU;
  o.ev.start_unix_nanos = T0_MS * 1000000, o.ev.duration_nanos = 1000000000;
  o.ev.tid = 5;
  return batch_send(c, &o.b, id, r);
}

static void case_bad(void) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  check_refused(&c, add_samples, 11,
                "event 0 (profile): sample_stacks must be empty: a profile's samples are "
                "aggregated in stack_counts",
                r);
  check_refused(&c, add_weighted_samples, 12, "event 0 (profile): sample_stacks must be empty", r);
  check_refused(&c, bad_state, 13,
                "event 0 (profile): stack_counts[1].state 7 is not a SampleState (0..6)", r);
  check_refused(&c, heavy_weight, 14,
                "event 0 (profile): stack_counts[0].weight_micros 4294967296 is over 4294967295",
                r);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM events"), 0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 0);
  /* Bad parameters name what is wrong. */
  check_bad_parameter(&c, "/api/v1/flame", "kind=profiles", "kind");
  check_text(&c, "/api/v1/export/folded", "kind=profile&value=cpu_us", "");
  /* On another kind, a count's weight_micros and state are not read. */
  CHECK_EQ_INT(send_cpu_with_profile_fields(&c, r), 200);
  check_text(&c, "/api/v1/export/folded", "kind=cpu&app=cpuapp&value=cpu_us", "spin 0\n");
  check_states(&c, "kind=cpu&app=cpuapp", 0, "");
  free(r);
  collector_stop_healthy(&c);
}

static const test_case_t g_cases[] = {
    TEST_CASE(stored),  TEST_CASE(diff),     TEST_CASE(pprof), TEST_CASE(not_slow),
    TEST_CASE(rebuilt), TEST_CASE(replayed), TEST_CASE(bad),
};

int main(int argc, char **argv) {
  return collector_test_main(argc, argv, g_cases, ARRAY_LEN(g_cases));
}
