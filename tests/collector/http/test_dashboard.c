/*
 * test_dashboard.c - the collector's web dashboard in a real browser (ctest
 * dashboard_browser). Starts the real perf-collector (collector_rig.c: a
 * free port, a temp db, an API keys file), fills it with real batches by
 * running the real demo app (samples/demo_app, sink = http: a ~1 s hang in
 * checksum_profile_slowly, a CPU burn in convolve_kernel), waits until the
 * hang and the cpu event are stored, adds one hand-made hang (reason
 * "stack-truth": an inline frame with file:line, a stack cut by the depth
 * cap, sent as two device stacks of the same names; its batch tagged
 * team=truth and reporting 12 events dropped by the rate limit and 3 by
 * the spool quota), four versions of app "rates" with loop stats (before
 * the demo: 3.1: 2 hangs in 1 h watched, 3.2: 6 in 2 h, 3.0: 2 in 10 s,
 * 3.3: 5 in 0.1 h; hangs of 1 ms: the demo's stays the slowest) and app "inapp" (a hang and a CPU
 * stack innermost in libc, called from the app: post_in_app) and app "kinds" (a fatal hang and a
 * manual capture: post_kinds), hangs in two hours of app "periods"
 * (post_periods), three windows of the always-on CPU profile of app "prof"
 * in two versions and two hours (post_profile), and an alert (a new_group rule of app
 * "alerted" whose new CPU group is delivered to a test webhook:
 * post_alert), then runs tests/dashboard/
 * dashboard_test.mjs (node + playwright-core + Debian's chromium, headless)
 * against it and requires its exit 0 and its two screenshots (the page,
 * and the version comparison panel beside it, "-compare.png"), then
 * scripts/screenshot.mjs (the README's picture) on the same collector
 * ("-readme.png"). A missing node, chromium or playwright-core fails the
 * test: it never skips.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "demo_rig.h"
#include "http_server.h"
#include "tempdir.h"

#define CHROMIUM_PATH "/usr/bin/chromium"
static double now_wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define BROWSER_DEADLINE_S 240 /* node + chromium start, then ~3 s of steps */

/* What the browser test needs is there: a missing piece is a failure with
   the way to fix it, never a skip. */
static void check_browser_tools(void) {
  CHECKF(access(PERF_NODE_PATH, X_OK) == 0,
         "node not found (%s): install Debian's nodejs and npm (scripts/deps.sh)", PERF_NODE_PATH);
  CHECKF(access(CHROMIUM_PATH, X_OK) == 0,
         "%s not found: install Debian's chromium (scripts/deps.sh)", CHROMIUM_PATH);
  CHECKF(access(PERF_DASHBOARD_DIR "/node_modules/playwright-core/package.json", R_OK) == 0,
         "playwright-core missing: run `npm ci` in %s (scripts/test.sh does)", PERF_DASHBOARD_DIR);
}

/* A 1 ms hang of four samples whose stack is stack_truth_inner inlined into
   stack_truth_outer (truth.c:11 and :22) under stack_truth_root, cut by
   the SDK's depth cap: the browser test finds "[inline]", "truth.c:11"
   and "<truncated: depth>" in its detail. Its last sample was taken at
   another address in stack_truth_root: another stack to the SDK, the
   same to the collector (the detail lists it once, with 4 samples). Its batch has the tag
   team=truth and drop counters (rate_limited 12, spool_quota 3): the
   browser test's drops line and tag filter. It hung in loop "render-3"
   (the event list's Loop column and the detail). */
