/*
 * test_app_fds.c - an app that closes every descriptor it did not open
 * (a daemon's closefrom(3), here close_range(3, ~0U, 0)) after the SDK
 * started, then opens files of its own, which take the SDK's old numbers.
 * The SDK never reads, writes or closes those files, and what it sends
 * still arrives, through the upload helper and through libcurl in the
 * process, against the test server on 127.0.0.1 (tests/support/
 * http_server.c).
 *
 * The app runs in a child process (the close would take the server's
 * sockets and ctest's pipes in this one); the parent holds the server and
 * counts what arrived. Each case runs in its own process:
 * `test_app_fds <case>`.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "http_server.h"
#include "perf_sdk.h"
#include "sdk/wire/batch_decode.h"
#include "sdk_log.h"
#include "sdk_util.h"
#include "tempdir.h"
#include "test_util.h"
#include "uploader/transport.h"

#define APP_FILES 8 /* more than the SDK's descriptors at the closed numbers */
#define POSTS 6     /* batches posted after the close */
#define HANGS 4     /* hangs after the close */
#define DECODE_MAX (64u << 20)
#define WAIT_MS 20000

/* Child side: a failed check prints and exits non-zero; the parent
   reports the child's status. stderr (2) stays open through the close. */

/* The app's files, their paths made before the close. */
typedef struct {
  char path[APP_FILES][128];
  int fd[APP_FILES];
} app_files_t;

static void app_files_name(app_files_t *f) {
  for (int i = 0; i < APP_FILES; i++)
    snprintf(f->path[i], sizeof f->path[i], "%s/app-%d.txt", tempdir_make("perf-appfds"), i);
}

static void app_file_text(int i, char *buf, size_t cap) {
  snprintf(buf, cap, "the app's own file %d: its own content\n", i);
}

/* The app's closefrom(3), then its files, opened at the lowest numbers
   (the SDK's old ones) and written; kept open. */
