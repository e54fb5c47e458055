/*
 * test_chroot.c - an app that chroots into an empty directory after
 * perf_sdk_init (as a daemon dropping its view of the file system does;
 * root only). The sampler and the monitors go on: /proc through the
 * directory the SDK opened at init, the modules' files through
 * /proc/self/map_files. Each case runs the app in a child process (the
 * chroot cannot be undone) and reads what it left outside the chroot.
 * Each case runs in its own process: `test_chroot <case>`.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "perf_sdk.h"
#include "sdk_log.h"
#include "sdk_report.h"
#include "sdk_util.h"
#include "tempdir.h"
#include "test_util.h"

#define HANGS 3
#define WAIT_MS 20000

static char g_report[128]; /* the file sink's report, outside the chroot */
static char g_jail[128];   /* the empty directory the app chroots into */

/* The SDK's log lines, kept to look for what it said after the chroot. */

static bool skipped_not_root(void) {
  if (geteuid() == 0) return false;
  printf("note: skipped, not root: chroot needs CAP_SYS_CHROOT, and /proc/self/map_files "
         "CAP_SYS_ADMIN\n");
  return true;
}

static void make_jail(void) {
  const char *dir = tempdir_make("perf-chroot");
  snprintf(g_report, sizeof g_report, "%s/report.txt", dir);
  snprintf(g_jail, sizeof g_jail, "%s/jail", dir);
  CHECK(mkdir(g_jail, 0755) == 0);
}

/* The app's chroot into the empty directory. */
static void app_chroot(void) {
  CHECKF(chroot(g_jail) == 0, "chroot %s: %s", g_jail, strerror(errno));
  CHECK(chdir("/") == 0);
  struct stat st;
  CHECK(stat("/proc", &st) != 0 && errno == ENOENT); /* nothing inside */
}

/* The log holds nothing that blames memory or a failed sample. */
static void log_is_plain(void) {
  pthread_mutex_lock(&g_log_lock);
  CHECKF(!strstr(g_log, "out of memory") && !strstr(g_log, "no memory"),
         "the SDK's log blames memory:\n%s", g_log);
  pthread_mutex_unlock(&g_log_lock);
}

/* Fork the app; returns once it exited 0. */
static void run_app(void (*app)(void)) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    app();
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the app ended with status 0x%x", status);
}

/* ---- hangs after the chroot ---------------------------------------------- */

static volatile unsigned long g_sink;

/* A hang: spins for 100 ms at least, and on until the SDK has made
   `samples` captures in all (taken or failed: a monitor's first capture
   of a thread on a loaded machine may come late), failing after WAIT_MS. */
static CHAIN unsigned long jail_spin_leaf(uint64_t samples) {
  unsigned long x = 1;
  int64_t start = now_ns(), next_look = 0;
  for (;;) {
    x = x * 2862933555777941757UL + 3;
    int64_t now = now_ns();
    if (now < next_look) continue;
    next_look = now + 2000000;
    perf_sdk_stats_t st = sdk_stats();
    if (now - start >= 100000000 && st.samples_taken + st.samples_failed >= samples) break;
    CHECKF(now - start < (int64_t)WAIT_MS * 1000000,
           "%llu captures in %d ms of a hang, not %llu; the SDK's log:\n%s",
           (unsigned long long)(st.samples_taken + st.samples_failed), WAIT_MS,
           (unsigned long long)samples, g_log);
  }
  return x;
}
static CHAIN unsigned long jail_middle(uint64_t samples) {
  return jail_spin_leaf(samples) + 1;
}
static CHAIN unsigned long jail_outer(uint64_t samples) {
  return jail_middle(samples) + 1;
}

static perf_sink_t g_sink_kind;