static void post_stack_truth(const collector_t *c) {
  char *strings[] = {
      "", "stack_truth_inner", "stack_truth_outer", "stack_truth_root", "truth.c", "read", "futex"};
  Perf__V1__Function fn[3];
  Perf__V1__Function *fns[3];
  for (int i = 0; i < 3; i++) {
    perf__v1__function__init(&fn[i]);
    fn[i].name = (uint32_t)i + 1;
    fns[i] = &fn[i];
  }
  Perf__V1__Line inner = PERF__V1__LINE__INIT, outer = PERF__V1__LINE__INIT;
  inner.function = 1, inner.file = 4, inner.line = 11;
  outer.function = 2, outer.file = 4, outer.line = 22;
  Perf__V1__Line *lines[] = {&inner, &outer};
  Perf__V1__Frame f0 = PERF__V1__FRAME__INIT, f1 = PERF__V1__FRAME__INIT;
  Perf__V1__Frame f2 = PERF__V1__FRAME__INIT;
  f0.address = 0x1234, f0.function = 2, f0.function_offset = 4, f0.n_lines = 2, f0.lines = lines;
  f1.address = 0x2000, f1.function = 3, f1.function_offset = 8;
  f2.address = 0x2010, f2.function = 3, f2.function_offset = 24;
  Perf__V1__Frame *frs[] = {&f0, &f1, &f2};
  uint32_t ids[] = {1, 2}, ids2[] = {1, 3};
  Perf__V1__Stack st = PERF__V1__STACK__INIT, st2 = PERF__V1__STACK__INIT;
  st.n_frames = 2, st.frames = ids, st.end = PERF__V1__STACK_END__STACK_END_DEPTH;
  st2.n_frames = 2, st2.frames = ids2, st2.end = PERF__V1__STACK_END__STACK_END_DEPTH;
  Perf__V1__Stack *sts[] = {&st, &st2};
  Perf__V1__StackCount sc = PERF__V1__STACK_COUNT__INIT, sc2 = PERF__V1__STACK_COUNT__INIT;
  sc.stack = 1, sc.samples = 3, sc.tid = 4242;
  sc2.stack = 2, sc2.samples = 1, sc2.tid = 4242;
  Perf__V1__StackCount *scs[] = {&sc, &sc2};
  Perf__V1__Event ev = PERF__V1__EVENT__INIT;
  ev.kind = PERF__V1__EVENT_KIND__EVENT_KIND_HANG;
  ev.start_unix_nanos = (int64_t)(now_wall_s() * 1e9);
  ev.duration_nanos = 1000000, ev.tid = 4242, ev.reason = "stack-truth";
  ev.loop = "render-3"; /* a registered loop's (perf_sdk_loop_register) */
  ev.n_stack_counts = 2, ev.stack_counts = scs, ev.dominant_stack = 1;
  /* Four samples: two in read() on a pipe, one in a futex, one running
     (the browser test reads "waiting in read() (pipe) 50%, ..."). */
  int64_t offsets[] = {100, 100, 100, 100};
  uint32_t stacks[] = {1, 1, 1, 2}, calls[] = {5, 5, 6, 0};
  Perf__V1__SampleState states[] = {
      PERF__V1__SAMPLE_STATE__SAMPLE_STATE_IO, PERF__V1__SAMPLE_STATE__SAMPLE_STATE_IO,
      PERF__V1__SAMPLE_STATE__SAMPLE_STATE_LOCK, PERF__V1__SAMPLE_STATE__SAMPLE_STATE_RUNNING};
  Perf__V1__FdKind fds[] = {PERF__V1__FD_KIND__FD_KIND_PIPE, PERF__V1__FD_KIND__FD_KIND_PIPE,
                            PERF__V1__FD_KIND__FD_KIND_NONE, PERF__V1__FD_KIND__FD_KIND_NONE};
  ev.n_sample_offsets_micros = 4, ev.sample_offsets_micros = offsets;
  ev.n_sample_stacks = 4, ev.sample_stacks = stacks;
  ev.n_sample_states = 4, ev.sample_states = states;
  ev.n_sample_syscalls = 4, ev.sample_syscalls = calls;
  ev.n_sample_fds = 4, ev.sample_fds = fds;
  Perf__V1__Event *evs[] = {&ev};
  Perf__V1__Resource res = PERF__V1__RESOURCE__INIT;
  res.app_name = "truth";
  Perf__V1__KeyValue tag = PERF__V1__KEY_VALUE__INIT;
  tag.key = "team", tag.value = "truth";
  Perf__V1__KeyValue *tags[] = {&tag};
  res.n_tags = 1, res.tags = tags;
  Perf__V1__DropCounters drops = PERF__V1__DROP_COUNTERS__INIT;
  drops.rate_limited = 12, drops.spool_quota = 3;
  Perf__V1__Batch b = PERF__V1__BATCH__INIT;
  b.resource = &res;
  b.drops = &drops;
  b.n_strings = 7, b.strings = strings;
  b.n_functions = 3, b.functions = fns;
  b.n_frames = 3, b.frames = frs;
  b.n_stacks = 2, b.stacks = sts;
  b.n_events = 1, b.events = evs;
  batch_post(c, &b, 1);
}

