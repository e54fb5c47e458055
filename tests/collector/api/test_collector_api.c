/*
 * test_collector_api.c - the read-only API of perf-collector (the real
 * binary as a child process on 127.0.0.1, like test_collector.c), fed real
 * SDK batches (sink = http): two hangs stuck in the same function whose
 * samples land in different leaf calls group as one (exactly one group); CPU events group per
 * stack; filters; bad parameters get 400 JSON; the folded export, the flame
 * tree, the event list and an event's detail, the pprof export read back by
 * us and by `go tool pprof`. Each case runs in its own
 * process: `test_collector_api <case>`.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "http_server.h"
#include "perf_sdk.h"
#include "pprof_check.h"
#include "sdk_util.h"
#include "tempdir.h"
#include "test_util.h"

#define HANG_MS 400.0      /* each of the two hangs: busy this long in stuck_in_here */
#define FEED_DEADLINE_S 60 /* feed gives up waiting for the CPU monitor after this */
#define HANG_SAMPLES 20    /* ... and until the monitor has sampled it this often */
#define HANG_DEADLINE_S 30 /* a hang that cannot get its samples fails after this */

/* ---- the SDK's side ----------------------------------------------------- */

static volatile int g_cpu_stop;
static volatile uint64_t g_sink;

static CHAIN void *cpu_burner(void *arg) {
  (void)arg;
  uint64_t x = 1;
  while (!g_cpu_stop)
    for (int i = 0; i < 100000; i++)
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  g_sink = x;
  return NULL;
}

static void sdk_flush_and_stop(void);

/* Two leaf calls of the same cost, all in user space (a system call such
   as sched_yield would collect the samples: signals are delivered on the
   way back from the kernel). */
static volatile unsigned long g_leaf_sink;
static CHAIN void leaf_hash(void) {
  for (unsigned i = 0; i < 2000; i++)
    g_leaf_sink = g_leaf_sink * 31 + i;
}
static CHAIN void leaf_mix(void) {
  for (unsigned i = 0; i < 2000; i++)
    g_leaf_sink = (g_leaf_sink ^ i) * 17;
}

/* The hang: the loop is stuck here calling the two leaves in turn, so a
   hang's samples end in different leaf calls (P(all HANG_SAMPLES in one)
   ~ 2e-6) and only stuck_in_here and its callers are shared. It lasts ms,
   and on a loaded machine until the monitor has taken HANG_SAMPLES (the
   hang's are the only samples of this run of the SDK; feed). */
static CHAIN void stuck_in_here(double ms, const char *label) {
  /* Busy from inside too: on a loaded machine the thread can be preempted
     for longer than the threshold anywhere, and a sample taken in the
     caller would be shared by no other. */
  CHECK_EQ_INT(label ? perf_sdk_loop_busy_label(label) : perf_sdk_loop_busy(), PERF_OK);
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  const uint64_t samples0 = st.samples_taken;
  double start = (double)now_ns() / 1e6;
  for (unsigned i = 0;; i++) {
    if (i & 1)
      leaf_hash();
    else
      leaf_mix();
    double now = (double)now_ns() / 1e6;
    if (now < start + ms || i % 64 != 0) continue;
    CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
    if (st.samples_taken - samples0 >= HANG_SAMPLES) break;
    CHECKF(now < start + HANG_DEADLINE_S * 1000.0, "%llu samples of the hang in %d s",
           (unsigned long long)(st.samples_taken - samples0), HANG_DEADLINE_S);
  }
  /* Idle from inside, for the same reason on the way out. */
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
}

static CHAIN void handle_request(double ms, const char *label) {
  stuck_in_here(ms, label);
}

#define LABEL "GET /users"

/* Two hangs of HANG_MS (or more) in stuck_in_here (the first labelled
   LABEL), then a CPU burst of two
   busy threads, sent to c; hang_ms[i]: hang i's call of handle_request as
   timed here, which holds its busy period (loop_busy to loop_idle, the
   hang's duration). Two runs of the SDK: the monitors take turns at the
   sampler (one mutex), and a burst sampling at 200 Hz during a hang can
   leave the hang without a sample, so the hangs run with the CPU monitor
   out of the way and the burst in a run of its own. */
static void feed(const collector_t *c, double hang_ms[2]) {
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  char data_dir[128];
  snprintf(data_dir, sizeof data_dir, "%s/sdk", tempdir_make("perf-api"));
  sdk_config_upload(&cfg, "api-test", c->url, GOOD_KEY, data_dir);
  cfg.app_version = "2.0.1";
  cfg.environment = "ci";
  cfg.hang_threshold_ms = 100;
  cfg.hang_sample_interval_ms = 10;
  cfg.hang_max_samples = 100;
  cfg.cpu_threshold_percent = 25600; /* 256 cores: no burst in this run */
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  for (int i = 0; i < 2; i++) {
    double t0 = (double)now_ns() / 1e6;
    /* marks busy and idle inside stuck_in_here; the first unit labelled */
    handle_request(HANG_MS, i == 0 ? LABEL : NULL);
    hang_ms[i] = (double)now_ns() / 1e6 - t0;
    usleep(200000);
  }
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  CHECK_EQ_INT(st.hangs_detected, 2);
  sdk_flush_and_stop();

  /* The burst: a twentieth of a core on every 100 ms tick for 1 s, what
     two busy threads still get beside a whole test suite on 2 cores.
     They burn until it is recorded, however long the machine takes. */
  cfg.cpu_threshold_percent = 5;
  cfg.cpu_window_ms = 1000;
  cfg.cpu_sample_hz = 200;
  cfg.cpu_burst_ms = 300;
  cfg.cpu_cooldown_ms = 0;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  uint64_t recorded_before = st.events_recorded; /* the counters outlive a shutdown */
  pthread_t burners[2];
  for (int i = 0; i < 2; i++)
    CHECK(pthread_create(&burners[i], NULL, cpu_burner, NULL) == 0);
  double end = now_s() + FEED_DEADLINE_S;
  for (;;) {
    CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
    /* The CPU event recorded (cpu_bursts counts a burst as it starts, and
       a burst that caught no thread running records none). */
    if (st.events_recorded > recorded_before) break;
    CHECKF(now_s() < end, "no CPU burst recorded after %d s", FEED_DEADLINE_S);
    usleep(20000);
  }
  g_cpu_stop = 1;
  for (int i = 0; i < 2; i++)
    pthread_join(burners[i], NULL);
  sdk_flush_and_stop();
}

/* Everything sent and acknowledged, then shut down. */
static void sdk_flush_and_stop(void) {
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK);
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  CHECK(st.batches_written >= 1);
  CHECK_EQ_INT(st.batches_sent, st.batches_written);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
}

/* ---- the API ------------------------------------------------------------ */

/* Each query of bad on endpoint gets 400 with an error naming its param. */
typedef struct bad_param_s {
  const char *query, *param;
} bad_param_t;

static void check_bad_params(const collector_t *c, const char *endpoint, const bad_param_t *bad,
                             size_t n) {
  for (size_t i = 0; i < n; i++) {
    char path[128];
    snprintf(path, sizeof path, "%s?%s", endpoint, bad[i].query);
    long status;
    json_t *j = get_json(c, path, &status);
    CHECKF(status == 400, "%s -> %ld", path, status);
    const char *err = json_string_value(json_object_get(j, "error"));
    CHECKF(err && strstr(err, bad[i].param), "%s: error %s", path, err ? err : "(none)");
    json_decref(j);
  }
}

static json_t *stacks_of(json_t *j) {
  json_t *s = json_object_get(j, "stacks");
  CHECKF(json_is_array(s), "no stacks array");
  return s;
}

/* Poll until kind's list is non-empty (batches arrive asynchronously). */
static json_t *top_stacks_polled(const collector_t *c, const char *query) {
  double end = now_s() + 20;
  char path[256];
  snprintf(path, sizeof path, "/api/v1/top-stacks?%s", query);
  for (;;) {
    long status;
    json_t *j = get_json(c, path, &status);
    CHECK_EQ_INT(status, 200);
    if (json_array_size(stacks_of(j)) > 0 || now_s() > end) return j;
    json_decref(j);
    usleep(100000);
  }
}

static void print_stacks(const char *what, json_t *j) {
  char *text = json_dumps(j, JSON_INDENT(1));
  fprintf(stderr, "%s: %.6000s\n", what, text ? text : "?");
  free(text);
}

/* ---- cases ---------------------------------------------------------------- */

