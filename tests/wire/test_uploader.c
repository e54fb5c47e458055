/*
 * test_uploader.c - the upload thread (uploader/uploader.c) with the real
 * disk spool and the real libcurl transport against a real HTTP server on
 * 127.0.0.1 (tests/http_server.c), scripted per request: delivery and
 * headers, keep-alive, collector down then up, Retry-After in seconds and as
 * a date, 503 then 200, 4xx set aside, 5xx dropped after a bounded number
 * of attempts, a slow collector against the request timeout and shutdown;
 * the one warning per episode that batches stopped arriving, and why
 * (stall_*), every log message on one line.
 * Each case runs in its own process: `test_uploader <case>`.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "http_server.h"
#include "sdk/base/log.h"
#include "sdk/base/stats.h"
#include "sdk/wire/spool.h"
#include "tempdir.h"
#include "test_util.h"
#include "uploader/transport.h"
#include "uploader/uploader.h"

#define WAIT_MS 15000

typedef struct {
  char dir[64];
  perf__spool_t *spool;
  perf__stats_t stats;
  perf__uploader_t *up;
  http_server_t *server;
  unsigned stall_ms;    /* the uploader's stall_warn_ms (0: never) */
  const char *path;     /* the endpoint's path after the port; NULL: "/" */
  const char *endpoint; /* the whole endpoint instead (NULL: 127.0.0.1:<port><path>) */
} rig_t;

/* The messages the SDK logs at INFO and above, kept in order (the
   uploader thread logs); every message is checked to be one line. */
#define LOG_MAX 64
static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_log[LOG_MAX][512];
static perf_log_level_t g_log_level[LOG_MAX];
static int g_log_count;
static int g_log_split; /* messages holding a CR or LF */

static void keep_log(perf_log_level_t level, const char *msg, void *user) {
  (void)user;
  pthread_mutex_lock(&g_log_lock);
  if (strpbrk(msg, "\r\n")) g_log_split++; /* every message, DEBUG too */
  if (level >= PERF_LOG_INFO && g_log_count < LOG_MAX) {
    g_log_level[g_log_count] = level;
    snprintf(g_log[g_log_count++], sizeof g_log[0], "%s", msg);
  }
  pthread_mutex_unlock(&g_log_lock);
}

static void rig_open(rig_t *r, bool server_up) {
  memset(r, 0, sizeof *r);
  pthread_mutex_lock(&g_log_lock);
  g_log_count = 0;
  pthread_mutex_unlock(&g_log_lock);
  snprintf(r->dir, sizeof r->dir, "%s", tempdir_make("perf-uploader"));
  perf__spool_options_t so = {r->dir, 64u << 20, 1000, 0, NULL, NULL};
  CHECK_EQ_INT(perf__spool_open(&so, &r->spool), PERF_OK);
  if (server_up) CHECK((r->server = http_server_start()) != NULL);
}

/* Start the uploader against `port` with short backoffs and a request
   timeout of timeout_ms. */
static void rig_start(rig_t *r, int port, long timeout_ms) {
  perf__curl_options_t co = {2000, timeout_ms, true, NULL};
  perf__transport_t *t = NULL;
  CHECK_EQ_INT(perf__curl_transport_new(&co, &t), PERF_OK);
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, r->path ? r->path : "/");
  perf__log_set(keep_log, NULL);
  perf__uploader_options_t uo = {
      r->endpoint ? r->endpoint : url, "test-key", r->spool, t, 50, 400, 3, &r->stats, r->stall_ms};
  CHECK_EQ_INT(perf__uploader_start(&uo, &r->up), PERF_OK);
}

static void rig_close(rig_t *r) {
  perf__uploader_stop(r->up);
  perf__spool_close(r->spool);
  if (r->server) http_server_stop(r->server);
}

static void put_batch(rig_t *r, int n, uint8_t id[16]) {
  for (int i = 0; i < 16; i++)
    id[i] = (uint8_t)(n * 16 + i);
  char payload[64];
  int len = snprintf(payload, sizeof payload, "batch payload %d", n);
  CHECK_EQ_INT(perf__spool_put(r->spool, id, payload, (size_t)len, NULL), PERF_OK);
  perf__uploader_wake(r->up);
}