static void app_close_and_open(app_files_t *f) {
  CHECK(close_range(3, ~0u, 0) == 0);
  for (int i = 0; i < APP_FILES; i++) {
    f->fd[i] = open(f->path[i], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECKF(f->fd[i] == 3 + i, "%s opened as %d", f->path[i], f->fd[i]);
    char text[96];
    app_file_text(i, text, sizeof text);
    CHECK(write(f->fd[i], text, strlen(text)) == (ssize_t)strlen(text));
  }
}

/* Each file still open at its number and holding exactly its own text. */
static void app_files_intact(const app_files_t *f) {
  for (int i = 0; i < APP_FILES; i++) {
    CHECKF(fcntl(f->fd[i], F_GETFD) >= 0, "the app's file %d (fd %d) was closed", i, f->fd[i]);
    char want[96], got[256] = {0};
    app_file_text(i, want, sizeof want);
    ssize_t n = pread(f->fd[i], got, sizeof got - 1, 0);
    CHECKF(n == (ssize_t)strlen(want) && memcmp(got, want, (size_t)n) == 0,
           "the app's file %d holds %zd bytes, not only its own %zu", i, n, strlen(want));
    char again[256] = {0};
    int fd = open(f->path[i], O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    CHECK(read(fd, again, sizeof again - 1) == n); /* through a fresh descriptor too */
    close(fd);
  }
}

/* Fork the app; returns once it exited 0. */
static void run_app(void (*app)(const char *url, const char *helper), const char *url,
                    const char *helper) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    app(url, helper);
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the app ended with status 0x%x", status);
}

/* ---- the transports alone ------------------------------------------------ */

static int post_body(perf__transport_t *t, const char *url, int n) {
  char body[32], id[33];
  snprintf(body, sizeof body, "batch %d", n);
  snprintf(id, sizeof id, "%032d", n);
  perf__http_request_t req = {url, "k", id, body, strlen(body)};
  perf__http_response_t resp;
  int rc = t->post(t, &req, &resp);
  CHECKF(rc == PERF_OK && resp.status == 200, "post %d: rc %d status %ld (%s)", n, rc, resp.status,
         resp.reason);
  return rc;
}

/* One post, the app's close and files, POSTS posts, an interrupt and the
   transport's end: none of them touches the app's files. */
static void transport_app(const char *base_url, const char *helper) {
  app_files_t f;
  app_files_name(&f);
  char url[96];
  snprintf(url, sizeof url, "%s/v1/batches", base_url);
  perf__curl_options_t co = {5000, 10000, true, NULL};
  perf__transport_t *t = NULL;
  if (helper)
    CHECK_EQ_INT(perf__helper_transport_new(&co, helper, &t), PERF_OK);
  else
    CHECK_EQ_INT(perf__curl_transport_new(&co, &t), PERF_OK);
  post_body(t, url, 0);
  app_close_and_open(&f);
  for (int i = 1; i <= POSTS; i++)
    post_body(t, url, i);
  app_files_intact(&f);
  t->interrupt(t); /* shutdown's: it wakes the transport's own descriptors only */
  t->destroy(t);
  app_files_intact(&f);
}

/* The server got exactly the batches 0..POSTS, each once. */
static void expect_posts(http_server_t *srv) {
  CHECK_EQ_INT(http_server_request_count(srv), POSTS + 1);
  bool seen[POSTS + 1] = {false};
  for (size_t i = 0; i <= POSTS; i++) {
    http_request_t q;
    CHECK(http_server_request(srv, i, &q));
    int n = -1;
    CHECKF(q.body && sscanf((const char *)q.body, "batch %d", &n) == 1 && n >= 0 && n <= POSTS,
           "request %zu: unexpected body", i);
    CHECKF(!seen[n], "batch %d arrived twice", n);
    seen[n] = true;
    http_request_free(&q);
  }
}

static void transport_case(const char *helper) {
  tempdir_make("perf-appfds");
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  run_app(transport_app, http_server_url(srv), helper);
  expect_posts(srv);
  http_server_stop(srv);
}

static void case_helper_transport_after_closefrom(void) {
  transport_case(PERF_UPLOAD_PATH);
}

static void case_curl_transport_after_closefrom(void) {
  transport_case(NULL);
}

/* ---- the SDK --------------------------------------------------------------- */

/* The SDK's log lines, printed when a check of the SDK case fails. */

static CHAIN void appfds_hang(void) {
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  sleep_ms(120); /* a hang: over the 20 ms threshold */
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
}

/* The SDK with the http sink uploads once; then the app's close and
   files, HANGS hangs, a flush and the shutdown. */
static void sdk_app(const char *url, const char *helper) {
  app_files_t f;
  app_files_name(&f);
  char data_dir[160];
  snprintf(data_dir, sizeof data_dir, "%s/data", tempdir_make("perf-appfds"));
  perf_sdk_config_t cfg;
  sdk_config_short_hangs(&cfg);
  sdk_config_upload(&cfg, "appfds", url, "k", data_dir);
  cfg.upload_helper = helper;
  cfg.log_fn = sdk_log_keep;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("before"), PERF_OK);
  int rc = perf_sdk_flush(WAIT_MS);
  CHECKF(rc == PERF_OK, "first flush: %s; the SDK's log:\n%s", perf_strerror(rc), g_log);
  perf_sdk_stats_t st = sdk_stats();
  CHECK_EQ_INT(st.batches_sent, 1);
  app_close_and_open(&f);
  for (int i = 0; i < HANGS; i++) {
    appfds_hang();
    SDK_WAIT_FOR_STATS(st, st.events_recorded == 2 + (uint64_t)i, WAIT_MS, 5);
  }
  rc = perf_sdk_flush(WAIT_MS);
  CHECKF(rc == PERF_OK, "flush after the close: %s; the SDK's log:\n%s", perf_strerror(rc), g_log);
  app_files_intact(&f);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  app_files_intact(&f);
}

/* Hang events in every batch the server received. */
static size_t hangs_received(http_server_t *srv) {
  size_t n = 0;
  for (size_t i = 0; i < http_server_request_count(srv); i++) {
    http_request_t q;
    CHECK(http_server_request(srv, i, &q));
    Perf__V1__Batch *b = NULL;
    CHECKF(perf__batch_decode(q.body, q.body_len, DECODE_MAX, &b) == PERF_OK,
           "request %zu does not decode", i);
    for (size_t e = 0; e < b->n_events; e++)
      n += b->events[e]->kind == PERF__V1__EVENT_KIND__EVENT_KIND_HANG;
    perf__v1__batch__free_unpacked(b, NULL);
    http_request_free(&q);
  }
  return n;
}

static void sdk_case(const char *helper) {
  tempdir_make("perf-appfds");
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  run_app(sdk_app, http_server_url(srv), helper);
  CHECK_EQ_INT(hangs_received(srv), HANGS);
  http_server_stop(srv);
}

static void case_sdk_helper_after_closefrom(void) {
  sdk_case(PERF_UPLOAD_PATH);
}

static void case_sdk_in_process_after_closefrom(void) {
  sdk_case("off");
}

static const test_case_t g_cases[] = {
    TEST_CASE(helper_transport_after_closefrom),
    TEST_CASE(curl_transport_after_closefrom),
    TEST_CASE(sdk_helper_after_closefrom),
    TEST_CASE(sdk_in_process_after_closefrom),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
