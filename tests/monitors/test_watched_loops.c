/*
 * test_watched_loops.c - every loop watched (perf_sdk_loop_register):
 * real worker threads, each running a loop that waits in read() on a pipe
 * for its next command and handles it marked busy. A stall on any one
 * worker is exactly one hang event naming that worker's loop and thread,
 * with the worker's stall function on its stack; two workers stalled at
 * once are two events, each with its own stack; a worker's own threshold;
 * unregistered threads, bad names and the bound refused with their
 * errors; a thread's exit frees its loop; each loop's statistics in the
 * batches under its name (Batch.loops), their sum in Batch.loop_stats;
 * a thread gone without its destructors freed by the monitor; a process
 * killed while a worker's loop hung reported by the next run naming the
 * loop; a heartbeat loop kept off its CPU by a real-time thread is not
 * hung, and hangs when it stalls on the CPU.
 * Through the file sink: the report and its batch records.
 */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "perf_sdk.h"
#include "sdk/wire/batch.h"
#include "sdk/wire/batch_decode.h"
#include "sdk/wire/spool.h"
#include "sdk_log.h"
#include "sdk_report.h"
#include "sdk_util.h"
#include "tempdir.h"
#include "test_util.h"

#define THRESHOLD_MS 150
#define STALL_MS 800
#define WAIT_MS 20000
#define MAX_WORKERS 70

enum { CMD_NOTHING = 'n', CMD_STALL_A = 'a', CMD_STALL_B = 'b', CMD_EXIT = 'x' };

typedef struct {
  pthread_t thread;
  int cmd[2]; /* the loop's event source: a pipe */
  char name[32];
  int threshold_ms;
  atomic_int tid;
  atomic_int register_err; /* 1 until the worker registered */
  atomic_int handled;      /* commands handled */
} worker_t;

static worker_t g_workers[MAX_WORKERS];
static char g_report[512];

static void start_sdk(unsigned threshold_ms) {
  const char *dir = tempdir_make("perf-wloops");
  snprintf(g_report, sizeof g_report, "%s/report.txt", dir);
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "test_watched_loops";
  cfg.data_dir = dir;
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = g_report;
  cfg.hang_threshold_ms = threshold_ms;
  cfg.hang_sample_interval_ms = 50;
  cfg.cpu_threshold_percent = 25600; /* no CPU events */
  cfg.max_events_per_hour = 1000;
  cfg.log_fn = sdk_log_keep;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK); /* the main loop waits */
}

static void spin_ms(long ms) {
  long long end = now_ms() + ms;
  while (now_ms() < end) {
  }
}

/* The stalls wait, as a handler blocked on I/O would: a stall that spins
   competes for the CPU with the monitor that must see it (16 of them at
   once on 2 CPUs under ASan left hangs unseen). */
CHAIN static void worker_stall_a(void) {
  sleep_ms(STALL_MS);
}

CHAIN static void worker_stall_b(void) {
  sleep_ms(STALL_MS);
}

/* The worker's loop: idle in read() until a command, busy while handling
   it. */
static void *worker_main(void *arg) {
  worker_t *w = arg;
  atomic_store(&w->tid, (int)syscall(SYS_gettid));
  int err = perf_sdk_loop_register(w->name, w->threshold_ms);
  atomic_store(&w->register_err, err);
  if (err) return NULL;
  for (;;) {
    CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
    char c;
    if (read(w->cmd[0], &c, 1) != 1 || c == CMD_EXIT) break;
    CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
    if (c == CMD_STALL_A) worker_stall_a();
    if (c == CMD_STALL_B) worker_stall_b();
    atomic_fetch_add(&w->handled, 1);
  }
  return NULL; /* exits registered: the thread's exit forgets its loop */
}

/* Start worker i as loop `name`; returns its registration's result. */
static int start_worker(int i, const char *name, int threshold_ms) {
  worker_t *w = &g_workers[i];
  memset(w, 0, sizeof *w);
  snprintf(w->name, sizeof w->name, "%s", name);
  w->threshold_ms = threshold_ms;
  atomic_store(&w->register_err, 1);
  CHECK(pipe(w->cmd) == 0);
  CHECK(pthread_create(&w->thread, NULL, worker_main, w) == 0);
  long long deadline = now_ms() + WAIT_MS;
  while (atomic_load(&w->register_err) == 1) {
    CHECKF(now_ms() < deadline, "worker %s did not register", name);
    sleep_ms(1);
  }
  return atomic_load(&w->register_err);
}

