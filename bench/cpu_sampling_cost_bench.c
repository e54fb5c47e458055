/*
 * cpu_sampling_cost_bench.c - what sampling one busy thread costs the
 * whole process: the SDK's CPU burst against gperftools' SIGPROF profiler
 * (libprofiler: ProfilerStart, CPUPROFILE_FREQUENCY) on the same workload,
 * in the same run.
 *
 * The workload: one thread doing fixed units of work (a short call chain
 * spinning ~50 us per unit) while the main thread waits. Each mode runs in
 * its own forked child for --seconds of measurement: no profiler, the SDK
 * sampling the thread (a burst longer than the measurement, at 100 and at
 * 1000 Hz; the measurement starts once the burst has begun; and the SDK
 * running without a burst), gperftools at
 * 100 and 1000 Hz. Each child reports the whole process's CPU time
 * (CLOCK_PROCESS_CPUTIME_ID: every thread, the SDK's included) per unit of
 * work and the samples taken; modes are interleaved over --rounds rounds
 * and the median of each is printed as a ratio to the run without a
 * profiler, with the process CPU each sample cost ((CPU per unit - the
 * bare CPU per unit) x units / samples: a difference of a few tenths of a
 * percent, as noisy as the machine), the CPU per second of every thread
 * but the busy one (the SDK's monitors and writer; nothing for
 * gperftools, whose work is all in its handler), and the SDK threads' CPU
 * per sample beyond what they use with the SDK running and no burst.
 *
 *   ./build/bench/cpu_sampling_cost_bench [--seconds 3] [--rounds 5]
 *
 * Not a test: it never fails on the figures.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perf_sdk.h"

#ifdef HAVE_GPERFTOOLS
#include <gperftools/profiler.h>
#endif

enum { BARE, SDK_IDLE, SDK_100, SDK_1000, GPERF_100, GPERF_1000, MODES };
static const char *const MODE_NAMES[MODES] = {"no profiler",       "SDK, no burst",
                                              "SDK 100 Hz",        "SDK 1000 Hz",
                                              "gperftools 100 Hz", "gperftools 1000 Hz"};

/* The SDK's threads, by name: their own CPU clocks. */
enum { T_CPU_MON, T_HANG_MON, T_WRITER, SDK_THREADS };
static const char *const SDK_THREAD_NAMES[SDK_THREADS] = {"perf-cpu-mon", "perf-hang-mon",
                                                          "perf-writer"};

typedef struct {
  double cpu_per_unit_ns; /* whole-process CPU per unit of work */
  double units, samples;
  double others_ns; /* CPU of every thread but the busy one (the SDK's threads, main) */
  double busy_ns;   /* the busy thread's CPU */
  double sdk_ns[SDK_THREADS];
  int ok;
} result_t;

static atomic_int g_stop;
static pthread_t g_busy;
static atomic_llong g_units;
static volatile unsigned long g_sink;

static int64_t clock_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

__attribute__((noinline)) static unsigned long leaf_spin(unsigned long x) {
  for (int i = 0; i < 20000; i++)
    x = x * 2862933555777941757UL + 3;
  return x;
}

__attribute__((noinline)) static unsigned long middle(unsigned long x) {
  return leaf_spin(x) + 1;
}

__attribute__((noinline)) static unsigned long work_unit(unsigned long x) {
  return middle(x) ^ 5;
}

static void *busy_main(void *arg) {
  (void)arg;
  unsigned long x = 1;
  while (!atomic_load(&g_stop)) {
    x = work_unit(x);
    atomic_fetch_add(&g_units, 1);
  }
  g_sink = x;
  return NULL;
}

