/*
 * test_loops.c - the event-loop integrations (include/perf_sdk_uv.h,
 * perf_sdk_glib.h, perf_sdk_libevent.h) on Debian's real libuv, GLib and
 * libevent: a callback that runs 800 ms is one hang event whose stack
 * names the callback's function; a loop that waits 1 s for its only event
 * has no hang. Loops on worker threads, each watched under its name: a
 * stall on one worker's loop (1, 4 or 16 libevent bases; a libuv loop; a
 * GLib worker context) is exactly one hang event naming that loop and its
 * thread, with the stall's function on its stack; two workers stalled at
 * once are two events with their own stacks; idle loops at the lowest
 * threshold (20 ms) give no event in 10 s. Through libperfsdk.so as apps
 * link it, the file sink.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
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

#define MIN_THRESHOLD_MS 20
#define IDLE_RUN_MS 10000
#define WAIT_MS 20000

static char g_report[256];

static void start_sdk_at(unsigned threshold_ms) {
  const char *dir = tempdir_make("loops");
  snprintf(g_report, sizeof g_report, "%s/report.txt", dir);
  setenv("XDG_STATE_HOME", dir, 1);
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "test_loops";
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = g_report;
  cfg.hang_threshold_ms = threshold_ms;
  cfg.hang_sample_interval_ms = threshold_ms < 50 ? 5 : 50;
  cfg.cpu_threshold_percent = 25600;
  cfg.max_events_per_hour = 1000;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  perf_sdk_loop_idle();
}

static void start_sdk(void) {
  start_sdk_at(THRESHOLD_MS);
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

/* The slow callback's work: waits HANG_MS, as a callback blocked on I/O
   or a lock would. A callback that spins competes for the CPU with the
   monitor that must see it: two at once in each of four ASan copies on 2
   CPUs left hangs unseen. */
CHAIN static void slow_work(void) {
  sleep_ms(HANG_MS);
}

/* ---- libuv ---------------------------------------------------------------- */