static void send_cmd(int i, char c) {
  CHECK(write(g_workers[i].cmd[1], &c, 1) == 1);
}

/* Wait until worker i has handled `count` commands. */
static void wait_handled(int i, int count) {
  long long deadline = now_ms() + WAIT_MS;
  while (atomic_load(&g_workers[i].handled) < count) {
    CHECKF(now_ms() < deadline, "worker %d handled %d commands, want %d", i,
           atomic_load(&g_workers[i].handled), count);
    sleep_ms(2);
  }
}

static void stop_worker(int i) {
  send_cmd(i, CMD_EXIT);
  pthread_join(g_workers[i].thread, NULL);
  close(g_workers[i].cmd[0]);
  close(g_workers[i].cmd[1]);
}

static char *g_text; /* the report, once the SDK is shut down */

static void finish_sdk(void) {
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  free(g_text);
  g_text = read_text(g_report);
  CHECK(g_text != NULL);
}

static void expect_hangs(size_t n) {
  size_t got = count_events(g_text, "hang");
  CHECKF(got == n, "%zu hang events, want %zu:\n%s", got, n, g_text);
}

/* The report's hang event that names loop `name`: exactly one, on the
   worker's thread, its stack through `function`. */
static void expect_hang_of(int i, const char *function, const char *not_function) {
  worker_t *w = &g_workers[i];
  char want[96];
  snprintf(want, sizeof want, "loop name=\"%s\" thread=%d\n", w->name, atomic_load(&w->tid));
  size_t n = count_events(g_text, "hang"), found = 0;
  for (size_t k = 0; k < n; k++) {
    event_t ev;
    find_event(g_text, "hang", k, &ev);
    if (strstr(ev.text, want)) {
      found++;
      CHECK_EQ_INT(ev.thread, atomic_load(&w->tid));
      CHECKF(ev.duration_ms >= STALL_MS - 60, "%s hung %ld ms, stalled %d", w->name, ev.duration_ms,
             STALL_MS);
      perf_sdk_stats_t st = sdk_stats();
      CHECKF(strstr(ev.text, function) != NULL,
             "%s not in %s's hang (samples taken %llu, failed %llu):\n%s", function, w->name,
             (unsigned long long)st.samples_taken, (unsigned long long)st.samples_failed, ev.text);
      CHECKF(!not_function || strstr(ev.text, not_function) == NULL, "%s in %s's hang:\n%s",
             not_function, w->name, ev.text);
    }
    event_free(&ev);
  }
  CHECKF(found == 1, "%zu hang events name loop %s (want 1):\n%s", found, w->name, g_text);
}

/* n workers; worker n/2 stalls: one hang event, naming it. */
static void stall_one_of(int n) {
  start_sdk(THRESHOLD_MS);
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "worker-%d", i);
    CHECK_EQ_INT(start_worker(i, name, 0), PERF_OK);
  }
  for (int i = 0; i < n; i++) /* every loop handles short work */
    send_cmd(i, CMD_NOTHING);
  int k = n / 2;
  send_cmd(k, CMD_STALL_A);
  wait_handled(k, 2);
  for (int i = 0; i < n; i++)
    stop_worker(i);
  finish_sdk();
  expect_hangs(1);
  expect_hang_of(k, "worker_stall_a", NULL);
}

static void case_stall_one_of_1(void) {
  stall_one_of(1);
}

static void case_stall_one_of_4(void) {
  stall_one_of(4);
}

static void case_stall_one_of_16(void) {
  stall_one_of(16);
}

