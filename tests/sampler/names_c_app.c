/*
 * names_c_app.c - the C program (-O2 -g -fomit-frame-pointer, built as C
 * production code often is: no frame pointers, so every caller comes from
 * CFI) whose parked threads test_names compares with gdb, frame for frame,
 * the way it compares names_app (C++).
 *
 * What is in it, on purpose: three threads parked where unwinding without
 * frame pointers matters - one in pthread_cond_wait inside an inlined
 * queue_pop, one in pthread_mutex_lock inside an inlined ledger_record, one
 * in a hot loop inlined from mix_until (frame 0 anywhere in the loop) -
 * each called from a noinline function of this file.
 *
 * Usage: names_c_app <dir> [--no-sdk]. It writes <dir>/text.txt (the
 * all-threads text) and, unless --no-sdk, <dir>/report.txt (the file
 * sink, one manual event), prints "ready <pid> <cv tid> <mutex tid> <hot
 * tid>", waits for a line on stdin, lets the threads go and exits 0 (the
 * protocol of names_app.cc).
 */
#define _GNU_SOURCE /* pthread_setname_np, pthread_getcpuclockid, syscall */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "names_app_threads.h"
#include "perf_sdk.h"

#define NOINLINE __attribute__((noinline, noipa))
#define ALWAYS_INLINE inline __attribute__((always_inline))

static pthread_mutex_t g_queue_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_queue_cv = PTHREAD_COND_INITIALIZER;
static int g_queue_items;
static pthread_mutex_t g_ledger_mu = PTHREAD_MUTEX_INITIALIZER;
static long g_ledger_total;
static int g_stop_hot;
static volatile unsigned long g_sink;
static atomic_int g_tids[3];

/* Waits for an order on the condition variable. */
static ALWAYS_INLINE int queue_pop(void) {
  pthread_mutex_lock(&g_queue_mu);
  while (g_queue_items == 0)
    pthread_cond_wait(&g_queue_cv, &g_queue_mu);
  int item = g_queue_items--;
  pthread_mutex_unlock(&g_queue_mu);
  return item;
}

NOINLINE static int take_order(int bonus) {
  return queue_pop() + bonus;
}

static ALWAYS_INLINE void ledger_record(long amount) {
  pthread_mutex_lock(&g_ledger_mu);
  g_ledger_total += amount;
  pthread_mutex_unlock(&g_ledger_mu);
}

NOINLINE static void post_price(long amount) {
  ledger_record(amount);
  g_sink += (unsigned long)amount;
}

/* The hot loop lives entirely in the inlined mix_until: every instruction
   of it names the same chain and line, wherever a sample (or gdb)
   interrupts it. */
static ALWAYS_INLINE unsigned long mix_until(const int *stop, unsigned long seed) {
  unsigned long h = seed * 1099511628211UL + 0x9e3779b97f4a7c15UL;
  /* One source line: a sample anywhere in the loop reads the same line. */
  // clang-format off
  do h = (h ^ (h >> 7)) * 1099511628211UL; while (!__atomic_load_n(stop, __ATOMIC_RELAXED));
  // clang-format on
  return h;
}

NOINLINE static unsigned long spin_prices(const int *stop, unsigned long seed) {
  return mix_until(stop, seed) + 1;
}

static pid_t gettid_(void) {
  return (pid_t)syscall(SYS_gettid);
}

static void *orders_main(void *arg) {
  (void)arg;
  atomic_store(&g_tids[0], gettid_());
  g_sink += (unsigned long)take_order(2);
  return NULL;
}

static void *ledger_main(void *arg) {
  (void)arg;
  atomic_store(&g_tids[1], gettid_());
  post_price(7);
  return NULL;
}

static void *pricing_main(void *arg) {
  (void)arg;
  atomic_store(&g_tids[2], gettid_());
  g_sink += spin_prices(&g_stop_hot, 42);
  return NULL;
}