/* Versions of app "rates" (the version comparison view): 3.1 watched 1 h
   with 2 hangs (1 in slow_query, 1 in render), 3.2 watched 2 h with 6 (5
   and 1), 3.0 watched 10 s with 2 (720 per hour, on two hangs: not enough
   data), 3.3 watched 0.1 h with 5 (50 per hour, its 95% interval wholly
   above 3.2's); units by duration per version. Sent before the demo runs,
   so the demo's hang is among the newest events. */
static void post_rates(const collector_t *c) {
  static const uint64_t u31[9] = {100, 20, 10, 3, 2, 0, 0, 0, 0};
  static const uint64_t u32[9] = {400, 30, 20, 8, 5, 1, 0, 0, 0};
  const uint64_t hour = 3600000000000ULL;
  const loop_batch_t batches[] = {
      {"rates", "3.1", "production", hour, hour / 4, u31, 9, 2, 1, 1},
      {"rates", "3.2", "production", 2 * hour, hour, u32, 9, 6, 5, 1},
      {"rates", "3.0", "production", hour / 360, hour / 3600, u31, 9, 2, 1, 1},
      {"rates", "3.3", "production", hour / 10, hour / 20, u32, 9, 5, 5, 1},
  };
  for (unsigned i = 0; i < ARRAY_LEN(batches); i++) {
    reply_t *r = calloc(1, sizeof *r);
    CHECK(r);
    long status = batch_post_loop(c, &batches[i], 100 + i, r);
    CHECKF(status == 200, "rates batch %u -> %ld", i, status);
    free(r);
  }
}

/* App "inapp": a 1 ms hang in libc's read() called by reload_config and a
   CPU event in libc's memset called by fill_buffers, both in /usr/bin/shopd
   (marked the executable): the browser test finds each headed by the app's
   function, with "in <libc's function> ←" before it, and libc's frames
   muted in the expanded stack and the event's detail. */
static void post_in_app(const collector_t *c) {
  char *strings[] = {
      "",      "read", "reload_config", "main", "__memset_avx2_unaligned_erms", "fill_buffers",
      "worker"};
  Perf__V1__Module libc = PERF__V1__MODULE__INIT, exe = PERF__V1__MODULE__INIT;
  libc.path = "/lib/x86_64-linux-gnu/libc.so.6";
  exe.path = "/usr/bin/shopd", exe.executable = true;
  Perf__V1__Module *mods[] = {&libc, &exe};
  Perf__V1__Function fn[6], *fns[6];
  Perf__V1__Frame fr[6], *frs[6];
  for (uint32_t i = 0; i < 6; i++) {
    perf__v1__function__init(&fn[i]);
    fn[i].name = i + 1;
    fns[i] = &fn[i];
    perf__v1__frame__init(&fr[i]);
    fr[i].function = i + 1, fr[i].address = 0x100 * (i + 1);
    fr[i].module = i == 0 || i == 3 ? 1 : 2; /* read and memset: libc's */
    frs[i] = &fr[i];
  }
  uint32_t hang_ids[] = {1, 2, 3}, cpu_ids[] = {4, 5, 6};
  Perf__V1__Stack st[2] = {PERF__V1__STACK__INIT, PERF__V1__STACK__INIT};
  st[0].n_frames = 3, st[0].frames = hang_ids, st[0].end = PERF__V1__STACK_END__STACK_END_COMPLETE;
  st[1].n_frames = 3, st[1].frames = cpu_ids, st[1].end = PERF__V1__STACK_END__STACK_END_COMPLETE;
  Perf__V1__Stack *sts[] = {&st[0], &st[1]};
  Perf__V1__StackCount sc[2] = {PERF__V1__STACK_COUNT__INIT, PERF__V1__STACK_COUNT__INIT};
  sc[0].stack = 1, sc[0].samples = 5, sc[0].tid = 77;
  sc[1].stack = 2, sc[1].samples = 3, sc[1].tid = 78;
  Perf__V1__StackCount *hang_sc[] = {&sc[0]}, *cpu_sc[] = {&sc[1]};
  Perf__V1__Event ev[2] = {PERF__V1__EVENT__INIT, PERF__V1__EVENT__INIT};
  int64_t now = (int64_t)(now_wall_s() * 1e9);
  ev[0].kind = PERF__V1__EVENT_KIND__EVENT_KIND_HANG;
  ev[0].start_unix_nanos = now, ev[0].duration_nanos = 1000000, ev[0].tid = 77;
  ev[0].cpu_percent = -1;
  ev[0].n_stack_counts = 1, ev[0].stack_counts = hang_sc, ev[0].dominant_stack = 1;
  ev[1].kind = PERF__V1__EVENT_KIND__EVENT_KIND_CPU;
  ev[1].start_unix_nanos = now, ev[1].duration_nanos = 300000000, ev[1].tid = 78;
  ev[1].cpu_percent = 90;
  ev[1].n_stack_counts = 1, ev[1].stack_counts = cpu_sc, ev[1].dominant_stack = 2;
  Perf__V1__Event *evs[] = {&ev[0], &ev[1]};
  Perf__V1__Resource res;
  Perf__V1__Batch b;
  batch_begin(&b, &res, "inapp", NULL, NULL, NULL);
  b.n_strings = 7, b.strings = strings;
  b.n_modules = 2, b.modules = mods;
  b.n_functions = 6, b.functions = fns;
  b.n_frames = 6, b.frames = frs;
  b.n_stacks = 2, b.stacks = sts;
  b.n_events = 2, b.events = evs;
  batch_post(c, &b, 2);
}