static void case_hang_grouped(void) {
  collector_t c;
  collector_start(&c, NULL);
  double hang_ms[2];
  feed(&c, hang_ms);
  json_t *j = top_stacks_polled(&c, "kind=hang");
  print_stacks("hang", j);
  json_t *stacks = stacks_of(j);
  CHECK(json_array_size(stacks) >= 1);
  json_t *g = json_array_get(stacks, 0);
  json_t *frames = json_object_get(g, "frames");
  CHECK(json_is_array(frames) && json_array_size(frames) >= 3);
  /* The key is what more than half of the first hang's samples share:
     stuck_in_here, or one of its two leaves when the majority landed in
     it; the second hang joins that group either way (its samples turned
     into the other leaf with far more than a quarter: perf__group_pick). */
  const char *f0 = json_string_value(json_array_get(frames, 0));
  size_t at = strcmp(f0, "leaf_hash") == 0 || strcmp(f0, "leaf_mix") == 0 ? 1 : 0;
  CHECKF(strcmp(json_string_value(json_array_get(frames, at)), "stuck_in_here") == 0,
         "frames[%zu] = %s", at, json_string_value(json_array_get(frames, at)));
  CHECK(strcmp(json_string_value(json_array_get(frames, at + 1)), "handle_request") == 0);
  CHECK_EQ_INT(json_array_size(stacks), 1);
  CHECK_EQ_INT(json_integer_value(json_object_get(g, "events")), 2);
  CHECK(json_integer_value(json_object_get(g, "samples")) >= 2);
  double total = json_real_value(json_object_get(g, "event_total_ms"));
  /* Each hang lasted from loop_busy to loop_idle: at least HANG_MS, within
     the call timed around it (1 ms for rounding). */
  CHECKF(total > 2 * HANG_MS - 1 && total < hang_ms[0] + hang_ms[1] + 1,
         "event_total_ms %.1f, the two calls took %.1f and %.1f ms", total, hang_ms[0], hang_ms[1]);
  /* A hang group's own time: all of its hangs' (each sample is in it). */
  CHECK(json_real_value(json_object_get(g, "hang_ms")) == total);
  CHECK(json_object_get(g, "cpu_us") == NULL);
  double mean = json_real_value(json_object_get(g, "event_mean_ms"));
  double p95 = json_real_value(json_object_get(g, "event_p95_ms"));
  CHECK(mean > total / 2 - 1 && mean < total / 2 + 1);
  CHECK(p95 >= mean - 1 && p95 <= total);
  CHECK(strlen(json_string_value(json_object_get(g, "signature"))) == 16);
  json_t *versions = json_object_get(g, "versions");
  CHECK(json_array_size(versions) == 1);
  CHECK(strcmp(json_string_value(json_array_get(versions, 0)), "2.0.1") == 0);
  json_int_t first = json_integer_value(json_object_get(g, "first_seen"));
  json_int_t last = json_integer_value(json_object_get(g, "last_seen"));
  json_int_t wall_ms = (json_int_t)time(NULL) * 1000;
  CHECK(first > wall_ms - 120000 && first <= last && last <= wall_ms + 1000);
  json_decref(j);
  collector_stop_healthy(&c);
}

static void case_cpu_stacks(void) {
  collector_t c;
  collector_start(&c, NULL);
  double hang_ms[2];
  feed(&c, hang_ms);
  json_t *j = top_stacks_polled(&c, "kind=cpu&limit=5");
  print_stacks("cpu", j);
  json_t *stacks = stacks_of(j);
  CHECK(json_array_size(stacks) >= 1 && json_array_size(stacks) <= 5);
  json_int_t prev = INT64_MAX;
  for (size_t i = 0; i < json_array_size(stacks); i++) {
    json_t *g = json_array_get(stacks, i);
    json_int_t samples = json_integer_value(json_object_get(g, "samples"));
    json_int_t cpu_us = json_integer_value(json_object_get(g, "cpu_us"));
    CHECK(json_object_get(g, "hang_ms") == NULL);
    /* The SDK weighs its samples: CPU time, most first. */
    CHECKF(samples > 0 && cpu_us > 0 && cpu_us <= prev, "stack %zu: %lld samples, %lld us", i,
           (long long)samples, (long long)cpu_us);
    prev = cpu_us;
    CHECK(json_integer_value(json_object_get(g, "events")) >= 1);
    CHECK(json_array_size(json_object_get(g, "frames")) >= 1);
  }
  json_decref(j);
  collector_stop_healthy(&c);
}

static void case_filters(void) {
  collector_t c;
  collector_start(&c, NULL);
  double hang_ms[2];
  feed(&c, hang_ms);
  json_t *j = top_stacks_polled(&c, "kind=hang&app=api-test&version=2.0.1&environment=ci");
  CHECK(json_array_size(stacks_of(j)) >= 1);
  json_decref(j);
  static const char *const empty[] = {
      "/api/v1/top-stacks?kind=hang&app=other",
      "/api/v1/top-stacks?kind=hang&version=9.9",
      "/api/v1/top-stacks?kind=cpu&environment=production",
      "/api/v1/top-stacks?kind=hang&to=1000",
      "/api/v1/top-stacks?kind=hang&from=9000000000000",
  };
  for (size_t i = 0; i < ARRAY_LEN(empty); i++) {
    long status;
    j = get_json(&c, empty[i], &status);
    CHECK_EQ_INT(status, 200);
    CHECKF(json_array_size(stacks_of(j)) == 0, "%s not empty", empty[i]);
    json_decref(j);
  }
  char path[128];
  snprintf(path, sizeof path, "/api/v1/top-stacks?kind=hang&from=%lld&to=%lld",
           (long long)(time(NULL) - 300) * 1000, (long long)(time(NULL) + 60) * 1000);
  long status;
  j = get_json(&c, path, &status);
  CHECK_EQ_INT(status, 200);
  CHECK(json_array_size(stacks_of(j)) >= 1);
  json_decref(j);
  j = get_json(&c, "/api/v1/top-stacks?kind=cpu&limit=1", &status);
  CHECK_EQ_INT(status, 200);
  CHECK(json_array_size(stacks_of(j)) == 1);
  json_decref(j);
  collector_stop_healthy(&c);
}

static void case_bad_parameters(void) {
  collector_t c;
  collector_start(&c, NULL);
  static const bad_param_t bad[] = {
      {"", "kind"},
      {"kind=wall", "kind"},
      {"kind=hang&limit=0", "limit"},
      {"kind=hang&limit=1001", "limit"},
      {"kind=hang&limit=x", "limit"},
      {"kind=cpu&from=-5", "from"},
      {"kind=cpu&to=soon", "to"},
      {"kind=cpu&from=2000&to=1000", "to"},
  };
  check_bad_params(&c, "/api/v1/top-stacks", bad, ARRAY_LEN(bad));
  /* An empty store: 200 with no stacks; the API needs a known key. */
  long status;
  json_t *j = get_json(&c, "/api/v1/top-stacks?kind=hang", &status);
  CHECK_EQ_INT(status, 200);
  CHECK(json_array_size(stacks_of(j)) == 0);
  json_decref(j);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(get(&c, "/api/v1/top-stacks?kind=hang", r), 401);
  const char *wrong[] = {"Authorization: Bearer nope", NULL};
  CHECK_EQ_INT(request(&c, "GET", "/api/v1/top-stacks?kind=hang", wrong, NULL, 0, false, r), 401);
  CHECK_EQ_INT(request(&c, "POST", "/api/v1/top-stacks?kind=hang", NULL, "x", 1, false, r), 405);
  free(r);
  collector_stop_healthy(&c);
}

/* Feed c, then wait for the hang group to show (batches are stored as the
   SDK sends them; poll anyway, like the other cases). hang_ms: as
   feed's. */
static void fed(collector_t *c, double hang_ms[2]) {
  collector_start(c, NULL);
  feed(c, hang_ms);
  json_t *j = top_stacks_polled(c, "kind=hang");
  CHECK(json_array_size(stacks_of(j)) >= 1);
  json_decref(j);
}

/* frames (a folded line's, root first) has the frame stuck_in_here after
   handle_request: "...;handle_request;stuck_in_here" or "...;stuck_in_here;leaf". */
static bool folded_stuck(const char *frames, size_t len) {
  static const char PART[] = "handle_request;stuck_in_here";
  for (const char *p = frames; p < frames + len; p++) {
    p = strstr(p, PART);
    if (!p || p >= frames + len) return false;
    const char *after = p + strlen(PART);
    if ((p == frames || p[-1] == ';') && (after == frames + len || *after == ';')) return true;
  }
  return false;
}

static void case_export_folded(void) {
  collector_t c;
  double hang_ms[2];
  fed(&c, hang_ms);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(get_key(&c, GOOD_KEY, "/api/v1/export/folded?kind=hang&app=api-test", r), 200);
  fprintf(stderr, "folded hang:\n%.4000s\n", r->body);
  CHECK(r->body_len > 0 && r->body[r->body_len - 1] == '\n');
  size_t lines = 0, stuck = 0;
  long long total = 0;
  for (char *line = r->body; *line;) {
    char *nl = strchr(line, '\n');
    CHECK(nl != NULL);
    char *space = line;
    for (char *p = line; p < nl; p++)
      if (*p == ' ') space = p;
    CHECKF(space > line, "line without frames: %.*s", (int)(nl - line), line);
    CHECKF(space + 1 < nl, "line without a count: %.*s", (int)(nl - line), line);
    long long n = 0;
    for (char *p = space + 1; p < nl; p++) {
      CHECKF(*p >= '0' && *p <= '9', "bad count: %.*s", (int)(nl - line), line);
      n = n * 10 + (*p - '0');
    }
    CHECK(n > 0);
    total += n;
    if (folded_stuck(line, (size_t)(space - line))) stuck++;
    lines++;
    line = nl + 1;
  }
  CHECK(lines >= 1);
  CHECKF(stuck >= 1, "no line with handle_request;stuck_in_here");
  /* The same samples as top-stacks' hang group(s). */
  long status;
  json_t *j = get_json(&c, "/api/v1/top-stacks?kind=hang", &status);
  json_int_t top_samples = 0;
  for (size_t i = 0; i < json_array_size(stacks_of(j)); i++)
    top_samples += json_integer_value(json_object_get(json_array_get(stacks_of(j), i), "samples"));
  json_decref(j);
  CHECKF(total == top_samples, "folded %lld samples, top-stacks %lld", total,
         (long long)top_samples);
  /* cpu too; filters and errors like top-stacks. */
  CHECK_EQ_INT(get_key(&c, GOOD_KEY, "/api/v1/export/folded?kind=cpu", r), 200);
  CHECK(r->body_len > 0);
  CHECK_EQ_INT(get_key(&c, GOOD_KEY, "/api/v1/export/folded?kind=hang&app=other", r), 200);
  CHECK(r->body_len == 0);
  j = get_json(&c, "/api/v1/export/folded?kind=wall", &status);
  CHECK_EQ_INT(status, 400);
  CHECK(strstr(json_string_value(json_object_get(j, "error")), "kind") != NULL);
  json_decref(j);
  CHECK_EQ_INT(get(&c, "/api/v1/export/folded?kind=hang", r), 401);
  free(r);
  collector_stop_healthy(&c);
}