/* Two workers stalled at once: two events, each with its own stack. */
static void case_two_stalls_two_events(void) {
  start_sdk(THRESHOLD_MS);
  CHECK_EQ_INT(start_worker(0, "render", 0), PERF_OK);
  CHECK_EQ_INT(start_worker(1, "io.worker_2", 0), PERF_OK);
  CHECK_EQ_INT(start_worker(2, "quiet", 0), PERF_OK);
  send_cmd(0, CMD_STALL_A);
  send_cmd(1, CMD_STALL_B);
  wait_handled(0, 1);
  wait_handled(1, 1);
  for (int i = 0; i < 3; i++)
    stop_worker(i);
  finish_sdk();
  expect_hangs(2);
  expect_hang_of(0, "worker_stall_a", "worker_stall_b");
  expect_hang_of(1, "worker_stall_b", "worker_stall_a");
}

/* A loop's own threshold: a worker at 50 ms hangs in a 500 ms stall; the
   main loop, at the config's 2000 ms, does not in a 500 ms unit. */
static void case_own_threshold(void) {
  start_sdk(2000);
  CHECK_EQ_INT(start_worker(0, "fast", 50), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  sleep_ms(STALL_MS);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  send_cmd(0, CMD_STALL_A);
  wait_handled(0, 1);
  stop_worker(0);
  finish_sdk();
  expect_hangs(1);
  expect_hang_of(0, "worker_stall_a", NULL);
}

/* The watched thread's loop is "main" in the report. */
static void case_main_loop_named(void) {
  start_sdk(THRESHOLD_MS);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  sleep_ms(STALL_MS);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  finish_sdk();
  event_t ev;
  find_event(g_text, "hang", 0, &ev);
  char want[64];
  snprintf(want, sizeof want, "loop name=\"main\" thread=%d\n", (int)syscall(SYS_gettid));
  CHECKF(strstr(ev.text, want) != NULL, "no '%s' in\n%s", want, ev.text);
  event_free(&ev);
}

static void *mark_unregistered(void *arg) {
  int *errs = arg;
  errs[0] = perf_sdk_loop_busy();
  sleep_ms(STALL_MS);
  errs[1] = perf_sdk_loop_idle();
  errs[2] = perf_sdk_heartbeat();
  errs[3] = perf_sdk_loop_busy_label("x");
  errs[4] = perf_sdk_loop_nested_begin();
  errs[5] = perf_sdk_loop_nested_end();
  errs[6] = perf_sdk_loop_unregister();
  return NULL;
}

/* Marks from a thread with no loop: PERF_E_NO_THREAD, nothing changed (no
   hang, the main loop's stays idle). */
static void case_unregistered_marks_refused(void) {
  start_sdk(THRESHOLD_MS);
  int errs[7];
  pthread_t t;
  CHECK(pthread_create(&t, NULL, mark_unregistered, errs) == 0);
  pthread_join(t, NULL);
  for (int i = 0; i < 7; i++)
    CHECK_EQ_INT(errs[i], PERF_E_NO_THREAD);
  finish_sdk();
  expect_hangs(0);
}

/* Bad names and thresholds: PERF_E_INVALID_ARGUMENT, the log naming them. */
static void case_bad_registration_refused(void) {
  CHECK_EQ_INT(perf_sdk_loop_register("early", 0), PERF_E_NOT_INITIALIZED);
  start_sdk(THRESHOLD_MS);
  const char *bad[] = {"", "a b", "w\xc3\xb6rker", "worker/1", "0123456789abcdef0123456789abcdef"};
  for (size_t i = 0; i < ARRAY_LEN(bad); i++)
    CHECK_EQ_INT(perf_sdk_loop_register(bad[i], 0), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_sdk_loop_register(NULL, 0), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_sdk_loop_register("ok", 19), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_sdk_loop_register("ok", 60001), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_sdk_loop_register("ok", -1), PERF_E_INVALID_ARGUMENT);
  CHECK(strstr(g_log, "name \"a?b\"") != NULL);
  CHECK(strstr(g_log, "name \"worker/1\": must be 1..31 bytes") != NULL);
  CHECK(strstr(g_log, "loop ok: threshold_ms = 19: must be 0 (the config's) or 20..60000") != NULL);
  /* 31 bytes is the longest; 20 and 60000 the thresholds' ends. */
  CHECK_EQ_INT(start_worker(0, "0123456789abcdef0123456789abcde", 20), PERF_OK);
  CHECK_EQ_INT(start_worker(1, "Z.z_9-", 60000), PERF_OK);
  stop_worker(0);
  stop_worker(1);
  finish_sdk();
}

/* PERF_SDK_MAX_LOOPS - 1 workers besides main; the next is refused,
   counted, logged once; a worker's exit frees its loop for another. */
static void case_bound_refused_counted(void) {
  start_sdk(THRESHOLD_MS);
  int n = PERF_SDK_MAX_LOOPS - 1;
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "w%d", i);
    CHECK_EQ_INT(start_worker(i, name, 0), PERF_OK);
  }
  CHECK_EQ_INT(start_worker(n, "one-too-many", 0), PERF_E_NO_MEMORY);
  stop_worker(n); /* returned already: the command is never read */
  CHECK_EQ_INT(start_worker(n, "two-too-many", 0), PERF_E_NO_MEMORY);
  stop_worker(n);
  CHECK_EQ_INT(sdk_stats().loops_refused, 2);
  const char *line = "loop one-too-many refused: 64 loops are watched already";
  CHECKF(strstr(g_log, line) != NULL, "no '%s' in the log:\n%s", line, g_log);
  CHECK(strstr(g_log, "two-too-many") == NULL);
  stop_worker(5); /* exits registered: its loop is freed */
  CHECK_EQ_INT(start_worker(5, "after-exit", 0), PERF_OK);
  send_cmd(5, CMD_STALL_A);
  wait_handled(5, 1);
  for (int i = 0; i < n; i++)
    stop_worker(i);
  finish_sdk();
  expect_hangs(1);
  expect_hang_of(5, "worker_stall_a", NULL);
}

