/*
 * test_collector.c - perf-collector (collector/) as a real child process on
 * 127.0.0.1, driven with libcurl: a batch made by the SDK (sink = http) is
 * stored (checked with the sqlite3 API on the database), and every bad
 * input gets its status and leaves the server healthy (GET /healthz 200,
 * then SIGTERM and exit 0: under ASan, a clean exit also means no leak).
 * Batches for the bad-input cases are built here with protobuf-c and zstd.
 * Each case runs in its own process: `test_collector <case>`.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "perf/v1/perf.pb-c.h"
#include "perf_sdk.h"
#include "sdk/sampler/module_map.h"
#include "sdk/wire/batch_decode.h"
#include "sdk_util.h"
#include "tempdir.h"

/* ---- the collector as a child process ------------------------------------ */

static long vm_rss_kib(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  fclose(f);
  return kib;
}

/* ---- payloads -------------------------------------------------------------- */

/* A valid batch: one manual event with one named stack sampled 3 times. */
static void make_batch(payload_t *p, uint8_t seed) {
  uint8_t id[16];
  for (int i = 0; i < 16; i++)
    id[i] = (uint8_t)(seed * 31 + i + (unsigned)getpid());
  batch_one_event_t o;
  batch_one_event_init(&o, id, "hand-made", "/usr/bin/hand", "hand_made_function");
  o.b.sequence = 1;
  o.res.host = "test-host";
  o.res.pid = 42;
  o.b.symbolized = true;
  Perf__V1__Frame fr[2] = {PERF__V1__FRAME__INIT, PERF__V1__FRAME__INIT};
  Perf__V1__Frame *frs[] = {&fr[0], &fr[1]};
  fr[0].module = 1, fr[0].address = 0x1234, fr[0].function = 1, fr[0].function_offset = 4;
  fr[1].module = 1, fr[1].address = 0x5678; /* unnamed: module + address */
  o.b.n_frames = 2, o.b.frames = frs;
  uint32_t frame_ids[] = {1, 2};
  o.st.n_frames = 2, o.st.frames = frame_ids;
  o.sc.tid = 7, o.sc.samples = 3;
  o.ev.kind = PERF__V1__EVENT_KIND__EVENT_KIND_MANUAL;
  o.ev.start_unix_nanos = 1700000000000000000;
  o.ev.duration_nanos = 5000000;
  o.ev.tid = 7;
  o.ev.reason = "hand made";
  payload_pack(p, &o.b, 3);
}

/* One small zstd frame that expands to `expanded` zero bytes, with a small
   window (so only the output cap can stop it). */
static void make_bomb(payload_t *p, size_t expanded) {
  ZSTD_CCtx *cc = ZSTD_createCCtx();
  CHECK(cc != NULL);
  ZSTD_CCtx_setParameter(cc, ZSTD_c_windowLog, 17);
  size_t chunk = 1u << 20, cap = 1u << 20;
  uint8_t *zeros = calloc(1, chunk);
  CHECK(zeros && (p->data = malloc(cap)));
  ZSTD_outBuffer out = {p->data, cap, 0};
  for (size_t done = 0; done < expanded; done += chunk) {
    ZSTD_inBuffer in = {zeros, chunk, 0};
    ZSTD_EndDirective end = done + chunk >= expanded ? ZSTD_e_end : ZSTD_e_continue;
    size_t left;
    do
      CHECK(!ZSTD_isError(left = ZSTD_compressStream2(cc, &out, &in, end)));
    while (in.pos < in.size || (end == ZSTD_e_end && left != 0));
  }
  p->len = out.pos;
  snprintf(p->id_hex, sizeof p->id_hex, "%s", "00112233445566778899aabbccddeeff");
  free(zeros);
  ZSTD_freeCCtx(cc);
}

/* ---- cases ------------------------------------------------------------------ */