/* A node named name under node (node itself included). */
static bool flame_has(json_t *node, const char *name) {
  if (strcmp(json_string_value(json_object_get(node, "name")), name) == 0) return true;
  json_t *kids = json_object_get(node, "children");
  for (size_t i = 0; i < json_array_size(kids); i++)
    if (flame_has(json_array_get(kids, i), name)) return true;
  return false;
}

/* A node named outer under node (itself included) with inner below it. */
static bool flame_path(json_t *node, const char *outer, const char *inner) {
  if (strcmp(json_string_value(json_object_get(node, "name")), outer) == 0)
    return flame_has(node, inner);
  json_t *kids = json_object_get(node, "children");
  for (size_t i = 0; i < json_array_size(kids); i++)
    if (flame_path(json_array_get(kids, i), outer, inner)) return true;
  return false;
}

/* Every node of a hang flame graph: samples and hang time >= its
   children's sums, children sorted by samples. */
static void flame_check(json_t *node) {
  json_int_t value = json_integer_value(json_object_get(node, "samples"));
  double ms = json_real_value(json_object_get(node, "hang_ms"));
  json_t *kids = json_object_get(node, "children");
  CHECK(json_is_string(json_object_get(node, "name")) && json_is_array(kids) && value > 0);
  CHECK(ms > 0 && json_object_get(node, "cpu_us") == NULL);
  json_int_t sum = 0, prev = INT64_MAX;
  double ms_sum = 0;
  for (size_t i = 0; i < json_array_size(kids); i++) {
    json_int_t v = json_integer_value(json_object_get(json_array_get(kids, i), "samples"));
    CHECK(v <= prev);
    prev = v;
    sum += v;
    ms_sum += json_real_value(json_object_get(json_array_get(kids, i), "hang_ms"));
    flame_check(json_array_get(kids, i));
  }
  CHECK(sum <= value && ms_sum <= ms + 1e-6);
}

/* The first node named name, depth first (a flame tree of the test's
   few stacks: recursion is fine), or NULL. */
static json_t *flame_find(json_t *node, const char *name) {
  if (strcmp(json_string_value(json_object_get(node, "name")), name) == 0) return node;
  json_t *kids = json_object_get(node, "children");
  for (size_t i = 0; i < json_array_size(kids); i++) {
    json_t *found = flame_find(json_array_get(kids, i), name);
    if (found) return found;
  }
  return NULL;
}

static void case_flame(void) {
  collector_t c;
  double hang_ms[2];
  fed(&c, hang_ms);
  long status;
  json_t *j = get_json(&c, "/api/v1/flame?kind=hang&environment=ci", &status);
  CHECK_EQ_INT(status, 200);
  print_stacks("flame", j);
  CHECK(strcmp(json_string_value(json_object_get(j, "name")), "all") == 0);
  json_t *kids = json_object_get(j, "children");
  CHECK(json_array_size(kids) >= 1);
  json_int_t sum = 0;
  for (size_t i = 0; i < json_array_size(kids); i++)
    sum += json_integer_value(json_object_get(json_array_get(kids, i), "samples"));
  /* root first: (_start ->) main -> ... -> handle_request -> stuck_in_here */
  bool main_to_stuck =
      flame_path(j, "main", "stuck_in_here") && flame_path(j, "handle_request", "stuck_in_here");
  json_int_t root = json_integer_value(json_object_get(j, "samples"));
  CHECKF(root == sum && root > 0, "root %lld, children %lld", (long long)root, (long long)sum);
  CHECKF(main_to_stuck, "no path main -> ... -> stuck_in_here");
  flame_check(j);
  /* The hangs' time: the groups' hang_ms, less a nanosecond per stack at
     most (each stack's share is rounded down). */
  double root_ms = json_real_value(json_object_get(j, "hang_ms"));
  json_decref(j);
  j = get_json(&c, "/api/v1/top-stacks?kind=hang&environment=ci", &status);
  double groups_ms = 0;
  for (size_t i = 0; i < json_array_size(stacks_of(j)); i++)
    groups_ms += json_real_value(json_object_get(json_array_get(stacks_of(j), i), "hang_ms"));
  json_decref(j);
  CHECKF(root_ms <= groups_ms + 1e-6 && root_ms > groups_ms - 0.001, "flame %.6f ms, groups %.6f",
         root_ms, groups_ms);
  /* The same hangs against an empty baseline: each node's share is its
     part of the hangs' time. */
  j = get_json(&c, "/api/v1/flame/diff?kind=hang&environment=ci&base_version=9.9", &status);
  CHECK_EQ_INT(status, 200);
  CHECK(json_real_value(json_object_get(j, "hang_ms")) == root_ms);
  CHECK_EQ_INT(json_integer_value(json_object_get(j, "base_samples")), 0);
  json_t *top = json_array_get(json_object_get(j, "children"), 0);
  double share = json_real_value(json_object_get(top, "share"));
  double part = json_real_value(json_object_get(top, "hang_ms")) / root_ms;
  CHECKF(top && fabs(share - part) < 1e-5 && json_real_value(json_object_get(j, "share")) == 1,
         "share %.6f, hang_ms part %.6f", share, part);
  CHECK(fabs(json_real_value(json_object_get(top, "delta")) - share) < 2e-6);
  /* Each frame of the tree (a diff's as a flame's) says whether it is the app's: the test's
     functions are, libc's are not; the root says neither. */
  json_t *stuck = flame_find(j, "stuck_in_here"), *libc = flame_find(j, "__libc_start_main");
  CHECKF(stuck && json_is_true(json_object_get(stuck, "in_app")), "stuck_in_here not in-app");
  CHECKF(libc && json_is_false(json_object_get(libc, "in_app")), "__libc_start_main in-app");
  CHECK(json_object_get(j, "in_app") == NULL);
  json_decref(j);
  j = get_json(&c, "/api/v1/flame?kind=hang&version=9.9", &status);
  CHECK_EQ_INT(status, 200);
  CHECK(json_integer_value(json_object_get(j, "samples")) == 0);
  CHECK(json_real_value(json_object_get(j, "hang_ms")) == 0);
  CHECK(json_array_size(json_object_get(j, "children")) == 0);
  json_decref(j);
  j = get_json(&c, "/api/v1/flame?kind=cpu&from=2000&to=1000", &status);
  CHECK_EQ_INT(status, 400);
  json_decref(j);
  collector_stop_healthy(&c);
}

/* The child of node named name, or NULL. */
static json_t *flame_child(json_t *node, const char *name) {
  json_t *kids = json_object_get(node, "children");
  for (size_t i = 0; i < json_array_size(kids); i++)
    if (strcmp(json_string_value(json_object_get(json_array_get(kids, i), "name")), name) == 0)
      return json_array_get(kids, i);
  return NULL;
}

static double real_of(json_t *o, const char *key) {
  return json_number_value(json_object_get(o, key));
}

/* Two versions' CPU stacks in one tree: version 1.0 sampled a_0, a_1 and
   a_2 once each, version 2.0 a_0, b_0 and b_1 once each (hand-made CPU
   events without weights: shares are of samples). Each node has both
   sides' samples and CPU, each side's share and their difference; a time-range
   baseline works the same way; without a baseline parameter it is a 400
   naming base_version, and a bad baseline names its own parameter. */