CHAIN static void uv_slow_read_handler(uv_poll_t *poll, int status, int events) {
  (void)status;
  (void)events;
  slow_work();
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
  slow_work();
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
  slow_work();
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
  slow_work();
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

/* ---- loops on worker threads ---------------------------------------------- */

/* The report once the SDK is shut down, and its hang events. */
static char *finish_report(void) {
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  char *text = read_text(g_report);
  CHECK(text != NULL);
  return text;
}

static int count_hangs(const char *text) {
  int n = 0;
  for (const char *p = strstr(text, "event hang "); p; p = strstr(p + 1, "event hang "))
    n++;
  return n;
}

/* The one hang event naming loop `name` on thread tid: its duration from
   the stall, `function` on its stack, `not_function` not. */
static void expect_loop_hang(const char *text, const char *name, int tid, const char *function,
                             const char *not_function) {
  char want[96];
  snprintf(want, sizeof want, "loop name=\"%s\" thread=%d\n", name, tid);
  int found = 0;
  for (const char *p = strstr(text, "event hang "); p; p = strstr(p + 1, "event hang ")) {
    const char *next = strstr(p + 1, "\nevent ");
    char *ev = strndup(p, next ? (size_t)(next - p) : strlen(p));
    if (strstr(ev, want)) {
      found++;
      const char *d = strstr(ev, "duration_ms=");
      long ms = d ? strtol(d + 12, NULL, 10) : -1;
      CHECKF(ms >= HANG_MS - 50, "loop %s hung %ld ms, the callback %d", name, ms, HANG_MS);
      CHECKF(strstr(ev, function) != NULL, "%s not in loop %s's hang:\n%s", function, name, ev);
      CHECKF(!not_function || !strstr(ev, not_function), "%s in loop %s's hang:\n%s", not_function,
             name, ev);
    }
    free(ev);
  }
  CHECKF(found == 1, "%d hang events name loop %s on thread %d, want 1:\n%s", found, name, tid,
         text);
}

static int gettid_now(void) {
  return (int)syscall(SYS_gettid);
}

/* A worker thread running an event loop of one of the libraries: it
   registers, then handles commands written to its pipe ('a', 'b': stall in
   one of two functions; 'q': quit) until it quits. */
typedef struct {
  pthread_t thread;
  int cmd[2];
  char name[32];
  int threshold_ms;
  atomic_int tid;
  atomic_int ready; /* 1 watched, -1 could not be */
  atomic_int handled;
  void *loop; /* the library's loop object */
} worker_t;

static worker_t g_workers[16];

CHAIN static void worker_stall_a(void) {
  slow_work();
}

CHAIN static void worker_stall_b(void) {
  slow_work();
}

/* One command from the worker's pipe; false on 'q'. */
static bool handle_cmd(worker_t *w) {
  char c;
  CHECK(read(w->cmd[0], &c, 1) == 1);
  if (c == 'a') worker_stall_a();
  if (c == 'b') worker_stall_b();
  atomic_fetch_add(&w->handled, 1);
  return c != 'q';
}

static void start_worker(int i, const char *name, void *(*run)(void *)) {
  worker_t *w = &g_workers[i];
  memset(w, 0, sizeof *w);
  snprintf(w->name, sizeof w->name, "%s", name);
  CHECK(pipe(w->cmd) == 0);
  CHECK(pthread_create(&w->thread, NULL, run, w) == 0);
  long long deadline = now_ms() + WAIT_MS;
  while (atomic_load(&w->ready) == 0) {
    CHECKF(now_ms() < deadline, "worker %s did not start", name);
    sleep_ms(1);
  }
  CHECKF(atomic_load(&w->ready) == 1, "worker %s could not watch its loop", name);
}

static void send_cmd(int i, char c) {
  CHECK(write(g_workers[i].cmd[1], &c, 1) == 1);
}

static void wait_handled(int i, int count) {
  long long deadline = now_ms() + WAIT_MS;
  while (atomic_load(&g_workers[i].handled) < count) {
    CHECKF(now_ms() < deadline, "worker %s handled %d commands, want %d", g_workers[i].name,
           atomic_load(&g_workers[i].handled), count);
    sleep_ms(2);
  }
}

static void stop_worker(int i) {
  send_cmd(i, 'q');
  pthread_join(g_workers[i].thread, NULL);
  close(g_workers[i].cmd[0]);
  close(g_workers[i].cmd[1]);
}

/* -- libevent: a base per worker, watched under its name */

static void libevent_cmd(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  worker_t *w = arg;
  if (!handle_cmd(w)) event_base_loopbreak((struct event_base *)w->loop);
}

static void *libevent_worker(void *arg) {
  worker_t *w = arg;
  atomic_store(&w->tid, gettid_now());
  struct event_base *base = event_base_new();
  CHECK(base != NULL);
  w->loop = base;
  struct event *watch = perf_sdk_libevent_watch_loop(base, w->name, w->threshold_ms);
  struct event *cmd = event_new(base, w->cmd[0], EV_READ | EV_PERSIST, libevent_cmd, w);
  CHECK(cmd != NULL && event_add(cmd, NULL) == 0);
  atomic_store(&w->ready, watch ? 1 : -1);
  if (watch) CHECK_EQ_INT(event_base_dispatch(base), 0);
  perf_sdk_libevent_unwatch(watch);
  event_free(cmd);
  event_base_free(base);
  return NULL;
}

/* n worker bases; worker n/2 stalls: one hang event, naming it. */
static void libevent_workers(int n) {
  start_sdk();
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "worker-%d", i);
    start_worker(i, name, libevent_worker);
  }
  int k = n / 2;
  send_cmd(k, 'a');
  wait_handled(k, 1);
  for (int i = 0; i < n; i++)
    stop_worker(i);
  char *text = finish_report();
  CHECKF(count_hangs(text) == 1, "%d hang events, want 1:\n%s", count_hangs(text), text);
  expect_loop_hang(text, g_workers[k].name, atomic_load(&g_workers[k].tid), "worker_stall_a", NULL);
  free(text);
}

static void case_libevent_workers_1(void) {
  libevent_workers(1);
}

