/*
 * test_collector_hostile.c - perf-collector (the real binary, a child
 * process on 127.0.0.1) against hostile and careless clients: small bodies
 * that expand (deep stacks, millions of empty messages, huge strings, many
 * tiny batches) stored or refused with the collector's peak RSS (VmHWM)
 * under the documented bound, then every GET the dashboard makes; each
 * batch limit refused with its flag named; loop names repaired and cut.
 * Slow clients, deadlines and raw targets are test_collector_conns.c's;
 * key scopes, open mode and symbol rules test_collector_scopes.c's. Every case ends with /healthz
 * 200 and a clean SIGTERM exit (under ASan: no leak). Each case runs in its own process:
 * `test_collector_hostile <case>`.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "perf/v1/perf.pb-c.h"
#include "tempdir.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* The collector's documented bound on one in-flight ingest request with
   the default limits (docs/internals/collector.md, "Memory per request"), on top
   of its idle RSS. Under ASan every allocation costs more (redzones,
   shadow, the quarantine of freed blocks): twice the bound plus ASan's
   256 MiB quarantine. */
#define REQUEST_BOUND_MIB 160
#define RSS_BOUND_KIB ((long)(UNDER_ASAN ? 2 * REQUEST_BOUND_MIB + 256 : REQUEST_BOUND_MIB) * 1024)

/* ---- payloads ------------------------------------------------------------- */

/* zstd's level 19: the smallest bodies for what they expand to. */
#define HOSTILE_LEVEL 19

/* What a hostile batch is made of: one hang event whose one stack is
   `depth` copies of one named frame (depth 0: no stack), `empty_frames`
   more empty Frame messages, and a reason of `reason_bytes` bytes. */
typedef struct shape_s {
  size_t depth, empty_frames, reason_bytes, path_bytes;
  size_t lines; /* empty inline Line messages in each empty frame */
  const char *app;
} shape_t;

static void make_hostile(payload_t *p, const shape_t *sh, unsigned seed) {
  uint8_t id[16];
  for (int i = 0; i < 16; i++)
    id[i] = (uint8_t)(seed * 131 + (unsigned)i * 7 + (unsigned)getpid());
  Perf__V1__Frame frame = PERF__V1__FRAME__INIT, empty = PERF__V1__FRAME__INIT;
  Perf__V1__Line line = PERF__V1__LINE__INIT;
  Perf__V1__Line **lines = calloc(sh->lines ? sh->lines : 1, sizeof *lines);
  CHECK(lines != NULL);
  for (size_t i = 0; i < sh->lines; i++)
    lines[i] = &line;
  line.function = 1;
  empty.n_lines = sh->lines, empty.lines = lines;
  size_t n_frames = 1 + sh->empty_frames;
  Perf__V1__Frame **frs = calloc(n_frames, sizeof *frs);
  uint32_t *ids = calloc(sh->depth ? sh->depth : 1, sizeof *ids);
  char *reason = calloc(1, sh->reason_bytes + 1), *path = calloc(1, sh->path_bytes + 32);
  CHECK(frs && ids && reason && path);
  memset(reason, 'r', sh->reason_bytes);
  strcpy(path, "/usr/bin/");
  memset(path + strlen(path), 'p', sh->path_bytes);
  frs[0] = &frame;
  for (size_t i = 1; i < n_frames; i++)
    frs[i] = &empty;
  for (size_t i = 0; i < sh->depth; i++)
    ids[i] = 1;
  batch_one_event_t o;
  batch_one_event_init(&o, id, sh->app ? sh->app : "hostile",
                       sh->path_bytes ? path : "/usr/bin/hostile", "recurse_forever");
  frame.module = 1, frame.address = 0x1000, frame.function = 1;
  o.b.n_frames = n_frames, o.b.frames = frs;
  o.st.n_frames = sh->depth, o.st.frames = ids;
  o.b.n_stacks = sh->depth ? 1 : 0;
  o.sc.tid = 9, o.sc.samples = 5;
  o.ev.kind = PERF__V1__EVENT_KIND__EVENT_KIND_HANG;
  o.ev.start_unix_nanos = 1700000000000000000 + (int64_t)seed * 1000000;
  o.ev.duration_nanos = 300000000;
  o.ev.tid = 9;
  o.ev.reason = reason;
  o.ev.n_stack_counts = sh->depth ? 1 : 0;
  o.ev.dominant_stack = sh->depth ? 1 : 0;
  payload_pack(p, &o.b, HOSTILE_LEVEL);
  free(frs);
  free(ids);
  free(reason);
  free(path);
  free(lines);
}