/* One event of app in a batch of its own (batch id from id0, id1, i;
   batch_post's seed): a one-frame stack in module "/usr/bin/<app>"
   calling function, sampled `samples` times on thread tid, started ago_s
   seconds ago, lasting duration_ns; reason NULL: none. */
typedef struct one_event_s {
  Perf__V1__EventKind kind;
  int64_t ago_s;
  const char *function, *reason;
  uint32_t samples;
  int64_t duration_ns;
} one_event_t;

static void post_one_event(const collector_t *c, const char *app, uint8_t id0, uint8_t id1,
                           unsigned i, unsigned seed, pid_t tid, const one_event_t *e) {
  uint8_t id[16] = {id0, id1, (uint8_t)i};
  char module[64];
  snprintf(module, sizeof module, "/usr/bin/%s", app);
  batch_one_event_t o;
  batch_one_event_init(&o, id, app, module, e->function);
  Perf__V1__Frame fr = PERF__V1__FRAME__INIT, *frs[] = {&fr};
  fr.module = 1, fr.address = 0x1234, fr.function = 1;
  uint32_t ids[] = {1};
  o.b.n_frames = 1, o.b.frames = frs;
  o.st.n_frames = 1, o.st.frames = ids;
  o.sc.tid = tid, o.sc.samples = e->samples;
  o.ev.kind = e->kind;
  o.ev.start_unix_nanos = (int64_t)((now_wall_s() - (double)e->ago_s) * 1e9);
  o.ev.duration_nanos = e->duration_ns;
  o.ev.tid = tid;
  if (e->reason) o.ev.reason = (char *)e->reason;
  batch_post(c, &o.b, seed);
}

/* App "kinds": a fatal hang two hours ago (a process that ended while
   hung, as its next run reports it) and a manual capture an hour ago
   (perf_sdk_capture_now), one batch each: the browser test finds each
   with its own badge under its own kind, and the detail cleared when a
   kind, filter or range leaves its event out. */
static void post_kinds(const collector_t *c) {
  static const one_event_t KIND[] = {
      {PERF__V1__EVENT_KIND__EVENT_KIND_FATAL_HANG, 7200, "wedged_in_flush",
       "process 4242 ended while its thread 4242 was hung", 3, 1000000},
      {PERF__V1__EVENT_KIND__EVENT_KIND_MANUAL, 3600, "report_button_pressed", "user report", 3,
       1000000},
  };
  for (unsigned i = 0; i < ARRAY_LEN(KIND); i++)
    post_one_event(c, "kinds", 0xd5, 0x4b, i, 300 + i, 4242, &KIND[i]);
}