static void case_libevent_workers_4(void) {
  libevent_workers(4);
}

static void case_libevent_workers_16(void) {
  libevent_workers(16);
}

/* Two worker bases stalled at once: two events, each with its own stack. */
static void case_libevent_two_stalls(void) {
  start_sdk();
  start_worker(0, "worker-0", libevent_worker);
  start_worker(1, "worker-1", libevent_worker);
  start_worker(2, "worker-2", libevent_worker);
  send_cmd(0, 'a');
  send_cmd(2, 'b');
  wait_handled(0, 1);
  wait_handled(2, 1);
  for (int i = 0; i < 3; i++)
    stop_worker(i);
  char *text = finish_report();
  CHECKF(count_hangs(text) == 2, "%d hang events, want 2:\n%s", count_hangs(text), text);
  expect_loop_hang(text, "worker-0", atomic_load(&g_workers[0].tid), "worker_stall_a",
                   "worker_stall_b");
  expect_loop_hang(text, "worker-2", atomic_load(&g_workers[2].tid), "worker_stall_b",
                   "worker_stall_a");
  free(text);
}

/* -- libuv: a loop per worker, perf_sdk_uv_run_loop */

static void uv_cmd(uv_poll_t *poll, int status, int events) {
  (void)status;
  (void)events;
  worker_t *w = poll->data;
  if (!handle_cmd(w)) uv_close((uv_handle_t *)poll, NULL);
}

static void *uv_worker(void *arg) {
  worker_t *w = arg;
  atomic_store(&w->tid, gettid_now());
  uv_loop_t loop;
  CHECK_EQ_INT(uv_loop_init(&loop), 0);
  uv_poll_t poll;
  CHECK_EQ_INT(uv_poll_init(&loop, &poll, w->cmd[0]), 0);
  poll.data = w;
  CHECK_EQ_INT(uv_poll_start(&poll, UV_READABLE, uv_cmd), 0);
  atomic_store(&w->ready, 1);
  CHECK_EQ_INT(perf_sdk_uv_run_loop(&loop, w->name, w->threshold_ms), 0);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_E_NO_THREAD); /* forgotten when it returned */
  CHECK_EQ_INT(uv_loop_close(&loop), 0);
  return NULL;
}

static void case_uv_worker_stall(void) {
  start_sdk();
  start_worker(0, "uv-0", uv_worker);
  start_worker(1, "uv-1", uv_worker);
  send_cmd(0, 'n');
  send_cmd(1, 'b');
  wait_handled(1, 1);
  stop_worker(0);
  stop_worker(1);
  char *text = finish_report();
  CHECKF(count_hangs(text) == 1, "%d hang events, want 1:\n%s", count_hangs(text), text);
  expect_loop_hang(text, "uv-1", atomic_load(&g_workers[1].tid), "worker_stall_b", NULL);
  free(text);
}

/* -- GLib: a worker GMainContext, perf_sdk_glib_watch_loop */

static gboolean glib_cmd(GIOChannel *ch, GIOCondition cond, gpointer arg) {
  (void)ch;
  (void)cond;
  worker_t *w = arg;
  if (!handle_cmd(w)) g_main_loop_quit((GMainLoop *)w->loop);
  return G_SOURCE_CONTINUE;
}

static void *glib_worker(void *arg) {
  worker_t *w = arg;
  atomic_store(&w->tid, gettid_now());
  GMainContext *ctx = g_main_context_new();
  g_main_context_push_thread_default(ctx);
  GMainLoop *loop = g_main_loop_new(ctx, FALSE);
  w->loop = loop;
  GIOChannel *ch = g_io_channel_unix_new(w->cmd[0]);
  GSource *src = g_io_create_watch(ch, G_IO_IN);
  g_source_set_callback(src, (GSourceFunc)(void (*)(void))glib_cmd, w, NULL);
  g_source_attach(src, ctx);
  int err = perf_sdk_glib_watch_loop(ctx, w->name, w->threshold_ms);
  atomic_store(&w->ready, err == 0 ? 1 : -1);
  if (err == 0) g_main_loop_run(loop);
  CHECK_EQ_INT(perf_sdk_glib_unwatch(ctx), 0);
  g_source_destroy(src);
  g_source_unref(src);
  g_io_channel_unref(ch);
  g_main_loop_unref(loop);
  g_main_context_pop_thread_default(ctx);
  g_main_context_unref(ctx);
  return NULL;
}