/* Each SDK thread's CPU (its clock, by tid), 0 when it is not running. */
static void sdk_threads_cpu(double out[SDK_THREADS]) {
  memset(out, 0, sizeof(double) * SDK_THREADS);
  DIR *d = opendir("/proc/self/task");
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    int tid = atoi(e->d_name);
    if (tid <= 0) continue;
    char path[64], name[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (!fgets(name, sizeof name, f)) name[0] = 0;
    fclose(f);
    name[strcspn(name, "\n")] = 0;
    for (int t = 0; t < SDK_THREADS; t++)
      if (strcmp(name, SDK_THREAD_NAMES[t]) == 0)
        out[t] += (double)clock_ns((clockid_t)((~(unsigned)tid << 3) | 6)); /* its sched clock */
  }
  closedir(d);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* hz 0: the SDK running, its CPU threshold out of reach (no burst). */
static bool sdk_start(unsigned hz, char *dir, size_t len) {
  snprintf(dir, len, "/tmp/perf_cost_bench.XXXXXX");
  if (!mkdtemp(dir)) return false;
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "cpu_sampling_cost_bench";
  cfg.data_dir = dir;
  cfg.sink = PERF_SINK_NONE;
  cfg.hang_threshold_ms = 60000;
  cfg.cpu_threshold_percent = hz ? 50 : 25600;
  cfg.cpu_window_ms = 300;
  cfg.cpu_burst_ms = 60000; /* longer than the measurement */
  cfg.cpu_sample_hz = hz ? hz : 100;
  cfg.cpu_top_threads = 1;
  return perf_sdk_init(&cfg) == PERF_OK;
}

static uint64_t sdk_samples(void) {
  perf_sdk_stats_t st;
  return perf_sdk_get_stats(&st) == PERF_OK ? st.samples_taken : 0;
}

/* One mode in this (child) process; writes its result to fd. */
static void run_mode(int mode, int seconds, int fd) {
  result_t r = {0};
  char dir[64] = "";
  if (pthread_create(&g_busy, NULL, busy_main, NULL) != 0) goto out;
  clockid_t busy_clock;
  if (pthread_getcpuclockid(g_busy, &busy_clock) != 0) goto out;
  if (mode == SDK_IDLE) {
    if (!sdk_start(0, dir, sizeof dir)) goto out;
    sleep_ms(1000); /* past the start-up (the writer's first capture) */
  }
  if (mode == SDK_100 || mode == SDK_1000) {
    if (!sdk_start(mode == SDK_100 ? 100 : 1000, dir, sizeof dir)) goto out;
    perf_sdk_stats_t st;
    for (int i = 0; i < 10000 && perf_sdk_get_stats(&st) == PERF_OK && st.cpu_bursts == 0; i++)
      sleep_ms(1);
    sleep_ms(200); /* past the burst's start: its timers armed */
  }
#ifdef HAVE_GPERFTOOLS
  char prof[64];
  snprintf(prof, sizeof prof, "/tmp/perf_cost_bench.%d.prof", (int)getpid());
  if (mode == GPERF_100 || mode == GPERF_1000) {
    setenv("CPUPROFILE_FREQUENCY", mode == GPERF_100 ? "100" : "1000", 1);
    if (!ProfilerStart(prof)) goto out;
  }
#else
  if (mode == GPERF_100 || mode == GPERF_1000) goto out;
#endif
  sleep_ms(100);
  double sdk0[SDK_THREADS], sdk1[SDK_THREADS];
  sdk_threads_cpu(sdk0);
  int64_t cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID), busy0 = clock_ns(busy_clock);
  long long units0 = atomic_load(&g_units);
  uint64_t samples0 = sdk_samples();
#ifdef HAVE_GPERFTOOLS
  struct ProfilerState ps0;
  ProfilerGetCurrentState(&ps0);
#endif
  sleep_ms(seconds * 1000);
  long long units = atomic_load(&g_units) - units0;
  int64_t cpu = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0, busy = clock_ns(busy_clock) - busy0;
  sdk_threads_cpu(sdk1);
  for (int t = 0; t < SDK_THREADS; t++)
    r.sdk_ns[t] = sdk1[t] - sdk0[t];
  r.others_ns = (double)(cpu - busy);
  r.samples = (double)(sdk_samples() - samples0);
#ifdef HAVE_GPERFTOOLS
  if (mode == GPERF_100 || mode == GPERF_1000) {
    struct ProfilerState ps1;
    ProfilerGetCurrentState(&ps1);
    r.samples = ps1.samples_gathered - ps0.samples_gathered;
    ProfilerStop();
    unlink(prof);
  }
#endif
  r.units = (double)units;
  r.cpu_per_unit_ns = units > 0 ? (double)cpu / (double)units : 0;
  r.ok = units > 0;
out:
  atomic_store(&g_stop, 1);
  if (write(fd, &r, sizeof r) != (ssize_t)sizeof r) _exit(1);
  _exit(0); /* no shutdown: the burst's end is not measured */
}

static result_t run_child(int mode, int seconds) {
  result_t r = {0};
  int p[2];
  if (pipe(p) != 0) return r;
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    run_mode(mode, seconds, p[1]);
  }
  close(p[1]);
  if (pid > 0) {
    if (read(p[0], &r, sizeof r) != (ssize_t)sizeof r) r.ok = 0;
    waitpid(pid, NULL, 0);
  }
  close(p[0]);
  return r;
}

