/*
 * test_collector_symbols.c - symbolization by build-id in perf-collector
 * (the real binary as a child process on 127.0.0.1, collector_rig.c), fed
 * by a stripped build of samples/demo_app.c (demo_app_stripped: no .symtab,
 * its hang chain load_user_profile -> parse_profile_blob ->
 * checksum_profile_slowly is static) running with sink = http. Its debug
 * file (objcopy --only-keep-debug) reaches the collector in four ways:
 * in --symbols-dir at start, uploaded after the events (POST /v1/symbols,
 * by hand or with tools/perf-symbols), or fetched from a debuginfod server
 * (tests/http_server.c) in the background; and the upload's bad inputs get
 * their statuses. Each case runs in its own process:
 * `test_collector_symbols <case>`.
 */
#include <dirent.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libelf.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "build_id.h"
#include "check.h"
#include "collector_rig.h"
#include "demo_rig.h"
#include "http_server.h"
#include "tempdir.h"

#define POLL_DEADLINE_S 60.0

static const char *const HANG_CHAIN[] = {"checksum_profile_slowly", "parse_profile_blob",
                                         "load_user_profile"};

/* ---- files ---------------------------------------------------------------- */

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  CHECKF(f != NULL, "%s: %s", path, strerror(errno));
  CHECK(fseek(f, 0, SEEK_END) == 0);
  long size = ftell(f);
  CHECK(size > 0 && fseek(f, 0, SEEK_SET) == 0);
  char *data = malloc((size_t)size);
  CHECK(data != NULL && fread(data, 1, (size_t)size, f) == (size_t)size);
  fclose(f);
  *len = (size_t)size;
  return data;
}

/* mkdir -p of path's parent directories. */
static void make_parents(const char *path) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      CHECK(mkdir(buf, 0755) == 0 || errno == EEXIST);
      *p = '/';
    }
}

/* The debug file's place under dir (.build-id/xx/rest.debug). */
static void debug_path(const char *dir, const char *id, char *out, size_t size) {
  snprintf(out, size, "%s/.build-id/%.2s/%s.debug", dir, id, id + 2);
}

static bool file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Files in dir whose name starts with prefix. */
static int count_prefixed(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
  closedir(d);
  return n;
}

/* ---- the demo ------------------------------------------------------------- */

/* Run the stripped demo with its events sent to c (demo_rig.c). */
static void run_demo(const collector_t *c) {
  demo_run_uploading(c, DEMO_STRIPPED_PATH, tempdir_make("perf-sym"));
}

/* ---- the API -------------------------------------------------------------- */

static void print_json(const char *what, json_t *j) {
  char *text = json_dumps(j, JSON_INDENT(1));
  fprintf(stderr, "%s: %.4000s\n", what, text ? text : "?");
  free(text);
}

/* The hang group whose frame names start with HANG_CHAIN (the demo's
   hang, stuck in checksum_profile_slowly); NULL when there is none. The
   demo has one such hang; other hangs (the loop thread waiting on a busy
   machine) may group elsewhere, even above it. */
static json_t *chain_group(json_t *top) {
  size_t i;
  json_t *g;
  json_array_foreach(json_object_get(top, "stacks"), i, g) {
    json_t *frames = json_object_get(g, "frames");
    size_t k = 0;
    while (k < ARRAY_LEN(HANG_CHAIN) && json_string_value(json_array_get(frames, k)) &&
           strcmp(json_string_value(json_array_get(frames, k)), HANG_CHAIN[k]) == 0)
      k++;
    if (k == ARRAY_LEN(HANG_CHAIN)) return g;
  }
  return NULL;
}

static bool chain_named(json_t *top) {
  return chain_group(top) != NULL;
}

/* Frames of the demo's own module still unnamed, over all groups. */
static size_t unnamed_demo_frames(json_t *top) {
  size_t n = 0, i, k;
  json_t *g, *f;
  json_array_foreach(json_object_get(top, "stacks"), i, g) {
    json_array_foreach(json_object_get(g, "frames"), k, f) {
      n += strncmp(json_string_value(f), "demo_app_stripped+0x", 20) == 0;
    }
  }
  return n;
}