static void hex(const uint8_t id[16], char out[33]) {
  for (int i = 0; i < 16; i++)
    snprintf(out + 2 * i, 3, "%02x", id[i]);
}

static uint64_t spool_files(rig_t *r) {
  perf__spool_stats_t st;
  perf__spool_stats(r->spool, &st);
  return st.files;
}

static void wait_stat(atomic_uint_fast64_t *counter, uint64_t at_least) {
  int64_t deadline = now_ms() + WAIT_MS;
  while (atomic_load(counter) < at_least && now_ms() < deadline)
    usleep(2000);
  CHECKF(atomic_load(counter) >= at_least, "counter %llu, waited for %llu",
         (unsigned long long)atomic_load(counter), (unsigned long long)at_least);
}

static int64_t flush_deadline(int ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec + (int64_t)ms * 1000000;
}

/* ---- cases ----------------------------------------------------------------- */

static void case_delivers_in_order(void) {
  rig_t r;
  rig_open(&r, true);
  rig_start(&r, http_server_port(r.server), 5000);
  uint8_t ids[3][16];
  for (int i = 0; i < 3; i++)
    put_batch(&r, i, ids[i]);
  CHECK_EQ_INT(perf__uploader_flush(r.up, flush_deadline(WAIT_MS)), PERF_OK);
  CHECK_EQ_INT(http_server_request_count(r.server), 3);
  long connection = -1;
  for (int i = 0; i < 3; i++) {
    http_request_t q;
    CHECK(http_server_request(r.server, i, &q));
    char want[33];
    hex(ids[i], want);
    CHECK(strcmp(q.method, "POST") == 0 && strcmp(q.path, "/v1/batches") == 0);
    CHECK(strcmp(http_request_header(&q, "Content-Type"), "application/x-protobuf") == 0);
    CHECK(strcmp(http_request_header(&q, "Content-Encoding"), "zstd") == 0);
    CHECK(strcmp(http_request_header(&q, "Authorization"), "Bearer test-key") == 0);
    CHECKF(strcmp(http_request_header(&q, "X-Perf-Batch-Id"), want) == 0, "request %d", i);
    char body[64];
    snprintf(body, sizeof body, "batch payload %d", i);
    CHECK(q.body_len == strlen(body) && memcmp(q.body, body, q.body_len) == 0);
    if (i == 0) connection = (long)q.connection_id;
    CHECKF((long)q.connection_id == connection, "request %d on a new connection", i);
    http_request_free(&q);
  }
  CHECK_EQ_INT(spool_files(&r), 0);
  CHECK_EQ_INT(atomic_load(&r.stats.batches_sent), 3);
  CHECK_EQ_INT(atomic_load(&r.stats.batches_retried), 0);
  rig_close(&r);
}

static void case_down_then_up(void) {
  rig_t r;
  rig_open(&r, true);
  int port = http_server_port(r.server);
  http_server_stop(r.server); /* the collector is down */
  r.server = NULL;
  rig_start(&r, port, 2000);
  uint8_t ids[5][16];
  for (int i = 0; i < 5; i++)
    put_batch(&r, i, ids[i]);
  wait_stat(&r.stats.batches_retried, 3); /* refused connections, retried */
  CHECK_EQ_INT(spool_files(&r), 5);
  CHECK((r.server = http_server_start_on_port(port)) != NULL); /* and up again */
  CHECK_EQ_INT(perf__uploader_flush(r.up, flush_deadline(WAIT_MS)), PERF_OK);
  /* Everything arrived, in order, nothing twice. */
  CHECK_EQ_INT(http_server_request_count(r.server), 5);
  for (int i = 0; i < 5; i++) {
    char want[33];
    hex(ids[i], want);
    CHECK_EQ_INT(http_server_count_header_value(r.server, "X-Perf-Batch-Id", want), 1);
  }
  CHECK_EQ_INT(atomic_load(&r.stats.batches_sent), 5);
  CHECK_EQ_INT(spool_files(&r), 0);
  rig_close(&r);
}