/* App "periods": hangs 90 minutes ago in old_path (6 samples), 30 minutes
   ago in new_path (6) and old_path (2), 100 ms a sample: the last hour
   against the hour before it, new_path grew from none to 75%, old_path
   shrank from all to 25%. */
static void post_periods(const collector_t *c) {
  static const one_event_t HANG[] = {
      {PERF__V1__EVENT_KIND__EVENT_KIND_HANG, 5400, "old_path", NULL, 6, 600000000},
      {PERF__V1__EVENT_KIND__EVENT_KIND_HANG, 1800, "new_path", NULL, 6, 600000000},
      {PERF__V1__EVENT_KIND__EVENT_KIND_HANG, 1800, "old_path", NULL, 2, 200000000},
  };
  for (unsigned i = 0; i < ARRAY_LEN(HANG); i++)
    post_one_event(c, "periods", 0xd6, 0x9e, i, 500 + i, 4343, &HANG[i]);
}

/* App "prof": three windows of the always-on CPU profile, a minute each,
   of parse_json and gzip_body called by prof_loop: version 1.0's 90 and
   30 minutes ago (parse_json 300 ms and gzip_body 100 ms, then 200 ms
   each, 50 of gzip_body's samples on a lock), version 2.0's 30 minutes
   ago (100 ms and 400 ms). In all: gzip_body 700 ms of 1.3 s; 2.0 against
   1.0, gzip_body from 37.5% to 80% of the CPU time; the last hour against
   the hour before, from 25% to 66.7%. */
static void post_profile(const collector_t *c) {
  enum {
    RUN = PERF__V1__SAMPLE_STATE__SAMPLE_STATE_RUNNING,
    LOCK = PERF__V1__SAMPLE_STATE__SAMPLE_STATE_LOCK
  };
  static const char *const LEAVES[] = {"parse_json", "gzip_body"};
  static const profile_count_t OLD[] = {{1, 71, 30, 300000, RUN}, {2, 71, 10, 100000, RUN}};
  static const profile_count_t V1[] = {
      {1, 71, 20, 200000, RUN}, {2, 72, 15, 150000, RUN}, {2, 72, 5, 50000, LOCK}};
  static const profile_count_t V2[] = {{2, 81, 40, 400000, RUN}, {1, 81, 10, 100000, RUN}};
  struct {
    const char *version;
    int64_t ago_s;
    const profile_count_t *counts;
    size_t n;
  } windows[] = {{"1.0", 5400, OLD, ARRAY_LEN(OLD)},
                 {"1.0", 1800, V1, ARRAY_LEN(V1)},
                 {"2.0", 1800, V2, ARRAY_LEN(V2)}};
  reply_t *r = malloc(sizeof *r);
  CHECK(r);
  for (unsigned i = 0; i < ARRAY_LEN(windows); i++) {
    profile_window_t w = {"prof",
                          windows[i].version,
                          NULL,
                          "prof_loop",
                          LEAVES,
                          ARRAY_LEN(LEAVES),
                          (int64_t)((now_wall_s() - (double)windows[i].ago_s) * 1e9),
                          60000000000LL,
                          windows[i].counts,
                          windows[i].n};
    long status = batch_post_profile(c, &w, NULL, 600 + i, r);
    CHECKF(status == 200, "profile window %u -> %ld %.300s", i, status, r->body);
  }
  free(r);
}

/* A new_group rule of app "alerted" (format slack), a new CPU group of it
   delivered to hook: the Alerts panel's row, once the API lists it
   delivered. */