static CHAIN int collector_capture_inner(const char *reason) {
  return perf_sdk_capture_now(reason) + 1;
}
static CHAIN int collector_capture_outer(const char *reason) {
  return collector_capture_inner(reason) + 1;
}

static void case_sdk_batch_stored(void) {
  collector_t c;
  collector_start(&c, NULL);
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  char data_dir[128];
  snprintf(data_dir, sizeof data_dir, "%s/sdk", tempdir_make("perf-coll"));
  sdk_config_upload(&cfg, "collector-test", c.url, GOOD_KEY, data_dir);
  cfg.app_version = "1.2.3";
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  for (int i = 0; i < 3; i++)
    CHECK_EQ_INT(collector_capture_outer("to the collector"), 2);
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK);
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  CHECK(st.batches_written >= 1);
  CHECK_EQ_INT(st.batches_sent, st.batches_written);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK_EQ_INT(metric(&c, "perf_collector_batches_accepted_total"), st.batches_sent);
  CHECK(metric(&c, "perf_collector_samples_total") >= 3);
  CHECK(metric(&c, "perf_collector_db_bytes") > 0);
  CHECK_EQ_INT(metric(&c, "perf_collector_ingest_seconds_count"), st.batches_sent);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches WHERE app = 'collector-test'"
                              " AND version = '1.2.3'"),
               st.batches_sent);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM events WHERE reason = 'to the collector'"
                              " AND kind = 'manual'"),
               3);
  CHECK(db_count(c.db, "SELECT count(*) FROM stacks") >= 1);
  CHECK(db_count(c.db, "SELECT count(*) FROM stacks WHERE frames LIKE "
                       "'%collector_capture_inner%'") >= 1);
  CHECK(db_count(c.db, "SELECT sum(samples) FROM stack_counts") >= 3);
  /* Every event's dominant stack and every count's stack is stored. */
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM events WHERE dominant_stack_sig IS NOT NULL"
                              " AND dominant_stack_sig NOT IN (SELECT signature FROM stacks)"),
               0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stack_counts WHERE stack_sig NOT IN"
                              " (SELECT signature FROM stacks)"),
               0);
}

/* ---- a fatal hang ------------------------------------------------------------ */

static volatile int g_spin;

static CHAIN void fatal_chain_inner(void) {
  for (;;)
    g_spin++;
}
static CHAIN void fatal_chain_outer(void) {
  fatal_chain_inner();
}

/* Key rotation: an app still shipping a revoked key gets 401 for its
   batches, which stay in its spool; the next process with the new key sends
   them first. Every event arrives, once. */
static void rotation_config(perf_sdk_config_t *cfg, const collector_t *c, const char *data_dir,
                            const char *key) {
  perf_sdk_config_init(cfg);
  cfg->app_name = "rotation-test";
  cfg->sink = PERF_SINK_HTTP;
  cfg->endpoint = c->url;
  cfg->api_key = key;
  cfg->data_dir = data_dir;
  cfg->batch_max_delay_ms = 200;
}

static void case_key_rotation(void) {
  collector_t c;
  collector_start(&c, NULL);
  char data_dir[128];
  snprintf(data_dir, sizeof data_dir, "%s/sdk", tempdir_make("perf-rotation"));
  perf_sdk_config_t cfg;
  rotation_config(&cfg, &c, data_dir, "revoked-key");
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  for (int i = 0; i < 3; i++)
    CHECK_EQ_INT(collector_capture_outer("rotated"), 2);
  /* Written, refused (401: kept, retried after a long backoff): not
     delivered, and the flush says so as soon as the backoff is set, not
     after its whole timeout (perf_sdk_flush in perf_sdk.h). */
  double t0 = now_s();
  CHECK_EQ_INT(perf_sdk_flush(20000), PERF_E_DEADLINE);
  CHECKF(now_s() - t0 < 10.0, "the flush waited %.1f s for a retry due after its deadline",
         now_s() - t0);
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  CHECK(st.batches_written >= 1);
  CHECK_EQ_INT(st.batches_sent, 0);
  CHECK_EQ_INT(st.batches_rejected, 0);
  CHECK(st.batches_retried >= 1);
  uint64_t written = st.batches_written;
  /* The uploader may be in its request or loading libcurl: a loaded
     machine needs more than a second to see it out. */
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK(metric(&c, "perf_collector_batches_rejected_total{reason=\"unauthorized\"}") >= 1);
  CHECK_EQ_INT(metric(&c, "perf_collector_batches_accepted_total"), 0);

  rotation_config(&cfg, &c, data_dir, GOOD_KEY); /* the next release */
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK);
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  CHECK_EQ_INT(st.batches_sent, written);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM events WHERE reason = 'rotated'"), 3);
}