static bool write_file(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) return false;
  bool ok = fputs(text, f) >= 0;
  return fclose(f) == 0 && ok;
}

static int capture_with_sdk(const char *dir) {
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  char report[512];
  snprintf(report, sizeof report, "%s/report.txt", dir);
  cfg.app_name = "names_c_app";
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = report;
  cfg.data_dir = dir;
  cfg.cpu_threshold_percent = 25600; /* only the manual event */
  int err = perf_sdk_init(&cfg);
  /* A thread may not answer within the sampler's timeout on a loaded
     machine: that capture fails (counted); ask again. */
  perf_sdk_stats_t st = {0};
  struct timespec pause = {0, 50000000};
  for (int attempt = 0; attempt < 20 && !err; attempt++) {
    if (attempt) nanosleep(&pause, NULL);
    uint64_t failed = st.samples_failed;
    err = perf_sdk_capture_now("names");
    if (!err) err = perf_sdk_get_stats(&st);
    if (!err && st.samples_failed == failed) break;
  }
  int stop = perf_sdk_shutdown(10000);
  return err ? err : stop;
}

/* Every thread's text, asked again (after a pause) while a thread did not
   answer; the last answer is kept whatever it says. */
static int capture_text(char **text) {
  int err = 0;
  struct timespec pause = {0, 50000000};
  for (int attempt = 0; attempt < 20; attempt++) {
    if (attempt) nanosleep(&pause, NULL);
    err = perf_backtrace_all_threads_text(text);
    if (err || !strstr(*text, "\nerror: ") || attempt == 19) break;
    perf_free(*text);
    *text = NULL;
  }
  return err;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: names_c_app <dir> [--no-sdk]\n");
    return 2;
  }
  const char *dir = argv[1];
  bool sdk = !(argc > 2 && strcmp(argv[2], "--no-sdk") == 0);
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY); /* the test's gdb is not our parent */
  pthread_mutex_lock(&g_ledger_mu);          /* the ledger thread parks on it */
  pthread_t threads[3];
  void *(*bodies[3])(void *) = {orders_main, ledger_main, pricing_main};
  const char *names[3] = {"orders", "ledger", "pricing"};
  for (int i = 0; i < 3; i++) {
    if (pthread_create(&threads[i], NULL, bodies[i], NULL) != 0) return 1;
    pthread_setname_np(threads[i], names[i]);
  }
  /* Parked: the two waiters in futex(2), the hot one past 50 ms of CPU. */
  struct timespec pause = {0, 2000000};
  while (!atomic_load(&g_tids[0]) || !atomic_load(&g_tids[1]) || !atomic_load(&g_tids[2]) ||
         !in_futex(atomic_load(&g_tids[0])) || !in_futex(atomic_load(&g_tids[1])) ||
         thread_cpu_s(threads[2]) < 0.05)
    nanosleep(&pause, NULL);

  int err = sdk ? capture_with_sdk(dir) : 0;
  char *text = NULL;
  if (!err) err = capture_text(&text);
  if (!err && !write_file(dir, "text.txt", text)) err = PERF_E_SYSTEM;
  perf_free(text);
  if (err) {
    fprintf(stderr, "names_c_app: %s\n", perf_strerror(err));
    return 1;
  }
  printf("ready %d %d %d %d\n", (int)getpid(), atomic_load(&g_tids[0]), atomic_load(&g_tids[1]),
         atomic_load(&g_tids[2]));
  fflush(stdout);
  char line[16];
  if (!fgets(line, sizeof line, stdin)) { /* the test went away: finish anyway */
  }
  __atomic_store_n(&g_stop_hot, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&g_ledger_mu);
  pthread_mutex_lock(&g_queue_mu);
  g_queue_items = 1;
  pthread_cond_signal(&g_queue_cv);
  pthread_mutex_unlock(&g_queue_mu);
  for (int i = 0; i < 3; i++)
    pthread_join(threads[i], NULL);
  return 0;
}