/* The first log line said on an SDK thread registers that thread's loop
   (what libperfsdk-preload.so asks for every thread that waits). */
static atomic_int g_sdk_thread_err = 1;
static atomic_int g_sdk_thread_tid;

static void log_and_register(perf_log_level_t level, const char *message, void *user) {
  sdk_log_keep(level, message, user);
  int tid = (int)syscall(SYS_gettid);
  int unset = 1;
  if (tid != getpid() && atomic_load(&g_sdk_thread_err) == 1 &&
      atomic_compare_exchange_strong(&g_sdk_thread_err, &unset, 2)) {
    atomic_store(&g_sdk_thread_tid, tid);
    /* A line said while perf_sdk_init is still starting the SDK: asked
       again once it runs (a bounded wait, on the SDK's thread). */
    int err = perf_sdk_loop_register("sdk-thread", 0);
    for (long long end = now_ms() + 5000; err == PERF_E_NOT_INITIALIZED && now_ms() < end;) {
      sleep_ms(1);
      err = perf_sdk_loop_register("sdk-thread", 0);
    }
    atomic_store(&g_sdk_thread_err, err);
  }
}

/* The SDK's own threads run no loop of the app: perf_sdk_loop_register
   from one is PERF_E_NO_THREAD, and nothing is registered or logged. */
static void case_sdk_thread_refused(void) {
  const char *dir = tempdir_make("perf-wloops");
  snprintf(g_report, sizeof g_report, "%s/report.txt", dir);
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.data_dir = dir;
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = g_report;
  cfg.log_fn = log_and_register;
  cfg.cpu_threshold_percent = 25600;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  long long deadline = now_ms() + 10000;
  while (atomic_load(&g_sdk_thread_err) > 0) {
    CHECKF(now_ms() < deadline, "no log line from an SDK thread:\n%s", g_log);
    sleep_ms(5);
  }
  char path[64], comm[32] = "";
  snprintf(path, sizeof path, "/proc/self/task/%d/comm", atomic_load(&g_sdk_thread_tid));
  FILE *f = fopen(path, "r");
  if (f) {
    CHECK(fgets(comm, sizeof comm, f) != NULL);
    fclose(f);
  }
  CHECKF(strncmp(comm, "perf-", 5) == 0, "the log line came from thread %s", comm);
  CHECK_EQ_INT(atomic_load(&g_sdk_thread_err), PERF_E_NO_THREAD);
  CHECK(strstr(g_log, "sdk-thread") == NULL);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
}

