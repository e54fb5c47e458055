/*
 * marks_bench.c - the cost of one busy/idle pair of loop marks
 * (perf_sdk_loop_busy + perf_sdk_loop_idle) through libperfsdk.so as an app
 * calls them: on the watched thread's loop ("main"), on a loop a worker
 * thread registered (perf_sdk_loop_register), and on 8 registered loops
 * marked at once by their own threads. Baseline, in the same run: the
 * single-loop marks as they were before loops were registered (a copy of
 * their code here: one static loop, a relaxed load of its nesting depth,
 * a vDSO clock read, two stores; the idle mark counting the unit), so the
 * ratio is the price of finding the calling thread's loop.
 *
 *   ./build/bench/marks_bench [pairs per round, default 5000000]
 *
 * Best of 5 rounds for each, timed on the marking thread's CPU clock.
 * Built against a header without perf_sdk_loop_register (an older SDK),
 * it times the main loop only. Exits 0 whatever the figures.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "perf_sdk.h"

#define ROUNDS 5
#define THREADS 8

static long g_pairs = 5000000;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The calling thread's CPU time: threads sharing the 2 cores time only
   their own work. */
static int64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- the baseline: the single-loop marks before the registry ------------- */

static struct {
  atomic_int nested, paused;
  atomic_uint_fast64_t word;
  atomic_int_fast64_t busy_since_ns, threshold_ns;
  atomic_uint_fast64_t long_unit_end, units[9], busy_total_ns;
} g_old = {.threshold_ns = 250000000};
static atomic_bool g_old_running = true;

static void old_mark_ended(uint64_t epoch, int64_t now) {
  if (!atomic_load_explicit(&g_old.paused, memory_order_relaxed)) {
    int64_t took = now - atomic_load_explicit(&g_old.busy_since_ns, memory_order_relaxed);
    unsigned b = took < 50000000 ? 0 : 1;
    atomic_fetch_add_explicit(&g_old.units[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_old.busy_total_ns, (uint64_t)took, memory_order_relaxed);
  }
  int64_t began = atomic_load_explicit(&g_old.busy_since_ns, memory_order_relaxed);
  if (now - began < atomic_load_explicit(&g_old.threshold_ns, memory_order_relaxed)) return;
  atomic_store_explicit(&g_old.long_unit_end, epoch, memory_order_relaxed);
}

__attribute__((noinline)) static int old_busy(void) {
  if (!atomic_load_explicit(&g_old_running, memory_order_relaxed)) return -11;
  if (atomic_load_explicit(&g_old.nested, memory_order_relaxed)) return 0;
  int64_t now = now_ns();
  uint64_t w = atomic_load_explicit(&g_old.word, memory_order_relaxed);
  if (w & 1) old_mark_ended(w >> 1, now);
  atomic_store_explicit(&g_old.busy_since_ns, now, memory_order_relaxed);
  atomic_store_explicit(&g_old.word, ((w >> 1) + 1) << 1 | 1, memory_order_release);
  return 0;
}

__attribute__((noinline)) static int old_idle(void) {
  if (!atomic_load_explicit(&g_old_running, memory_order_relaxed)) return -11;
  if (atomic_load_explicit(&g_old.nested, memory_order_relaxed)) return 0;
  uint64_t w = atomic_load_explicit(&g_old.word, memory_order_relaxed);
  if (w & 1) old_mark_ended(w >> 1, now_ns());
  atomic_store_explicit(&g_old.word, w & ~(uint64_t)1, memory_order_release);
  return 0;
}

/* ---- timing ------------------------------------------------------------------ */

typedef struct {
  int (*busy)(void);
  int (*idle)(void);
  const char *register_as; /* NULL: the calling thread marks as it is */
  double best_ns;          /* per pair */
} run_t;

static void *time_pairs(void *arg) {
  run_t *r = arg;
#ifdef PERF_SDK_MAX_LOOPS
  if (r->register_as && perf_sdk_loop_register(r->register_as, 0) != PERF_OK) {
    fprintf(stderr, "marks_bench: perf_sdk_loop_register(%s) failed\n", r->register_as);
    exit(1);
  }
#endif
  r->best_ns = 1e30;
  for (int round = 0; round < ROUNDS; round++) {
    int64_t t0 = cpu_ns();
    int err = 0;
    for (long i = 0; i < g_pairs; i++)
      err |= r->busy() | r->idle();
    int64_t took = cpu_ns() - t0;
    if (err) {
      fprintf(stderr, "marks_bench: a mark failed: %s\n", perf_strerror(err));
      exit(1);
    }
    double per = (double)took / (double)g_pairs;
    if (per < r->best_ns) r->best_ns = per;
  }
#ifdef PERF_SDK_MAX_LOOPS
  if (r->register_as) perf_sdk_loop_unregister();
#endif
  return NULL;
}

static double on_thread(run_t *r) {
  pthread_t t;
  if (pthread_create(&t, NULL, time_pairs, r) != 0) exit(1);
  pthread_join(t, NULL);
  return r->best_ns;
}

int main(int argc, char **argv) {
  if (argc > 1) g_pairs = strtol(argv[1], NULL, 10);
  if (g_pairs <= 0) g_pairs = 5000000;
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "marks_bench";
  cfg.sink = PERF_SINK_NONE;
  cfg.cpu_threshold_percent = 25600; /* the CPU monitor never samples */
  if (perf_sdk_init(&cfg) != PERF_OK) {
    fprintf(stderr, "marks_bench: perf_sdk_init failed\n");
    return 1;
  }
  run_t base = {old_busy, old_idle, NULL, 0};
  time_pairs(&base);
  run_t main_loop = {perf_sdk_loop_busy, perf_sdk_loop_idle, NULL, 0};
  time_pairs(&main_loop);
  printf("marks_bench: %ld busy/idle pairs per round, best of %d\n", g_pairs, ROUNDS);
  printf("  single-loop marks before the registry (baseline)  %6.1f ns per pair\n", base.best_ns);
  printf("  main loop (the watched thread)                    %6.1f ns per pair  x%.2f\n",
         main_loop.best_ns, main_loop.best_ns / base.best_ns);
#ifdef PERF_SDK_MAX_LOOPS
  run_t worker = {perf_sdk_loop_busy, perf_sdk_loop_idle, "worker", 0};
  on_thread(&worker);
  run_t many[THREADS];
  pthread_t threads[THREADS];
  char names[THREADS][16];
  for (int i = 0; i < THREADS; i++) {
    snprintf(names[i], sizeof names[i], "worker-%d", i);
    many[i] = (run_t){perf_sdk_loop_busy, perf_sdk_loop_idle, names[i], 0};
    if (pthread_create(&threads[i], NULL, time_pairs, &many[i]) != 0) return 1;
  }
  double worst = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(threads[i], NULL);
    if (many[i].best_ns > worst) worst = many[i].best_ns;
  }
  printf("  a registered worker loop                          %6.1f ns per pair  x%.2f\n",
         worker.best_ns, worker.best_ns / base.best_ns);
  printf("  %d registered loops marked at once (slowest)      %6.1f ns per pair  x%.2f\n", THREADS,
         worst, worst / base.best_ns);
#endif
  perf_sdk_shutdown(2000);
  return 0;
}