static void expect_gap_after(rig_t *r, int64_t at_least_ms) {
  CHECK(http_server_wait_requests(r->server, 2, WAIT_MS));
  http_request_t a, b;
  CHECK(http_server_request(r->server, 0, &a) && http_server_request(r->server, 1, &b));
  int64_t gap_ms = (int64_t)(b.arrival_ns - a.arrival_ns) / 1000000;
  CHECKF(gap_ms >= at_least_ms, "second request %lld ms after the first", (long long)gap_ms);
  http_request_free(&a);
  http_request_free(&b);
}

static void case_retry_after_seconds(void) {
  rig_t r;
  rig_open(&r, true);
  http_response_t busy = {.status = 429, .headers = {{"Retry-After", "2"}}};
  http_server_push(r.server, &busy);
  rig_start(&r, http_server_port(r.server), 5000);
  uint8_t id[16];
  put_batch(&r, 0, id);
  expect_gap_after(&r, 2000); /* no request before Retry-After; backoff alone is <= 400 ms */
  CHECK_EQ_INT(perf__uploader_flush(r.up, flush_deadline(WAIT_MS)), PERF_OK);
  CHECK_EQ_INT(http_server_request_count(r.server), 2);
  rig_close(&r);
}

static void case_retry_after_date(void) {
  rig_t r;
  rig_open(&r, true);
  time_t at = time(NULL) + 3;
  char date[64];
  struct tm tm;
  gmtime_r(&at, &tm);
  strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  http_response_t busy = {.status = 503, .headers = {{"Retry-After", date}}};
  http_server_push(r.server, &busy);
  rig_start(&r, http_server_port(r.server), 5000);
  uint8_t id[16];
  put_batch(&r, 0, id);
  CHECK(http_server_wait_requests(r.server, 2, WAIT_MS));
  CHECKF(time(NULL) >= at, "retried before the Retry-After date"); /* second resolution */
  expect_gap_after(&r, 1000);
  rig_close(&r);
}

static void case_unavailable_then_ok(void) {
  rig_t r;
  rig_open(&r, true);
  http_server_push(r.server, &(http_response_t){.status = 503});
  rig_start(&r, http_server_port(r.server), 5000);
  uint8_t id[16];
  put_batch(&r, 0, id);
  CHECK_EQ_INT(perf__uploader_flush(r.up, flush_deadline(WAIT_MS)), PERF_OK);
  CHECK_EQ_INT(http_server_request_count(r.server), 2);
  char want[33];
  hex(id, want);
  CHECK_EQ_INT(http_server_count_header_value(r.server, "X-Perf-Batch-Id", want), 2);
  CHECK_EQ_INT(atomic_load(&r.stats.batches_retried), 1);
  CHECK_EQ_INT(atomic_load(&r.stats.batches_sent), 1);
  rig_close(&r);
}

static void case_rejected_set_aside(void) {
  rig_t r;
  rig_open(&r, true);
  http_server_push(r.server, &(http_response_t){.status = 400, .body = "bad batch"});
  http_server_push(r.server, &(http_response_t){.status = 413});
  rig_start(&r, http_server_port(r.server), 5000);
  uint8_t ids[3][16];
  for (int i = 0; i < 3; i++)
    put_batch(&r, i, ids[i]);
  CHECK_EQ_INT(perf__uploader_flush(r.up, flush_deadline(WAIT_MS)), PERF_OK);
  /* One request each: the refused ones are never sent again. */
  CHECK_EQ_INT(http_server_request_count(r.server), 3);
  perf__spool_stats_t st;
  perf__spool_stats(r.spool, &st);
  CHECK_EQ_INT(st.quarantined_rejected, 2);
  CHECK_EQ_INT(st.files, 0);
  CHECK_EQ_INT(atomic_load(&r.stats.batches_rejected), 2);
  CHECK_EQ_INT(atomic_load(&r.stats.batches_sent), 1);
  char path[128];
  snprintf(path, sizeof path, "%s/quarantine", r.dir);
  CHECK(access(path, F_OK) == 0);
  rig_close(&r);
}

