/*
 * test_loops.c - the event-loop integrations (include/perf_sdk_uv.h,
 * perf_sdk_glib.h, perf_sdk_libevent.h) on Debian's real libuv, GLib and
 * libevent: a callback that runs 800 ms is one hang event whose stack
 * names the callback's function; a loop that waits 1 s for its only event
 * has no hang. Through libperfsdk.so as apps link it, the file sink.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "perf_sdk.h"
#include "perf_sdk_glib.h"
#include "perf_sdk_libevent.h"
#include "perf_sdk_uv.h"
#include "sdk_util.h"
#include "tempdir.h"
#include "test_util.h"

#define THRESHOLD_MS 300
#define HANG_MS 800
#define IDLE_MS 1000

static char g_report[256];

static void start_sdk(void) {
  const char *dir = tempdir_make("loops");
  snprintf(g_report, sizeof g_report, "%s/report.txt", dir);
  setenv("XDG_STATE_HOME", dir, 1);
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "test_loops";
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = g_report;
  cfg.hang_threshold_ms = THRESHOLD_MS;
  cfg.hang_sample_interval_ms = 50;
  cfg.cpu_threshold_percent = 25600;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  perf_sdk_loop_idle();
}

/* The report's hang events: how many, and the first one's duration and
   text up to the next event. */
typedef struct {
  int count;
  long duration_ms;
  char *first;
} hangs_t;

static hangs_t finish_sdk(void) {
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  char *text = read_text(g_report);
  hangs_t h = {0, -1, NULL};
  for (char *p = text ? strstr(text, "event hang ") : NULL; p; p = strstr(p + 1, "event hang ")) {
    if (h.count++ == 0) {
      const char *d = strstr(p, "duration_ms=");
      h.duration_ms = d ? strtol(d + 12, NULL, 10) : -1;
      char *next = strstr(p + 1, "\nevent ");
      h.first = strndup(p, next ? (size_t)(next - p) : strlen(p));
    }
  }
  free(text);
  return h;
}

static void check_one_hang(const char *function) {
  hangs_t h = finish_sdk();
  CHECKF(h.count == 1, "%d hang events, want 1", h.count);
  CHECKF(h.duration_ms >= HANG_MS - 50, "the hang lasted %ld ms, the callback %d", h.duration_ms,
         HANG_MS);
  CHECKF(strstr(h.first, function) != NULL, "%s not in the hang:\n%s", function, h.first);
  free(h.first);
}

static void check_no_hang(void) {
  hangs_t h = finish_sdk();
  CHECKF(h.count == 0, "%d hang events in an idle loop:\n%s", h.count, h.first);
}

/* The slow callback's work: spins HANG_MS on the wall clock. */
CHAIN static void spin_hang(void) {
  long long end = now_ms() + HANG_MS;
  while (now_ms() < end) {
  }
}

/* ---- libuv ---------------------------------------------------------------- */

CHAIN static void uv_slow_read_handler(uv_poll_t *poll, int status, int events) {
  (void)status;
  (void)events;
  spin_hang();
  char c;
  CHECK(read(*(int *)poll->data, &c, 1) == 1);
  uv_stop(poll->loop);
}

static void *write_later(void *arg) {
  sleep_ms(100);
  CHECK(write(*(int *)arg, "x", 1) == 1);
  return NULL;
}