/* GET path with the good key, parsed as JSON with no depth limit beyond
   jansson's (2048 levels); a failure shows the start of the body only. */
static json_t *get_json_ok(const collector_t *c, const char *path) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  long st = get_key(c, GOOD_KEY, path, r);
  json_error_t err;
  json_t *j = json_loads(r->body, 0, &err);
  CHECKF(st == 200 && j != NULL, "GET %s -> %ld, %zu bytes: %s (%.200s)", path, st, r->total_len,
         err.text, r->body);
  free(r);
  return j;
}

/* ---- the collector's memory ---------------------------------------------- */

static long status_kib(pid_t pid, const char *field) {
  char path[64], line[256], fmt[64];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  snprintf(fmt, sizeof fmt, "%s: %%ld kB", field);
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, fmt, &kib) == 1) break;
  fclose(f);
  return kib;
}

/* The peak RSS over the idle one, within the bound; printed for the
   report (ctest --output-on-failure -V shows it). */
static void check_peak(const collector_t *c, long idle_kib, const char *what) {
  long peak = status_kib(c->pid, "VmHWM");
  fprintf(stderr, "%s: VmHWM %ld KiB, idle %ld KiB, growth %ld KiB (bound %ld KiB)\n", what, peak,
          idle_kib, peak - idle_kib, RSS_BOUND_KIB);
  CHECKF(peak - idle_kib < RSS_BOUND_KIB, "%s: peak RSS grew by %ld KiB", what, peak - idle_kib);
}

/* ---- every GET the dashboard makes --------------------------------------- */

/* The depth of the flame tree (iteratively: the test must not recurse
   either) and whether a node named name is in it. */
static size_t flame_depth(json_t *root, const char *name, bool *found) {
  size_t depth = 0;
  *found = false;
  for (json_t *node = root; node; depth++) {
    const char *n = json_string_value(json_object_get(node, "name"));
    if (n && strcmp(n, name) == 0) *found = true;
    json_t *kids = json_object_get(node, "children");
    node = json_array_size(kids) ? json_array_get(kids, 0) : NULL;
  }
  return depth;
}

/* top-stacks, flame, events (the filters' 1000 too), an event's detail,
   drops and both exports, for both kinds: all 200. Returns the hang flame's depth. */
static size_t dashboard_gets(const collector_t *c) {
  size_t depth = 0;
  static const char *const kinds[] = {"hang", "cpu"};
  for (size_t k = 0; k < 2; k++) {
    char path[128];
    snprintf(path, sizeof path, "/api/v1/top-stacks?kind=%s&limit=20", kinds[k]);
    json_decref(get_json_ok(c, path));
    snprintf(path, sizeof path, "/api/v1/flame?kind=%s", kinds[k]);
    json_t *flame = get_json_ok(c, path);
    bool found;
    if (k == 0) depth = flame_depth(flame, "<truncated>", &found);
    json_decref(flame);
    reply_t *r = malloc(sizeof *r);
    CHECK(r != NULL);
    snprintf(path, sizeof path, "/api/v1/export/folded?kind=%s", kinds[k]);
    CHECK_EQ_INT(get_key(c, GOOD_KEY, path, r), 200);
    snprintf(path, sizeof path, "/api/v1/export/pprof?kind=%s", kinds[k]);
    CHECK_EQ_INT(get_key(c, GOOD_KEY, path, r), 200);
    CHECK(r->total_len > 10);
    free(r);
  }
  json_t *all = get_json_ok(c, "/api/v1/events?limit=1000");
  json_decref(get_json_ok(c, "/api/v1/events?kind=hang&limit=20"));
  json_decref(get_json_ok(c, "/api/v1/drops"));
  json_t *events = json_object_get(all, "events");
  for (size_t i = 0; i < json_array_size(events) && i < 3; i++) {
    char path[64];
    snprintf(path, sizeof path, "/api/v1/events/%lld",
             (long long)json_integer_value(json_object_get(json_array_get(events, i), "id")));
    json_decref(get_json_ok(c, path));
  }
  json_decref(all);
  return depth;
}

