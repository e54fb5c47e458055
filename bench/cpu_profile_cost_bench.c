/*
 * cpu_profile_cost_bench.c - what the continuous CPU profile
 * (cpu_profile_hz) costs a busy process, against its budget, in one run:
 * --threads N busy threads (default 2) each count rounds of a fixed piece
 * of work; the SDK is started and stopped again and again (--rounds
 * pairs, default 3, of --phase-ms each, default 10000), alternately with
 * the profile off (cpu_profile_hz 0) and on (--hz, default 19; budget
 * --budget thousandths of a core, default 5), sink none, no CPU bursts.
 * Per phase:
 *  - the work done per second of the workload threads' CPU (their CPU
 *    clocks): the handler's time on them, and the kernel's delivery of its
 *    signals, is CPU that does no work;
 *  - the CPU of the process's other threads (the SDK's, and this main
 *    thread's polls) per second;
 *  - with the profile on, what the SDK measured of its own cost
 *    (perf_sdk_stats_t.cpu_profile_cost_us), its samples and rate.
 * Prints each phase, then the means over the rounds: the slowdown of the
 * work (on against off), the SDK threads' extra CPU, their sum as the
 * profile's real cost in thousandths of a core, and the SDK's own measure
 * of it, beside the budget. Not a test: it never fails on the figures.
 *
 *   ./build/bench/cpu_profile_cost_bench [--threads 2] [--hz 19] [--budget 5]
 *                                        [--rounds 3] [--phase-ms 10000]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf_sdk.h"

#define MAX_THREADS 16

static atomic_int g_stop;
static int g_threads = 2;

typedef struct {
  pthread_t thread;
  clockid_t clock;
  atomic_ullong rounds;
  atomic_int ready;
} worker_t;

static worker_t g_workers[MAX_THREADS];
static volatile unsigned long g_sink;

static int64_t ts_ns(const struct timespec *ts) {
  return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

static int64_t clock_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts_ns(&ts);
}

/* One round of work: a few microseconds of arithmetic, through a call
   chain of three functions (the stacks a profile walks). */
__attribute__((noinline)) static unsigned long work_leaf(unsigned long x) {
  for (int i = 0; i < 2048; i++)
    x = x * 6364136223846793005UL + 1442695040888963407UL;
  return x;
}

__attribute__((noinline)) static unsigned long work_mid(unsigned long x) {
  return work_leaf(x) + 1;
}

__attribute__((noinline)) static unsigned long work_top(unsigned long x) {
  return work_mid(x) ^ 3;
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  pthread_getcpuclockid(pthread_self(), &w->clock);
  atomic_store(&w->ready, 1);
  unsigned long x = 1;
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
    x = work_top(x);
    atomic_fetch_add_explicit(&w->rounds, 1, memory_order_relaxed);
  }
  g_sink = x;
  return NULL;
}

/* What the clocks say at one moment. */
typedef struct {
  int64_t wall_ns, process_ns, workers_ns;
  unsigned long long rounds;
} reading_t;

static void read_now(reading_t *r) {
  r->wall_ns = clock_ns(CLOCK_MONOTONIC);
  r->process_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
  r->workers_ns = 0;
  r->rounds = 0;
  for (int i = 0; i < g_threads; i++) {
    r->workers_ns += clock_ns(g_workers[i].clock);
    r->rounds += atomic_load(&g_workers[i].rounds);
  }
}

/* One phase's figures. */
typedef struct {
  double rounds_per_cpu_s; /* work per second of the workers' CPU */
  double others_ms_per_s;  /* the other threads' CPU per second of wall time */
  double cost_ms_per_s;    /* the SDK's own measure of the profile's cost */
  double workers_cpu;      /* the workers' CPU per second of wall time (cores) */
  unsigned hz_now;
  unsigned long long lowered;
} phase_t;

