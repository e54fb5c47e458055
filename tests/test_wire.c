/*
 * test_wire.c - the SDK's wire path end to end: perf_sdk_init with
 * sink = http against a real HTTP server on 127.0.0.1 (tests/http_server.c);
 * events become zstd protobuf batches, go through the disk spool and the
 * uploader, and are decoded back from what the server received. Also: a
 * collector that is down at shutdown (the batch waits on disk and the next
 * run sends it), and the batch records the file sink writes beside its
 * report. Each case runs in its own process: `test_wire <case>`.
 */
#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "encoder.h"
#include "http_server.h"
#include "perf_sdk.h"
#include "spool.h"

#if defined(__clang__)
#define CHAIN __attribute__((noinline, used))
#else
#define CHAIN __attribute__((noinline, noipa, used))
#endif

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define DECODE_MAX (64u << 20)

static char g_dir[64];

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static void make_dir(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/perf-wire-XXXXXX");
  CHECK(mkdtemp(g_dir) != NULL);
}

static void remove_dir(void) {
  nftw(g_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void http_config(perf_sdk_config_t *cfg, const char *endpoint, char *data_dir) {
  perf_sdk_config_init(cfg);
  cfg->app_name = "wire-test";
  cfg->app_version = "9.9.9";
  cfg->sink = PERF_SINK_HTTP;
  cfg->endpoint = endpoint;
  cfg->api_key = "k-123";
  snprintf(data_dir, 128, "%s/data", g_dir);
  cfg->data_dir = data_dir;
  cfg->batch_max_delay_ms = 200;
  cfg->backoff_base_ms = 50;
  cfg->backoff_cap_ms = 200;
  cfg->request_timeout_ms = 2000;
}

static CHAIN int wire_capture_inner(const char *reason) {
  return perf_sdk_capture_now(reason) + 1;
}
static CHAIN int wire_capture_outer(const char *reason) {
  return wire_capture_inner(reason) + 1;
}

/* Every event in every batch the server received, by reason. */
static size_t count_events(http_server_t *srv, const char *reason, bool *saw_function) {
  size_t n = 0;
  for (size_t i = 0; i < http_server_request_count(srv); i++) {
    http_request_t q;
    CHECK(http_server_request(srv, i, &q));
    Perf__V1__Batch *b = NULL;
    CHECKF(perf__batch_decode(q.body, q.body_len, DECODE_MAX, &b) == PERF_OK,
           "request %zu does not decode", i);
    CHECK(strcmp(b->resource->app_name, "wire-test") == 0);
    CHECK(strcmp(b->resource->app_version, "9.9.9") == 0);
    for (size_t e = 0; e < b->n_events; e++)
      if (strcmp(b->events[e]->reason, reason) == 0) n++;
    for (size_t f = 0; saw_function && f < b->n_functions; f++)
      if (strcmp(b->strings[b->functions[f]->name], "wire_capture_inner") == 0)
        *saw_function = true;
    perf__v1__batch__free_unpacked(b, NULL);
    http_request_free(&q);
  }
  return n;
}

static void case_http_sink_delivers(void) {
  make_dir();
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  perf_sdk_config_t cfg;
  char data_dir[128];
  http_config(&cfg, http_server_url(srv), data_dir);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  for (int i = 0; i < 3; i++)
    CHECK_EQ_INT(wire_capture_outer("delivered"), 2);
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK);
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  CHECK(st.batches_written >= 1);
  CHECK_EQ_INT(st.batches_sent, st.batches_written);
  CHECK_EQ_INT(st.spool_files, 0);
  bool named = false;
  CHECK_EQ_INT(count_events(srv, "delivered", &named), 3);
  CHECK(named); /* symbolized on the device: the caller's frames are named */
  http_request_t q;
  CHECK(http_server_request(srv, 0, &q));
  CHECK(strcmp(q.path, "/v1/batches") == 0);
  CHECK(strcmp(http_request_header(&q, "Authorization"), "Bearer k-123") == 0);
  CHECK(strcmp(http_request_header(&q, "Content-Encoding"), "zstd") == 0);
  CHECK(strlen(http_request_header(&q, "X-Perf-Batch-Id")) == 32);
  http_request_free(&q);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  http_server_stop(srv);
  remove_dir();
}

static void case_down_at_shutdown_sent_next_run(void) {
  make_dir();
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  uint16_t port = http_server_port(srv);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned)port);
  http_server_stop(srv); /* the collector is down for the whole first run */
  perf_sdk_config_t cfg;
  char data_dir[128];
  http_config(&cfg, url, data_dir);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(wire_capture_outer("first run"), 2);
  CHECK_EQ_INT(perf_sdk_flush(800), PERF_E_TIMEOUT); /* written, not sent */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK_EQ_INT(perf_sdk_shutdown(1000), PERF_OK);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  CHECKF(ms < 1500, "shutdown(1000) took %ld ms", ms);
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  CHECK_EQ_INT(st.batches_sent, 0);
  CHECK_EQ_INT(st.spool_files, 1); /* waiting on disk */

  /* Next run, collector up: the batch left on disk is sent, once. */
  CHECK((srv = http_server_start_on_port(port)) != NULL);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK);
  CHECK_EQ_INT(count_events(srv, "first run", NULL), 1);
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  CHECK_EQ_INT(st.spool_files, 0);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK_EQ_INT(count_events(srv, "first run", NULL), 1); /* nothing twice */
  http_server_stop(srv);
  remove_dir();
}

static void case_file_sink_batches(void) {
  make_dir();
  char report[128], spool_dir[160];
  snprintf(report, sizeof report, "%s/report.txt", g_dir);
  snprintf(spool_dir, sizeof spool_dir, "%s.batches", report);
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = report;
  char data_dir[128];
  snprintf(data_dir, sizeof data_dir, "%s/data", g_dir);
  cfg.data_dir = data_dir;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(wire_capture_outer("to a file"), 2);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  /* The same event as a batch record beside the text report. */
  perf__spool_options_t so = {spool_dir, 1u << 24, 100, 0, NULL};
  perf__spool_t *sp = NULL;
  CHECK_EQ_INT(perf__spool_open(&so, &sp), PERF_OK);
  perf__spool_entry_t e;
  CHECK_EQ_INT(perf__spool_peek_oldest(sp, &e), PERF_OK);
  uint8_t *payload = NULL;
  size_t len = 0;
  CHECK_EQ_INT(perf__spool_read(sp, &e, &payload, &len), PERF_OK);
  Perf__V1__Batch *b = NULL;
  CHECK_EQ_INT(perf__batch_decode(payload, len, DECODE_MAX, &b), PERF_OK);
  CHECK_EQ_INT(b->n_events, 1);
  CHECK(strcmp(b->events[0]->reason, "to a file") == 0);
  perf__v1__batch__free_unpacked(b, NULL);
  free(payload);
  perf__spool_close(sp);
  remove_dir();
}

static const test_case_t g_cases[] = {
    TEST_CASE(http_sink_delivers),
    TEST_CASE(down_at_shutdown_sent_next_run),
    TEST_CASE(file_sink_batches),
};

int main(int argc, char **argv) {
  if (argc == 2 && test_run_case(g_cases, ARRAY_LEN(g_cases), argv[1])) return 0;
  fprintf(stderr, "usage: %s <case>\n", argv[0]);
  return 2;
}