static void *register_twice(void *arg) {
  int *errs = arg;
  errs[0] = perf_sdk_loop_register("first", 0);
  errs[1] = perf_sdk_loop_register("second", 0);
  errs[2] = perf_sdk_loop_busy();
  sleep_ms(STALL_MS);
  errs[3] = perf_sdk_loop_idle();
  errs[4] = perf_sdk_loop_unregister();
  errs[5] = perf_sdk_loop_busy(); /* forgotten */
  errs[6] = perf_sdk_loop_unregister();
  return NULL;
}

/* Registering again renames the loop; unregister forgets it. */
static void case_register_again_unregister(void) {
  start_sdk(THRESHOLD_MS);
  int errs[7];
  pthread_t t;
  CHECK(pthread_create(&t, NULL, register_twice, errs) == 0);
  pthread_join(t, NULL);
  for (int i = 0; i < 5; i++)
    CHECK_EQ_INT(errs[i], PERF_OK);
  CHECK_EQ_INT(errs[5], PERF_E_NO_THREAD);
  CHECK_EQ_INT(errs[6], PERF_E_NO_THREAD);
  finish_sdk();
  expect_hangs(1);
  event_t ev;
  find_event(g_text, "hang", 0, &ev);
  CHECKF(strstr(ev.text, "loop name=\"second\"") != NULL, "%s", ev.text);
  event_free(&ev);
}

/* perf_sdk_pause stops every loop's detection, resume restarts it. */
static void case_pause_every_loop(void) {
  start_sdk(THRESHOLD_MS);
  CHECK_EQ_INT(start_worker(0, "paused", 0), PERF_OK);
  CHECK_EQ_INT(perf_sdk_pause(), PERF_OK);
  send_cmd(0, CMD_STALL_A);
  wait_handled(0, 1);
  CHECK_EQ_INT(perf_sdk_resume(), PERF_OK);
  send_cmd(0, CMD_STALL_B);
  wait_handled(0, 2);
  stop_worker(0);
  finish_sdk();
  expect_hangs(1);
  expect_hang_of(0, "worker_stall_b", "worker_stall_a");
}

static void *vanish(void *arg) {
  atomic_int *registered = arg;
  CHECK_EQ_INT(perf_sdk_loop_register("vanishing", 0), PERF_OK);
  atomic_store(registered, 1);
  syscall(SYS_exit, 0); /* gone without running its destructors */
  return NULL;
}

static void *register_until_ok(void *arg) {
  long long *took_ms = arg;
  long long t0 = now_ms();
  while (perf_sdk_loop_register("after-gone", 0) != PERF_OK) {
    CHECKF(now_ms() - t0 < WAIT_MS, "no loop freed after %d ms", WAIT_MS);
    sleep_ms(10);
  }
  *took_ms = now_ms() - t0;
  return NULL;
}

/* A thread gone without its key's destructor (a raw exit): the monitor
   frees its loop (within about a second), the next registration gets it. */
static void case_gone_thread_freed(void) {
  start_sdk(THRESHOLD_MS);
  int n = PERF_SDK_MAX_LOOPS - 2;
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "w%d", i);
    CHECK_EQ_INT(start_worker(i, name, 0), PERF_OK);
  }
  pthread_t t;
  static atomic_int registered;
  CHECK(pthread_create(&t, NULL, vanish, &registered) == 0); /* the last free loop; never joined */
  /* Its loop taken before the next registration asks for one. */
  long long until = now_ms() + WAIT_MS;
  while (!atomic_load(&registered)) {
    CHECKF(now_ms() < until, "the vanishing thread did not register in %d ms", WAIT_MS);
    sleep_ms(1);
  }
  long long took_ms = -1;
  pthread_t r;
  CHECK(pthread_create(&r, NULL, register_until_ok, &took_ms) == 0);
  pthread_join(r, NULL);
  CHECKF(took_ms >= 0 && took_ms < WAIT_MS, "took %lld ms", took_ms);
  for (int i = 0; i < n; i++)
    stop_worker(i);
  finish_sdk();
  /* The vanished thread was never joined: end here, before LeakSanitizer's
     exit check (ASan builds) stops on a thread it cannot suspend. */
  _exit(0);
}

/* ---- a process killed while a worker's loop hung ------------------------- */

static void *doomed_worker(void *arg) {
  int *out = arg;
  CHECK_EQ_INT(perf_sdk_loop_register("doomed", 0), PERF_OK);
  int tid = (int)syscall(SYS_gettid);
  CHECK(write(*out, &tid, sizeof tid) == (ssize_t)sizeof tid);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  for (;;)
    worker_stall_a();
  return NULL;
}