static void hangs_app(void) {
  perf_sdk_config_t cfg;
  sdk_config_short_hangs(&cfg);
  cfg.app_name = "chroot-app";
  cfg.sink = g_sink_kind;
  cfg.sink_path = g_sink_kind == PERF_SINK_FILE ? g_report : NULL;
  cfg.log_fn = sdk_log_keep;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  app_chroot();
  perf_sdk_stats_t st;
  for (int i = 0; i < HANGS; i++) {
    CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
    perf_sdk_stats_t before = sdk_stats();
    g_sink = jail_outer(before.samples_taken + before.samples_failed + 2);
    CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
    int64_t deadline = now_ns() + (int64_t)WAIT_MS * 1000000;
    while ((st = sdk_stats()).hangs_detected != (uint64_t)i + 1) {
      CHECKF(now_ns() < deadline, "hang %d not detected in %d ms; the SDK's log:\n%s", i + 1,
             WAIT_MS, g_log);
      sleep_ms(5);
    }
  }
  CHECK_EQ_INT(perf_sdk_flush(WAIT_MS), PERF_OK);
  st = sdk_stats();
  CHECK_EQ_INT(st.hangs_detected, HANGS);
  CHECKF(st.samples_taken >= HANGS && st.samples_failed == 0,
         "samples taken %llu, failed %llu; the SDK's log:\n%s",
         (unsigned long long)st.samples_taken, (unsigned long long)st.samples_failed, g_log);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  log_is_plain();
}

/* HANGS hangs after the chroot, each detected and sampled without a
   failed sample (the sampler's part: no sink). */
static void case_hangs_sampled_after_chroot(void) {
  if (skipped_not_root()) return;
  make_jail();
  g_sink_kind = PERF_SINK_NONE;
  run_app(hangs_app);
}

/* The same into the file sink's report, opened before the chroot: HANGS
   hang events, each stack named from the modules' files the chroot hides.
   Needs the file sink to write after a chroot too. */
static void case_hangs_reported_after_chroot(void) {
  if (skipped_not_root()) return;
  make_jail();
  g_sink_kind = PERF_SINK_FILE;
  run_app(hangs_app);
  char *text = read_text(g_report);
  CHECK_EQ_INT(count_events(text, "hang"), HANGS);
  const char *chain[] = {"jail_spin_leaf", "jail_middle", "jail_outer"};
  for (size_t i = 0; i < HANGS; i++) {
    event_t ev;
    find_event(text, "hang", i, &ev);
    CHECK(ev.samples >= 1);
    expect_chain(&ev, 0, chain, ARRAY_LEN(chain));
    event_free(&ev);
  }
  free(text);
}

/* ---- a backtrace after the chroot ---------------------------------------- */

static CHAIN char *jail_backtrace_inner(void) {
  char *text = NULL;
  int rc = perf_backtrace_thread_text((pid_t)syscall(SYS_gettid), &text);
  CHECKF(rc == PERF_OK, "perf_backtrace_thread_text: %s", perf_strerror(rc));
  return text;
}
static CHAIN char *jail_backtrace_outer(void) {
  char *text = jail_backtrace_inner();
  g_sink++;
  return text;
}

static void backtrace_app(void) {
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "chroot-app";
  cfg.log_fn = sdk_log_keep;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  app_chroot();
  char *text = jail_backtrace_outer();
  CHECKF(strstr(text, "jail_backtrace_inner") && strstr(text, "jail_backtrace_outer"),
         "the backtrace does not name its functions:\n%s", text);
  perf_free(text);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  log_is_plain();
}

static void case_backtrace_after_chroot(void) {
  if (skipped_not_root()) return;
  make_jail();
  run_app(backtrace_app);
}

/* Another thread, spinning in known functions, captured by the signal
   sampler after the chroot: its stack named. */
static atomic_int g_spinner_tid;
static atomic_bool g_spinner_stop;

static CHAIN unsigned long jail_thread_leaf(void) {
  unsigned long x = 1;
  atomic_store(&g_spinner_tid, (int)syscall(SYS_gettid));
  while (!atomic_load_explicit(&g_spinner_stop, memory_order_relaxed))
    x = x * 2862933555777941757UL + 3;
  return x;
}
static CHAIN void *jail_thread_main(void *arg) {
  (void)arg;
  g_sink = jail_thread_leaf() + 1;
  return NULL;
}

static void thread_app(void) {
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "chroot-app";
  cfg.log_fn = sdk_log_keep;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  app_chroot();
  pthread_t th;
  CHECK(pthread_create(&th, NULL, jail_thread_main, NULL) == 0);
  int64_t deadline = now_ns() + (int64_t)WAIT_MS * 1000000;
  while (atomic_load(&g_spinner_tid) == 0) {
    CHECK(now_ns() < deadline);
    sleep_ms(1);
  }
  for (int i = 0; i < HANGS; i++) {
    char *text = NULL;
    int rc = perf_backtrace_thread_text(atomic_load(&g_spinner_tid), &text);
    CHECKF(rc == PERF_OK, "perf_backtrace_thread_text: %s", perf_strerror(rc));
    CHECKF(strstr(text, "jail_thread_leaf") && strstr(text, "jail_thread_main"),
           "the backtrace does not name its functions:\n%s", text);
    perf_free(text);
  }
  atomic_store(&g_spinner_stop, true);
  CHECK(pthread_join(th, NULL) == 0);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  log_is_plain();
}