/* The demo's hang named, and no frame of its module left unnamed. */
static bool all_named(json_t *top) {
  return chain_named(top) && unnamed_demo_frames(top) == 0;
}

/* A field summed over all groups. */
static json_int_t groups_sum(json_t *top, const char *field) {
  json_int_t sum = 0;
  size_t i;
  json_t *g;
  json_array_foreach(json_object_get(top, "stacks"), i, g) {
    sum += json_integer_value(json_object_get(g, field));
  }
  return sum;
}

/* GET top-stacks?kind=hang until done(top) or the deadline; the last one. */
static json_t *top_hang_until(const collector_t *c, bool (*done)(json_t *)) {
  double end = now_s() + POLL_DEADLINE_S;
  for (;;) {
    json_t *j = get_ok(c, "/api/v1/top-stacks?kind=hang");
    if (done(j) || now_s() > end) return j;
    json_decref(j);
    usleep(100000);
  }
}

static bool has_stacks(json_t *top) {
  return json_array_size(json_object_get(top, "stacks")) > 0;
}

static size_t event_count(const collector_t *c) {
  json_t *j = get_ok(c, "/api/v1/events?limit=1000");
  size_t n = json_array_size(json_object_get(j, "events"));
  json_decref(j);
  return n;
}

/* The hang event of the demo's hang group: its innermost frame is in
   checksum_profile_slowly, with file:line of demo_app.c and the build-id. */
static void check_detail_file_line(const collector_t *c, json_t *top, const char *id) {
  const char *sig = json_string_value(json_object_get(chain_group(top), "signature"));
  json_t *events = get_ok(c, "/api/v1/events?kind=hang&limit=1000");
  json_int_t event_id = -1;
  size_t i;
  json_t *e;
  json_array_foreach(json_object_get(events, "events"), i, e) {
    const char *g = json_string_value(json_object_get(e, "group"));
    if (g && strcmp(g, sig) == 0) event_id = json_integer_value(json_object_get(e, "id"));
  }
  json_decref(events);
  CHECKF(event_id >= 0, "no hang event in group %s", sig);
  char path[64];
  snprintf(path, sizeof path, "/api/v1/events/%lld", (long long)event_id);
  json_t *detail = get_ok(c, path);
  json_t *frame = json_array_get(
      json_object_get(json_array_get(json_object_get(detail, "stacks"), 0), "frames"), 0);
  print_json("innermost frame", frame);
  const char *fn = json_string_value(json_object_get(frame, "function"));
  const char *file = json_string_value(json_object_get(frame, "file"));
  const char *bid = json_string_value(json_object_get(frame, "build_id"));
  json_int_t line = json_integer_value(json_object_get(frame, "line"));
  CHECKF(fn && strcmp(fn, "checksum_profile_slowly") == 0, "function %s", fn ? fn : "(none)");
  CHECKF(file && strlen(file) >= 18 && strcmp(file + strlen(file) - 18, "samples/demo_app.c") == 0,
         "file %s", file ? file : "(none)");
  CHECK(line > 0);
  CHECK(bid && strcmp(bid, id) == 0);
  json_decref(detail);
}

/* POST body to /v1/symbols/<id>; key NULL: no Authorization. */
static long post_symbols(const collector_t *c, const char *id, const char *key, const void *body,
                         size_t len, bool chunked, reply_t *r) {
  char path[160], auth[128];
  snprintf(path, sizeof path, "/v1/symbols/%s", id);
  snprintf(auth, sizeof auth, "Authorization: Bearer %s", key ? key : "");
  const char *headers[] = {"Content-Type: application/octet-stream", key ? auth : NULL, NULL};
  return request(c, "POST", path, headers, body, len, chunked, r);
}

/* ---- cases ---------------------------------------------------------------- */

/* The debug file is in --symbols-dir before the events arrive: every frame
   of the demo is named at ingest, with file:line. */