static void case_flame_diff(void) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = calloc(1, sizeof *r);
  CHECK(r != NULL);
  const distinct_batch_t sides[] = {{.app = "diff", .version = "1.0", .prefix = "a", .n = 3},
                                    {.app = "diff", .version = "2.0", .prefix = "a", .n = 1},
                                    {.app = "diff", .version = "2.0", .prefix = "b", .n = 2}};
  for (unsigned i = 0; i < ARRAY_LEN(sides); i++) {
    payload_t p;
    batch_distinct_payload(&p, &sides[i], 100 + i);
    CHECK_EQ_INT(payload_post(&c, GOOD_KEY, &p, r), 200);
    free(p.data);
  }
  free(r);
  long status;
  json_t *j =
      get_json(&c, "/api/v1/flame/diff?kind=cpu&app=diff&version=2.0&base_version=1.0", &status);
  CHECK_EQ_INT(status, 200);
  print_stacks("flame diff", j);
  CHECK_EQ_INT(json_integer_value(json_object_get(j, "samples")), 3);
  CHECK_EQ_INT(json_integer_value(json_object_get(j, "base_samples")), 3);
  CHECK(real_of(j, "share") == 1 && real_of(j, "base_share") == 1 && real_of(j, "delta") == 0);
  CHECK(real_of(j, "cpu_us") == 0 && real_of(j, "base_cpu_us") == 0);
  static const struct {
    const char *name;
    int samples, base_samples;
    double share, base_share;
  } want[] = {{"a_0", 1, 1, 1.0 / 3, 1.0 / 3},
              {"a_1", 0, 1, 0, 1.0 / 3},
              {"a_2", 0, 1, 0, 1.0 / 3},
              {"b_0", 1, 0, 1.0 / 3, 0},
              {"b_1", 1, 0, 1.0 / 3, 0}};
  /* Under the root, one frame per stack: the module's function. */
  json_t *kids = json_object_get(j, "children");
  CHECKF(json_array_size(kids) == ARRAY_LEN(want), "%zu children", json_array_size(kids));
  for (size_t i = 0; i < ARRAY_LEN(want); i++) {
    json_t *n = flame_child(j, want[i].name);
    CHECKF(n != NULL, "no node %s", want[i].name);
    CHECK_EQ_INT(json_integer_value(json_object_get(n, "samples")), want[i].samples);
    CHECK_EQ_INT(json_integer_value(json_object_get(n, "base_samples")), want[i].base_samples);
    double share = real_of(n, "share"), base_share = real_of(n, "base_share");
    CHECKF(fabs(share - want[i].share) < 1e-5 && fabs(base_share - want[i].base_share) < 1e-5,
           "%s: share %.6f (want %.6f), base_share %.6f (want %.6f)", want[i].name, share,
           want[i].share, base_share, want[i].base_share);
    CHECKF(fabs(real_of(n, "delta") - (share - base_share)) < 2e-6, "%s: delta %.6f", want[i].name,
           real_of(n, "delta"));
  }
  json_decref(j);
  /* A time range as the baseline: everything before the epoch's second 1
     is nothing. */
  j = get_json(&c, "/api/v1/flame/diff?kind=cpu&app=diff&base_to=1", &status);
  CHECK_EQ_INT(status, 200);
  CHECK_EQ_INT(json_integer_value(json_object_get(j, "samples")), 6);
  CHECK_EQ_INT(json_integer_value(json_object_get(j, "base_samples")), 0);
  CHECK(real_of(j, "base_share") == 0);
  json_decref(j);
  j = get_json(&c, "/api/v1/flame/diff?kind=cpu&app=diff&version=2.0", &status);
  CHECK_EQ_INT(status, 400);
  const char *err = json_string_value(json_object_get(j, "error"));
  CHECKF(err && strstr(err, "parameter base_version: a diff needs a baseline"), "%s", err);
  json_decref(j);
  j = get_json(&c, "/api/v1/flame/diff?kind=cpu&app=diff&base_from=x", &status);
  CHECK_EQ_INT(status, 400);
  err = json_string_value(json_object_get(j, "error"));
  CHECKF(err && strncmp(err, "parameter base_from:", 20) == 0, "%s", err);
  json_decref(j);
  collector_stop_healthy(&c);
}

/* A stack of a detail (its "names" or its frames' "function") has name. */
static bool stack_has(json_t *stack, const char *name) {
  json_t *names = json_object_get(stack, "names"), *frames = json_object_get(stack, "frames");
  for (size_t i = 0; i < json_array_size(names); i++)
    if (strcmp(json_string_value(json_array_get(names, i)), name) == 0) return true;
  for (size_t i = 0; i < json_array_size(frames); i++) {
    const char *fn = json_string_value(json_object_get(json_array_get(frames, i), "function"));
    if (fn && strcmp(fn, name) == 0) return true;
  }
  return false;
}

static void case_events(void) {
  collector_t c;
  double hang_ms[2];
  fed(&c, hang_ms);
  long status;
  json_t *j = get_json(&c, "/api/v1/events?kind=hang&app=api-test&limit=50", &status);
  CHECK_EQ_INT(status, 200);
  print_stacks("events", j);
  json_t *events = json_object_get(j, "events");
  CHECK_EQ_INT(json_array_size(events), 2);
  json_int_t prev = INT64_MAX;
  for (size_t i = 0; i < 2; i++) {
    json_t *e = json_array_get(events, i);
    CHECK(strcmp(json_string_value(json_object_get(e, "kind")), "hang") == 0);
    double d = json_real_value(json_object_get(e, "duration_ms"));
    /* newest first: hang 1, then hang 0; each from loop_busy to loop_idle */
    CHECKF(d > HANG_MS - 1 && d < hang_ms[1 - i] + 1, "duration_ms %.1f, its call took %.1f ms", d,
           hang_ms[1 - i]);
    json_int_t start = json_integer_value(json_object_get(e, "start_ms"));
    CHECK(start <= prev); /* newest first */
    prev = start;
    CHECK(json_integer_value(json_object_get(e, "id")) > 0);
    CHECK(strcmp(json_string_value(json_object_get(e, "app")), "api-test") == 0);
    CHECK(strcmp(json_string_value(json_object_get(e, "version")), "2.0.1") == 0);
    CHECK(strcmp(json_string_value(json_object_get(e, "environment")), "ci") == 0);
    CHECK(json_is_string(json_object_get(e, "group")));
    CHECK(json_is_integer(json_object_get(e, "tid")));
    CHECK(json_is_integer(json_object_get(e, "cpu_percent")));
    CHECK(json_object_get(e, "reason") != NULL);
    /* newest first: the second hang has no label, the first LABEL */
    const char *label = json_string_value(json_object_get(e, "label"));
    if (i == 0)
      CHECKF(label == NULL, "hang 1 has label %s", label);
    else
      CHECKF(label && strcmp(label, LABEL) == 0, "hang 0 has label %s", label ? label : "(none)");
  }
  /* The label filter: events, top stacks; drops have no label. */
  json_decref(j);
  j = get_json(&c, "/api/v1/events?kind=hang&label=GET%20%2Fusers", &status);
  CHECK_EQ_INT(status, 200);
  CHECK_EQ_INT(json_array_size(json_object_get(j, "events")), 1);
  json_decref(j);
  j = get_json(&c, "/api/v1/events?kind=hang&label=POST%20%2Fusers", &status);
  CHECK_EQ_INT(status, 200);
  CHECK_EQ_INT(json_array_size(json_object_get(j, "events")), 0);
  json_decref(j);
  j = get_json(&c, "/api/v1/top-stacks?kind=hang&label=GET%20%2Fusers", &status);
  CHECK_EQ_INT(status, 200);
  json_int_t labelled = 0;
  for (size_t i = 0; i < json_array_size(stacks_of(j)); i++)
    labelled += json_integer_value(json_object_get(json_array_get(stacks_of(j), i), "events"));
  CHECK_EQ_INT(labelled, 1);
  json_decref(j);
  /* Without the filter, each group counts its events per label. */
  j = get_json(&c, "/api/v1/top-stacks?kind=hang&app=api-test", &status);
  CHECK_EQ_INT(status, 200);
  json_int_t per_label = 0;
  for (size_t i = 0; i < json_array_size(stacks_of(j)); i++) {
    json_t *labels = json_object_get(json_array_get(stacks_of(j), i), "labels");
    CHECK(json_is_object(labels));
    CHECK(json_object_size(labels) <= 1);
    per_label += json_integer_value(json_object_get(labels, LABEL));
  }
  CHECK_EQ_INT(per_label, 1);
  json_decref(j);
  j = get_json(&c, "/api/v1/drops?label=x", &status);
  CHECK_EQ_INT(status, 400);
  json_decref(j);
  j = get_json(&c, "/api/v1/events?kind=hang&app=api-test&limit=50", &status);
  CHECK_EQ_INT(status, 200);
  events = json_object_get(j, "events");
  /* The detail of the first: its stacks, one of them in stuck_in_here. */
  char path[96];
  json_int_t id = json_integer_value(json_object_get(json_array_get(events, 0), "id"));
  snprintf(path, sizeof path, "/api/v1/events/%lld", (long long)id);
  json_t *d = get_json(&c, path, &status);
  CHECK_EQ_INT(status, 200);
  print_stacks("event", d);
  CHECK(json_integer_value(json_object_get(d, "id")) == id);
  json_t *stacks = json_object_get(d, "stacks");
  CHECK(json_array_size(stacks) >= 1);
  bool stuck = false;
  double stacks_ms = 0, duration = json_real_value(json_object_get(d, "duration_ms"));
  for (size_t i = 0; i < json_array_size(stacks); i++) {
    json_t *st = json_array_get(stacks, i);
    CHECK(json_integer_value(json_object_get(st, "samples")) > 0);
    CHECK(json_is_integer(json_object_get(st, "tid")));
    CHECK(json_array_size(json_object_get(st, "frames")) >= 1);
    CHECK(json_object_get(st, "cpu_us") == NULL);
    stacks_ms += json_real_value(json_object_get(st, "hang_ms"));
    if (stack_has(st, "stuck_in_here")) stuck = true;
  }
  CHECKF(stuck, "no stack of event %lld in stuck_in_here", (long long)id);
  /* The hang's stacks share its duration (each share rounded down to the ns). */
  CHECKF(stacks_ms <= duration + 1e-9 && stacks_ms > duration - 0.001,
         "stacks' hang_ms %.6f, the hang's %.6f", stacks_ms, duration);
  CHECK(json_array_size(json_object_get(d, "threads")) >= 1);
  json_decref(d);
  json_decref(j);
  /* kind absent: every kind, the cpu events too; limit. */
  j = get_json(&c, "/api/v1/events", &status);
  CHECK_EQ_INT(status, 200);
  CHECK(json_array_size(json_object_get(j, "events")) >= 3);
  json_decref(j);
  j = get_json(&c, "/api/v1/events?limit=1", &status);
  CHECK_EQ_INT(status, 200);
  CHECK(json_array_size(json_object_get(j, "events")) == 1);
  json_decref(j);
  static const char *const missing[] = {"/api/v1/events/999999999", "/api/v1/events/abc",
                                        "/api/v1/events/0"};
  for (size_t i = 0; i < ARRAY_LEN(missing); i++) {
    j = get_json(&c, missing[i], &status);
    CHECKF(status == 404, "%s -> %ld", missing[i], status);
    CHECK(json_is_string(json_object_get(j, "error")));
    json_decref(j);
  }
  j = get_json(&c, "/api/v1/events?limit=0", &status);
  CHECK_EQ_INT(status, 400);
  json_decref(j);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(get(&c, path, r), 401);
  CHECK_EQ_INT(request(&c, "POST", "/api/v1/events", NULL, "x", 1, false, r), 405);
  free(r);
  collector_stop_healthy(&c);
}