static void case_other_thread_after_chroot(void) {
  if (skipped_not_root()) return;
  make_jail();
  run_app(thread_app);
}

/* ---- /proc closed by the app ---------------------------------------------- */

/* How many lines of the kept log hold `what`. */
static int log_count(const char *what) {
  pthread_mutex_lock(&g_log_lock);
  int n = 0;
  for (const char *p = g_log; (p = strstr(p, what)) != NULL; p += strlen(what))
    n++;
  pthread_mutex_unlock(&g_log_lock);
  return n;
}

/* The app closes every descriptor it did not open, the SDK's /proc
   directory among them, and opens its own files at those numbers: /proc
   is opened again by its path and a backtrace is named as before. */
static void closed_app(void) {
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "closefrom-app";
  cfg.log_fn = sdk_log_keep;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK(close_range(3, ~0u, 0) == 0);
  int fds[4];
  for (int i = 0; i < 4; i++) { /* at the lowest numbers: the SDK's old ones */
    char path[160];
    snprintf(path, sizeof path, "%s/app-%d", g_jail, i);
    CHECK((fds[i] = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) >= 3);
  }
  char *text = jail_backtrace_outer();
  CHECKF(strstr(text, "jail_backtrace_inner") && strstr(text, "jail_backtrace_outer"),
         "the backtrace does not name its functions:\n%s", text);
  perf_free(text);
  for (int i = 0; i < 4; i++)
    CHECKF(fcntl(fds[i], F_GETFD) >= 0, "the app's file %d was closed", fds[i]);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  log_is_plain();
}

static void case_proc_closed_after_init(void) {
  make_jail();
  run_app(closed_app);
}

/* Both: the /proc descriptor closed, then a chroot. The stack of a
   thread started now (a new mapping, in no earlier read of the maps)
   cannot be bounded: each capture of it fails, and the log says why once,
   plainly. */
static void unreachable_app(void) {
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "closefrom-chroot-app";
  cfg.log_fn = sdk_log_keep;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK(close_range(3, ~0u, 0) == 0);
  app_chroot();
  pthread_attr_t attr;
  CHECK(pthread_attr_init(&attr) == 0);
  CHECK(pthread_attr_setstacksize(&attr, (5u << 20) + (12u << 10)) == 0);
  pthread_t th;
  CHECK(pthread_create(&th, &attr, jail_thread_main, NULL) == 0);
  int64_t deadline = now_ns() + (int64_t)WAIT_MS * 1000000;
  while (atomic_load(&g_spinner_tid) == 0) {
    CHECK(now_ns() < deadline);
    sleep_ms(1);
  }
  for (int i = 0; i < HANGS; i++) {
    char *text = NULL;
    int rc = perf_backtrace_thread_text(atomic_load(&g_spinner_tid), &text);
    CHECKF(rc == PERF_E_UNSUPPORTED, "capture %d: %s, not %s", i, perf_strerror(rc),
           perf_strerror(PERF_E_UNSUPPORTED));
    CHECK(text == NULL);
  }
  /* Said once, with the error of the first read that failed: ENOENT, or
     EBADF when an SDK thread read through the descriptor as the app
     closed it. */
  const char *said = "/proc/self/maps cannot be read (";
  CHECKF(log_count(said) == 1, "the log says \"%s\" %d times, not once:\n%s", said, log_count(said),
         g_log);
  atomic_store(&g_spinner_stop, true);
  CHECK(pthread_join(th, NULL) == 0);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  log_is_plain();
}

static void case_proc_unreachable_after_chroot(void) {
  if (skipped_not_root()) return;
  make_jail();
  run_app(unreachable_app);
}

static const test_case_t g_cases[] = {
    TEST_CASE(hangs_sampled_after_chroot), TEST_CASE(hangs_reported_after_chroot),
    TEST_CASE(backtrace_after_chroot),     TEST_CASE(other_thread_after_chroot),
    TEST_CASE(proc_closed_after_init),     TEST_CASE(proc_unreachable_after_chroot),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