static void fatal_config(perf_sdk_config_t *cfg, const collector_t *c, const char *data_dir) {
  perf_sdk_config_init(cfg);
  cfg->app_name = "fatal-test";
  cfg->sink = PERF_SINK_HTTP;
  cfg->endpoint = c->url;
  cfg->api_key = GOOD_KEY;
  cfg->data_dir = data_dir;
  cfg->batch_max_delay_ms = 200;
  cfg->hang_threshold_ms = 100;
  cfg->hang_sample_interval_ms = 20;
  cfg->symbolize = 0; /* names come from the collector, by build-id */
}

/* Good samples in the hang marker at path (a one-event batch); -1 while it
   is absent. */
static long marker_samples(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  static uint8_t data[4 << 20];
  size_t len = fread(data, 1, sizeof data, f);
  fclose(f);
  Perf__V1__Batch *bt = NULL;
  CHECKF(perf__batch_decode_stored(data, len, sizeof data, &bt) == PERF_OK, "%s: not a batch",
         path);
  long good = 0;
  for (size_t i = 0; i < bt->events[0]->n_sample_stacks; i++)
    good += bt->events[0]->sample_stacks[i] != 0;
  perf__v1__batch__free_unpacked(bt, NULL);
  return good;
}

/* This executable's GNU build-id as hex, and its debug file (itself: it has
   .symtab and DWARF) installed under symbols_dir by that id. */
static void install_own_symbols(const char *symbols_dir, char id_hex[2 * PERF__BUILD_ID_MAX + 1]) {
  perf__module_map_t *map = NULL;
  CHECK_EQ_INT(perf__module_map_build(&map), PERF_OK);
  const perf__module_t *m = perf__module_map_find(map, (uintptr_t)fatal_chain_inner);
  CHECK(m != NULL && m->build_id_len >= 16);
  for (size_t i = 0; i < m->build_id_len; i++)
    snprintf(id_hex + 2 * i, 3, "%02x", m->build_id[i]);
  char dir[512], link[700];
  snprintf(dir, sizeof dir, "%s/.build-id", symbols_dir);
  CHECK(mkdir(symbols_dir, 0755) == 0 && mkdir(dir, 0755) == 0);
  snprintf(dir, sizeof dir, "%s/.build-id/%.2s", symbols_dir, id_hex);
  CHECK(mkdir(dir, 0755) == 0);
  snprintf(link, sizeof link, "%s/%s.debug", dir, id_hex + 2);
  CHECK(symlink(m->path, link) == 0);
  perf__module_map_free(map);
}

/* A process killed -9 while hung: its hang marker holds the hang in the
   wire encoding (module, build-id, module-relative addresses); the next
   process with the same data_dir sends it as a fatal_hang, and the
   collector names its frames from the debug file found by that build-id
   (the SDK sent no names: symbolize = 0). */