/* ---- the pprof export ---------------------------------------------------- */

/* ---- events by loop ------------------------------------------------------ */

#define LOOP_STALL_MS 400 /* a worker's hang: busy this long, past the 100 ms threshold */
#define LOOP_WAIT_S 60    /* a worker that has not handled its command fails after this */

/* A registered loop's thread: idle in read() on its pipe until a command,
   busy while it spins LOOP_STALL_MS for it ('s'), gone at 'x'. */
typedef struct loop_worker_s {
  pthread_t thread;
  int cmd[2];
  const char *name;
  volatile int tid, registered, handled;
} loop_worker_t;

static void *loop_worker_main(void *arg) {
  loop_worker_t *w = arg;
  w->tid = (int)syscall(SYS_gettid);
  CHECK_EQ_INT(perf_sdk_loop_register(w->name, 0), PERF_OK);
  __atomic_store_n(&w->registered, 1, __ATOMIC_RELEASE);
  for (;;) {
    CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
    char c;
    if (read(w->cmd[0], &c, 1) != 1 || c == 'x') break;
    CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
    double end = (double)now_ns() / 1e6 + LOOP_STALL_MS;
    while ((double)now_ns() / 1e6 < end)
      leaf_hash();
    __atomic_add_fetch(&w->handled, 1, __ATOMIC_RELEASE);
  }
  return NULL;
}

static void loop_worker_start(loop_worker_t *w, const char *name) {
  *w = (loop_worker_t){.name = name};
  CHECK(pipe(w->cmd) == 0);
  CHECK(pthread_create(&w->thread, NULL, loop_worker_main, w) == 0);
  double end = now_s() + LOOP_WAIT_S;
  while (!__atomic_load_n(&w->registered, __ATOMIC_ACQUIRE)) {
    CHECKF(now_s() < end, "loop %s did not register", name);
    usleep(1000);
  }
}

/* The worker's loop hangs `times` times, one after the other. */
static void loop_worker_stall(loop_worker_t *w, int times) {
  for (int i = 0; i < times; i++) {
    int before = __atomic_load_n(&w->handled, __ATOMIC_ACQUIRE);
    CHECK(write(w->cmd[1], "s", 1) == 1);
    double end = now_s() + LOOP_WAIT_S;
    while (__atomic_load_n(&w->handled, __ATOMIC_ACQUIRE) == before) {
      CHECKF(now_s() < end, "loop %s did not handle its stall", w->name);
      usleep(2000);
    }
  }
}

static void loop_worker_stop(loop_worker_t *w) {
  CHECK(write(w->cmd[1], "x", 1) == 1);
  pthread_join(w->thread, NULL);
  close(w->cmd[0]);
  close(w->cmd[1]);
}

/* The events of query, polled until there are want of them (the SDK sent
   its batches; the collector may still be storing the last). */
static json_t *events_polled(const collector_t *c, const char *query, size_t want) {
  char path[256];
  snprintf(path, sizeof path, "/api/v1/events?%s", query);
  double end = now_s() + LOOP_WAIT_S;
  for (;;) {
    long status;
    json_t *j = get_json(c, path, &status);
    CHECKF(status == 200, "%s -> %ld", path, status);
    size_t n = json_array_size(json_object_get(j, "events"));
    if (n >= want || now_s() > end) return j;
    json_decref(j);
    usleep(50000);
  }
}

/* Every event of j from loop (and its thread tid, when not 0); their count. */
static size_t events_of_loop(json_t *j, const char *loop, int tid) {
  json_t *events = json_object_get(j, "events"), *e;
  size_t i;
  json_array_foreach(events, i, e) {
    const char *got = json_string_value(json_object_get(e, "loop"));
    CHECKF(got && strcmp(got, loop) == 0, "event %zu of loop %s, want %s", i, got ? got : "(none)",
           loop);
    if (tid) CHECK_EQ_INT(json_integer_value(json_object_get(e, "tid")), tid);
  }
  return json_array_size(events);
}

/* Two registered loops and the main loop hang (worker-a twice, worker-b
   once, main once), sent by the SDK: the events list filters by loop
   exactly, each event and its detail name the loop, and every endpoint
   answered from rollups (and drops, which counts no loop's) refuses
   loop= with 400 naming it. */
/* The SDK of app (version 1.0) sending to url: two registered loops and
   the main loop hang, worker-a twice, worker-b once, main once; the
   workers' thread ids in tids[0..1]. */
static void loops_hang(const char *url, const char *app, int tids[2]) {
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  char data_dir[128];
  snprintf(data_dir, sizeof data_dir, "%s/sdk", tempdir_make("perf-api-loops"));
  sdk_config_upload(&cfg, app, url, GOOD_KEY, data_dir);
  cfg.hang_threshold_ms = 100;
  cfg.hang_sample_interval_ms = 20;
  cfg.cpu_threshold_percent = 25600; /* 256 cores: no CPU events */
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK); /* the main loop waits */
  loop_worker_t a, b;
  loop_worker_start(&a, "worker-a");
  loop_worker_start(&b, "worker-b");
  loop_worker_stall(&a, 2);
  loop_worker_stall(&b, 1);
  handle_request(HANG_MS, NULL); /* the main loop's hang */
  loop_worker_stop(&a);
  loop_worker_stop(&b);
  double end = now_s() + LOOP_WAIT_S;
  while (sdk_stats().hangs_detected < 4) {
    CHECKF(now_s() < end, "%llu hangs detected, want 4",
           (unsigned long long)sdk_stats().hangs_detected);
    usleep(20000);
  }
  CHECK_EQ_INT(sdk_stats().hangs_detected, 4);
  sdk_flush_and_stop();
  tids[0] = a.tid;
  tids[1] = b.tid;
}

static void case_events_by_loop(void) {
  collector_t c;
  collector_start(&c, NULL);
  int tids[2];
  loops_hang(c.url, "loop-test", tids);

  json_t *all = events_polled(&c, "app=loop-test&limit=50", 4);
  CHECK_EQ_INT(json_array_size(json_object_get(all, "events")), 4);
  json_decref(all);
  json_t *j = events_polled(&c, "app=loop-test&loop=worker-a", 2);
  CHECK_EQ_INT(events_of_loop(j, "worker-a", tids[0]), 2);
  json_decref(j);
  j = events_polled(&c, "app=loop-test&kind=hang&loop=worker-b", 1);
  CHECK_EQ_INT(events_of_loop(j, "worker-b", tids[1]), 1);
  json_int_t id =
      json_integer_value(json_object_get(json_array_get(json_object_get(j, "events"), 0), "id"));
  json_decref(j);
  j = events_polled(&c, "app=loop-test&loop=main", 1);
  CHECK_EQ_INT(events_of_loop(j, "main", (int)syscall(SYS_gettid)), 1);
  json_decref(j);
  long status;
  j = get_json(&c, "/api/v1/events?loop=worker-c", &status);
  CHECK_EQ_INT(status, 200);
  CHECK_EQ_INT(json_array_size(json_object_get(j, "events")), 0);
  json_decref(j);
  j = get_json(&c, "/api/v1/events?loop=worker&kind=hang", &status); /* exact, not a prefix */
  CHECK_EQ_INT(status, 200);
  CHECK_EQ_INT(json_array_size(json_object_get(j, "events")), 0);
  json_decref(j);

  char path[64];
  snprintf(path, sizeof path, "/api/v1/events/%lld", (long long)id);
  j = get_json(&c, path, &status);
  CHECK_EQ_INT(status, 200);
  const char *loop = json_string_value(json_object_get(j, "loop"));
  CHECKF(loop && strcmp(loop, "worker-b") == 0, "detail's loop %s", loop ? loop : "(none)");
  json_decref(j);

  /* Answers from the rollups, which keep no loop: refused, not ignored. */
  static const char *const refused[] = {
      "/api/v1/top-stacks?kind=hang&loop=worker-a",
      "/api/v1/flame?kind=hang&loop=worker-a",
      "/api/v1/export/folded?kind=hang&loop=worker-a",
      "/api/v1/export/pprof?kind=hang&loop=worker-a",
      "/api/v1/timeseries?kind=hang&bucket=hour&loop=worker-a",
      "/api/v1/states?kind=hang&loop=worker-a",
      "/api/v1/drops?loop=worker-a",
  };
  for (size_t i = 0; i < ARRAY_LEN(refused); i++) {
    j = get_json(&c, refused[i], &status);
    CHECKF(status == 400, "%s -> %ld", refused[i], status);
    const char *err = json_string_value(json_object_get(j, "error"));
    CHECKF(err && strstr(err, "parameter loop"), "%s: error %s", refused[i], err ? err : "(none)");
    json_decref(j);
  }
  collector_stop_healthy(&c);
}