static void case_symbols_dir(void) {
  char id[81], dir[256], dest[512];
  build_id_of(DEMO_STRIPPED_PATH, id);
  snprintf(dir, sizeof dir, "%s/symbols", tempdir_make("perf-sym"));
  debug_path(dir, id, dest, sizeof dest);
  make_parents(dest);
  size_t len;
  char *debug = read_file(DEMO_DEBUG_PATH, &len);
  FILE *f = fopen(dest, "wb");
  CHECK(f && fwrite(debug, 1, len, f) == len && fclose(f) == 0);
  free(debug);

  collector_t c;
  const char *extra[] = {"--symbols-dir", dir, NULL};
  collector_start(&c, extra);
  run_demo(&c);
  json_t *top = top_hang_until(&c, has_stacks);
  print_json("top hang stacks", top);
  CHECK(chain_named(top));
  CHECK_EQ_INT(json_integer_value(json_object_get(chain_group(top), "events")), 1);
  CHECK_EQ_INT(unnamed_demo_frames(top), 0);
  check_detail_file_line(&c, top, id);
  CHECK(metric(&c, "perf_collector_stacks_resymbolized_total") == 0);
  json_decref(top);
  collector_stop_healthy(&c);
}

/* Events first (unnamed: "demo_app_stripped+0x..."), then the debug file
   uploaded: 201, the stored stacks renamed and merged, the same events. */
static void case_upload_after_events(void) {
  char id[81];
  build_id_of(DEMO_STRIPPED_PATH, id);
  collector_t c;
  collector_start(&c, NULL);
  run_demo(&c);
  json_t *before = top_hang_until(&c, has_stacks);
  print_json("before", before);
  CHECK(unnamed_demo_frames(before) > 0);
  CHECK(!chain_named(before));
  size_t events = event_count(&c);
  long long stacks = metric(&c, "perf_collector_stacks");
  json_int_t group_events = groups_sum(before, "events");
  json_int_t group_samples = groups_sum(before, "samples");

  size_t len;
  char *debug = read_file(DEMO_DEBUG_PATH, &len);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECKF(post_symbols(&c, id, GOOD_KEY, debug, len, false, r) == 201, "%ld %s", r->status, r->body);
  CHECKF(strstr(r->body, "stacks renamed") != NULL, "%s", r->body);

  /* Renamed in the upload's transaction: no polling needed. */
  json_t *after = get_ok(&c, "/api/v1/top-stacks?kind=hang");
  print_json("after", after);
  CHECK(chain_named(after));
  CHECK_EQ_INT(json_integer_value(json_object_get(chain_group(after), "events")), 1);
  CHECK_EQ_INT(unnamed_demo_frames(after), 0);
  CHECK_EQ_INT(groups_sum(after, "events"), group_events);
  CHECK_EQ_INT(groups_sum(after, "samples"), group_samples);
  CHECK_EQ_INT(event_count(&c), events);
  long long stacks_after = metric(&c, "perf_collector_stacks");
  CHECKF(stacks_after < stacks, "stacks %lld -> %lld: none merged", stacks, stacks_after);
  CHECK(metric(&c, "perf_collector_stacks_resymbolized_total") > 0);
  CHECK_EQ_INT(metric(&c, "perf_collector_symbols_uploaded_total"), 1);
  check_detail_file_line(&c, after, id);
  /* PostgreSQL: the rename deleted stored stacks, so stack_epoch moved
     (every collector forgets the rows it knew stored), and every count
     still has its stack. */
  if (rig_pg()) CHECK_EQ_INT(db_count(c.db, "SELECT epoch FROM stack_epoch"), 1);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stack_counts c WHERE NOT EXISTS"
                              " (SELECT 1 FROM stacks s WHERE s.signature = c.stack_sig)"),
               0);

  /* The same file again: 200, nothing changes. */
  CHECKF(post_symbols(&c, id, GOOD_KEY, debug, len, false, r) == 200, "%ld %s", r->status, r->body);
  CHECK_EQ_INT(metric(&c, "perf_collector_stacks"), stacks_after);
  char installed[512], symbols_dir[256];
  snprintf(symbols_dir, sizeof symbols_dir, "%s/collector.db.symbols", c.dir);
  debug_path(symbols_dir, id, installed, sizeof installed);
  CHECK(file_exists(installed));
  free(r);
  free(debug);
  json_decref(before);
  json_decref(after);
  collector_stop_healthy(&c);
}

