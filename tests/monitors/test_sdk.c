/*
 * test_sdk.c - perf_sdk_init, the hang and CPU monitors, the rate limit, the
 * writer and the file sink against the real SDK: real threads, real signals,
 * real files in a temporary directory under /tmp that the test removes.
 * Each case runs in its own process: `test_sdk <case>`. The fatal-hang case
 * runs every SDK "run" as a fresh process: this program re-executed with a
 * child case (`test_sdk child_... <dir> ...`).
 *
 * Linked against the static library (perf__sdk_hold_writer) and built -O2
 * -fno-optimize-sibling-calls. Chain functions are noinline (noipa under
 * gcc) and use their callee's result, so every frame really exists.
 *
 * Nothing here sleeps hoping for timing: the tests wait for a counter or a
 * file with a deadline, and durations are measured on CLOCK_MONOTONIC, the
 * SDK's own clock.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "error_texts.h"
#include "perf_sdk.h"
#include "sdk/base/worker.h"
#include "sdk/monitors/unit_end.h"
#include "sdk/sdk_testing.h"
#include "sdk/symbols/symbols.h"
#include "sdk/wire/batch_decode.h"
#include "sdk_report.h"
#include "sdk_util.h"
#include "stack_assert.h"
#include "tempdir.h"
#include "test_util.h"

#define WAIT_MS 10000 /* every wait for the SDK gives up after this */
#define PATH_LEN 512
#define THRESHOLD_MS 200

extern char **environ;

static volatile unsigned long g_sink;
static int g_argc;
static char **g_argv;

static pid_t gettid_now(void) {
  return (pid_t)syscall(SYS_gettid);
}

/* ---- call chains --------------------------------------------------------- */

/* Burns CPU until the monotonic deadline (or *stop), reading the clock only
   every few microseconds so that samples land in the caller itself. */
static inline __attribute__((always_inline)) unsigned long burn(int64_t deadline,
                                                                const atomic_int *stop) {
  unsigned long x = 7;
  do {
    for (int i = 0; i < 4096; i++)
      x = x * 2862933555777941757UL + 3;
  } while (now_ns() < deadline && !(stop && atomic_load_explicit(stop, memory_order_relaxed)));
  return x;
}

static CHAIN unsigned long hang_spin_leaf(int64_t deadline) {
  return burn(deadline, NULL) + 1;
}
static CHAIN unsigned long hang_middle(int64_t deadline) {
  return hang_spin_leaf(deadline) + 1;
}
static CHAIN unsigned long hang_outer(int ms) {
  return hang_middle(now_ns() + (int64_t)ms * 1000000) + 1;
}

static CHAIN unsigned long fatal_spin(int64_t deadline) {
  return burn(deadline, NULL) + 1;
}
static CHAIN unsigned long fatal_outer(int ms) {
  return fatal_spin(now_ns() + (int64_t)ms * 1000000) + 1;
}

static atomic_int g_hot_stop;
static CHAIN unsigned long cpu_hot_leaf(int64_t deadline) {
  return burn(deadline, &g_hot_stop) + 1;
}
static CHAIN unsigned long cpu_hot_outer(int ms) {
  return cpu_hot_leaf(now_ns() + (int64_t)ms * 1000000) + 1;
}

/* A short unit of work (not a hang). */
static CHAIN unsigned long work_ms(int ms) {
  return burn(now_ns() + (int64_t)ms * 1000000, NULL) + 1;
}

/* ---- the temporary directory --------------------------------------------- */

static char g_dir[PATH_LEN];  /* the test's directory */
static char g_data[PATH_LEN]; /* <dir>/data: the SDK's data_dir in every run */

static void use_dir(const char *dir) {
  int n = snprintf(g_dir, sizeof g_dir, "%s", dir);
  CHECK(n > 0 && n < (int)sizeof g_dir);
  n = snprintf(g_data, sizeof g_data, "%s/data", dir);
  CHECK(n > 0 && n < (int)sizeof g_data);
}

static void make_dir(void) {
  use_dir(tempdir_make("test_sdk"));
}

static void dir_path(char *out, const char *name) {
  int n = snprintf(out, PATH_LEN, "%s/%s", g_dir, name);
  CHECK(n > 0 && n < PATH_LEN);
}

/* ---- SDK helpers --------------------------------------------------------- */

/* Defaults plus: this test's data_dir, the file sink when `report` is given,
   a 200 ms hang threshold sampled every 50 ms, and the CPU monitor out of
   the way (256 cores' worth) unless a case turns it on. */
static void base_config(perf_sdk_config_t *cfg, const char *report) {
  perf_sdk_config_init(cfg);
  cfg->app_name = "test_sdk";
  cfg->data_dir = g_data;
  if (report) {
    cfg->sink = PERF_SINK_FILE;
    cfg->sink_path = report;
  }
  cfg->hang_threshold_ms = THRESHOLD_MS;
  cfg->hang_sample_interval_ms = 50;
  cfg->cpu_threshold_percent = 25600;
}

#define WAIT_FOR_STATS(st, cond) SDK_WAIT_FOR_STATS(st, cond, WAIT_MS, 5)

/* When a loop call happened: between lo and hi (monotonic ns). */
typedef struct {
  int64_t lo, hi;
} instant_t;

static instant_t call_at(int (*loop_call)(void)) {
  instant_t t;
  t.lo = now_ns();
  CHECK_EQ_INT(loop_call(), PERF_OK);
  t.hi = now_ns();
  return t;
}

/* The unit of work from a to b lasted lo..hi ms, truncated as the report
   prints durations. */
static void unit_ms(instant_t a, instant_t b, long *lo, long *hi) {
  *lo = (long)((b.lo - a.hi) / 1000000);
  *hi = (long)((b.hi - a.lo) / 1000000);
}

/* A thread noting when hangs_detected first moves (for failure messages). */
typedef struct {
  pthread_t thread;
  atomic_int stop;
  _Atomic int64_t detected_ns;
} hang_watch_t;

static void *hang_watch_main(void *arg) {
  hang_watch_t *w = arg;
  while (!atomic_load(&w->stop)) {
    perf_sdk_stats_t st;
    if (perf_sdk_get_stats(&st) == PERF_OK && st.hangs_detected > 0) {
      atomic_store(&w->detected_ns, now_ns());
      break;
    }
    sleep_ms(1);
  }
  return NULL;
}

static void hang_watch_start(hang_watch_t *w) {
  atomic_store(&w->stop, 0);
  atomic_store(&w->detected_ns, 0);
  CHECK(pthread_create(&w->thread, NULL, hang_watch_main, w) == 0);
}

/* Milliseconds from `since` to the first hang, -1 when there was none. */
static long hang_watch_stop(hang_watch_t *w, int64_t since) {
  atomic_store(&w->stop, 1);
  pthread_join(w->thread, NULL);
  int64_t t = atomic_load(&w->detected_ns);
  return t ? (long)((t - since) / 1000000) : -1;
}

/* Messages given to log_fn, kept for the checks. */
static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_log[64][512];
static perf_log_level_t g_log_level[64];
static size_t g_log_count;

static void collect_log(perf_log_level_t level, const char *message, void *user) {
  (void)user;
  pthread_mutex_lock(&g_log_lock);
  if (g_log_count < ARRAY_LEN(g_log)) {
    g_log_level[g_log_count] = level;
    snprintf(g_log[g_log_count++], sizeof g_log[0], "%s", message);
  }
  pthread_mutex_unlock(&g_log_lock);
}

static void clear_log(void) {
  pthread_mutex_lock(&g_log_lock);
  g_log_count = 0;
  pthread_mutex_unlock(&g_log_lock);
}