/* A rotated key (401, 403) or a proxy's 404/408: the batch stays in the
   spool, retried after at least backoff_cap_ms (400 ms here), never set
   aside; a later uploader (a process with the new key) sends it. */
static void case_auth_refused_kept(void) {
  rig_t r;
  rig_open(&r, true);
  http_server_push(r.server, &(http_response_t){.status = 401});
  http_server_push(r.server, &(http_response_t){.status = 403});
  http_server_push(r.server, &(http_response_t){.status = 404});
  http_server_push(r.server, &(http_response_t){.status = 408});
  rig_start(&r, http_server_port(r.server), 5000);
  uint8_t id[16];
  put_batch(&r, 0, id);
  CHECK_EQ_INT(perf__uploader_flush(r.up, flush_deadline(WAIT_MS)), PERF_OK);
  CHECK_EQ_INT(http_server_request_count(r.server), 5);
  for (int i = 1; i < 5; i++) {
    http_request_t a, b;
    CHECK(http_server_request(r.server, i - 1, &a) && http_server_request(r.server, i, &b));
    int64_t gap_ms = (int64_t)(b.arrival_ns - a.arrival_ns) / 1000000;
    CHECKF(gap_ms >= 400, "retry %d came %lld ms after the refusal", i, (long long)gap_ms);
    http_request_free(&a);
    http_request_free(&b);
  }
  perf__spool_stats_t st;
  perf__spool_stats(r.spool, &st);
  CHECK_EQ_INT(st.quarantined_rejected, 0);
  CHECK_EQ_INT(atomic_load(&r.stats.batches_rejected), 0);
  CHECK_EQ_INT(atomic_load(&r.stats.batches_retried), 4);
  CHECK_EQ_INT(atomic_load(&r.stats.batches_sent), 1);
  CHECK_EQ_INT(spool_files(&r), 0);
  rig_close(&r);
}

/* Key rotation across processes: refused with 401 until the uploader
   stops; the next one (the new key) sends what the spool kept, once. */
static void case_rotated_key_next_process(void) {
  rig_t r;
  rig_open(&r, true);
  http_server_set_default(r.server, &(http_response_t){.status = 401});
  rig_start(&r, http_server_port(r.server), 5000);
  uint8_t ids[3][16];
  for (int i = 0; i < 3; i++)
    put_batch(&r, i, ids[i]);
  wait_stat(&r.stats.batches_retried, 1);
  perf__uploader_stop(r.up);
  r.up = NULL;
  CHECK_EQ_INT(spool_files(&r), 3);
  http_server_set_default(r.server, &(http_response_t){.status = 200});
  int refused = http_server_request_count(r.server);
  rig_start(&r, http_server_port(r.server), 5000);
  perf__uploader_wake(r.up);
  CHECK_EQ_INT(perf__uploader_flush(r.up, flush_deadline(WAIT_MS)), PERF_OK);
  CHECK_EQ_INT(http_server_request_count(r.server), refused + 3);
  for (int i = 0; i < 3; i++) {
    char want[33];
    hex(ids[i], want);
    /* batch 0 was refused once before; each is delivered once after */
    CHECK_EQ_INT(http_server_count_header_value(r.server, "X-Perf-Batch-Id", want),
                 i == 0 ? refused + 1 : 1);
  }
  CHECK_EQ_INT(spool_files(&r), 0);
  rig_close(&r);
}

static void case_server_errors_dropped(void) {
  rig_t r;
  rig_open(&r, true);
  http_server_set_default(r.server, &(http_response_t){.status = 500});
  rig_start(&r, http_server_port(r.server), 5000);
  uint8_t id[16];
  put_batch(&r, 0, id);
  CHECK_EQ_INT(perf__uploader_flush(r.up, flush_deadline(WAIT_MS)), PERF_OK);
  CHECK_EQ_INT(http_server_request_count(r.server), 3); /* max_server_errors */
  CHECK_EQ_INT(atomic_load(&r.stats.batches_dropped_server), 1);
  CHECK_EQ_INT(spool_files(&r), 0);
  rig_close(&r);
}