static void case_glib_worker_stall(void) {
  start_sdk();
  start_worker(0, "glib-worker", glib_worker);
  send_cmd(0, 'n');
  send_cmd(0, 'a');
  wait_handled(0, 2);
  stop_worker(0);
  char *text = finish_report();
  CHECKF(count_hangs(text) == 1, "%d hang events, want 1:\n%s", count_hangs(text), text);
  expect_loop_hang(text, "glib-worker", atomic_load(&g_workers[0].tid), "worker_stall_a", NULL);
  free(text);
}

/* -- idle loops at the lowest threshold */

/* Each worker of `run` and the main thread's libevent base idle for
   IDLE_RUN_MS at a 20 ms threshold: no hang event. */
static void idle_at_min_threshold(void *(*run)(void *), int workers) {
  start_sdk_at(MIN_THRESHOLD_MS);
  for (int i = 0; i < workers; i++) {
    char name[32];
    snprintf(name, sizeof name, "idle-%d", i);
    start_worker(i, name, run);
  }
  struct event_base *base = event_base_new();
  CHECK(base != NULL);
  struct event *watch = perf_sdk_libevent_watch(base, 0);
  CHECK(watch != NULL);
  struct event *quit = evtimer_new(base, libevent_quit, base);
  struct timeval after = {IDLE_RUN_MS / 1000, (IDLE_RUN_MS % 1000) * 1000};
  CHECK_EQ_INT(evtimer_add(quit, &after), 0);
  CHECK_EQ_INT(event_base_dispatch(base), 0);
  perf_sdk_libevent_unwatch(watch);
  event_free(quit);
  event_base_free(base);
  for (int i = 0; i < workers; i++)
    stop_worker(i);
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  char *text = finish_report();
  CHECKF(count_hangs(text) == 0 && st.hangs_detected == 0,
         "%d hang events (%llu detected) in idle loops:\n%s", count_hangs(text),
         (unsigned long long)st.hangs_detected, text);
  free(text);
}

static void case_libevent_idle_min_threshold(void) {
  idle_at_min_threshold(libevent_worker, 4);
}

static void case_uv_idle_min_threshold(void) {
  idle_at_min_threshold(uv_worker, 2);
}

static void case_glib_idle_min_threshold(void) {
  idle_at_min_threshold(glib_worker, 1);
}

static const test_case_t g_cases[] = {
    TEST_CASE(uv_io_callback_hang),
    TEST_CASE(uv_timer_callback_hang),
    TEST_CASE(uv_idle_is_not_hang),
    TEST_CASE(glib_callback_hang),
    TEST_CASE(glib_idle_is_not_hang),
    TEST_CASE(libevent_callback_hang),
    TEST_CASE(libevent_idle_is_not_hang),
    TEST_CASE(libevent_workers_1),
    TEST_CASE(libevent_workers_4),
    TEST_CASE(libevent_workers_16),
    TEST_CASE(libevent_two_stalls),
    TEST_CASE(uv_worker_stall),
    TEST_CASE(glib_worker_stall),
    /* At a 20 ms threshold a libevent loop's heartbeat (every 5 ms) that
       waits over 15 ms for a CPU is a hang: beside a -j8 suite on 2 cores
       the main thread waits that long. */
    TEST_CASE_SERIAL(libevent_idle_min_threshold, "20 ms loops starved 80 ms hang"),
    TEST_CASE_SERIAL(uv_idle_min_threshold, "20 ms loops starved 80 ms hang"),
    TEST_CASE_SERIAL(glib_idle_min_threshold, "20 ms loops starved 80 ms hang"),
};

int main(int argc, char **argv) {
  return test_main(g_cases, sizeof g_cases / sizeof g_cases[0], argc, argv);
}