/* An error-level message containing both strings (b may be NULL). */
static bool log_has_error(const char *a, const char *b) {
  bool found = false;
  pthread_mutex_lock(&g_log_lock);
  for (size_t i = 0; i < g_log_count && !found; i++)
    found = g_log_level[i] == PERF_LOG_ERROR && strstr(g_log[i], a) && (!b || strstr(g_log[i], b));
  pthread_mutex_unlock(&g_log_lock);
  return found;
}

static void dump_log(void) {
  pthread_mutex_lock(&g_log_lock);
  for (size_t i = 0; i < g_log_count; i++)
    fprintf(stderr, "  log[%d]: %s\n", (int)g_log_level[i], g_log[i]);
  pthread_mutex_unlock(&g_log_lock);
}

/* ---- threads ------------------------------------------------------------- */

typedef struct {
  pthread_t thread;
  atomic_int tid;
} worker_t;

static pthread_mutex_t g_idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_idle_cond = PTHREAD_COND_INITIALIZER;
static bool g_idle_release; /* under g_idle_lock */

static void *idle_main(void *arg) {
  worker_t *w = arg;
  atomic_store(&w->tid, gettid_now());
  pthread_mutex_lock(&g_idle_lock);
  while (!g_idle_release)
    pthread_cond_wait(&g_idle_cond, &g_idle_lock);
  pthread_mutex_unlock(&g_idle_lock);
  return NULL;
}

static void *hot_main(void *arg) {
  worker_t *w = arg;
  atomic_store(&w->tid, gettid_now());
  g_sink = cpu_hot_outer(2 * WAIT_MS); /* until g_hot_stop: the case waits WAIT_MS at most */
  return NULL;
}

static pid_t start_worker(worker_t *w, void *(*body)(void *)) {
  atomic_store(&w->tid, 0);
  CHECK(pthread_create(&w->thread, NULL, body, w) == 0);
  while (atomic_load(&w->tid) == 0)
    sleep_ms(1);
  return atomic_load(&w->tid);
}

/* ---- child processes ----------------------------------------------------- */

/* This program again, as `test_sdk <child_case> <dir> [arg]`; killed if the
   test dies first. */
static pid_t spawn_self(const char *child_case, const char *arg) {
  pid_t parent = getpid();
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    char *argv[] = {g_argv[0], (char *)child_case, g_dir, (char *)arg, NULL};
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  return pid;
}

static void expect_child_ok(pid_t pid) {
  int status;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d ended with status 0x%x", (int)pid,
         status);
}

/* ---- cases --------------------------------------------------------------- */

/* A marker that cannot be written (its temporary name is taken by a
   directory) is rewritten at every sample of a hang: the failure is logged
   once per hang, not once per sample. */
static size_t log_count_containing(const char *needle) {
  size_t n = 0;
  pthread_mutex_lock(&g_log_lock);
  for (size_t i = 0; i < g_log_count; i++)
    n += strstr(g_log[i], needle) != NULL;
  pthread_mutex_unlock(&g_log_lock);
  return n;
}

/* The writer names a report's frames from DWARF (this program is built
   with -g) and closes that DWARF after 2 s without events
   (sdk/pipeline/writer.c): an idle app does not carry debug info. */