static int compare_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, compare_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The SDK's threads' CPU per sample during a burst, each thread's from
   its own clock: all of their work over the burst's samples (the hang
   monitor's and the writer's own included), and beyond what they use with
   the SDK running and no burst. What a sample costs in the sampled thread
   is sample_cost_bench's. */
static void sdk_threads(const int n[MODES], double rate[MODES][50],
                        double sdk[MODES][SDK_THREADS][50]) {
  double idle = 0;
  for (int t = 0; t < SDK_THREADS && n[SDK_IDLE]; t++)
    idle += median(sdk[SDK_IDLE][t], n[SDK_IDLE]);
  printf("\nthe SDK's threads per sample during the burst (us), from their own clocks\n");
  printf("%-20s %10s %10s %10s %10s %12s\n", "mode", "cpu-mon", "hang-mon", "writer", "all",
         "beyond idle");
  for (int mode = SDK_100; mode <= SDK_1000; mode++) {
    double s = n[mode] ? median(rate[mode], n[mode]) : 0;
    if (s <= 0) continue;
    double part[SDK_THREADS], all = 0;
    for (int t = 0; t < SDK_THREADS; t++) {
      part[t] = median(sdk[mode][t], n[mode]) / s / 1000;
      all += part[t];
    }
    printf("%-20s %10.2f %10.2f %10.2f %10.2f %12.2f\n", MODE_NAMES[mode], part[T_CPU_MON],
           part[T_HANG_MON], part[T_WRITER], all, all - idle / s / 1000);
  }
  printf("%-20s %10s %10s %10s %10.1f us/s\n", MODE_NAMES[SDK_IDLE], "", "", "", idle / 1000);
}

int main(int argc, char **argv) {
  int seconds = 3, rounds = 5;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
      seconds = atoi(argv[++i]);
    else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--seconds 3] [--rounds 5]\n", argv[0]);
      return 2;
    }
  }
  if (seconds < 1 || rounds < 1 || rounds > 50) return 2;
  double cpu[MODES][50], rate[MODES][50], units[MODES][50], others[MODES][50];
  /* Per second of the run: each SDK thread's CPU. */
  double sdk[MODES][SDK_THREADS][50];
  int n[MODES] = {0};
  for (int round = 0; round < rounds; round++)
    for (int mode = 0; mode < MODES; mode++) {
      result_t r = run_child(mode, seconds);
      if (!r.ok) continue;
      cpu[mode][n[mode]] = r.cpu_per_unit_ns;
      units[mode][n[mode]] = r.units / seconds;
      others[mode][n[mode]] = r.others_ns / seconds;
      for (int t = 0; t < SDK_THREADS; t++)
        sdk[mode][t][n[mode]] = r.sdk_ns[t] / seconds;
      rate[mode][n[mode]++] = r.samples / seconds;
    }
  if (n[BARE] == 0) {
    fprintf(stderr, "the run without a profiler failed\n");
    return 1;
  }
  double bare = median(cpu[BARE], n[BARE]);
  printf("one busy thread, %d s per run, median of %d rounds; whole-process CPU per unit of work\n",
         seconds, rounds);
  double idle_others = n[SDK_IDLE] ? median(others[SDK_IDLE], n[SDK_IDLE]) : 0;
  printf("%-20s %13s %8s %10s %15s %15s %16s\n", "mode", "CPU/unit (us)", "ratio", "samples/s",
         "CPU/sample (us)", "others (us/s)", "SDK/sample (us)");
  for (int mode = 0; mode < MODES; mode++) {
    if (n[mode] == 0) {
      printf("%-20s %14s\n", MODE_NAMES[mode], "(not run: not built with gperftools, or failed)");
      continue;
    }
    double c = median(cpu[mode], n[mode]), s = median(rate[mode], n[mode]);
    /* Per sample: the extra CPU of the units done in a second, over the
       samples of a second. */
    double units_per_s = median(units[mode], n[mode]);
    double per_sample_us = s > 0 ? (c - bare) * units_per_s / s / 1000 : 0;
    double o = median(others[mode], n[mode]);
    /* The SDK's threads' CPU per sample beyond what they use without a
       burst (its handler's time in the busy thread is not in it). */
    double sdk_per_sample =
        (mode == SDK_100 || mode == SDK_1000) && s > 0 ? (o - idle_others) / s / 1000 : 0;
    printf("%-20s %13.2f %8.4f %10.1f %15.2f %15.1f %16.2f\n", MODE_NAMES[mode], c / 1000, c / bare,
           s, s > 0 ? per_sample_us : 0.0, o / 1000, sdk_per_sample);
  }
  sdk_threads(n, rate, sdk);
  return 0;
}