/* The child: its worker's loop hangs until the parent kills it. */
static void doomed_child(const char *dir, int tid_pipe) {
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "test_watched_loops";
  cfg.data_dir = dir;
  cfg.hang_threshold_ms = THRESHOLD_MS;
  cfg.hang_sample_interval_ms = 50;
  cfg.cpu_threshold_percent = 25600;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, doomed_worker, &tid_pipe) == 0);
  pthread_join(t, NULL);
  _exit(0);
}

/* Killed while the worker's loop hung: the next run's fatal hang names
   that loop and its thread (through the hang marker). */
static void case_fatal_hang_names_loop(void) {
  const char *dir = tempdir_make("perf-wloops-fatal");
  int fds[2];
  CHECK(pipe(fds) == 0);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) doomed_child(dir, fds[1]);
  int tid = 0;
  CHECK(read(fds[0], &tid, sizeof tid) == (ssize_t)sizeof tid);
  char marker[600];
  snprintf(marker, sizeof marker, "%s/hang-%d.marker", dir, (int)child);
  long long deadline = now_ms() + WAIT_MS;
  struct stat st;
  while (stat(marker, &st) != 0 || st.st_size == 0) {
    CHECKF(now_ms() < deadline, "no hang marker %s", marker);
    sleep_ms(5);
  }
  CHECK(kill(child, SIGKILL) == 0);
  CHECK(waitpid(child, NULL, 0) == child);

  snprintf(g_report, sizeof g_report, "%s/report.txt", dir);
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "test_watched_loops";
  cfg.data_dir = dir;
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = g_report;
  cfg.cpu_threshold_percent = 25600;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  finish_sdk();
  CHECK_EQ_INT(count_events(g_text, "fatal_hang"), 1);
  event_t ev;
  find_event(g_text, "fatal_hang", 0, &ev);
  char want[96];
  snprintf(want, sizeof want, "loop name=\"doomed\" thread=%d\n", tid);
  CHECKF(strstr(ev.text, want) != NULL, "no '%s' in:\n%s", want, ev.text);
  CHECK_EQ_INT(ev.thread, tid);
  CHECKF(strstr(ev.text, "worker_stall_a") != NULL, "%s", ev.text);
  event_free(&ev);
}

/* ---- the batches ---------------------------------------------------------- */

typedef struct {
  perf__batch_loops_t loops; /* every batch's, merged */
  size_t hangs;
  char hang_loop[PERF__BATCH_LOOP_NAME_BYTES + 1];
  uint32_t hang_tid;
} batches_t;

static void read_batch_dir(const char *dir, batches_t *out) {
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    size_t len = strlen(de->d_name);
    if (len < 7 || strcmp(de->d_name + len - 6, ".batch") != 0) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    uint8_t *payload = NULL;
    size_t plen = 0;
    const char *reason = NULL;
    CHECKF(perf__spool_read_file(path, NULL, NULL, &payload, &plen, &reason) == PERF_OK, "%s: %s",
           path, reason ? reason : "unreadable");
    Perf__V1__Batch *b = NULL;
    CHECK_EQ_INT(perf__batch_decode_stored(payload, plen, 64u << 20, &b), PERF_OK);
    free(payload);
    perf__batch_loops_t *one = calloc(1, sizeof *one);
    CHECK(one != NULL);
    if (perf__batch_loops_of(b, one)) perf__batch_loops_merge(&out->loops, one);
    free(one);
    for (size_t i = 0; i < b->n_events; i++) {
      if (b->events[i]->kind != PERF__V1__EVENT_KIND__EVENT_KIND_HANG) continue;
      out->hangs++;
      snprintf(out->hang_loop, sizeof out->hang_loop, "%s", b->events[i]->loop);
      out->hang_tid = b->events[i]->tid;
    }
    perf__v1__batch__free_unpacked(b, NULL);
  }
  closedir(d);
}

static const perf__batch_loop_stats_t *loop_named(const batches_t *b, const char *name) {
  for (size_t i = 0; i < b->loops.n_loops; i++)
    if (strcmp(b->loops.loops[i].name, name) == 0) return &b->loops.loops[i].stats;
  return NULL;
}