/* The way a build pipeline sends them: events first (unnamed), then
   tools/perf-symbols run over a directory holding the stripped demo, with
   --debug-dir pointing at its debug file in the .build-id layout: one
   upload, and the stored stacks are named with the demo's chain. */
static void case_perf_symbols_after_events(void) {
  char id[81], build[256], debug_dir[256], dest[512], copy[512];
  build_id_of(DEMO_STRIPPED_PATH, id);
  const char *tmp = tempdir_make("perf-sym");
  snprintf(build, sizeof build, "%s/build", tmp);
  snprintf(copy, sizeof copy, "%s/demo_app", build);
  make_parents(copy);
  size_t len;
  char *bytes = read_file(DEMO_STRIPPED_PATH, &len);
  FILE *f = fopen(copy, "wb");
  CHECK(f && fwrite(bytes, 1, len, f) == len && fclose(f) == 0);
  free(bytes);
  snprintf(debug_dir, sizeof debug_dir, "%s/debug", tmp);
  debug_path(debug_dir, id, dest, sizeof dest);
  make_parents(dest);
  bytes = read_file(DEMO_DEBUG_PATH, &len);
  f = fopen(dest, "wb");
  CHECK(f && fwrite(bytes, 1, len, f) == len && fclose(f) == 0);
  free(bytes);

  collector_t c;
  collector_start(&c, NULL);
  run_demo(&c);
  json_t *before = top_hang_until(&c, has_stacks);
  CHECK(unnamed_demo_frames(before) > 0);
  char *argv[] = {PERF_SYMBOLS_PATH, "--url",   c.url, "--key", GOOD_KEY,
                  "--debug-dir",     debug_dir, build, NULL};
  char out[512];
  snprintf(out, sizeof out, "%s/perf-symbols.txt", tmp);
  int status = spawn_wait(spawn(argv, out), 60.0);
  char *text = read_file(out, &len);
  fprintf(stderr, "perf-symbols -> %d: %.*s", status, (int)len, text);
  CHECK_EQ_INT(status, 0);
  CHECKF(strstr(text, "perf-symbols: 1 uploaded, 0 already on the collector") != NULL, "%s", text);
  free(text);
  json_t *after = get_ok(&c, "/api/v1/top-stacks?kind=hang");
  print_json("after perf-symbols", after);
  CHECK(chain_named(after));
  CHECK_EQ_INT(unnamed_demo_frames(after), 0);
  json_decref(before);
  json_decref(after);
  collector_stop_healthy(&c);
}

/* Bad uploads get their status and reason, store nothing, leave no
   temporary file, and the server stays healthy. */