static void case_fatal_hang_build_id(void) {
  const char *tmp = tempdir_make("perf-fatal");
  char symbols[160], data_dir[160], marker[224];
  snprintf(symbols, sizeof symbols, "%s/symbols", tmp);
  snprintf(data_dir, sizeof data_dir, "%s/sdk", tmp);
  char id[2 * PERF__BUILD_ID_MAX + 1];
  install_own_symbols(symbols, id);
  collector_t c;
  const char *extra[] = {"--symbols-dir", symbols, NULL};
  collector_start(&c, extra);
  perf_sdk_config_t cfg;
  fatal_config(&cfg, &c, data_dir);

  pid_t hung = fork();
  CHECK(hung >= 0);
  if (hung == 0) {
    if (perf_sdk_init(&cfg) != PERF_OK || perf_sdk_loop_busy() != PERF_OK) _exit(3);
    fatal_chain_outer();
  }
  snprintf(marker, sizeof marker, "%s/hang-%d.marker", data_dir, (int)hung);
  double deadline = now_s() + 30;
  while (marker_samples(marker) < 3) {
    CHECKF(now_s() < deadline, "no marker %s with 3 samples", marker);
    usleep(5000);
  }
  CHECK(kill(hung, SIGKILL) == 0);
  int st = 0;
  CHECK(waitpid(hung, &st, 0) == hung && WIFSIGNALED(st));

  pid_t next = fork();
  CHECK(next >= 0);
  if (next == 0) {
    int ok = perf_sdk_init(&cfg) == PERF_OK && perf_sdk_flush(20000) == PERF_OK &&
             perf_sdk_shutdown(5000) == PERF_OK;
    _exit(ok ? 0 : 4);
  }
  CHECK(waitpid(next, &st, 0) == next);
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the next run: status 0x%x", st);
  collector_stop_healthy(&c);

  char sql[512];
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM events WHERE kind = 'fatal_hang' AND reason ="
           " 'process %d ended while its thread %d was hung'",
           (int)hung, (int)hung);
  CHECK_EQ_INT(db_count(c.db, sql), 1);
  /* Every stack of the fatal hang: named by the collector, with the
     build-id (the spin loop may be sampled at several instructions). */
  const char *fatal_stacks = "SELECT count(*) FROM stacks s JOIN stack_counts sc"
                             " ON sc.stack_sig = s.signature JOIN events e ON e.id = sc.event_id"
                             " WHERE e.kind = 'fatal_hang'";
  long long all = db_count(c.db, fatal_stacks);
  CHECK(all >= 1);
  snprintf(sql, sizeof sql,
           "%s AND s.frames LIKE '%%\"build_id\":\"%s\"%%'"
           " AND s.frames LIKE '%%fatal_chain_inner%%' AND s.frames LIKE '%%fatal_chain_outer%%'",
           fatal_stacks, id);
  CHECK_EQ_INT(db_count(c.db, sql), all);
}

static void case_no_auth(void) {
  collector_t c;
  collector_start(&c, NULL);
  payload_t p;
  make_batch(&p, 1);
  reply_t r;
  CHECK_EQ_INT(post_batch(&c, NULL, p.id_hex, p.data, p.len, &r), 401);
  const char *basic[] = {"Authorization: Basic Z29vZC1rZXk6",
                         "Content-Type: application/x-protobuf", "Content-Encoding: zstd", NULL};
  CHECK_EQ_INT(request(&c, "POST", "/v1/batches", basic, p.data, p.len, false, &r), 401);
  CHECK_EQ_INT(post_batch(&c, "", p.id_hex, p.data, p.len, &r), 401);
  CHECK_EQ_INT(metric(&c, "perf_collector_batches_rejected_total{reason=\"unauthorized\"}"), 3);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 0);
  free(p.data);
}