static void case_slow_collector(void) {
  rig_t r;
  rig_open(&r, true);
  /* A collector slower than the 500 ms request timeout: the attempt times
     out and is retried; the batch stays. */
  http_server_set_default(r.server, &(http_response_t){.status = 200, .delay_ms = 3000});
  rig_start(&r, http_server_port(r.server), 500);
  uint8_t id[16];
  put_batch(&r, 0, id);
  int64_t t0 = now_ms();
  wait_stat(&r.stats.batches_retried, 1);
  CHECKF(now_ms() - t0 < 2500, "the 500 ms timeout took %lld ms", (long long)(now_ms() - t0));
  CHECK_EQ_INT(perf__uploader_flush(r.up, flush_deadline(300)), PERF_E_TIMEOUT);
  /* Shutdown with a request in flight returns at once; the batch stays. */
  CHECK(http_server_wait_requests(r.server, 2, WAIT_MS));
  t0 = now_ms();
  perf__uploader_stop(r.up);
  r.up = NULL;
  CHECKF(now_ms() - t0 < 1000, "stop took %lld ms", (long long)(now_ms() - t0));
  CHECK_EQ_INT(spool_files(&r), 1);
  CHECK_EQ_INT(atomic_load(&r.stats.batches_sent), 0);
  rig_close(&r);
}

/* ---- the stall warning ----------------------------------------------------- */

#define STALL_PREFIX "no batch has reached the collector for 1 s (they wait in the spool): "

/* The warnings logged so far that start with STALL_PREFIX; the last one
   into last (when not NULL). Every message checked to be one line. */
static int stall_warnings(char last[512]) {
  int n = 0;
  pthread_mutex_lock(&g_log_lock);
  CHECKF(g_log_split == 0, "%d messages are not one line", g_log_split);
  for (int i = 0; i < g_log_count; i++) {
    if (strncmp(g_log[i], STALL_PREFIX, strlen(STALL_PREFIX)) != 0) continue;
    CHECKF(g_log_level[i] == PERF_LOG_WARN, "the stall message is at level %d", g_log_level[i]);
    if (last) snprintf(last, 512, "%s", g_log[i]);
    n++;
  }
  pthread_mutex_unlock(&g_log_lock);
  return n;
}

/* Wait (bounded) for the count of stall warnings to reach n; the last one
   into last. */
static void wait_stall_warnings(int n, char last[512]) {
  int64_t deadline = now_ms() + WAIT_MS;
  while (stall_warnings(NULL) < n && now_ms() < deadline)
    usleep(5000);
  CHECKF(stall_warnings(last) == n, "%d stall warnings, waited for %d", stall_warnings(NULL), n);
}

/* The warning is exactly STALL_PREFIX + why, where why is `head`, then
   the transport's own text in parentheses (its words vary with libcurl:
   only its presence is checked) when `tail` is "(", else exactly `tail`. */
static void expect_stall(const char *msg, const char *head, const char *tail) {
  char want[512];
  snprintf(want, sizeof want, STALL_PREFIX "%s", head);
  CHECKF(strncmp(msg, want, strlen(want)) == 0, "warning:\n  %s\nwanted it to start with:\n  %s",
         msg, want);
  const char *rest = msg + strlen(want);
  if (strcmp(tail, "(") == 0)
    CHECKF(rest[0] == '(' && strlen(rest) > 2 && rest[strlen(rest) - 1] == ')',
           "no transport text in parentheses: %s", msg);
  else
    CHECKF(strcmp(rest, tail) == 0, "warning:\n  %s\nwanted it to end with:\n  %s", msg, tail);
}

/* Collector down: one warning after 1 s, none more while it stays down;
   up again, the batches arrive; down again, one more warning. */