static void post_alert(const collector_t *c, http_server_t *hook) {
  char rule[256];
  snprintf(rule, sizeof rule,
           "{\"kind\":\"new_group\",\"url\":\"%s/hook\",\"format\":\"slack\","
           "\"filters\":{\"app\":\"alerted\"}}",
           http_server_url(hook));
  const char *headers[] = {"Authorization: Bearer " GOOD_KEY, "Content-Type: application/json",
                           NULL};
  reply_t *r = calloc(1, sizeof *r);
  CHECK(r);
  long status = request(c, "POST", "/api/v1/alerts/rules", headers, rule, strlen(rule), false, r);
  CHECKF(status == 201, "POST rule -> %ld %.*s", status, (int)r->body_len, r->body);
  payload_t p = {0};
  batch_distinct_payload(&p, &(distinct_batch_t){"alerted", "1.0", NULL, NULL, NULL, "spin", 0, 1},
                         400);
  CHECK_EQ_INT(payload_post(c, GOOD_KEY, &p, r), 200);
  free(p.data);
  free(r);
  CHECKF(http_server_wait_requests(hook, 1, 30000), "the webhook got no alert");
  double end = now_s() + 30;
  char *text = NULL;
  do {
    free(text);
    text = get_text(c, "/api/v1/alerts/deliveries");
  } while (!strstr(text, "\"state\":\"delivered\"") && now_s() < end && usleep(20000) == 0);
  CHECKF(strstr(text, "\"state\":\"delivered\""), "never delivered: %s", text);
  free(text);
}

static void case_browser(void) {
  check_browser_tools();
  collector_t c;
  collector_start(&c, (const char *[]){"--alert-allow", "127.0.0.1", "--public-url",
                                       "http://dashboard.test:4318", NULL});
  http_server_t *hook = http_server_start();
  CHECK(hook);
  post_rates(&c);
  demo_run_uploading(&c, PERF_DEMO_APP_PATH, tempdir_make("perf-dash"));
  demo_wait_stored(&c);
  post_stack_truth(&c);
  post_in_app(&c);
  post_kinds(&c);
  post_periods(&c);
  post_profile(&c);
  post_alert(&c, hook);

  char compare_png[sizeof PERF_DASHBOARD_SCREENSHOT + 16];
  snprintf(compare_png, sizeof compare_png, "%.*s-compare.png",
           (int)(sizeof PERF_DASHBOARD_SCREENSHOT - 1 - 4), PERF_DASHBOARD_SCREENSHOT);
  unlink(PERF_DASHBOARD_SCREENSHOT);
  unlink(compare_png);
  char *argv[] = {PERF_NODE_PATH,
                  PERF_DASHBOARD_DIR "/dashboard_test.mjs",
                  c.url,
                  READ_KEY, /* the dashboard needs only the read scope */
                  PERF_DASHBOARD_SCREENSHOT,
                  NULL};
  int status = spawn_wait(spawn(argv, NULL), BROWSER_DEADLINE_S);
  CHECKF(status == 0, "dashboard_test.mjs exited with %d", status);
  struct stat st;
  CHECKF(stat(PERF_DASHBOARD_SCREENSHOT, &st) == 0 && st.st_size > 0, "no screenshot at %s",
         PERF_DASHBOARD_SCREENSHOT);
  CHECKF(stat(compare_png, &st) == 0 && st.st_size > 0, "no screenshot at %s", compare_png);
  /* The README's picture: scripts/screenshot.mjs on the same collector. */
  char readme_png[sizeof PERF_DASHBOARD_SCREENSHOT + 16];
  snprintf(readme_png, sizeof readme_png, "%.*s-readme.png",
           (int)(sizeof PERF_DASHBOARD_SCREENSHOT - 1 - 4), PERF_DASHBOARD_SCREENSHOT);
  unlink(readme_png);
  char *shot[] = {PERF_NODE_PATH, PERF_SCREENSHOT_SCRIPT, c.url, READ_KEY, readme_png, NULL};
  status = spawn_wait(spawn(shot, NULL), BROWSER_DEADLINE_S);
  CHECKF(status == 0, "scripts/screenshot.mjs exited with %d", status);
  CHECKF(stat(readme_png, &st) == 0 && st.st_size > 10000, "no screenshot at %s", readme_png);
  http_server_stop(hook);
  collector_stop_healthy(&c);
}

static const test_case_t CASES[] = {TEST_CASE(browser)};

int main(int argc, char **argv) {
  return collector_test_main(argc, argv, CASES, sizeof CASES / sizeof CASES[0]);
}