/* ---- deep stacks ------------------------------------------------------------ */

/* One stack of `depth` identical frames: stored (200) with its root end cut
   at --max-stack-frames (512: 511 frames and <truncated>); the dashboard's
   GETs answer, also after a restart on the same database. */
static void deep_stack(size_t depth, size_t max_body) {
  collector_t c;
  collector_start(&c, NULL);
  long idle = status_kib(c.pid, "VmRSS");
  payload_t p;
  make_hostile(&p, &(shape_t){.depth = depth}, 1);
  fprintf(stderr, "a stack of %zu frames: %zu bytes of body\n", depth, p.len);
  CHECKF(p.len <= max_body, "body %zu bytes", p.len);
  reply_t r;
  CHECK_EQ_INT(payload_post(&c, GOOD_KEY, &p, &r), 200);
  CHECK_EQ_INT(dashboard_gets(&c), 1 + 512); /* "all", then the cut stack */
  check_peak(&c, idle, depth > 100000 ? "1,000,000-frame stack" : "20,000-frame stack");
  collector_stop_healthy(&c);
  char db[sizeof c.db];
  snprintf(db, sizeof db, "%s", c.db);
  collector_start(&c, (const char *[]){"--db", db, NULL}); /* the same db again */
  CHECK_EQ_INT(dashboard_gets(&c), 1 + 512);
  collector_stop_healthy(&c);
  free(p.data);
}

static void case_stack_20000_frames(void) {
  deep_stack(20000, 300);
}

static void case_stack_million_frames(void) {
  deep_stack(1000000, 400);
}

/* Millions of empty Frame messages (2 bytes each on the wire, about 90 in
   protobuf-c's memory): refused before the unpack, naming the limit. */
static void case_empty_frames(void) {
  collector_t c;
  collector_start(&c, NULL);
  long idle = status_kib(c.pid, "VmRSS");
  payload_t p;
  make_hostile(&p, &(shape_t){.depth = 1, .empty_frames = 4u << 20}, 2); /* 8 MiB */
  fprintf(stderr, "8 MiB of empty frames: %zu bytes of body\n", p.len);
  reply_t r;
  CHECK_EQ_INT(payload_post(&c, GOOD_KEY, &p, &r), 413);
  CHECKF(strstr(r.body, "--max-batch-frames 65536") != NULL, "body: %s", r.body);
  /* Under the frames limit, the decoded-size estimate still holds. */
  free(p.data);
  make_hostile(&p, &(shape_t){.depth = 1, .empty_frames = 60000}, 3);
  CHECK_EQ_INT(payload_post(&c, GOOD_KEY, &p, &r), 200);
  check_peak(&c, idle, "8 MiB of empty frames");
  collector_stop_healthy(&c);
  free(p.data);
}

/* Just under the decoded-size estimate (--max-decoded-bytes, 64 MiB):
   65,000 frames of 5 inline lines each, stored; the peak is what the
   documented bound is made of. One more line per frame is refused. */
static void case_near_decoded_cap(void) {
  collector_t c;
  collector_start(&c, NULL);
  long idle = status_kib(c.pid, "VmRSS");
  payload_t p;
  reply_t r;
  make_hostile(&p, &(shape_t){.depth = 1, .empty_frames = 65000, .lines = 5}, 4);
  fprintf(stderr, "65,000 frames x 5 lines: %zu bytes of body\n", p.len);
  CHECKF(payload_post(&c, GOOD_KEY, &p, &r) == 200, "%s", r.body);
  free(p.data);
  make_hostile(&p, &(shape_t){.depth = 1, .empty_frames = 65000, .lines = 8}, 5);
  CHECK_EQ_INT(payload_post(&c, GOOD_KEY, &p, &r), 413);
  CHECKF(strstr(r.body, "--max-decoded-bytes 67108864") != NULL, "body: %s", r.body);
  check_peak(&c, idle, "the decoded-size estimate's edge");
  collector_stop_healthy(&c);
  free(p.data);
}