static void case_stall_down_once_per_episode(void) {
  rig_t r;
  rig_open(&r, true);
  int port = http_server_port(r.server);
  http_server_stop(r.server);
  r.server = NULL;
  r.stall_ms = 1000;
  rig_start(&r, port, 2000);
  uint8_t id[16];
  put_batch(&r, 0, id);
  char msg[512], head[256];
  wait_stall_warnings(1, msg);
  snprintf(head, sizeof head,
           "the collector at http://127.0.0.1:%d/v1/batches is down or refuses connections; "
           "check that it runs and listens at that host and port ",
           port);
  expect_stall(msg, head, "(");
  /* Still down for ten more attempts (each at most 400 ms apart): no
     second warning in the same episode. */
  uint64_t retried = atomic_load(&r.stats.batches_retried);
  wait_stat(&r.stats.batches_retried, retried + 10);
  CHECK_EQ_INT(stall_warnings(NULL), 1);
  CHECK((r.server = http_server_start_on_port(port)) != NULL);
  CHECK_EQ_INT(perf__uploader_flush(r.up, flush_deadline(WAIT_MS)), PERF_OK);
  CHECK_EQ_INT(atomic_load(&r.stats.batches_sent), 1);
  CHECK_EQ_INT(stall_warnings(NULL), 1);
  http_server_stop(r.server); /* down again: a new episode */
  r.server = NULL;
  put_batch(&r, 1, id);
  wait_stall_warnings(2, msg);
  expect_stall(msg, head, "(");
  rig_close(&r);
}

/* A collector that answers every batch with one status: the case's
   answer, the uploader's path, and the warning's exact words after
   STALL_PREFIX (a "%d" in them is the server's port). */
typedef struct stall_answer_s {
  int status;
  const char *body, *retry_after, *path;
  const char *words;
} stall_answer_t;

/* Start an uploader against an answer, put one batch, wait for the one
   stall warning and check its words; the rig stays open for the case's
   own checks. */
static void expect_stall_answer(rig_t *r, const stall_answer_t *a) {
  rig_open(r, true);
  http_response_t resp = {.status = a->status, .body = a->body};
  if (a->retry_after) resp.headers[0] = (http_header_t){"Retry-After", a->retry_after};
  http_server_set_default(r->server, &resp);
  r->stall_ms = 1000;
  r->path = a->path;
  rig_start(r, http_server_port(r->server), 5000);
  uint8_t id[16];
  put_batch(r, 0, id);
  char msg[512], tail[512];
  wait_stall_warnings(1, msg);
  snprintf(tail, sizeof tail, a->words, http_server_port(r->server));
  expect_stall(msg, "", tail);
}

/* 401 with a body ending in a newline: the warning names the key, and no
   message (this one, the per-batch one) holds the newline. */
static void case_stall_key_refused(void) {
  rig_t r;
  expect_stall_answer(&r,
                      &(stall_answer_t){
                          .status = 401,
                          .body = "unknown key\n",
                          .words = "the collector answers 401 to the API key; check api_key "
                                   "(PERF_SDK_API_KEY) against the collector's keys (unknown key)",
                      });
  pthread_mutex_lock(&g_log_lock);
  bool per_batch = false;
  for (int i = 0; i < g_log_count; i++)
    per_batch =
        per_batch || strncmp(g_log[i], "collector answered 401 (unknown key) for batch ",
                             strlen("collector answered 401 (unknown key) for batch ")) == 0;
  pthread_mutex_unlock(&g_log_lock);
  CHECK(per_batch);
  rig_close(&r);
}

/* The endpoint given with /v1/batches: 404, and the hint to drop it. */
static void case_stall_not_found_full_url(void) {
  rig_t r;
  expect_stall_answer(&r, &(stall_answer_t){
                              .status = 404,
                              .body = "not found",
                              .path = "/v1/batches",
                              .words = "the collector answers 404 for "
                                       "http://127.0.0.1:%d/v1/batches/v1/batches; give the base "
                                       "URL, without /v1/batches, as endpoint (not found)",
                          });
  rig_close(&r);
}