static void case_wrong_key(void) {
  collector_t c;
  collector_start(&c, (const char *[]){"--max-decompressed-bytes", "1048576", NULL});
  payload_t bomb;
  make_bomb(&bomb, 512u << 20);
  reply_t r;
  double t0 = now_s();
  CHECK_EQ_INT(post_batch(&c, "wrong-key", bomb.id_hex, bomb.data, bomb.len, &r), 401);
  CHECKF(now_s() - t0 < 2.0, "401 took %.2f s", now_s() - t0);
  /* Refused from the headers: the bomb was never decompressed. */
  CHECK_EQ_INT(metric(&c, "perf_collector_batches_rejected_total{reason=\"unauthorized\"}"), 1);
  CHECK_EQ_INT(
      metric(&c, "perf_collector_batches_rejected_total{reason=\"decompressed_too_large\"}"), 0);
  payload_t p;
  make_batch(&p, 2);
  CHECK_EQ_INT(post_batch(&c, "good-keyX", p.id_hex, p.data, p.len, &r), 401);
  CHECK_EQ_INT(post_batch(&c, "second-key", p.id_hex, p.data, p.len, &r), 200);
  collector_stop_healthy(&c);
  free(bomb.data);
  free(p.data);
}

static void case_oversized_body(void) {
  collector_t c;
  collector_start(&c, (const char *[]){"--max-body-bytes", "65536", NULL});
  size_t len = 100000;
  uint8_t *big = malloc(len);
  CHECK(big != NULL);
  for (size_t i = 0; i < len; i++)
    big[i] = (uint8_t)(i * 7919 >> 3);
  reply_t r;
  CHECK_EQ_INT(post_batch(&c, GOOD_KEY, "00112233445566778899aabbccddeeff", big, len, &r), 413);
  /* Without Content-Length (chunked): refused once the bytes pass the cap. */
  const char *headers[] = {"Authorization: Bearer " GOOD_KEY,
                           "Content-Type: application/x-protobuf", "Content-Encoding: zstd",
                           "X-Perf-Batch-Id: 00112233445566778899aabbccddeeff", NULL};
  CHECK_EQ_INT(request(&c, "POST", "/v1/batches", headers, big, len, true, &r), 413);
  CHECK_EQ_INT(metric(&c, "perf_collector_batches_rejected_total{reason=\"body_too_large\"}"), 2);
  free(big);
  collector_stop_healthy(&c);
}

static void case_zstd_bomb(void) {
  collector_t c;
  collector_start(&c, (const char *[]){"--max-decompressed-bytes", "1048576", NULL});
  payload_t bomb;
  make_bomb(&bomb, 256u << 20);
  CHECKF(bomb.len < 65536, "bomb is %zu bytes", bomb.len);
  reply_t r;
  CHECK_EQ_INT(post_batch(&c, GOOD_KEY, bomb.id_hex, bomb.data, bomb.len, &r), 413); /* warm-up */
  long before = vm_rss_kib(c.pid);
  for (int i = 0; i < 5; i++) {
    CHECK_EQ_INT(post_batch(&c, GOOD_KEY, bomb.id_hex, bomb.data, bomb.len, &r), 413);
    CHECKF(strstr(r.body, "decompressed size over the limit") != NULL, "body: %s", r.body);
  }
  long after = vm_rss_kib(c.pid);
  CHECKF(after - before < 64 * 1024, "RSS grew from %ld to %ld KiB", before, after);
  CHECK_EQ_INT(
      metric(&c, "perf_collector_batches_rejected_total{reason=\"decompressed_too_large\"}"), 6);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 0);
  free(bomb.data);
}