/* 40 batches of a few hundred bytes, each with a 4 MiB reason: stored with
   the reason cut at --max-string-bytes, so the events list stays small.
   No rate limit: 40 batches posted at once are over the default burst
   (20) on a machine quick enough to post them within 2 s. */
static void case_huge_strings(void) {
  collector_t c;
  collector_start(&c, (const char *[]){"--rate-limit", "0", NULL});
  long idle = status_kib(c.pid, "VmRSS");
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  for (unsigned i = 0; i < 40; i++) {
    payload_t p;
    make_hostile(&p, &(shape_t){.depth = 3, .reason_bytes = 4u << 20}, 10 + i);
    if (i == 0) fprintf(stderr, "a 4 MiB string: %zu bytes of body\n", p.len);
    CHECK(p.len < 1024);
    CHECK_EQ_INT(payload_post(&c, GOOD_KEY, &p, r), 200);
    free(p.data);
  }
  CHECK_EQ_INT(get_key(&c, GOOD_KEY, "/api/v1/events?limit=1000", r), 200);
  fprintf(stderr, "events?limit=1000: %zu bytes\n", r->total_len);
  CHECKF(r->total_len < 40 * 4096 + 40 * 1024, "events answer %zu bytes", r->total_len);
  CHECK(strstr(r->body, "<truncated>") != NULL);
  dashboard_gets(&c);
  check_peak(&c, idle, "40 batches with 4 MiB strings");
  free(r);
  collector_stop_healthy(&c);
}

/* Many tiny batches, each a 1,000,000-frame stack under another app name
   (distinct stacks, groups and events): the peak stays that of one
   request; the answers are capped. */
static void case_many_tiny_batches(void) {
  collector_t c;
  collector_start(&c, (const char *[]){"--rate-limit", "0", NULL});
  long idle = status_kib(c.pid, "VmRSS");
  reply_t r;
  for (unsigned i = 0; i < 30; i++) {
    char app[32];
    snprintf(app, sizeof app, "tiny-%u", i);
    payload_t p;
    make_hostile(&p, &(shape_t){.depth = 1000000, .app = app}, 100 + i);
    CHECK_EQ_INT(payload_post(&c, GOOD_KEY, &p, &r), 200);
    free(p.data);
  }
  CHECK_EQ_INT(dashboard_gets(&c), 1 + 512);
  check_peak(&c, idle, "30 tiny batches of 1,000,000-frame stacks");
  collector_stop_healthy(&c);
}

/* Each batch limit refused with its flag named. */
static void case_batch_limits(void) {
  collector_t c;
  collector_start(&c, (const char *[]){"--max-batch-frames", "10", "--max-event-samples", "4",
                                       "--max-stack-text-bytes", "1048576", NULL});
  payload_t p;
  reply_t r;
  make_hostile(&p, &(shape_t){.depth = 1, .empty_frames = 10}, 200);
  CHECK_EQ_INT(payload_post(&c, GOOD_KEY, &p, &r), 413);
  CHECKF(strstr(r.body, "11 frames (--max-batch-frames 10)") != NULL, "body: %s", r.body);
  free(p.data);
  make_hostile(&p, &(shape_t){.depth = 1000, .path_bytes = 4000}, 201);
  CHECK_EQ_INT(payload_post(&c, GOOD_KEY, &p, &r), 413);
  CHECKF(strstr(r.body, "--max-stack-text-bytes 1048576") != NULL, "body: %s", r.body);
  free(p.data);
  make_hostile(&p, &(shape_t){.depth = 3}, 202);
  CHECK_EQ_INT(payload_post(&c, GOOD_KEY, &p, &r), 200);
  free(p.data);
  reply_t m;
  CHECK_EQ_INT(get_key(&c, GOOD_KEY, "/metrics", &m), 200);
  CHECKF(strstr(m.body, "perf_collector_batches_rejected_total{reason=\"over_limit\"} 2") != NULL,
         "%s", m.body);
  collector_stop_healthy(&c);
}