static void case_upload_errors(void) {
  char id[81], other[81];
  build_id_of(DEMO_STRIPPED_PATH, id);
  snprintf(other, sizeof other, "%s", id);
  other[0] = other[0] == '0' ? '1' : '0';
  collector_t c;
  const char *extra[] = {"--max-symbols-bytes", "1048576", NULL};
  collector_start(&c, extra);
  size_t len;
  char *debug = read_file(DEMO_DEBUG_PATH, &len);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);

  CHECK_EQ_INT(post_symbols(&c, id, NULL, debug, len, false, r), 401);
  CHECK_EQ_INT(post_symbols(&c, id, "wrong-key", debug, len, false, r), 401);
  CHECK_EQ_INT(post_symbols(&c, other, GOOD_KEY, debug, len, false, r), 400);
  CHECKF(strstr(r->body, "build-id mismatch") && strstr(r->body, id) && strstr(r->body, other),
         "%s", r->body);
  static const char NOT_ELF[] = "this is not an ELF file, just text";
  CHECK_EQ_INT(post_symbols(&c, id, GOOD_KEY, NOT_ELF, sizeof NOT_ELF, false, r), 400);
  CHECKF(strstr(r->body, "not an ELF file") != NULL, "%s", r->body);
  CHECK_EQ_INT(post_symbols(&c, id, GOOD_KEY, "", 0, false, r), 400);
  CHECK_EQ_INT(post_symbols(&c, "xyz1", GOOD_KEY, debug, len, false, r), 400);
  CHECKF(strstr(r->body, "hexadecimal") != NULL, "%s", r->body);
  CHECK_EQ_INT(post_symbols(&c, "abc", GOOD_KEY, debug, len, false, r), 400); /* odd */
  size_t big_len = 2u << 20;
  char *big = calloc(1, big_len);
  CHECK(big != NULL);
  memcpy(big, debug, len); /* a real ELF start, far too long */
  CHECK_EQ_INT(post_symbols(&c, id, GOOD_KEY, big, big_len, false, r), 413);
  /* Chunked: 413 once past the cap (past twice the cap: connection closed). */
  CHECK_EQ_INT(post_symbols(&c, id, GOOD_KEY, big, big_len * 3 / 4, true, r), 413);
  CHECK_EQ_INT(request(&c, "GET", "/v1/symbols/00ff", NULL, NULL, 0, false, r), 401); /* no key */
  CHECK(healthy_within(&c, 5));

  char symbols_dir[256], path[512], build_id_dir[300];
  snprintf(symbols_dir, sizeof symbols_dir, "%s/collector.db.symbols", c.dir);
  debug_path(symbols_dir, id, path, sizeof path);
  CHECK(!file_exists(path));
  debug_path(symbols_dir, other, path, sizeof path);
  CHECK(!file_exists(path));
  snprintf(build_id_dir, sizeof build_id_dir, "%s/.build-id", symbols_dir);
  CHECK_EQ_INT(count_prefixed(build_id_dir, ".incoming-"), 0);
  CHECK_EQ_INT(metric(&c, "perf_collector_symbols_uploaded_total"), 0);

  /* After all that, a good upload still works. */
  CHECKF(post_symbols(&c, id, GOOD_KEY, debug, len, false, r) == 201, "%ld %s", r->status, r->body);
  debug_path(symbols_dir, id, path, sizeof path);
  CHECK(file_exists(path));
  free(big);
  free(r);
  free(debug);
  collector_stop_healthy(&c);
}

/* Requests for path that the debuginfod server received. */
static size_t requests_for(http_server_t *srv, const char *path) {
  size_t n = 0, count = http_server_request_count(srv);
  for (size_t i = 0; i < count; i++) {
    http_request_t rq;
    if (!http_server_request(srv, i, &rq)) continue;
    n += strcmp(rq.path, path) == 0;
    http_request_free(&rq);
  }
  return n;
}

/* A debuginfod on 127.0.0.1 with the demo's debug file: the build-id in
   id, its path in url_path (/buildid/<id>/debuginfo), the file answered
   `answers` times after delay_ms each (404 otherwise). *debug is the
   file's text, freed by the caller. */
static http_server_t *debuginfod_start(char id[81], char url_path[160], int answers,
                                       unsigned delay_ms, char **debug) {
  build_id_of(DEMO_STRIPPED_PATH, id);
  size_t len;
  *debug = read_file(DEMO_DEBUG_PATH, &len);
  http_server_t *dbg = http_server_start();
  CHECK(dbg != NULL);
  CHECK(http_server_set_default(dbg, &(http_response_t){.status = 404, .body = "not found"}));
  snprintf(url_path, 160, "/buildid/%s/debuginfo", id);
  for (int i = 0; i < answers; i++)
    CHECK(http_server_push(
        dbg, &(http_response_t){
                 .body = *debug, .body_len = len, .delay_ms = delay_ms, .path = url_path}));
  return dbg;
}

/* DEBUGINFOD_URLS points at a debuginfod on 127.0.0.1 that has the debug
   file: the collector fetches it in the background and the names appear. */