static uint64_t units_of(const perf__batch_loop_stats_t *s) {
  uint64_t n = 0;
  for (size_t i = 0; i < PERF__LOOP_BUCKETS; i++)
    n += s->units[i];
  return n;
}

/* Each loop's units of work under its name in Batch.loops, their sum in
   Batch.loop_stats; the hang event's Event.loop and tid. */
static void case_batches_name_loops(void) {
  start_sdk(THRESHOLD_MS);
  CHECK_EQ_INT(start_worker(0, "worker-1", 0), PERF_OK);
  CHECK_EQ_INT(start_worker(1, "worker-2", 0), PERF_OK);
  for (int k = 0; k < 3; k++)
    send_cmd(0, CMD_NOTHING);
  for (int k = 0; k < 5; k++)
    send_cmd(1, CMD_NOTHING);
  send_cmd(1, CMD_STALL_A);
  for (int k = 0; k < 2; k++) {
    CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
    CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  }
  wait_handled(0, 3);
  wait_handled(1, 6);
  stop_worker(0);
  stop_worker(1);
  finish_sdk();
  batches_t *b = calloc(1, sizeof *b);
  CHECK(b != NULL);
  char dir[600];
  snprintf(dir, sizeof dir, "%s.batches", g_report);
  read_batch_dir(dir, b);
  CHECK_EQ_INT(b->hangs, 1);
  CHECKF(strcmp(b->hang_loop, "worker-2") == 0, "Event.loop = \"%s\"", b->hang_loop);
  CHECK_EQ_INT(b->hang_tid, atomic_load(&g_workers[1].tid));
  CHECK_EQ_INT(b->loops.n_loops, 3);
  const perf__batch_loop_stats_t *main_loop = loop_named(b, "main");
  const perf__batch_loop_stats_t *w1 = loop_named(b, "worker-1");
  const perf__batch_loop_stats_t *w2 = loop_named(b, "worker-2");
  CHECK(main_loop && w1 && w2);
  CHECK_EQ_INT(units_of(main_loop), 2);
  CHECK_EQ_INT(units_of(w1), 3);
  CHECK_EQ_INT(units_of(w2), 6);
  CHECKF(w2->busy_ns >= (uint64_t)(STALL_MS - 10) * 1000000, "worker-2 busy %llu ns",
         (unsigned long long)w2->busy_ns);
  CHECK(w1->watched_ns > 0 && w2->watched_ns > 0 && main_loop->watched_ns > 0);
  CHECK_EQ_INT(units_of(&b->loops.total), 11);
  CHECK(b->loops.total.watched_ns == main_loop->watched_ns + w1->watched_ns + w2->watched_ns);
  CHECK(b->loops.total.busy_ns == main_loop->busy_ns + w1->busy_ns + w2->busy_ns);
  free(b);
}

/* -- a loop waiting for a CPU is not hung */

#define BEAT_THRESHOLD_MS 20
#define HOG_MS 45

static atomic_int g_beat_stop, g_beat_tid, g_beat_stall;
static atomic_llong g_beat_max_gap_ms;

static void pin_to_cpu0(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  CHECK(sched_setaffinity(0, sizeof set, &set) == 0);
}

CHAIN static void beat_stall(void) {
  spin_ms(300);
}

/* An idle loop with a heartbeat every 2 ms on CPU 0 (as the libevent
   integration's timer at a 20 ms threshold): the longest gap between two
   of its turns, and a 300 ms stall when asked. */
static void *beat_main(void *arg) {
  (void)arg;
  pin_to_cpu0();
  atomic_store(&g_beat_tid, (int)syscall(SYS_gettid));
  CHECK_EQ_INT(perf_sdk_loop_register("beat-0", BEAT_THRESHOLD_MS), PERF_OK);
  long long last = now_ms();
  while (!atomic_load(&g_beat_stop)) {
    CHECK_EQ_INT(perf_sdk_heartbeat(), PERF_OK);
    if (atomic_exchange(&g_beat_stall, 0)) beat_stall();
    sleep_ms(2);
    long long now = now_ms(), gap = now - last;
    if (gap > atomic_load(&g_beat_max_gap_ms) && !atomic_load(&g_beat_stall))
      atomic_store(&g_beat_max_gap_ms, gap);
    last = now;
  }
  return NULL;
}