static void close_handle(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* An I/O callback (inside libuv's poll phase) that runs long is a hang;
   uv_stop in it ends perf_sdk_uv_run with non-zero, as uv_run. */
static void case_uv_io_callback_hang(void) {
  start_sdk();
  uv_loop_t loop;
  CHECK_EQ_INT(uv_loop_init(&loop), 0);
  int fds[2];
  CHECK(pipe(fds) == 0);
  uv_poll_t poll;
  CHECK_EQ_INT(uv_poll_init(&loop, &poll, fds[0]), 0);
  poll.data = &fds[0];
  CHECK_EQ_INT(uv_poll_start(&poll, UV_READABLE, uv_slow_read_handler), 0);
  pthread_t writer;
  CHECK(pthread_create(&writer, NULL, write_later, &fds[1]) == 0);
  CHECK(perf_sdk_uv_run(&loop) != 0);
  pthread_join(writer, NULL);
  uv_walk(&loop, close_handle, NULL);
  CHECK_EQ_INT(uv_run(&loop, UV_RUN_DEFAULT), 0);
  CHECK_EQ_INT(uv_loop_close(&loop), 0);
  check_one_hang("uv_slow_read_handler");
}

CHAIN static void uv_slow_timer_handler(uv_timer_t *timer) {
  spin_hang();
  uv_close((uv_handle_t *)timer, NULL);
}

/* A timer callback that runs long is a hang; the loop ends when its last
   handle is closed (0) and closes at once, as after uv_run. */
static void case_uv_timer_callback_hang(void) {
  start_sdk();
  uv_loop_t loop;
  CHECK_EQ_INT(uv_loop_init(&loop), 0);
  uv_timer_t timer;
  CHECK_EQ_INT(uv_timer_init(&loop, &timer), 0);
  CHECK_EQ_INT(uv_timer_start(&timer, uv_slow_timer_handler, 100, 0), 0);
  CHECK_EQ_INT(perf_sdk_uv_run(&loop), 0);
  CHECK_EQ_INT(uv_loop_close(&loop), 0);
  check_one_hang("uv_slow_timer_handler");
}

static void uv_quick_timer_handler(uv_timer_t *timer) {
  uv_close((uv_handle_t *)timer, NULL);
}

/* A loop that waits IDLE_MS for its only timer has no hang, and the wait
   lasts as long as under uv_run. */
static void case_uv_idle_is_not_hang(void) {
  start_sdk();
  uv_loop_t loop;
  CHECK_EQ_INT(uv_loop_init(&loop), 0);
  uv_timer_t timer;
  CHECK_EQ_INT(uv_timer_init(&loop, &timer), 0);
  /* The timer is dated on the loop's clock (whole milliseconds, maybe the
     kernel's coarse clock): on it the wait is at least IDLE_MS exactly; on
     the test's clock, read before the loop's, at least IDLE_MS less that
     clock's millisecond. */
  long long wall_start = now_ms();
  uv_update_time(&loop);
  uint64_t start = uv_now(&loop);
  CHECK_EQ_INT(uv_timer_start(&timer, uv_quick_timer_handler, IDLE_MS, 0), 0);
  CHECK_EQ_INT(perf_sdk_uv_run(&loop), 0);
  long long wall = now_ms() - wall_start;
  uv_update_time(&loop);
  long long took = (long long)(uv_now(&loop) - start);
  CHECKF(took >= IDLE_MS, "the loop ran %lld ms, its timer was due after %d", took, IDLE_MS);
  CHECKF(wall >= IDLE_MS - 1,
         "the loop ran %lld ms of the test's clock, its timer was due after %d", wall, IDLE_MS);
  CHECK_EQ_INT(uv_loop_close(&loop), 0);
  check_no_hang();
}

/* ---- GLib ----------------------------------------------------------------- */

CHAIN static gboolean glib_slow_handler(gpointer loop) {
  spin_hang();
  g_main_loop_quit((GMainLoop *)loop);
  return G_SOURCE_REMOVE;
}

static gboolean glib_quit(gpointer loop) {
  g_main_loop_quit((GMainLoop *)loop);
  return G_SOURCE_REMOVE;
}

static void run_glib(GSourceFunc fn, unsigned after_ms) {
  GMainLoop *loop = g_main_loop_new(NULL, FALSE);
  CHECK_EQ_INT(perf_sdk_glib_watch(NULL), 0);
  CHECK_EQ_INT(perf_sdk_glib_watch(NULL), -1);
  g_timeout_add(after_ms, fn, loop);
  g_main_loop_run(loop);
  CHECK_EQ_INT(perf_sdk_glib_unwatch(NULL), 0);
  CHECK(g_main_context_get_poll_func(NULL) == g_poll);
  g_main_loop_unref(loop);
}

static void case_glib_callback_hang(void) {
  start_sdk();
  run_glib(glib_slow_handler, 100);
  check_one_hang("glib_slow_handler");
}

static void case_glib_idle_is_not_hang(void) {
  start_sdk();
  run_glib(glib_quit, IDLE_MS);
  check_no_hang();
}

/* ---- libevent ------------------------------------------------------------- */

CHAIN static void libevent_slow_handler(evutil_socket_t fd, short what, void *base) {
  (void)fd;
  (void)what;
  spin_hang();
  event_base_loopbreak((struct event_base *)base);
}

static void libevent_quit(evutil_socket_t fd, short what, void *base) {
  (void)fd;
  (void)what;
  event_base_loopbreak((struct event_base *)base);
}

static void run_libevent(event_callback_fn fn, unsigned after_ms) {
  struct event_base *base = event_base_new();
  CHECK(base != NULL);
  struct event *watch = perf_sdk_libevent_watch(base, 50);
  CHECK(watch != NULL);
  struct event *once = evtimer_new(base, fn, base);
  struct timeval after = {after_ms / 1000, (after_ms % 1000) * 1000};
  CHECK_EQ_INT(evtimer_add(once, &after), 0);
  CHECK_EQ_INT(event_base_dispatch(base), 0);
  perf_sdk_libevent_unwatch(watch);
  event_free(once);
  /* Nothing left on the base: dispatch returns at once again (1: no events). */
  CHECK_EQ_INT(event_base_dispatch(base), 1);
  event_base_free(base);
}

static void case_libevent_callback_hang(void) {
  start_sdk();
  run_libevent(libevent_slow_handler, 100);
  check_one_hang("libevent_slow_handler");
}

static void case_libevent_idle_is_not_hang(void) {
  start_sdk();
  run_libevent(libevent_quit, IDLE_MS);
  check_no_hang();
}

static const test_case_t g_cases[] = {
    TEST_CASE(uv_io_callback_hang),       TEST_CASE(uv_timer_callback_hang),
    TEST_CASE(uv_idle_is_not_hang),       TEST_CASE(glib_callback_hang),
    TEST_CASE(glib_idle_is_not_hang),     TEST_CASE(libevent_callback_hang),
    TEST_CASE(libevent_idle_is_not_hang),
};

int main(int argc, char **argv) {
  return test_main(g_cases, sizeof g_cases / sizeof g_cases[0], argc, argv);
}