static int run_phase(unsigned hz, unsigned budget, int phase_ms, phase_t *out) {
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "cpu_profile_cost_bench";
  cfg.data_dir = "";
  cfg.sink = PERF_SINK_NONE;
  cfg.hang_threshold_ms = 60000;
  cfg.cpu_threshold_percent = 25600; /* no bursts: the profile alone */
  cfg.cpu_profile_hz = hz;
  cfg.cpu_profile_budget_permille = budget;
  int err = perf_sdk_init(&cfg);
  if (err != PERF_OK) {
    fprintf(stderr, "perf_sdk_init: %s\n", perf_strerror(err));
    return -1;
  }
  /* A second to settle (every thread armed, its stack learned), then the
     measured phase. */
  usleep(1000000);
  reading_t a, b;
  perf_sdk_stats_t s0, s1;
  perf_sdk_get_stats(&s0);
  read_now(&a);
  usleep((useconds_t)phase_ms * 1000);
  read_now(&b);
  perf_sdk_get_stats(&s1);
  perf_sdk_shutdown(5000);
  double wall_s = (double)(b.wall_ns - a.wall_ns) / 1e9;
  double workers_s = (double)(b.workers_ns - a.workers_ns) / 1e9;
  out->rounds_per_cpu_s = workers_s > 0 ? (double)(b.rounds - a.rounds) / workers_s : 0;
  out->others_ms_per_s =
      (double)((b.process_ns - a.process_ns) - (b.workers_ns - a.workers_ns)) / 1e6 / wall_s;
  out->cost_ms_per_s = (double)(s1.cpu_profile_cost_us - s0.cpu_profile_cost_us) / 1e3 / wall_s;
  out->workers_cpu = workers_s / wall_s;
  out->hz_now = (unsigned)s1.cpu_profile_hz_now;
  out->lowered = s1.cpu_profile_rate_lowered;
  return 0;
}

int main(int argc, char **argv) {
  unsigned hz = 19, budget = 5;
  int rounds = 3, phase_ms = 10000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--threads") == 0)
      g_threads = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--hz") == 0)
      hz = (unsigned)atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--budget") == 0)
      budget = (unsigned)atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--rounds") == 0)
      rounds = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--phase-ms") == 0)
      phase_ms = atoi(argv[i + 1]);
  }
  if (g_threads < 1 || g_threads > MAX_THREADS || hz < 1 || hz > 1000 || rounds < 1) {
    fprintf(stderr,
            "usage: %s [--threads 1..16] [--hz 1..1000] [--budget 1..1000] [--rounds n] "
            "[--phase-ms ms]\n",
            argv[0]);
    return 2;
  }
  for (int i = 0; i < g_threads; i++) {
    pthread_create(&g_workers[i].thread, NULL, worker_main, &g_workers[i]);
    while (!atomic_load(&g_workers[i].ready))
      usleep(1000);
  }
  printf("%d busy threads, profile at %u Hz, budget %u/1000 of a core (%.1f ms/s), %d pairs of "
         "%d ms phases\n",
         g_threads, hz, budget, (double)budget, rounds, phase_ms);
  printf("%-6s %-8s %16s %14s %14s %8s %8s\n", "round", "profile", "work/cpu-s", "others ms/s",
         "measured ms/s", "hz now", "lowered");
  double off_work = 0, on_work = 0, off_others = 0, on_others = 0, on_cost = 0, on_cores = 0;
  for (int r = 0; r < rounds; r++) {
    for (int on = 0; on < 2; on++) {
      phase_t p;
      if (run_phase(on ? hz : 0, budget, phase_ms, &p) != 0) return 1;
      printf("%-6d %-8s %16.0f %14.3f %14.3f %8u %8llu\n", r + 1, on ? "on" : "off",
             p.rounds_per_cpu_s, p.others_ms_per_s, on ? p.cost_ms_per_s : 0.0, on ? p.hz_now : 0,
             on ? p.lowered : 0ULL);
      if (on) {
        on_work += p.rounds_per_cpu_s;
        on_others += p.others_ms_per_s;
        on_cost += p.cost_ms_per_s;
        on_cores += p.workers_cpu;
      } else {
        off_work += p.rounds_per_cpu_s;
        off_others += p.others_ms_per_s;
      }
    }
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < g_threads; i++)
    pthread_join(g_workers[i].thread, NULL);
  off_work /= rounds, on_work /= rounds, off_others /= rounds, on_others /= rounds;
  on_cost /= rounds, on_cores /= rounds;
  /* The workers' CPU that did no work (the handler, the signals), per
     second: their CPU a second times the share of it lost. */
  double slowdown = off_work > 0 ? 1 - on_work / off_work : 0;
  double workers_ms = 1000.0 * on_cores * slowdown;
  double sdk_ms = on_others - off_others;
  printf("work per CPU-second: off %.0f, on %.0f: %.2f%% slower\n", off_work, on_work,
         100 * slowdown);
  printf("the SDK's threads: %.3f ms/s more CPU with the profile on\n", sdk_ms);
  printf("the profile's cost: about %.3f ms/s on the workers (%.2f cores) + %.3f ms/s of the "
         "SDK's = %.2f/1000 of a core; measured by the SDK: %.3f ms/s = %.2f/1000; budget "
         "%u/1000\n",
         workers_ms, on_cores, sdk_ms, workers_ms + sdk_ms, on_cost, on_cost, budget);
  return 0;
}