static void case_debuginfod(void) {
  char id[81], url_path[160], cache[256], *debug;
  /* One answer is enough; a retry finds the file too. */
  http_server_t *dbg = debuginfod_start(id, url_path, 3, 0, &debug);
  snprintf(cache, sizeof cache, "%s/debuginfod-cache", tempdir_make("perf-sym"));
  setenv("DEBUGINFOD_URLS", http_server_url(dbg), 1);
  setenv("DEBUGINFOD_CACHE_PATH", cache, 1);
  collector_t c;
  collector_start(&c, NULL);
  unsetenv("DEBUGINFOD_URLS");
  unsetenv("DEBUGINFOD_CACHE_PATH");

  run_demo(&c);
  json_t *top = top_hang_until(&c, all_named);
  print_json("top hang stacks", top);
  CHECK(chain_named(top));
  CHECK_EQ_INT(unnamed_demo_frames(top), 0);
  check_detail_file_line(&c, top, id);
  CHECKF(requests_for(dbg, url_path) >= 1, "debuginfod was not asked for %s (%zu requests)",
         url_path, http_server_request_count(dbg));
  char symbols_dir[256], path[512];
  snprintf(symbols_dir, sizeof symbols_dir, "%s/collector.db.symbols", c.dir);
  debug_path(symbols_dir, id, path, sizeof path);
  CHECK(file_exists(path));
  json_decref(top);
  collector_stop_healthy(&c);
  http_server_stop(dbg);
  free(debug);
}

/* Two collectors on one PostgreSQL database with one symbols directory
   (PostgreSQL only): both meet the demo's unknown build-id while A's
   fetch is in flight (the debuginfod answers after DELAY_MS); B finds the
   fetch claimed (perf_collector_debuginfod_deferred_total), leaves it to
   A, and names the frames from the file A installs. debuginfod is asked
   once in all, though each collector has a debuginfod cache of its own. */
static void case_debuginfod_two_collectors(void) {
  enum { DELAY_MS = 30000 }; /* longer than B's demo run, on a busy machine too */
  char id[81], url_path[160], shared[256], cache_a[300], cache_b[300], *debug;
  /* A second fetch would find the file too: asked twice would show. */
  http_server_t *dbg = debuginfod_start(id, url_path, 2, DELAY_MS, &debug);
  const char *dir = tempdir_make("perf-sym");
  snprintf(shared, sizeof shared, "%s/shared-symbols", dir);
  snprintf(cache_a, sizeof cache_a, "%s/debuginfod-cache-a", dir);
  snprintf(cache_b, sizeof cache_b, "%s/debuginfod-cache-b", dir);
  const char *extra[] = {"--symbols-dir", shared, NULL};
  setenv("DEBUGINFOD_URLS", http_server_url(dbg), 1);
  collector_t a, b;
  setenv("DEBUGINFOD_CACHE_PATH", cache_a, 1);
  collector_start(&a, extra);
  setenv("DEBUGINFOD_CACHE_PATH", cache_b, 1);
  collector_start(&b, extra);
  unsetenv("DEBUGINFOD_URLS");
  unsetenv("DEBUGINFOD_CACHE_PATH");

  run_demo(&a); /* A wants the build-id and starts its fetch */
  double deadline = now_s() + 30;
  while (requests_for(dbg, url_path) == 0 && now_s() < deadline)
    usleep(20000);
  CHECKF(requests_for(dbg, url_path) == 1, "A never asked debuginfod for %s", url_path);
  run_demo(&b); /* B wants it while A's answer is still delayed */
  deadline = now_s() + 30;
  while (metric(&b, "perf_collector_debuginfod_deferred_total") == 0 && now_s() < deadline)
    usleep(20000);
  CHECKF(metric(&b, "perf_collector_debuginfod_deferred_total") >= 1,
         "B never found the fetch claimed");
  CHECK_EQ_INT(requests_for(dbg, url_path), 1);

  json_t *top = top_hang_until(&b, all_named); /* from A's file, once it is in */
  CHECK(chain_named(top));
  CHECK_EQ_INT(unnamed_demo_frames(top), 0);
  json_decref(top);
  CHECK_EQ_INT(requests_for(dbg, url_path), 1);
  CHECK_EQ_INT(metric(&a, "perf_collector_debuginfod_deferred_total"), 0);
  char path[512];
  debug_path(shared, id, path, sizeof path);
  CHECK(file_exists(path));
  collector_stop_healthy(&b);
  collector_stop_healthy(&a);
  http_server_stop(dbg);
  free(debug);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE(symbols_dir),
      TEST_CASE(upload_after_events),
      TEST_CASE(perf_symbols_after_events),
      TEST_CASE(upload_errors),
      TEST_CASE(debuginfod),
      TEST_CASE(debuginfod_two_collectors),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