static void case_garbage_protobuf(void) {
  collector_t c;
  collector_start(&c, NULL);
  uint8_t garbage[4096];
  for (size_t i = 0; i < sizeof garbage; i++)
    garbage[i] = (uint8_t)(0xff - (i * 13 % 7));
  payload_t p;
  payload_compress(&p, garbage, sizeof garbage, 3);
  reply_t r;
  const char *id = "00112233445566778899aabbccddeeff";
  CHECK_EQ_INT(post_batch(&c, GOOD_KEY, id, p.data, p.len, &r), 400);
  CHECKF(strstr(r.body, "not a valid perf.v1.Batch") != NULL, "body: %s", r.body);
  CHECK_EQ_INT(post_batch(&c, GOOD_KEY, id, garbage, sizeof garbage, &r), 400);
  CHECKF(strstr(r.body, "not a zstd frame") != NULL, "body: %s", r.body);
  CHECK_EQ_INT(post_batch(&c, GOOD_KEY, id, p.data, p.len / 2, &r), 400); /* truncated frame */
  CHECK(r.body_len > 0);
  CHECK_EQ_INT(post_batch(&c, GOOD_KEY, id, "", 0, &r), 400); /* empty */
  free(p.data);
  /* A valid batch under another id, and a malformed id header. */
  make_batch(&p, 3);
  CHECK_EQ_INT(post_batch(&c, GOOD_KEY, id, p.data, p.len, &r), 400);
  CHECKF(strstr(r.body, "X-Perf-Batch-Id") != NULL, "body: %s", r.body);
  CHECK_EQ_INT(post_batch(&c, GOOD_KEY, "xyz", p.data, p.len, &r), 400);
  CHECK_EQ_INT(metric(&c, "perf_collector_batches_rejected_total{reason=\"bad_payload\"}"), 4);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 0);
  free(p.data);
}

static void case_wrong_content_type(void) {
  collector_t c;
  collector_start(&c, NULL);
  payload_t p;
  make_batch(&p, 4);
  char id[64];
  snprintf(id, sizeof id, "X-Perf-Batch-Id: %s", p.id_hex);
  const char *json[] = {"Authorization: Bearer " GOOD_KEY, "Content-Type: application/json",
                        "Content-Encoding: zstd", id, NULL};
  const char *gzip[] = {"Authorization: Bearer " GOOD_KEY, "Content-Type: application/x-protobuf",
                        "Content-Encoding: gzip", id, NULL};
  const char *none[] = {"Authorization: Bearer " GOOD_KEY, "Content-Type: application/x-protobuf",
                        id, NULL};
  reply_t r;
  CHECK_EQ_INT(request(&c, "POST", "/v1/batches", json, p.data, p.len, false, &r), 415);
  CHECK_EQ_INT(request(&c, "POST", "/v1/batches", gzip, p.data, p.len, false, &r), 415);
  CHECK_EQ_INT(request(&c, "POST", "/v1/batches", none, p.data, p.len, false, &r), 415);
  CHECK_EQ_INT(get(&c, "/v1/batches", &r), 405);
  CHECK_EQ_INT(get(&c, "/nowhere", &r), 404);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 0);
  free(p.data);
}

static void case_repeated_batch_id(void) {
  collector_t c;
  collector_start(&c, NULL);
  payload_t p;
  make_batch(&p, 5);
  reply_t r;
  CHECK_EQ_INT(post_batch(&c, GOOD_KEY, p.id_hex, p.data, p.len, &r), 200);
  CHECK_EQ_INT(post_batch(&c, GOOD_KEY, p.id_hex, p.data, p.len, &r), 200);
  CHECKF(strstr(r.body, "duplicate") != NULL, "body: %s", r.body);
  CHECK_EQ_INT(metric(&c, "perf_collector_batches_accepted_total"), 1);
  CHECK_EQ_INT(metric(&c, "perf_collector_events_total"), 1);
  CHECK_EQ_INT(metric(&c, "perf_collector_samples_total"), 3);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 1);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM events"), 1);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stack_counts"), 1);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stacks WHERE frames LIKE "
                              "'%hand_made_function%' AND frames LIKE '%0x5678%'"),
               1);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches WHERE host = 'test-host' AND pid = 42"),
               1);
  free(p.data);
}