/* What the SDK's batches said of their loops: watched time per loop name
   (Batch.loops), and the sum (Batch.loop_stats) of all batches and of
   those that named no loop. */
#define LR_MAX_NAMES 8
typedef struct loop_figures_s {
  char names[LR_MAX_NAMES][32];
  uint64_t watched[LR_MAX_NAMES];
  size_t n;
  uint64_t sum_watched, unnamed_watched;
  size_t batches;
} loop_figures_t;

static uint64_t *figure_of(loop_figures_t *f, const char *name) {
  for (size_t i = 0; i < f->n; i++)
    if (strcmp(f->names[i], name) == 0) return &f->watched[i];
  CHECK(f->n < LR_MAX_NAMES && strlen(name) < sizeof f->names[0]);
  snprintf(f->names[f->n], sizeof f->names[0], "%s", name);
  return &f->watched[f->n++];
}

/* One batch's body (zstd) read into f. */
static void figures_add(loop_figures_t *f, const void *body, size_t len) {
  unsigned long long raw_len = ZSTD_getFrameContentSize(body, len);
  CHECK(raw_len != ZSTD_CONTENTSIZE_ERROR && raw_len != ZSTD_CONTENTSIZE_UNKNOWN);
  void *raw = malloc(raw_len ? raw_len : 1);
  CHECK(raw != NULL);
  CHECK_EQ_INT(ZSTD_decompress(raw, raw_len, body, len), raw_len);
  Perf__V1__Batch *b = perf__v1__batch__unpack(NULL, raw_len, raw);
  CHECK(b != NULL);
  f->batches++;
  if (b->loop_stats) f->sum_watched += b->loop_stats->watched_nanos;
  if (b->loop_stats && !b->n_loops) f->unnamed_watched += b->loop_stats->watched_nanos;
  for (size_t i = 0; i < b->n_loops; i++)
    *figure_of(f, b->loops[i]->loop) += b->loops[i]->watched_nanos;
  perf__v1__batch__free_unpacked(b, NULL);
  free(raw);
}

/* A loop's totals in j ("loops" or a version of compare): watched hours
   from watched_ns, hangs exactly, hangs per hour (null when unwatched). */
static void check_rate(const json_t *o, uint64_t watched_ns, long long hangs, const char *what) {
  double hours = (double)watched_ns / 3.6e12;
  double got = json_real_value(json_object_get(o, "watched_hours"));
  CHECKF(fabs(got - hours) <= 1e-9 * (hours > 1 ? hours : 1), "%s: watched_hours %.12f, want %.12f",
         what, got, hours);
  CHECKF(json_integer_value(json_object_get(o, "hangs")) == hangs, "%s: hangs %lld, want %lld",
         what, (long long)json_integer_value(json_object_get(o, "hangs")), hangs);
  json_t *rate = json_object_get(o, "hangs_per_hour");
  if (!watched_ns) {
    CHECKF(json_is_null(rate), "%s: hangs_per_hour not null", what);
    return;
  }
  double want = (double)hangs / hours;
  CHECKF(fabs(json_real_value(rate) - want) <= 1e-6 * want + 1e-9, "%s: hangs_per_hour %f, want %f",
         what, json_real_value(rate), want);
}

static void check_loops(const collector_t *c, const char *query, uint64_t watched_ns,
                        long long hangs) {
  char path[256];
  snprintf(path, sizeof path, "/api/v1/loops?%s", query);
  long status;
  json_t *j = get_json(c, path, &status);
  CHECKF(status == 200, "%s -> %ld", path, status);
  check_rate(json_object_get(j, "loops"), watched_ns, hangs, path);
  json_decref(j);
}

/* Hangs per hour of one loop's watched time, per version: the SDK's
   batches (version 1.0: worker-a hangs twice, worker-b and main once;
   their loop stats per loop) caught on their way by a test server, read
   for their figures, then stored; a batch of an SDK that named no loop
   (version 2.0: 2 hours watched, 3 hangs) counts for loop main only. The
   loops and versions/compare answers with loop= are those figures
   exactly; without loop= the sum over all loops. */
static void case_versions_by_loop(void) {
  collector_t c;
  collector_start(&c, NULL);
  http_server_t *relay = http_server_start();
  CHECK(relay != NULL);
  int tids[2];
  loops_hang(http_server_url(relay), "loop-rates", tids);

  loop_figures_t f = {0};
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  size_t n = http_server_request_count(relay);
  for (size_t i = 0; i < n; i++) {
    http_request_t q;
    CHECK(http_server_request(relay, i, &q));
    if (strcmp(q.path, "/v1/batches") == 0) {
      figures_add(&f, q.body, q.body_len);
      const char *id = http_request_header(&q, "X-Perf-Batch-Id");
      CHECK(id != NULL);
      CHECK_EQ_INT(post_batch(&c, GOOD_KEY, id, q.body, q.body_len, r), 200);
    }
    http_request_free(&q);
  }
  http_server_stop(relay);
  CHECK(f.batches >= 1);
  uint64_t wa = *figure_of(&f, "worker-a"), wb = *figure_of(&f, "worker-b");
  uint64_t wmain = *figure_of(&f, "main");
  CHECKF(wa > 0 && wb > 0, "watched worker-a %llu ns, worker-b %llu ns", (unsigned long long)wa,
         (unsigned long long)wb);

  const uint64_t OLD_NS = 2 * 3600000000000ULL;
  loop_batch_t old = {.app = "loop-rates",
                      .version = "2.0",
                      .watched_ns = OLD_NS,
                      .busy_ns = OLD_NS / 4,
                      .hangs = 3,
                      .db = 1,
                      .hang_ms = 300};
  CHECK_EQ_INT(batch_post_loop(&c, &old, 1, r), 200);
  free(r);

  check_loops(&c, "app=loop-rates&version=1.0&loop=worker-a", wa, 2);
  check_loops(&c, "app=loop-rates&version=1.0&loop=worker-b", wb, 1);
  check_loops(&c, "app=loop-rates&version=1.0&loop=main", wmain + f.unnamed_watched, 1);
  check_loops(&c, "app=loop-rates&version=1.0", f.sum_watched, 4);
  check_loops(&c, "app=loop-rates&version=1.0&loop=worker-c", 0, 0);
  check_loops(&c, "app=loop-rates&version=2.0&loop=main", OLD_NS, 3);
  check_loops(&c, "app=loop-rates&version=2.0&loop=worker-a", 0, 0);
  check_loops(&c, "app=loop-rates&version=2.0", OLD_NS, 3);

  static const struct {
    const char *loop;
    long long hangs[2]; /* of a, of b */
  } cmp[] = {{"worker-a", {2, 0}}, {"main", {1, 3}}, {NULL, {4, 3}}};
  for (size_t i = 0; i < ARRAY_LEN(cmp); i++) {
    char path[160];
    snprintf(path, sizeof path, "/api/v1/versions/compare?app=loop-rates&a=1.0&b=2.0%s%s",
             cmp[i].loop ? "&loop=" : "", cmp[i].loop ? cmp[i].loop : "");
    uint64_t watched_a = !cmp[i].loop                       ? f.sum_watched
                         : strcmp(cmp[i].loop, "main") == 0 ? wmain + f.unnamed_watched
                                                            : wa;
    uint64_t watched_b = !cmp[i].loop || strcmp(cmp[i].loop, "main") == 0 ? OLD_NS : 0;
    long status;
    json_t *j = get_json(&c, path, &status);
    CHECKF(status == 200, "%s -> %ld", path, status);
    const char *loop = json_string_value(json_object_get(j, "loop"));
    CHECKF(cmp[i].loop ? loop && strcmp(loop, cmp[i].loop) == 0 : !loop, "%s: loop %s", path,
           loop ? loop : "(none)");
    json_t *versions = json_object_get(j, "versions");
    check_rate(json_array_get(versions, 0), watched_a, cmp[i].hangs[0], path);
    check_rate(json_array_get(versions, 1), watched_b, cmp[i].hangs[1], path);
    json_decref(j);
  }
  collector_stop_healthy(&c);
}

/* The samples of the folded export for query: its lines' counts summed. */
static long long folded_total(const collector_t *c, const char *query, reply_t *r) {
  char path[256];
  snprintf(path, sizeof path, "/api/v1/export/folded?%s", query);
  CHECK_EQ_INT(get_key(c, GOOD_KEY, path, r), 200);
  long long total = 0;
  for (char *line = r->body; *line;) {
    char *nl = strchr(line, '\n');
    CHECK(nl != NULL);
    *nl = '\0';
    char *space = strrchr(line, ' ');
    CHECK(space != NULL);
    total += atoll(space + 1);
    line = nl + 1;
  }
  return total;
}