/* The loop one hang was sent as: o's event a hang of loop (NULL: none) on
   thread tid, posted with batch id seed. */
static void post_loop_hang(const collector_t *c, const char *loop, uint32_t tid, unsigned seed) {
  batch_one_event_t o;
  uint8_t id[16] = {0};
  batch_one_event_init(&o, id, "loops", "/usr/bin/loops", "loop_function");
  Perf__V1__Frame fr = PERF__V1__FRAME__INIT, *frs[] = {&fr};
  fr.module = 1, fr.address = 0x1234, fr.function = 1, fr.function_offset = 4;
  uint32_t ids[] = {1};
  o.b.n_frames = 1, o.b.frames = frs;
  o.st.n_frames = 1, o.st.frames = ids;
  o.sc.tid = tid, o.sc.samples = 3;
  o.ev.kind = PERF__V1__EVENT_KIND__EVENT_KIND_HANG;
  o.ev.start_unix_nanos = (uint64_t)(now_s() * 1e9) - 2000000000u;
  o.ev.duration_nanos = 400000000u;
  o.ev.tid = tid;
  o.ev.loop = (char *)(loop ? loop : "");
  batch_post(c, &o.b, seed);
}

/* The events of loop (a query-string value), exactly n of them; the first's
   loop name. */
static char *events_of_loop(const collector_t *c, const char *loop, size_t n) {
  char path[256];
  snprintf(path, sizeof path, "/api/v1/events?app=loops&loop=%s", loop);
  long status;
  json_t *j = get_json(c, path, &status);
  CHECK_EQ_INT(status, 200);
  json_t *events = json_object_get(j, "events");
  CHECKF(json_array_size(events) == n, "%s: %zu events, want %zu", path, json_array_size(events),
         n);
  const char *name = json_string_value(json_object_get(json_array_get(events, 0), "loop"));
  char *copy = name ? strdup(name) : NULL;
  json_decref(j);
  return copy;
}

/* Loop names as a client other than the SDK may send them: bytes that are
   not UTF-8 stored with U+FFFD for each bad byte, a name past
   --max-string-bytes cut there and marked, no name on a hang the main
   loop's; each batch stored whole (200). */
static void case_loop_names(void) {
  collector_t c;
  collector_start(&c, (const char *[]){"--max-string-bytes", "64", NULL});
  char longest[301];
  memset(longest, 'L', 300);
  longest[300] = '\0';
  post_loop_hang(&c, "w\xff-1", 11, 1);
  post_loop_hang(&c, longest, 12, 2);
  post_loop_hang(&c, NULL, 13, 3);
  char *name = events_of_loop(&c, "w%EF%BF%BD-1", 1);
  CHECKF(name && strcmp(name, "w\xef\xbf\xbd-1") == 0, "repaired loop %s", name ? name : "(none)");
  free(name);
  char cut[80];
  snprintf(cut, sizeof cut, "%.*s%%3Ctruncated%%3E", 64 - (int)strlen("<truncated>"), longest);
  name = events_of_loop(&c, cut, 1);
  CHECKF(name && strlen(name) == 64 && strstr(name, "<truncated>") == name + 53, "cut loop %s",
         name ? name : "(none)");
  free(name);
  name = events_of_loop(&c, "main", 1);
  CHECKF(name && strcmp(name, "main") == 0, "unnamed loop %s", name ? name : "(none)");
  free(name);
  collector_stop_healthy(&c);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE(stack_20000_frames), TEST_CASE(stack_million_frames), TEST_CASE(empty_frames),
      TEST_CASE(huge_strings),       TEST_CASE(many_tiny_batches),    TEST_CASE(batch_limits),
      TEST_CASE(near_decoded_cap),   TEST_CASE(loop_names),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