static void case_rate_limit(void) {
  collector_t c;
  collector_start(&c, (const char *[]){"--rate-limit", "1", "--rate-burst", "2", NULL});
  reply_t r;
  payload_t p[3];
  for (int i = 0; i < 3; i++)
    make_batch(&p[i], (uint8_t)(10 + i));
  CHECK_EQ_INT(post_batch(&c, GOOD_KEY, p[0].id_hex, p[0].data, p[0].len, &r), 200);
  CHECK_EQ_INT(post_batch(&c, GOOD_KEY, p[1].id_hex, p[1].data, p[1].len, &r), 200);
  CHECK_EQ_INT(post_batch(&c, GOOD_KEY, p[2].id_hex, p[2].data, p[2].len, &r), 429);
  CHECKF(atoi(r.retry_after) >= 1, "Retry-After '%s'", r.retry_after);
  /* Buckets are per key: the other key still has its burst. */
  CHECK_EQ_INT(post_batch(&c, "second-key", p[2].id_hex, p[2].data, p[2].len, &r), 200);
  CHECK_EQ_INT(metric(&c, "perf_collector_batches_rejected_total{reason=\"rate_limited\"}"), 1);
  sleep(2); /* refilled */
  CHECK_EQ_INT(post_batch(&c, GOOD_KEY, p[2].id_hex, p[2].data, p[2].len, &r), 200);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 3);
  for (int i = 0; i < 3; i++)
    free(p[i].data);
}

static void case_slow_client(void) {
  collector_t c;
  collector_start(&c, (const char *[]){"--connection-timeout", "1", NULL});
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {
      .sin_family = AF_INET, .sin_port = htons(c.port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
  const char part[] = "POST /v1/batches HTTP/1.1\r\nHost: x\r\n"; /* and then nothing */
  CHECK(write(fd, part, sizeof part - 1) == (ssize_t)(sizeof part - 1));
  struct timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  double t0 = now_s();
  char buf[256];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
  }
  CHECKF(n == 0 && now_s() - t0 < 8, "read %zd after %.1f s", n, now_s() - t0);
  close(fd);
  collector_stop_healthy(&c);
}

static void case_retention(void) {
  collector_t c;
  collector_start(&c, NULL);
  payload_t p;
  make_batch(&p, 6);
  reply_t r;
  CHECK_EQ_INT(post_batch(&c, GOOD_KEY, p.id_hex, p.data, p.len, &r), 200);
  collector_stop_healthy(&c);
  /* An old batch (received in 1970) with an event, a count and a stack. */
  db_exec(c.db, rig_pg() ? "INSERT INTO batches(id, received_ns, app) VALUES('\\x00', 1, 'old');"
                           "INSERT INTO events(batch_id, kind) VALUES('\\x00', 'hang');"
                           "INSERT INTO stack_counts(event_id, stack_sig, samples)"
                           " VALUES(currval('events_id_seq'), 'oldsig', 1);"
                           "INSERT INTO stacks(signature, frames, first_seen, last_seen)"
                           " VALUES('oldsig', '[]', 1, 1);"
                         : "INSERT INTO batches(id, received_ns, app) VALUES(x'00', 1, 'old');"
                           "INSERT INTO events(batch_id, kind) VALUES(x'00', 'hang');"
                           "INSERT INTO stack_counts(event_id, stack_sig, samples)"
                           " VALUES(last_insert_rowid(), 'oldsig', 1);"
                           "INSERT INTO stacks(signature, frames, first_seen, last_seen)"
                           " VALUES('oldsig', '[]', 1, 1);");
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 2);
  collector_start(&c, (const char *[]){"--retention-days", "1", "--retention-interval", "1", NULL});
  double end = now_s() + 10;
  while (db_count(c.db, "SELECT count(*) FROM batches") != 1 && now_s() < end)
    usleep(100000);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches WHERE app = 'hand-made'"), 1);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 1);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM events"), 1);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stack_counts"), 1);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stacks WHERE signature = 'oldsig'"), 0);
  free(p.data);
}