/* GET export/pprof?query (200, whole) into *r and the file <tempdir>/name;
   decoded and checked (pprof_check.h). */
static pprof_profile_t *pprof_fetched(const collector_t *c, const char *query, reply_t *r,
                                      const char *name, char file[256]) {
  char path[256];
  snprintf(path, sizeof path, "/api/v1/export/pprof?%s", query);
  CHECK_EQ_INT(get_key(c, GOOD_KEY, path, r), 200);
  CHECK(r->body_len > 0 && r->body_len < sizeof r->body - 1);
  snprintf(file, 256, "%s/%s", tempdir_make("perf-api"), name);
  FILE *f = fopen(file, "wb");
  CHECK(f != NULL);
  CHECK(fwrite(r->body, 1, r->body_len, f) == r->body_len);
  CHECK(fclose(f) == 0);
  return pprof_decode_checked(r->body, r->body_len);
}

static void check_value_type(const pprof_profile_t *p, size_t i, const char *type,
                             const char *unit) {
  CHECK(i < p->n_sample_type);
  const char *t = pprof_string(p, p->sample_type[i]->type);
  const char *u = pprof_string(p, p->sample_type[i]->unit);
  CHECKF(strcmp(t, type) == 0 && strcmp(u, unit) == 0, "sample_type[%zu] = %s/%s", i, t, u);
}

/* `go tool pprof -top` of file: it lists name, and its total is samples
   (a CPU profile, "Type: cpu": its total is in time units, checked on the
   decoded profile instead: samples -1). */
static void pprof_top_check(const char *file, const char *name, long long samples) {
  static const char *const top[] = {"-top", "-nodecount=1000", NULL};
  char *out = pprof_tool(tempdir_make("perf-api"), top, file);
  fprintf(stderr, "go tool pprof -top %s:\n%.3000s\n", file, out);
  CHECKF(strstr(out, samples < 0 ? "Type: cpu" : "Type: samples") != NULL, "not the %s view",
         samples < 0 ? "cpu" : "samples");
  CHECKF(samples < 0 || pprof_top_total(out) == samples, "pprof total %lld, folded %lld",
         pprof_top_total(out), samples);
  CHECKF(!name || pprof_top_lists(out, name), "pprof does not list %s", name);
  free(out);
}

static void case_export_pprof(void) {
  collector_t c;
  double hang_ms[2];
  fed(&c, hang_ms);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  char file[256];
  /* hang: the folded export's samples, and the hangs' wall time */
  long long folded = folded_total(&c, "kind=hang&app=api-test", r);
  CHECK(folded > 0);
  pprof_profile_t *p = pprof_fetched(&c, "kind=hang&app=api-test", r, "hang.pb.gz", file);
  CHECK_EQ_INT(p->n_sample_type, 2);
  check_value_type(p, 0, "samples", "count");
  check_value_type(p, 1, "wall", "nanoseconds");
  CHECK(strcmp(pprof_string(p, p->default_sample_type), "samples") == 0);
  CHECK_EQ_INT(pprof_value_total(p, 0), folded);
  CHECK(pprof_has_function(p, "stuck_in_here") && pprof_has_function(p, "handle_request"));
  long status;
  json_t *j = get_json(&c, "/api/v1/top-stacks?kind=hang&app=api-test", &status);
  double groups_ms = 0;
  for (size_t i = 0; i < json_array_size(stacks_of(j)); i++)
    groups_ms += json_real_value(json_object_get(json_array_get(stacks_of(j), i), "hang_ms"));
  json_decref(j);
  double wall_ms = (double)pprof_value_total(p, 1) / 1e6;
  CHECKF(wall_ms > groups_ms - 0.01 && wall_ms <= groups_ms, "wall %.6f ms, hangs %.6f ms", wall_ms,
         groups_ms);
  /* unbounded: the window is the events' own, from the first start to the last end */
  int64_t wall_now = (int64_t)time(NULL) * 1000000000;
  CHECK(p->time_nanos > wall_now - 300 * (int64_t)1000000000 && p->time_nanos <= wall_now);
  CHECK(p->duration_nanos >= pprof_value_total(p, 1) - 1000);
  CHECK(p->time_nanos + p->duration_nanos <= wall_now + 2 * (int64_t)1000000000);
  perftools__profiles__profile__free_unpacked(p, NULL);
  pprof_top_check(file, "stuck_in_here", folded);
  static const char *const wall[] = {"-top", "-sample_index=wall", NULL};
  char *out = pprof_tool(tempdir_make("perf-api"), wall, file);
  CHECKF(strstr(out, "Type: wall") && pprof_top_lists(out, "stuck_in_here"), "%s", out);
  free(out);
  /* cpu: samples and CPU time (the SDK's weights), the CPU time shown
     first; the burner thread's function is there */
  folded = folded_total(&c, "kind=cpu", r);
  long long folded_cpu = folded_total(&c, "kind=cpu&value=cpu_us", r);
  CHECK(folded > 0 && folded_cpu > folded);
  p = pprof_fetched(&c, "kind=cpu", r, "cpu.pb.gz", file);
  CHECK_EQ_INT(p->n_sample_type, 2);
  check_value_type(p, 0, "samples", "count");
  check_value_type(p, 1, "cpu", "microseconds");
  CHECK(strcmp(pprof_string(p, p->default_sample_type), "cpu") == 0);
  CHECK_EQ_INT(pprof_value_total(p, 0), folded);
  CHECK_EQ_INT(pprof_value_total(p, 1), folded_cpu);
  perftools__profiles__profile__free_unpacked(p, NULL);
  pprof_top_check(file, "cpu_burner", -1);
  /* from/to: the window is the filter's */
  long long from_ms = ((long long)time(NULL) - 300) * 1000, to_ms = from_ms + 360000;
  char query[128];
  snprintf(query, sizeof query, "kind=hang&from=%lld&to=%lld", from_ms, to_ms);
  folded = folded_total(&c, query, r);
  p = pprof_fetched(&c, query, r, "window.pb.gz", file);
  CHECK_EQ_INT(pprof_value_total(p, 0), folded);
  CHECK_EQ_INT(p->time_nanos, from_ms * 1000000);
  CHECK_EQ_INT(p->duration_nanos, (to_ms - from_ms + 1) * 1000000);
  perftools__profiles__profile__free_unpacked(p, NULL);
  free(r);
  collector_stop_healthy(&c);
}

/* Nothing matches: a valid profile pprof reads (0 samples); errors. */
static void case_export_pprof_empty(void) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  char file[256];
  pprof_profile_t *p = pprof_fetched(&c, "kind=hang", r, "empty.pb.gz", file);
  CHECK(p->n_sample == 0 && p->n_location == 0 && p->n_function == 0 && p->n_mapping == 0);
  CHECK_EQ_INT(p->n_sample_type, 2);
  CHECK(p->time_nanos == 0 && p->duration_nanos == 0); /* no window, no events */
  perftools__profiles__profile__free_unpacked(p, NULL);
  pprof_top_check(file, NULL, 0);
  p = pprof_fetched(&c, "kind=cpu&from=1000&to=2000", r, "empty-cpu.pb.gz", file);
  CHECK(p->n_sample == 0 && p->n_sample_type == 2);
  CHECK(p->time_nanos == 1000000000 && p->duration_nanos == 1001000000);
  perftools__profiles__profile__free_unpacked(p, NULL);
  pprof_top_check(file, NULL, -1);
  static const bad_param_t bad[] = {
      {"", "kind"},
      {"kind=wall", "kind"},
      {"kind=cpu&from=-5", "from"},
      {"kind=cpu&to=soon", "to"},
      {"kind=cpu&from=2000&to=1000", "to"},
  };
  check_bad_params(&c, "/api/v1/export/pprof", bad, ARRAY_LEN(bad));
  CHECK_EQ_INT(get(&c, "/api/v1/export/pprof?kind=hang", r), 401);
  json_t *j = json_loads(r->body, 0, NULL);
  CHECK(json_is_string(json_object_get(j, "error")));
  json_decref(j);
  const char *wrong[] = {"Authorization: Bearer nope", NULL};
  CHECK_EQ_INT(request(&c, "GET", "/api/v1/export/pprof?kind=hang", wrong, NULL, 0, false, r), 401);
  CHECK_EQ_INT(request(&c, "POST", "/api/v1/export/pprof?kind=hang", NULL, "x", 1, false, r), 405);
  free(r);
  collector_stop_healthy(&c);
}

/* Every read endpoint with %FF (bytes that are not UTF-8) in each parameter
   it takes, one at a time, the others valid: a 400 naming the parameter,
   on both stores (PostgreSQL refuses such bytes as a statement's
   parameter; SQLite compared them as they were), and a name that is not
   UTF-8 is named with U+FFFD. One stored batch, so the reads have rows. */
typedef struct endpoint_params_s {
  const char *path, *base; /* base: the valid query the bad parameter joins */
  const char *params[13];
} endpoint_params_t;

#define FILTERS "app", "version", "environment", "host", "tag", "from", "to"