static void case_dwarf_dropped_when_idle(void) {
  make_dir();
  char report[PATH_LEN];
  dir_path(report, "report.txt");
  perf_sdk_config_t cfg;
  base_config(&cfg, report);
  perf__symbols_set_cap(64u << 20);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  perf__symbols_stats_t st;
  perf__symbols_stats(&st);
  size_t opens = st.dwarf_opens;
  CHECK_EQ_INT(perf_sdk_capture_now("dwarf"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  perf__symbols_stats(&st);
  CHECKF(st.dwarf_opens > opens, "the report named no frame from DWARF (%zu opens)",
         st.dwarf_opens);
  long long deadline = now_ms() + 20000;
  do {
    sleep_ms(50);
    perf__symbols_stats(&st);
  } while (st.dwarf_modules > 0 && now_ms() < deadline);
  CHECKF(st.dwarf_modules == 0 && st.dwarf_bytes == 0,
         "%zu modules still hold %zu bytes of DWARF 20 s after the last event", st.dwarf_modules,
         st.dwarf_bytes);
  char *text = read_text(report);
  CHECKF(strstr(text, "case_dwarf_dropped_when_idle") != NULL, "not named in:\n%s", text);
  free(text);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
}

static void case_marker_failure_logged_once(void) {
  make_dir();
  char report[PATH_LEN], blocker[PATH_LEN + 32];
  dir_path(report, "report.txt");
  CHECK(mkdir(g_data, 0700) == 0 || errno == EEXIST);
  snprintf(blocker, sizeof blocker, "%s/hang-%d.tmp", g_data, (int)getpid());
  CHECK(mkdir(blocker, 0700) == 0);
  perf_sdk_config_t cfg;
  base_config(&cfg, report);
  cfg.log_fn = collect_log;
  clear_log();
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  for (int hang = 1; hang <= 2; hang++) {
    /* Hung until the writer has tried a marker (it keeps only the latest
       post of a hang: a writer busy elsewhere may see the hang first in
       its end), then 600 ms more of rewrites that must not log again. */
    CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
    long long deadline = now_ms() + 30000;
    while (log_count_containing("hang marker") < (size_t)hang && now_ms() < deadline)
      g_sink = hang_outer(50);
    g_sink = hang_outer(600);
    CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
    CHECK_EQ_INT(perf_sdk_flush(5000), PERF_OK);
    size_t logged = log_count_containing("hang marker");
    if (logged != (size_t)hang) dump_log();
    CHECKF(logged == (size_t)hang, "after hang %d: %zu marker failures logged", hang, logged);
  }
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  perf_sdk_stats_t st = sdk_stats();
  CHECK_EQ_INT(st.hangs_detected, 2);
  char *text = read_text(report);
  event_t ev;
  find_event(text, "hang", 0, &ev);
  CHECKF(ev.samples >= 3, "samples=%ld: the marker was rewritten too few times to test",
         ev.samples);
  event_free(&ev);
  free(text);
}

static void case_hang_detected(void) {
  make_dir();
  char report[PATH_LEN];
  dir_path(report, "report.txt");
  perf_sdk_config_t cfg;
  base_config(&cfg, report);
  time_t wall0 = time(NULL);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  hang_watch_t watch;
  hang_watch_start(&watch);
  instant_t busy = call_at(perf_sdk_loop_busy);
  g_sink = hang_outer(800);
  instant_t idle = call_at(perf_sdk_loop_idle);
  long detected_ms = hang_watch_stop(&watch, busy.lo);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  time_t wall1 = time(NULL);
  long lo, hi;
  unit_ms(busy, idle, &lo, &hi);

  perf_sdk_stats_t st = sdk_stats();
  CHECK_EQ_INT(st.hangs_detected, 1);
  CHECK_EQ_INT(st.events_recorded, 1);
  CHECK_EQ_INT(st.events_written, 1);
  char *text = read_text(report);
  CHECK_EQ_INT(count_events(text, NULL), 1);
  CHECK_EQ_INT(count_events(text, "hang"), 1);
  event_t ev;
  find_event(text, "hang", 0, &ev);
  /* 800 ms (longer if this thread was preempted), -50 / +50 +60. */
  CHECKF(ev.duration_ms >= lo - 50 && ev.duration_ms <= hi + 50 + 60,
         "duration_ms=%ld for a unit of %ld..%ld ms", ev.duration_ms, lo, hi);
  CHECK_EQ_INT(ev.thread, gettid_now());
  expect_start_between(&ev, wall0, wall1);
  CHECK_EQ_INT(ev.samples, event_stack_samples(&ev));
  /* Every 50 ms from 200 ms on gives 13; a monitor on two cores loaded
     by a dozen runnable threads wakes late and was seen taking 4 to 9.
     At least 5 still shows sampling going on through the hang. */
  CHECKF(ev.samples >= 5,
         "samples=%ld; every 50 ms from 200 ms on gives 13; the hang was detected %ld ms after "
         "loop_busy (threshold 200)",
         ev.samples, detected_ms);
  const char *chain[] = {"hang_spin_leaf", "hang_middle", "hang_outer"};
  expect_chain(&ev, 0, chain, ARRAY_LEN(chain));
  event_free(&ev);
  free(text);
}

/* perf_sdk_flush right after the idle mark that ends a hang writes that
   hang: the flush has the monitor look at the loop first (it would
   otherwise notice the end up to 10 ms later, after the flush). Three
   times, each flushed at once. */
static void case_flush_right_after_hang(void) {
  make_dir();
  char report[PATH_LEN];
  dir_path(report, "report.txt");
  perf_sdk_config_t cfg;
  base_config(&cfg, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  for (int hang = 1; hang <= 3; hang++) {
    CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
    g_sink = hang_outer(THRESHOLD_MS + 150);
    CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
    CHECK_EQ_INT(perf_sdk_flush(WAIT_MS), PERF_OK);
    char *text = read_text(report);
    CHECKF(count_events(text, "hang") == (size_t)hang, "after hang %d and a flush:\n%s", hang,
           text);
    free(text);
  }
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
}

/* Idle for `ms` in epoll_wait on an eventfd nobody writes. */
static void idle_wait(int ep, int ms) {
  long long until = now_ms() + ms;
  for (long long left = ms; left > 0; left = until - now_ms()) {
    struct epoll_event e;
    int n = epoll_wait(ep, &e, 1, (int)left);
    CHECKF(n == 0 || (n < 0 && errno == EINTR), "epoll_wait: %d (%s)", n, strerror(errno));
  }
}

static void case_idle_not_hang(void) {
  make_dir();
  char report[PATH_LEN];
  dir_path(report, "report.txt");
  perf_sdk_config_t cfg;
  base_config(&cfg, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  int ep = epoll_create1(EPOLL_CLOEXEC), efd = eventfd(0, EFD_CLOEXEC);
  CHECK(ep >= 0 && efd >= 0);
  struct epoll_event e = {.events = EPOLLIN, .data.fd = efd};
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &e) == 0);
  for (int i = 0; i < 4; i++) {
    CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
    g_sink += work_ms(5);
    CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
    idle_wait(ep, 2 * THRESHOLD_MS + 50);
  }
  CHECK_EQ_INT(sdk_stats().hangs_detected, 0);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  perf_sdk_stats_t st = sdk_stats();
  CHECK_EQ_INT(st.hangs_detected, 0);
  CHECK_EQ_INT(st.events_recorded, 0);
  char *text = read_text(report);
  CHECK_EQ_INT(count_events(text, "hang"), 0);
  free(text);
  close(efd);
  close(ep);
}

/* The label="..." line of an event, or "" when it has none. */
static void event_label(const event_t *ev, char *out, size_t len) {
  const char *l = strstr(ev->text, "\nlabel=\"");
  out[0] = '\0';
  if (!l) return;
  l += 8;
  const char *end = strstr(l, "\"\n");
  CHECKF(end != NULL, "unterminated label in:\n%s", ev->text);
  snprintf(out, len, "%.*s", (int)(end - l), l);
}

/* perf_sdk_loop_busy_label: the hang of a labelled unit carries its label,
   the next unit's (plain busy) none; a long label is cut at 63 bytes
   without splitting a UTF-8 character; a nested loop's label changes
   nothing. */
static void case_hang_label(void) {
  make_dir();
  char report[PATH_LEN];
  dir_path(report, "report.txt");
  perf_sdk_config_t cfg;
  base_config(&cfg, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  /* Each unit runs 400 ms past the threshold: a monitor starved on a
     loaded machine still wakes inside it. */
  CHECK_EQ_INT(perf_sdk_loop_busy_label("GET /users"), PERF_OK);
  g_sink = hang_outer(THRESHOLD_MS + 400);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  g_sink = hang_outer(THRESHOLD_MS + 400);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  /* 61 ASCII bytes, then "é" (2 bytes) and "€" (3): 63 bytes keep the é. */
  char long_label[80];
  memset(long_label, 'x', 61);
  strcpy(long_label + 61, "\xc3\xa9\xe2\x82\xac-tail");
  CHECK_EQ_INT(perf_sdk_loop_busy_label(long_label), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_nested_begin(), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_busy_label("nested"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_nested_end(), PERF_OK);
  g_sink = hang_outer(THRESHOLD_MS + 400);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK_EQ_INT(sdk_stats().hangs_detected, 3);

  char *text = read_text(report);
  CHECK_EQ_INT(count_events(text, "hang"), 3);
  char want3[80];
  memset(want3, 'x', 61);
  strcpy(want3 + 61, "\xc3\xa9");
  const char *want[] = {"GET /users", "", want3};
  for (size_t i = 0; i < 3; i++) {
    event_t ev;
    find_event(text, "hang", i, &ev);
    char label[128];
    event_label(&ev, label, sizeof label);
    CHECKF(strcmp(label, want[i]) == 0, "hang %zu: label \"%s\", not \"%s\"", i, label, want[i]);
    event_free(&ev);
  }
  free(text);
}

/* Lines that start with prefix. */
static size_t lines_starting(const char *text, const char *prefix) {
  size_t n = 0, len = strlen(prefix);
  for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (strncmp(p, prefix, len) == 0) n++;
  return n;
}

/* A label and a capture_now reason holding '"' and newlines cannot forge
   report lines: the file sink escapes them as perf-dump does. */
static void case_report_escaping(void) {
  make_dir();
  char report[PATH_LEN];
  dir_path(report, "report.txt");
  perf_sdk_config_t cfg;
  base_config(&cfg, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_busy_label("L\"\nevent hang start=FORGED duration_ms=1"), PERF_OK);
  g_sink = hang_outer(THRESHOLD_MS + 400);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("R\"\nevent manual start=FORGED\\\tx\x01"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK_EQ_INT(sdk_stats().hangs_detected, 1);

  char *text = read_text(report);
  CHECKF(lines_starting(text, "event ") == 2, "not 2 event lines:\n%s", text);
  CHECK_EQ_INT(lines_starting(text, "event hang "), 1);
  CHECK_EQ_INT(lines_starting(text, "event manual "), 1);
  CHECKF(!strstr(text, "\nevent hang start=FORGED") && !strstr(text, "\nevent manual start=FORGED"),
         "a forged line in:\n%s", text);
  CHECKF(strstr(text, "\nlabel=\"L\\\"\\nevent hang start=FORGED duration_ms=1\"\n"),
         "label not escaped in:\n%s", text);
  CHECKF(strstr(text, "\nreason=\"R\\\"\\nevent manual start=FORGED\\\\\\tx\\x01\"\n"),
         "reason not escaped in:\n%s", text);
  free(text);
}

static void case_pause_suppresses(void) {
  make_dir();
  char report[PATH_LEN];
  dir_path(report, "report.txt");
  perf_sdk_config_t cfg;
  base_config(&cfg, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  /* Paused: 3 x threshold of work is no hang, nor is the rest of that unit
     after resume (it does not count from its start). */
  CHECK_EQ_INT(perf_sdk_pause(), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  g_sink = hang_outer(3 * THRESHOLD_MS);
  CHECK_EQ_INT(sdk_stats().hangs_detected, 0);
  instant_t resume = call_at(perf_sdk_resume);
  g_sink += work_ms(5);
  instant_t idle = call_at(perf_sdk_loop_idle);
  long lo, hi;
  unit_ms(resume, idle, &lo, &hi);
  CHECKF(sdk_stats().hangs_detected == 0, "a hang after resume; resume to idle took %ld..%ld ms",
         lo, hi);
  /* Resumed: a real hang is detected. */
  instant_t busy = call_at(perf_sdk_loop_busy);
  g_sink = hang_outer(3 * THRESHOLD_MS);
  idle = call_at(perf_sdk_loop_idle);
  unit_ms(busy, idle, &lo, &hi);
  perf_sdk_stats_t st;
  WAIT_FOR_STATS(st, st.events_written >= 1);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  st = sdk_stats();
  CHECK_EQ_INT(st.hangs_detected, 1);
  CHECK_EQ_INT(st.events_written, 1);
  char *text = read_text(report);
  CHECK_EQ_INT(count_events(text, "hang"), 1);
  event_t ev;
  find_event(text, "hang", 0, &ev);
  CHECKF(ev.duration_ms >= lo - 50 && ev.duration_ms <= hi + 110,
         "duration_ms=%ld for a unit of %ld..%ld ms", ev.duration_ms, lo, hi);
  const char *chain[] = {"hang_spin_leaf", "hang_middle", "hang_outer"};
  expect_chain(&ev, 0, chain, ARRAY_LEN(chain));
  event_free(&ev);
  free(text);
}

/* Child: hangs in fatal_outer -> fatal_spin until killed. */
static void child_fatal_hang(void) {
  perf_sdk_config_t cfg;
  base_config(&cfg, NULL);
  cfg.hang_threshold_ms = 100;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  g_sink = fatal_outer(60000);
  exit(3); /* the parent kills it long before */
}

/* Child: one SDK run with the file sink to <dir>/<argv[3]>. */
static void child_report(void) {
  CHECK(g_argc == 4);
  char report[PATH_LEN];
  dir_path(report, g_argv[3]);
  perf_sdk_config_t cfg;
  base_config(&cfg, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  perf_sdk_stats_t st = sdk_stats();
  CHECK_EQ_INT(st.events_written, st.events_recorded);
  CHECK_EQ_INT(st.events_dropped_queue + st.events_dropped_sink + st.events_dropped_rate, 0);
}

/* The hang marker is a one-event batch (the wire encoding): decoded, its
   good samples; -1 while it is absent. It must name this program's module
   with its build-id, so the collector can symbolize a fatal hang. */
static long marker_samples(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  static uint8_t data[4 << 20];
  size_t len = fread(data, 1, sizeof data, f);
  fclose(f);
  Perf__V1__Batch *bt = NULL;
  CHECKF(perf__batch_decode_stored(data, len, sizeof data, &bt) == PERF_OK, "%s: not a batch",
         path);
  CHECK_EQ_INT(bt->n_events, 1);
  const Perf__V1__Event *e = bt->events[0];
  long good = 0;
  for (size_t i = 0; i < e->n_sample_stacks; i++)
    good += e->sample_stacks[i] != 0;
  char exe[PATH_LEN];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  CHECK(n > 0);
  exe[n] = '\0';
  bool named = false;
  for (size_t i = 0; i < bt->n_modules; i++)
    named |= strcmp(bt->modules[i]->path, exe) == 0 && bt->modules[i]->build_id.len >= 16;
  CHECKF(named, "the marker has no module %s with a build-id", exe);
  perf__v1__batch__free_unpacked(bt, NULL);
  return good;
}

/* The marker's samples once it exists with at least `min` of them. */
static long wait_for_marker(const char *path, long min) {
  long long deadline = now_ms() + WAIT_MS;
  for (;;) {
    long samples = marker_samples(path);
    if (samples >= min) return samples;
    CHECKF(now_ms() < deadline, "no marker %s with %ld samples after %d ms", path, min, WAIT_MS);
    sleep_ms(5);
  }
}

static size_t count_hang_files(const char *dir) {
  char cmd[PATH_LEN + 64];
  snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c '^hang-'", dir);
  FILE *f = popen(cmd, "r");
  CHECK(f != NULL);
  unsigned long n = 99;
  CHECK(fscanf(f, "%lu", &n) == 1);
  pclose(f);
  return n;
}

static void case_fatal_hang(void) {
  make_dir();
  pid_t child = spawn_self("child_fatal_hang", NULL);
  char marker[PATH_LEN];
  int len = snprintf(marker, sizeof marker, "%s/hang-%d.marker", g_data, (int)child);
  CHECK(len > 0 && len < (int)sizeof marker);
  long marker_samples = wait_for_marker(marker, 4);
  CHECK(kill(child, SIGKILL) == 0);
  int status;
  CHECK(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  CHECK(access(marker, F_OK) == 0);

  /* The next run reports it, once. */
  expect_child_ok(spawn_self("child_report", "report1.txt"));
  char path[PATH_LEN];
  dir_path(path, "report1.txt");
  char *text = read_text(path);
  CHECK_EQ_INT(count_events(text, NULL), 1);
  CHECK_EQ_INT(count_events(text, "fatal_hang"), 1);
  event_t ev;
  find_event(text, "fatal_hang", 0, &ev);
  CHECK_EQ_INT(ev.thread, child); /* its main thread */
  CHECKF(ev.samples >= marker_samples, "samples=%ld, marker had %ld", ev.samples, marker_samples);
  CHECK_EQ_INT(ev.samples, event_stack_samples(&ev));
  CHECKF(ev.duration_ms >= 100, "duration_ms=%ld", ev.duration_ms);
  char reason[96];
  snprintf(reason, sizeof reason, "process %d ended", (int)child);
  CHECKF(strstr(ev.text, reason) != NULL, "no '%s' in:\n%s", reason, ev.text);
  /* The dead thread spun: its samples' states came through the marker
     (unknown only for a capture that failed). */
  char states[64];
  snprintf(states, sizeof states, "\nstates thread=%d running ", (int)child);
  CHECKF(strstr(ev.text, states) && strstr(ev.text, " state=\"running "), "no %s in:\n%s",
         states + 1, ev.text);
  const char *chain[] = {"fatal_spin", "fatal_outer"};
  expect_chain(&ev, 0, chain, ARRAY_LEN(chain));
  event_free(&ev);
  free(text);
  CHECK(access(marker, F_OK) != 0 && errno == ENOENT);
  CHECK_EQ_INT(count_hang_files(g_data), 0);

  expect_child_ok(spawn_self("child_report", "report2.txt"));
  dir_path(path, "report2.txt");
  text = read_text(path);
  CHECK_EQ_INT(count_events(text, "fatal_hang"), 0);
  free(text);
}

static void case_cpu_burst_hot_thread(void) {
  make_dir();
  char report[PATH_LEN];
  dir_path(report, "report.txt");
  perf_sdk_config_t cfg;
  base_config(&cfg, report);
  /* The case is about which thread the burst finds and samples, not about
     how much CPU it gets: the hot thread may share a core with a whole test
     suite (ctest -j8 on 2 cores and more). A twentieth of a core on every
     100 ms tick for a second is what it still gets there, and nothing else
     in this process comes close (the idle threads wait, this thread polls
     the counters every 5 ms). */
  cfg.cpu_threshold_percent = 5;
  cfg.cpu_window_ms = 1000;
  cfg.cpu_burst_ms = 1000;
  cfg.cpu_sample_hz = 100;
  cfg.cpu_top_threads = 1;
  cfg.cpu_cooldown_ms = 60000;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  worker_t idle[3], hot;
  pid_t idle_tids[3];
  for (int i = 0; i < 3; i++)
    idle_tids[i] = start_worker(&idle[i], idle_main);
  pid_t hot_tid = start_worker(&hot, hot_main);
  perf_sdk_stats_t st;
  WAIT_FOR_STATS(st, st.cpu_bursts == 1 && st.events_written >= 1);
  atomic_store(&g_hot_stop, 1);
  pthread_mutex_lock(&g_idle_lock);
  g_idle_release = true;
  pthread_cond_broadcast(&g_idle_cond);
  pthread_mutex_unlock(&g_idle_lock);
  pthread_join(hot.thread, NULL);
  for (int i = 0; i < 3; i++)
    pthread_join(idle[i].thread, NULL);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  st = sdk_stats();
  CHECK_EQ_INT(st.cpu_bursts, 1);
  CHECK_EQ_INT(st.events_written, 1);

  char *text = read_text(report);
  CHECK_EQ_INT(count_events(text, "cpu"), 1);
  event_t ev;
  find_event(text, "cpu", 0, &ev);
  CHECK_EQ_INT(ev.thread, hot_tid);
  char line[64];
  snprintf(line, sizeof line, "\nthread tid=%d ", (int)hot_tid);
  const char *t = strstr(ev.text, line);
  CHECKF(t != NULL, "no '%s' in:\n%s", line + 1, ev.text);
  const char *pct = strstr(t, " cpu_percent=");
  CHECKF(pct && pct < strchr(t + 1, '\n'), "no cpu_percent for the hot thread in:\n%s", ev.text);
  /* Shares, not absolute figures: the hot thread ran during the burst, and
     the process as a whole used at least what its hot thread did. */
  long hot_percent = strtol(pct + 13, NULL, 10);
  CHECKF(hot_percent >= 1 && ev.cpu_percent >= hot_percent,
         "hot thread cpu_percent=%ld, process cpu_percent=%ld in:\n%s", hot_percent, ev.cpu_percent,
         ev.text);
  CHECK_EQ_INT(count_events(ev.text, NULL), 1);
  size_t thread_lines = 0;
  for (const char *p = ev.text; (p = strstr(p, "\nthread tid=")) != NULL; p++)
    thread_lines++;
  CHECK_EQ_INT(thread_lines, 1); /* cpu_top_threads */
  CHECK_EQ_INT(ev.samples, event_stack_samples(&ev));
  /* Sampled at 100 Hz while it runs: how often depends on the core it gets. */
  CHECKF(ev.samples >= 1, "samples=%ld", ev.samples);
  const char *chain[] = {"cpu_hot_leaf", "cpu_hot_outer"};
  expect_chain(&ev, 0, chain, ARRAY_LEN(chain));
  ev_stack_t s;
  for (size_t i = 0; event_stack(&ev, i, &s); i++) {
    for (int k = 0; k < 3; k++)
      CHECKF(s.thread != idle_tids[k], "idle thread %d sampled:\n%s", (int)s.thread, ev.text);
    CHECK_EQ_INT(s.thread, hot_tid);
    free(s.text);
  }
  event_free(&ev);
  free(text);
}

/* ---- detection on a shared machine: dips are noise, lulls are not ---------- */

/* Burn this thread's CPU for ms of CPU time (however long that takes). */
static unsigned long burn_cpu_ms(int ms) {
  int64_t end = thread_cpu_ns() + (int64_t)ms * 1000000;
  unsigned long x = 0;
  do
    x += burn(0, NULL);
  while (thread_cpu_ns() < end);
  return x;
}

/* cycles of: `busy` periods of 100 ms burning, then `quiet` periods of
   100 ms that burn `quiet_cpu_ms` of CPU each and sleep the rest. */
static void dip_pattern(int cycles, int busy, int quiet, int quiet_cpu_ms) {
  int64_t period = now_ns();
  for (int c = 0; c < cycles; c++) {
    for (int i = 0; i < busy; i++)
      g_sink += burn(period += 100000000, NULL);
    for (int i = 0; i < quiet; i++) {
      g_sink += burn_cpu_ms(quiet_cpu_ms);
      period += 100000000;
      struct timespec ts = {(time_t)(period / 1000000000), (long)(period % 1000000000)};
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
      }
    }
  }
}

/* Runs the pattern for 3.5 s under a 4% threshold and a 1 s window (100 ms
   ticks); returns the CPU bursts the SDK found. A twentieth of a core is
   what a busy period still gets on a loaded machine (cpu_burst_hot_thread);
   the quiet periods are CPU time, the same on any machine. */
static uint64_t bursts_with_pattern(int busy, int quiet, int quiet_cpu_ms) {
  make_dir();
  perf_sdk_config_t cfg;
  base_config(&cfg, NULL);
  cfg.cpu_threshold_percent = 4;
  cfg.cpu_window_ms = 1000;
  cfg.cpu_burst_ms = 100;
  cfg.cpu_cooldown_ms = 60000;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  dip_pattern(35 / (busy + quiet), busy, quiet, quiet_cpu_ms);
  perf_sdk_stats_t st = sdk_stats();
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  return st.cpu_bursts;
}

/* Every fifth tick dips to 3% (under the 4% threshold, over half of it):
   the window's mean is over the threshold, so the burst is found (a rule
   wanting every tick over the threshold never fires here). */
static void case_cpu_burst_through_dips(void) {
  CHECK_EQ_INT(bursts_with_pattern(4, 1, 3), 1);
}

/* Three idle ticks in every seven: a lull (under half the threshold)
   starts the window again, whatever the mean. */
static void case_cpu_lull_restarts_window(void) {
  CHECK_EQ_INT(bursts_with_pattern(4, 3, 0), 0);
}

/* An SDK thread (a registered perf__worker) burning CPU until stopped. */
static void sdk_busy_main(perf__worker_t *w, void *arg) {
  (void)arg;
  unsigned long x = 0;
  while (!perf__worker_stopping(w))
    x += burn(now_ns() + 1000000, NULL);
  g_sink = x;
}

static void case_cpu_burst_skips_sdk_threads(void) {
  make_dir();
  char report[PATH_LEN];
  dir_path(report, "report.txt");
  perf_sdk_config_t cfg;
  base_config(&cfg, report);
  cfg.cpu_threshold_percent = 25;
  cfg.cpu_window_ms = 300;
  cfg.cpu_burst_ms = 300;
  cfg.cpu_sample_hz = 100;
  cfg.cpu_top_threads = 64; /* every thread that ran, unless it is the SDK's */
  cfg.cpu_cooldown_ms = 60000;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  /* Two threads burn CPU: the app's, and one of the SDK's (registered the
     way the writer, the monitors and the uploader are). */
  perf__worker_t *busy = NULL;
  CHECK_EQ_INT(perf__worker_start("perf-busy", sdk_busy_main, NULL, &busy), PERF_OK);
  pid_t busy_tid = perf__worker_tid(busy);
  worker_t hot;
  pid_t hot_tid = start_worker(&hot, hot_main);
  perf_sdk_stats_t st;
  WAIT_FOR_STATS(st, st.cpu_bursts == 1 && st.events_written >= 1);
  atomic_store(&g_hot_stop, 1);
  pthread_join(hot.thread, NULL);
  CHECK_EQ_INT(perf__worker_stop(busy, 0), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);

  char *text = read_text(report);
  event_t ev;
  find_event(text, "cpu", 0, &ev);
  char line[64];
  snprintf(line, sizeof line, "\nthread tid=%d ", (int)hot_tid);
  CHECKF(strstr(ev.text, line) != NULL, "the app's hot thread is missing:\n%s", ev.text);
  snprintf(line, sizeof line, "\nthread tid=%d ", (int)busy_tid);
  CHECKF(strstr(ev.text, line) == NULL, "the SDK's busy thread was picked:\n%s", ev.text);
  const char *sdk_names[] = {"perf-busy", "perf-writer", "perf-hang-mon", "perf-cpu-mon"};
  for (size_t i = 0; i < ARRAY_LEN(sdk_names); i++) {
    snprintf(line, sizeof line, " name=\"%s\"", sdk_names[i]);
    CHECKF(strstr(ev.text, line) == NULL, "%s was picked:\n%s", sdk_names[i], ev.text);
  }
  ev_stack_t s;
  for (size_t i = 0; event_stack(&ev, i, &s); i++) {
    CHECKF(s.thread != busy_tid, "the SDK's busy thread was sampled:\n%s", ev.text);
    free(s.text);
  }
  event_free(&ev);
  free(text);
}

static void case_rate_limit_exact(void) {
  make_dir();
  char report[PATH_LEN];
  dir_path(report, "report1.txt");
  perf_sdk_config_t cfg;
  base_config(&cfg, report);
  cfg.max_events_per_hour = 3;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  const char *reasons[] = {"n1", "n2", "n3", "n4", "n5"};
  for (int i = 0; i < 5; i++)
    CHECK_ERROR(perf_sdk_capture_now(reasons[i]), i < 3 ? PERF_OK : PERF_E_RATE_LIMITED);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  perf_sdk_stats_t st = sdk_stats();
  CHECK_EQ_INT(st.events_recorded, 3);
  CHECK_EQ_INT(st.events_dropped_rate, 2);
  CHECK_EQ_INT(st.events_dropped_queue, 0);
  CHECK_EQ_INT(st.events_written, 3);
  char *text = read_text(report);
  CHECK_EQ_INT(count_events(text, NULL), 3);
  CHECK_EQ_INT(count_events(text, "manual"), 3);
  for (int i = 0; i < 3; i++) {
    event_t ev;
    find_event(text, "manual", (size_t)i, &ev);
    char reason[32];
    snprintf(reason, sizeof reason, "\nreason=\"%s\"\n", reasons[i]);
    CHECKF(strstr(ev.text, reason) != NULL, "event %d is not %s:\n%s", i, reasons[i], ev.text);
    CHECK_EQ_INT(ev.dropped, 0);
    CHECK_EQ_INT(ev.thread, gettid_now());
    event_free(&ev);
  }
  free(text);

  /* A full queue: the drops travel with the next recorded event. */
  dir_path(report, "report2.txt");
  base_config(&cfg, report);
  cfg.queue_capacity = 2;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf__sdk_hold_writer(true), PERF_OK);
  for (int i = 0; i < 5; i++)
    CHECK_ERROR(perf_sdk_capture_now(reasons[i]), i < 2 ? PERF_OK : PERF_E_QUEUE_FULL);
  st = sdk_stats();
  CHECK_EQ_INT(st.events_recorded, 2);
  CHECK_EQ_INT(st.events_dropped_queue, 3);
  CHECK_EQ_INT(st.events_dropped_rate, 0);
  CHECK_EQ_INT(st.events_written, 0);
  CHECK_EQ_INT(perf__sdk_hold_writer(false), PERF_OK);
  WAIT_FOR_STATS(st, st.events_written == 2);
  CHECK_EQ_INT(perf_sdk_capture_now("after"), PERF_OK);
  WAIT_FOR_STATS(st, st.events_written == 3);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  st = sdk_stats();
  CHECK_EQ_INT(st.events_recorded, 3);
  CHECK_EQ_INT(st.events_written, 3);
  CHECK_EQ_INT(st.events_dropped_queue, 3);
  text = read_text(report);
  CHECK_EQ_INT(count_events(text, "manual"), 3);
  const char *written[] = {"n1", "n2", "after"};
  for (int i = 0; i < 3; i++) {
    event_t ev;
    find_event(text, "manual", (size_t)i, &ev);
    char reason[32];
    snprintf(reason, sizeof reason, "\nreason=\"%s\"\n", written[i]);
    CHECKF(strstr(ev.text, reason) != NULL, "event %d is not %s:\n%s", i, written[i], ev.text);
    CHECK_EQ_INT(ev.dropped, i == 2 ? 3 : 0);
    event_free(&ev);
  }
  free(text);
}

/* perf_sdk_init fails with PERF_E_INVALID_CONFIG, logging an error that
   contains a and b, and starts nothing. */
static void expect_config_error(const perf_sdk_config_t *cfg, const char *a, const char *b) {
  clear_log();
  int err = perf_sdk_init(cfg);
  if (err != PERF_E_INVALID_CONFIG || !log_has_error(a, b)) {
    fprintf(stderr, "init: %d (%s); expected an error naming '%s' '%s'; log:\n", err,
            perf_strerror(err), a, b ? b : "");
    dump_log();
    exit(1);
  }
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_E_NOT_INITIALIZED);
}

/* One init (threshold 100 in code): is a 500 ms unit a hang? */
static uint64_t hangs_for_500ms_unit(perf_sdk_config_t *cfg) {
  cfg->hang_threshold_ms = 100;
  CHECK_EQ_INT(perf_sdk_init(cfg), PERF_OK);
  unsetenv("PERF_SDK_HANG_THRESHOLD_MS");
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  g_sink = hang_outer(500);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  uint64_t hangs = sdk_stats().hangs_detected;
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK_EQ_INT(sdk_stats().hangs_detected, hangs);
  return hangs;
}

static void case_config_errors_name_field(void) {
  make_dir();
  perf_sdk_config_t cfg;
  base_config(&cfg, NULL);
  cfg.log_fn = collect_log;
  cfg.hang_threshold_ms = 5;
  expect_config_error(&cfg, "hang_threshold_ms", "20..60000");

  base_config(&cfg, NULL);
  cfg.log_fn = collect_log;
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = NULL;
  expect_config_error(&cfg, "sink_path", NULL);

  base_config(&cfg, NULL);
  cfg.log_fn = collect_log;
  setenv("PERF_SDK_HANG_THRESHOLD_MS", "abc", 1);
  expect_config_error(&cfg, "PERF_SDK_HANG_THRESHOLD_MS", NULL);
  unsetenv("PERF_SDK_HANG_THRESHOLD_MS");

  setenv("PERF_SDK_SINK", "carrier-pigeon", 1);
  expect_config_error(&cfg, "PERF_SDK_SINK", NULL);
  unsetenv("PERF_SDK_SINK");

  cfg.tags[0] = (perf_tag_t){"", "value"};
  expect_config_error(&cfg, "tags", NULL);
  /* A key with a colon could never be matched by the collector's
     tag=key:value filter: refused, the tag named; a value may hold one. */
  cfg.tags[0] = (perf_tag_t){"team", "pay:eu"};
  cfg.tags[1] = (perf_tag_t){"region:zone", "eu-1"};
  expect_config_error(&cfg, "tags[1]", "region:zone");
  setenv("PERF_SDK_TAGS", "team=pay,a:b=c", 1);
  cfg.tags[1] = (perf_tag_t){NULL, NULL};
  expect_config_error(&cfg, "tags[1]", "a:b");
  unsetenv("PERF_SDK_TAGS");
  cfg.tags[0] = (perf_tag_t){NULL, NULL};

  /* The environment wins over the code: 1000 ms makes a 500 ms unit no
     hang; without it the code's 100 ms does. */
  setenv("PERF_SDK_HANG_THRESHOLD_MS", "1000", 1);
  CHECK_EQ_INT(hangs_for_500ms_unit(&cfg), 0);
  CHECK_EQ_INT(hangs_for_500ms_unit(&cfg), 1);

  setenv("PERF_SDK_DISABLED", "1", 1);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  unsetenv("PERF_SDK_DISABLED");
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_E_NOT_INITIALIZED);
  CHECK_EQ_INT(perf_sdk_shutdown(1000), PERF_E_NOT_INITIALIZED);
}

/* Every call that needs a running SDK answers PERF_E_NOT_INITIALIZED. */
static void expect_not_running(void) {
  CHECK_ERROR(perf_sdk_loop_busy(), PERF_E_NOT_INITIALIZED);
  CHECK_ERROR(perf_sdk_loop_idle(), PERF_E_NOT_INITIALIZED);
  CHECK_ERROR(perf_sdk_heartbeat(), PERF_E_NOT_INITIALIZED);
  CHECK_ERROR(perf_sdk_pause(), PERF_E_NOT_INITIALIZED);
  CHECK_ERROR(perf_sdk_resume(), PERF_E_NOT_INITIALIZED);
  CHECK_ERROR(perf_sdk_watch_current_thread(), PERF_E_NOT_INITIALIZED);
  CHECK_ERROR(perf_sdk_capture_now("x"), PERF_E_NOT_INITIALIZED);
  CHECK_ERROR(perf_sdk_loop_nested_begin(), PERF_E_NOT_INITIALIZED);
  CHECK_ERROR(perf_sdk_loop_nested_end(), PERF_E_NOT_INITIALIZED);
  CHECK_ERROR(perf_sdk_loop_busy_label("x"), PERF_E_NOT_INITIALIZED);
  CHECK_ERROR(perf_sdk_flush(1000), PERF_E_NOT_INITIALIZED);
  CHECK_ERROR(perf_sdk_shutdown(1000), PERF_E_NOT_INITIALIZED);
}

static void case_lifecycle_errors(void) {
  make_dir();
  perf_sdk_stats_t st;
  CHECK_ERROR(perf_sdk_get_stats(&st), PERF_E_NOT_INITIALIZED);
  expect_not_running();
  CHECK_ERROR(perf_sdk_init(NULL), PERF_E_INVALID_ARGUMENT);
  CHECK_ERROR(perf_sdk_get_stats(NULL), PERF_E_INVALID_ARGUMENT);
  perf_sdk_config_t cfg;
  base_config(&cfg, NULL);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_ERROR(perf_sdk_init(&cfg), PERF_E_ALREADY_INITIALIZED);
  CHECK_ERROR(perf_sdk_shutdown(-1), PERF_E_INVALID_ARGUMENT);
  CHECK_ERROR(perf_sdk_shutdown(600001), PERF_E_INVALID_ARGUMENT);
  CHECK_ERROR(perf_sdk_flush(-1), PERF_E_INVALID_ARGUMENT);
  CHECK_ERROR(perf_sdk_flush(600001), PERF_E_INVALID_ARGUMENT);
  CHECK_ERROR(perf_sdk_loop_nested_end(), PERF_E_INVALID_ARGUMENT); /* no begin */
  CHECK_ERROR(perf_sdk_get_stats_sized(&st, 12), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_sdk_watch_current_thread(), PERF_OK);
  CHECK_EQ_INT(perf_sdk_heartbeat(), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  long long t0 = now_ms();
  CHECK_EQ_INT(perf_sdk_shutdown(2000), PERF_OK);
  long long took = now_ms() - t0;
  CHECKF(took < 2000, "shutdown(2000) took %lld ms", took);
  expect_not_running();
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  /* Again after a shutdown. */
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(2000), PERF_OK);
  expect_not_running();
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
}

/* Every code's text (error_texts.h): exact, none "unknown error". */
static void case_error_texts(void) {
  check_error_texts();
}

/* A flush that cannot finish by its deadline (the writer held with an event
   queued) says so, and leaves nothing behind: released, the next flush
   writes it. */
static void case_flush_deadline(void) {
  make_dir();
  char report[PATH_LEN];
  dir_path(report, "report.txt");
  perf_sdk_config_t cfg;
  base_config(&cfg, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf__sdk_hold_writer(true), PERF_OK);
  CHECK_ERROR(perf_sdk_capture_now("held"), PERF_OK);
  long long t0 = now_ms();
  CHECK_ERROR(perf_sdk_flush(300), PERF_E_DEADLINE);
  long long took = now_ms() - t0;
  CHECKF(took >= 299 && took < 3000, "flush(300) took %lld ms", took);
  perf_sdk_stats_t st = sdk_stats();
  CHECK_EQ_INT(st.events_written, 0);
  CHECK_EQ_INT(perf__sdk_hold_writer(false), PERF_OK);
  CHECK_ERROR(perf_sdk_flush(WAIT_MS), PERF_OK);
  st = sdk_stats();
  CHECK_EQ_INT(st.events_written, 1);
  CHECK_ERROR(perf_sdk_shutdown(5000), PERF_OK);
}

/* A shutdown whose writer is stuck in I/O past the deadline (the file sink
   is a FIFO nobody reads: its open() waits for a reader) returns
   PERF_E_DEADLINE in time and leaves that thread running; once a reader
   comes, the writer writes the report into it. */
/* The writer's open() of the report FIFO as /proc shows it. qemu-user
   passes /proc/self/task/TID/syscall through: it shows the host's call
   (the cross stage runs on x86_64, where openat is 257). */
#ifdef TEST_QEMU_USER
#define WRITER_OPEN_NR 257
#else
#define WRITER_OPEN_NR SYS_openat
#endif

static void case_shutdown_deadline(void) {
  make_dir();
  char fifo[PATH_LEN];
  dir_path(fifo, "report.fifo");
  CHECK(mkfifo(fifo, 0600) == 0);
  perf_sdk_config_t cfg;
  base_config(&cfg, fifo);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_ERROR(perf_sdk_capture_now("into a fifo"), PERF_OK);
  pid_t writer = thread_named("perf-writer");
  CHECK(writer != 0);
  wait_in_syscall(writer, WRITER_OPEN_NR, WAIT_MS);
  long long t0 = now_ms();
  CHECK_ERROR(perf_sdk_shutdown(200), PERF_E_DEADLINE);
  long long took = now_ms() - t0;
  /* The monitors get at least 1 s; they return at once here. */
  CHECKF(took >= 199 && took < 3000, "shutdown(200) took %lld ms", took);
  CHECK_ERROR(perf_sdk_capture_now("after"), PERF_E_NOT_INITIALIZED);
  CHECK(thread_in_syscall(writer, WRITER_OPEN_NR)); /* left running */
  /* The report is one write; the writer keeps its descriptor (no EOF). */
  int rd = open(fifo, O_RDONLY | O_NONBLOCK);
  CHECK(rd >= 0);
  static char text[1 << 16];
  size_t len = 0;
  long long deadline = now_ms() + WAIT_MS;
  while (!strstr(text, "\nreason=\"into a fifo\"\n")) {
    CHECKF(now_ms() < deadline, "the FIFO got:\n%s", text);
    ssize_t n = read(rd, text + len, sizeof text - 1 - len);
    if (n > 0)
      text[len += (size_t)n] = '\0';
    else
      sleep_ms(1);
  }
  close(rd);
}

static void case_heartbeat_hang(void) {
  make_dir();
  char report[PATH_LEN];
  dir_path(report, "report.txt");
  perf_sdk_config_t cfg;
  base_config(&cfg, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  /* Warm-up units, paused: right after init the SDK's threads start beside
     this one, and on a loaded machine (ctest -j8 and two busy loops on 2
     cores) one of these 20 ms units once took 688 ms, a real hang this
     case is not about. */
  CHECK_EQ_INT(perf_sdk_pause(), PERF_OK);
  for (int i = 0; i < 10; i++) {
    CHECK_EQ_INT(perf_sdk_heartbeat(), PERF_OK);
    g_sink += work_ms(20);
  }
  CHECK_EQ_INT(perf_sdk_resume(), PERF_OK);
  /* 625 ms: the unit ends between two of the monitor's looks, which then
     finds several more (1 ms) units done; the duration must still be the
     hung unit's own, from the loop's timestamps (docs/architecture.md). */
  instant_t before = call_at(perf_sdk_heartbeat);
  g_sink = hang_outer(625);
  instant_t after = call_at(perf_sdk_heartbeat);
  long long deadline = now_ms() + WAIT_MS;
  perf_sdk_stats_t st;
  do {
    g_sink += work_ms(1);
    CHECK_EQ_INT(perf_sdk_heartbeat(), PERF_OK);
    st = sdk_stats();
  } while (st.events_recorded < 1 && now_ms() < deadline);
  CHECK_EQ_INT(st.events_recorded, 1);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  st = sdk_stats();
  CHECK_EQ_INT(st.hangs_detected, 1);
  CHECK_EQ_INT(st.events_written, 1);

  char *text = read_text(report);
  CHECK_EQ_INT(count_events(text, "hang"), 1);
  event_t ev;
  find_event(text, "hang", 0, &ev);
  long lo, hi;
  unit_ms(before, after, &lo, &hi);
  CHECKF(ev.duration_ms >= lo - 60 && ev.duration_ms <= hi + 60,
         "duration_ms=%ld for a unit of %ld..%ld ms", ev.duration_ms, lo, hi);
  /* Exactly from the heartbeat before the unit to the one after it. */
  CHECKF(ev.duration_ms >= lo && ev.duration_ms <= hi,
         "duration_ms=%ld, but the unit lasted %ld..%ld ms between its heartbeats", ev.duration_ms,
         lo, hi);
  CHECK_EQ_INT(ev.thread, gettid_now());
  const char *chain[] = {"hang_spin_leaf", "hang_middle", "hang_outer"};
  expect_chain(&ev, 0, chain, ARRAY_LEN(chain));
  event_free(&ev);
  free(text);
}

/* The end of a long unit read back by the monitor (unit_end.h): before,
   at and after the monitor's own clock reading, across the wrap of the
   40-bit microsecond field, and another unit's end not taken. An end
   marked just after the monitor read its clock once gave a hang of minus
   12 days (the daemonize case on a busy machine). */
static void case_unit_end_read_back(void) {
  const int64_t wrap_ns = (INT64_C(1) << 40) * 1000;
  const int64_t nows[] = {INT64_C(5000000000), wrap_ns - 2000, wrap_ns + 3000, 7 * wrap_ns + 1};
  const int64_t offsets[] = {-600000000, -1000, 0, 1000, 2000000, 60000000000};
  for (size_t i = 0; i < ARRAY_LEN(nows); i++)
    for (size_t j = 0; j < ARRAY_LEN(offsets); j++) {
      int64_t end = (nows[i] + offsets[j]) / 1000 * 1000, got = -1;
      uint64_t v = perf__unit_end_pack(77, end);
      CHECK(perf__unit_end_read(v, 77, nows[i], &got));
      CHECKF(got == end, "end %lld read at %lld as %lld", (long long)end, (long long)nows[i],
             (long long)got);
      CHECK(!perf__unit_end_read(v, 78, nows[i], &got));
      /* Epochs compare on their low 24 bits, as stored. */
      CHECK(perf__unit_end_read(v, 77 + (UINT64_C(1) << 24), nows[i], &got));
    }
}

static const test_case_t g_cases[] = {
    /* 10 of the 13 samples a 50 ms interval gives: the hung thread and the
       monitor must get a core on time, which a -j8 suite on 2 cores denies. */
    TEST_CASE_SERIAL(hang_detected, "counts the samples of a 800 ms hang"),
    TEST_CASE(idle_not_hang),
    TEST_CASE(flush_right_after_hang),
    TEST_CASE(hang_label),
    TEST_CASE(report_escaping),
    TEST_CASE(cpu_burst_through_dips),
    TEST_CASE(cpu_lull_restarts_window),
    TEST_CASE(pause_suppresses),
    TEST_CASE(unit_end_read_back),
    TEST_CASE(fatal_hang),
    TEST_CASE(marker_failure_logged_once),
    TEST_CASE(dwarf_dropped_when_idle),
    /* The burst samples the hot thread while it runs (a tenth of each 10 ms
       period) and ends once it has not for 100 ms: beside a -j8 suite on 2
       cores it can end empty. */
    TEST_CASE_SERIAL(cpu_burst_hot_thread, "samples a thread that must keep running"),
    TEST_CASE(cpu_burst_skips_sdk_threads),
    TEST_CASE(rate_limit_exact),
    TEST_CASE(config_errors_name_field),
    TEST_CASE(lifecycle_errors),
    TEST_CASE(error_texts),
    TEST_CASE(flush_deadline),
    TEST_CASE(shutdown_deadline),
    TEST_CASE(heartbeat_hang),
};

static const test_case_t g_children[] = {
    {"child_fatal_hang", child_fatal_hang, NULL},
    {"child_report", child_report, NULL},
};

/* The SDK's captures wait for their thread at most the sampler's timeout,
   100 ms by default: on a loaded machine (ASan, ctest -j8 on 2 cores) a
   spinning thread can wait longer for a core, and a hang's or a burst's
   sample fails. These cases are about what is captured: 2 s. */
static void use_patient_sampler(void) {
  perf_sampler_options_t opts;
  perf_sampler_options_init(&opts);
  opts.timeout_ms = 2000;
  CHECK_EQ_INT(perf_sampler_configure(&opts), PERF_OK);
}

/* The cases set what they test; nothing comes from the caller's
   environment. */
static void clear_sdk_environment(void) {
  char names[64][128];
  size_t n = 0;
  for (char **e = environ; *e && n < ARRAY_LEN(names); e++)
    if (strncmp(*e, "PERF_SDK_", 9) == 0) {
      snprintf(names[n], sizeof names[0], "%.*s", (int)strcspn(*e, "="), *e);
      n++;
    }
  for (size_t i = 0; i < n; i++)
    unsetenv(names[i]);
}

int main(int argc, char **argv) {
  g_argc = argc;
  g_argv = argv;
  clear_sdk_environment();
#ifdef TEST_QEMU_USER
  /* qemu-user (7.2) keeps the host's two highest real-time signals for
     itself: it accepts sigaction for guest signals 63 and 64 but cannot
     send them (EINVAL). Held here (ignored), the sampler picks the next
     free one, as it would beside an app that uses them. */
  for (int s = SIGRTMAX - 1; s <= SIGRTMAX; s++)
    CHECK(signal(s, SIG_IGN) != SIG_ERR);
#endif
  use_patient_sampler();
  if (argc >= 3) { /* a child process of a case, re-executed with its directory */
    use_dir(argv[2]);
    if (test_run_case(g_children, ARRAY_LEN(g_children), argv[1])) return 0;
    return 2;
  }
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