/* Run the binary to completion; its exit code, output in out. */
static int run_collector(const char *const *args, char *out, size_t cap) {
  char path[128];
  snprintf(path, sizeof path, "%s/out.txt", tempdir_make("perf-coll"));
  char *argv[MAX_ARGS] = {PERF_COLLECTOR_PATH};
  size_t n = 1;
  for (size_t i = 0; args[i] && n < MAX_ARGS - 1; i++)
    argv[n++] = (char *)args[i];
  argv[n] = NULL;
  pid_t pid = spawn(argv, path);
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  size_t len = fread(out, 1, cap - 1, f);
  out[len] = '\0';
  fclose(f);
  CHECK(WIFEXITED(st));
  return WEXITSTATUS(st);
}

static void case_bad_flags(void) {
  static const struct {
    const char *args[4];
    const char *message;
  } bad[] = {
      {{"--bogus", NULL}, "unknown option"},
      {{"--listen", "localhost", NULL}, "--listen"},
      {{"--listen", "127.0.0.1:99999", NULL}, "--listen"},
      {{"--retention-days", "abc", NULL}, "--retention-days"},
      {{"--max-body-bytes", "-5", NULL}, "--max-body-bytes"},
      {{"--db", NULL}, "needs a value"},
      {{"--listen", "0.0.0.0:4318", NULL}, "--api-keys-file is required"},
      {{"--api-keys-file", "/nonexistent/keys", NULL}, "--api-keys-file"},
      {{"stray", NULL}, "unexpected argument"},
      {{"--durability", "normal", NULL}, "--durability: 'normal' is not full or process"},
      {{"--rollup-fold-interval", "0", NULL}, "--rollup-fold-interval: value out of range"},
      {{"--rollup-fold-interval", "86401", NULL}, "--rollup-fold-interval: value out of range"},
      {{"--max-read-rows", "99", NULL}, "--max-read-rows: value out of range"},
      {{"--max-read-rows", "1000000001", NULL}, "--max-read-rows: value out of range"},
      {{"--public-url", "dash.example", NULL},
       "--public-url: 'dash.example' is not an http:// or https:// URL"},
      {{"--alert-allow", "10.0.0.1:80", NULL},
       "--alert-allow: '10.0.0.1:80' is not a host name or IPv4 address"},
      {{"--alert-rate", "0", NULL}, "--alert-rate: value out of range"},
      {{"--alert-retries", "21", NULL}, "--alert-retries: value out of range"},
  };
  char out[4096];
  for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
    CHECKF(run_collector(bad[i].args, out, sizeof out) == 2, "case %zu: %s", i, out);
    CHECKF(strstr(out, bad[i].message) != NULL, "case %zu: %s", i, out);
  }
}

static void case_help(void) {
  char out[8192];
  CHECK_EQ_INT(run_collector((const char *[]){"--help", NULL}, out, sizeof out), 0);
  CHECK(strstr(out, "--listen HOST:PORT") != NULL);
  CHECK(strstr(out, "--api-keys-file") != NULL);
  CHECK(strstr(out, "--max-decompressed-bytes") != NULL);
  CHECK(strstr(out, "--durability full|process") != NULL);
  CHECK(strstr(out, "--rollup-fold-interval SECONDS") != NULL);
  CHECK(strstr(out, "--max-read-rows N") != NULL);
  CHECK(strstr(out, "--alert-allow HOST") != NULL);
  CHECK(strstr(out, "--public-url URL") != NULL);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE(sdk_batch_stored),  TEST_CASE(key_rotation),     TEST_CASE(fatal_hang_build_id),
      TEST_CASE(no_auth),           TEST_CASE(wrong_key),        TEST_CASE(oversized_body),
      TEST_CASE(zstd_bomb),         TEST_CASE(garbage_protobuf), TEST_CASE(wrong_content_type),
      TEST_CASE(repeated_batch_id), TEST_CASE(rate_limit),       TEST_CASE(slow_client),
      TEST_CASE(retention),         TEST_CASE(bad_flags),        TEST_CASE(help),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