static void case_not_utf8_parameters(void) {
  collector_t c;
  double hang_ms[2];
  fed(&c, hang_ms);
  static const endpoint_params_t eps[] = {
      {"/api/v1/top-stacks", "kind=hang", {"kind", FILTERS, "group", "label", "limit"}},
      {"/api/v1/export/folded", "kind=cpu", {"kind", FILTERS, "group", "label", "value"}},
      {"/api/v1/export/pprof", "kind=hang", {"kind", FILTERS, "group", "label"}},
      {"/api/v1/flame", "kind=hang", {"kind", FILTERS, "group", "label"}},
      {"/api/v1/flame/diff",
       "kind=hang&base_version=1.0",
       {"kind", FILTERS, "group", "label", "base_version", "base_from", "base_to"}},
      {"/api/v1/states", "kind=hang", {"kind", FILTERS, "group", "label"}},
      {"/api/v1/events", "", {"kind", FILTERS, "group", "label", "loop", "limit"}},
      {"/api/v1/drops", "", {"kind", FILTERS, "group", "label"}},
      {"/api/v1/loops", "", {"kind", FILTERS, "group", "label"}},
      {"/api/v1/timeseries", "kind=hang&bucket=hour", {"kind", FILTERS, "label", "bucket"}},
      {"/api/v1/versions/compare",
       "app=api_test&a=1.0&b=2.0",
       {"app", "environment", "host", "tag", "from", "to", "a", "b"}},
  };
  for (size_t e = 0; e < ARRAY_LEN(eps); e++)
    for (size_t i = 0; i < ARRAY_LEN(eps[e].params) && eps[e].params[i]; i++) {
      const char *p = eps[e].params[i];
      char query[256] = "", base[128];
      snprintf(base, sizeof base, "%s", eps[e].base);
      for (char *part = strtok(base, "&"); part; part = strtok(NULL, "&"))
        if (strncmp(part, p, strlen(p)) != 0 || part[strlen(p)] != '=') /* the bad one instead */
          snprintf(query + strlen(query), sizeof query - strlen(query), "%s&", part);
      snprintf(query + strlen(query), sizeof query - strlen(query), "%s=%s", p,
               strcmp(p, "tag") == 0 ? "env:caf%E9" : "caf%E9%FF");
      check_bad_parameter(&c, eps[e].path, query, p);
    }
  check_bad_parameter(&c, "/api/v1/top-stacks", "kind=hang&caf%E9=1", "caf\xef\xbf\xbd");
  collector_stop_healthy(&c);
}

/* ---- every kind of event ------------------------------------------------------ */

static volatile unsigned long g_spin;

static CHAIN void spin_until_killed(void) {
  for (;;)
    g_spin++;
}

/* GET path -> 200 with exactly n events, each of kind (NULL: any). */
static void check_event_count(const collector_t *c, const char *path, size_t n, const char *kind) {
  long status;
  json_t *j = get_json(c, path, &status);
  char *text = json_dumps(j, JSON_COMPACT);
  CHECKF(status == 200, "GET %s -> %ld %s", path, status, text);
  json_t *events = json_object_get(j, "events");
  CHECKF(json_array_size(events) == n, "GET %s: %zu events, want %zu: %.2000s", path,
         json_array_size(events), n, text);
  size_t i;
  json_t *e;
  json_array_foreach(events, i, e) {
    const char *k = json_string_value(json_object_get(e, "kind"));
    CHECKF(!kind || (k && strcmp(k, kind) == 0), "GET %s: kind %s, want %s", path, k ? k : "-",
           kind);
  }
  free(text);
  json_decref(j);
}

/* GET timeseries?query -> 200 whose points count n events in all. */
static void check_series_events(const collector_t *c, const char *query, long long n) {
  char path[256];
  snprintf(path, sizeof path, "/api/v1/timeseries?%s", query);
  long status;
  json_t *j = get_json(c, path, &status);
  CHECKF(status == 200, "GET %s -> %ld", path, status);
  long long sum = 0;
  size_t i;
  json_t *p;
  json_array_foreach(json_object_get(j, "points"), i, p) sum +=
      json_integer_value(json_object_get(p, "events"));
  CHECKF(sum == n, "GET %s: %lld events, want %lld", path, sum, n);
  json_decref(j);
}

/* Real SDK batches holding each kind an app sends: a process killed -9
   while hung (its next run sends the fatal hang), a hang and a manual
   capture. The events list and the time series filter each kind; the
   stacks' routes, summed per hang or cpu, refuse the others naming kind. */
static void case_event_kinds(void) {
  collector_t c;
  collector_start(&c, NULL);
  char data_dir[128], marker[192];
  snprintf(data_dir, sizeof data_dir, "%s/sdk", tempdir_make("perf-kinds"));
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  sdk_config_upload(&cfg, "kinds-test", c.url, GOOD_KEY, data_dir);
  cfg.hang_threshold_ms = 100;
  cfg.hang_sample_interval_ms = 10;
  cfg.cpu_threshold_percent = 25600; /* no burst */

  pid_t hung = fork();
  CHECK(hung >= 0);
  if (hung == 0) {
    if (perf_sdk_init(&cfg) != PERF_OK || perf_sdk_loop_busy() != PERF_OK) _exit(3);
    spin_until_killed();
  }
  /* The marker is written whole (renamed into place) at each sample. */
  snprintf(marker, sizeof marker, "%s/hang-%d.marker", data_dir, (int)hung);
  struct stat sb;
  double deadline = now_s() + 30;
  while (stat(marker, &sb) != 0) {
    CHECKF(now_s() < deadline, "no hang marker %s after 30 s", marker);
    usleep(5000);
  }
  CHECK(kill(hung, SIGKILL) == 0);
  int st = 0;
  CHECK(waitpid(hung, &st, 0) == hung && WIFSIGNALED(st));

  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK); /* sends the fatal hang */
  handle_request(HANG_MS, NULL);
  CHECK_EQ_INT(perf_sdk_capture_now("kinds manual"), PERF_OK);
  perf_sdk_stats_t stats;
  CHECK_EQ_INT(perf_sdk_get_stats(&stats), PERF_OK);
  CHECK_EQ_INT(stats.hangs_detected, 1);
  sdk_flush_and_stop();

  check_event_count(&c, "/api/v1/events?app=kinds-test", 3, NULL);
  check_event_count(&c, "/api/v1/events?app=kinds-test&kind=", 3, NULL);
  check_event_count(&c, "/api/v1/events?app=kinds-test&kind=hang", 2, NULL); /* fatal ones too */
  check_event_count(&c, "/api/v1/events?app=kinds-test&kind=fatal_hang", 1, "fatal_hang");
  check_event_count(&c, "/api/v1/events?app=kinds-test&kind=manual", 1, "manual");
  check_event_count(&c, "/api/v1/events?app=kinds-test&kind=cpu", 0, NULL);
  check_event_count(&c, "/api/v1/events?app=kinds-test&kind=manual&label=x", 0, NULL);
  check_series_events(&c, "kind=manual&bucket=day", 1);
  check_series_events(&c, "kind=fatal_hang&bucket=day", 1);
  check_series_events(&c, "kind=hang&bucket=day", 2);
  check_series_events(&c, "kind=cpu&bucket=day", 0);

  /* The manual capture's detail: its reason, every thread's stack. */
  long status;
  json_t *j = get_json(&c, "/api/v1/events?kind=manual", &status);
  json_int_t id =
      json_integer_value(json_object_get(json_array_get(json_object_get(j, "events"), 0), "id"));
  CHECK(strcmp(json_string_value(
                   json_object_get(json_array_get(json_object_get(j, "events"), 0), "reason")),
               "kinds manual") == 0);
  json_decref(j);
  char path[128];
  snprintf(path, sizeof path, "/api/v1/events/%lld", (long long)id);
  j = get_json(&c, path, &status);
  CHECK_EQ_INT(status, 200);
  CHECK(strcmp(json_string_value(json_object_get(j, "kind")), "manual") == 0);
  CHECK(json_array_size(json_object_get(j, "stacks")) >= 1);
  json_decref(j);

  static const char *const stack_routes[] = {"/api/v1/top-stacks", "/api/v1/flame",
                                             "/api/v1/export/folded", "/api/v1/states"};
  for (size_t i = 0; i < ARRAY_LEN(stack_routes); i++) {
    for (int k = 0; k < 2; k++) {
      snprintf(path, sizeof path, "%s?kind=%s", stack_routes[i], k ? "fatal_hang" : "manual");
      j = get_json(&c, path, &status);
      const char *err = json_string_value(json_object_get(j, "error"));
      CHECKF(status == 400 && err && strstr(err, "parameter kind: must be hang, cpu or profile"),
             "GET %s -> %ld %s", path, status, err ? err : "(no error)");
      json_decref(j);
    }
  }
  check_bad_parameter(&c, "/api/v1/export/pprof", "kind=manual", "kind");
  check_bad_parameter(&c, "/api/v1/events", "kind=wall", "kind");
  check_bad_parameter(&c, "/api/v1/events", "kind=Manual", "kind");
  check_bad_parameter(&c, "/api/v1/timeseries", "kind=unspecified&bucket=day", "kind");
  collector_stop_healthy(&c);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE(hang_grouped),   TEST_CASE(cpu_stacks),         TEST_CASE(filters),
      TEST_CASE(bad_parameters), TEST_CASE(export_folded),      TEST_CASE(flame),
      TEST_CASE(events),         TEST_CASE(events_by_loop),     TEST_CASE(versions_by_loop),
      TEST_CASE(export_pprof),   TEST_CASE(export_pprof_empty), TEST_CASE(not_utf8_parameters),
      TEST_CASE(flame_diff),     TEST_CASE(event_kinds),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