/* A real-time thread on CPU 0 that spins HOG_MS, three times 100 ms apart:
   the heartbeat thread gets no CPU meanwhile. */
static void *hog_main(void *arg) {
  (void)arg;
  pin_to_cpu0();
  for (int i = 0; i < 3; i++) {
    spin_ms(HOG_MS);
    sleep_ms(100);
  }
  return NULL;
}

/* The heartbeat loop's thread kept off its CPU three times for 45 ms
   (over twice its threshold, under the four at which a hang starts whatever the share) by a
   real-time thread: no hang, though its beats stopped that long; then a 300 ms stall on the CPU in
   the same loop: exactly one hang, through beat_stall. */
static void case_cpu_starved_not_hung(void) {
  if (geteuid() != 0 || sysconf(_SC_NPROCESSORS_ONLN) < 2) {
    printf("note: skipped: needs root (a SCHED_FIFO thread) and 2 CPUs\n");
    return;
  }
  start_sdk(THRESHOLD_MS);
  pthread_t beat, hog;
  CHECK(pthread_create(&beat, NULL, beat_main, NULL) == 0);
  long long deadline = now_ms() + WAIT_MS;
  while (!atomic_load(&g_beat_tid)) {
    CHECKF(now_ms() < deadline, "the heartbeat loop did not start");
    sleep_ms(1);
  }
  sleep_ms(50); /* a few quiet beats */
  pthread_attr_t attr;
  struct sched_param sp = {.sched_priority = 1};
  CHECK(pthread_attr_init(&attr) == 0);
  CHECK(pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED) == 0);
  CHECK(pthread_attr_setschedpolicy(&attr, SCHED_FIFO) == 0);
  CHECK(pthread_attr_setschedparam(&attr, &sp) == 0);
  CHECK(pthread_create(&hog, &attr, hog_main, NULL) == 0);
  pthread_join(hog, NULL);
  pthread_attr_destroy(&attr);
  long long gap = atomic_load(&g_beat_max_gap_ms);
  CHECKF(gap >= 2 * BEAT_THRESHOLD_MS, "the heartbeat's longest gap was %lld ms: not starved", gap);
  perf_sdk_stats_t st = sdk_stats();
  CHECKF(st.hangs_detected == 0, "%llu hangs while the loop only waited for its CPU (gap %lld ms)",
         (unsigned long long)st.hangs_detected, gap);
  atomic_store(&g_beat_stall, 1);
  deadline = now_ms() + WAIT_MS;
  while (atomic_load(&g_beat_stall)) {
    CHECKF(now_ms() < deadline, "the stall did not start");
    sleep_ms(1);
  }
  sleep_ms(400);
  atomic_store(&g_beat_stop, 1);
  pthread_join(beat, NULL);
  finish_sdk();
  expect_hangs(1);
  event_t ev;
  find_event(g_text, "hang", 0, &ev);
  CHECK_EQ_INT(ev.thread, atomic_load(&g_beat_tid));
  CHECKF(strstr(ev.text, "beat_stall") != NULL, "beat_stall not in the hang:\n%s", ev.text);
  event_free(&ev);
}

static const test_case_t g_cases[] = {
    TEST_CASE(stall_one_of_1),
    TEST_CASE(stall_one_of_4),
    TEST_CASE(stall_one_of_16),
    TEST_CASE(two_stalls_two_events),
    TEST_CASE(own_threshold),
    TEST_CASE(main_loop_named),
    TEST_CASE(unregistered_marks_refused),
    TEST_CASE(bad_registration_refused),
    TEST_CASE(bound_refused_counted),
    TEST_CASE(sdk_thread_refused),
    TEST_CASE(register_again_unregister),
    TEST_CASE(pause_every_loop),
    TEST_CASE(batches_name_loops),
    TEST_CASE(fatal_hang_names_loop),
    TEST_CASE(gone_thread_freed),
    TEST_CASE_SERIAL(cpu_starved_not_hung, "a real-time thread holds CPU 0 for 45 ms"),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