/* Another path: 404, and where batches go. */
static void case_stall_not_found_path(void) {
  rig_t r;
  expect_stall_answer(&r, &(stall_answer_t){
                              .status = 404,
                              .body = "not found",
                              .path = "/perf",
                              .words = "the collector answers 404 for "
                                       "http://127.0.0.1:%d/perf/v1/batches; check the path of "
                                       "endpoint: batches go to {endpoint}/v1/batches (not found)",
                          });
  rig_close(&r);
}

/* 413: the batch is set aside at once; with the spool empty the warning
   still comes when it is due. */
static void case_stall_too_large(void) {
  rig_t r;
  expect_stall_answer(&r, &(stall_answer_t){
                              .status = 413,
                              .body = "batch too large",
                              .words = "the collector answers 413: batches are larger than it "
                                       "takes; lower batch_max_bytes or raise the collector's "
                                       "limit (batch too large)",
                          });
  CHECK_EQ_INT(atomic_load(&r.stats.batches_rejected), 1);
  rig_close(&r);
}

static void case_stall_rate_limited(void) {
  rig_t r;
  expect_stall_answer(&r, &(stall_answer_t){
                              .status = 429,
                              .body = "slow down",
                              .retry_after = "1",
                              .words = "the collector answers 429: it limits this key's rate; "
                                       "batches are sent again as it asks (slow down)",
                          });
  rig_close(&r);
}

static void case_stall_server_error(void) {
  rig_t r;
  expect_stall_answer(&r, &(stall_answer_t){
                              .status = 500,
                              .body = "db down",
                              .words = "the collector answers 500: it fails; see its log (db down)",
                          });
  rig_close(&r);
}

/* A collector slower than the request timeout. */
static void case_stall_timeout(void) {
  rig_t r;
  rig_open(&r, true);
  http_server_set_default(r.server, &(http_response_t){.status = 200, .delay_ms = 3000});
  r.stall_ms = 1000;
  rig_start(&r, http_server_port(r.server), 300);
  uint8_t id[16];
  put_batch(&r, 0, id);
  char msg[512], head[256];
  wait_stall_warnings(1, msg);
  snprintf(head, sizeof head,
           "http://127.0.0.1:%d/v1/batches did not answer in time; check that the collector runs "
           "and is reachable, or raise connect_timeout_ms / request_timeout_ms ",
           http_server_port(r.server));
  expect_stall(msg, head, "(");
  rig_close(&r);
}

/* A host name that cannot resolve (.invalid never does, RFC 6761). */
static void case_stall_unresolved(void) {
  rig_t r;
  rig_open(&r, false);
  r.stall_ms = 1000;
  r.endpoint = "http://perf-collector.invalid";
  rig_start(&r, 0, 2000);
  uint8_t id[16];
  put_batch(&r, 0, id);
  char msg[512];
  wait_stall_warnings(1, msg);
  expect_stall(msg,
               "the host name of http://perf-collector.invalid/v1/batches does not resolve; "
               "check endpoint ",
               "(");
  rig_close(&r);
}

static const test_case_t g_cases[] = {
    TEST_CASE(delivers_in_order),
    TEST_CASE(down_then_up),
    TEST_CASE(retry_after_seconds),
    TEST_CASE(retry_after_date),
    TEST_CASE(unavailable_then_ok),
    TEST_CASE(rejected_set_aside),
    TEST_CASE(server_errors_dropped),
    TEST_CASE(slow_collector),
    TEST_CASE(auth_refused_kept),
    TEST_CASE(rotated_key_next_process),
    TEST_CASE(stall_down_once_per_episode),
    TEST_CASE(stall_key_refused),
    TEST_CASE(stall_not_found_full_url),
    TEST_CASE(stall_not_found_path),
    TEST_CASE(stall_too_large),
    TEST_CASE(stall_rate_limited),
    TEST_CASE(stall_server_error),
    TEST_CASE(stall_timeout),
    TEST_CASE(stall_unresolved),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
