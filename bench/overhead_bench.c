/*
 * overhead_bench.c - what the running SDK costs the app it lives in, against
 * the goals of its overhead budget: idle SDK threads < 0.1% of one core, RSS
 * growth < 4 MiB, a sampled CPU-bound thread slowed < 1%. See bench/README.md.
 *
 * Part 1, idle cost. 50 pool threads block (half on a condition variable,
 * half in poll on a pipe); the main thread marks its loop busy, does a few
 * microseconds of work and marks it idle every 10 ms. perf_sdk_init runs
 * with the default configuration (sink none). After a warm-up (at least 1 s,
 * until the SDK's start-up work is over) the SDK threads' CPU time is read
 * from their kernel CPU clocks (found by name under /proc/self/task) over
 * --seconds N, and VmRSS is read before init, right after init, after the
 * warm-up and at the end.
 *
 * Part 2, host slowdown. A deterministic CPU-bound loop (hashing a 64 KiB
 * buffer, calibrated to about --work-ms) runs in a worker thread, timed A/B
 * in --pairs pairs: A without the SDK, B with the SDK started just before
 * (and shut down just after) and its CPU monitor sampling the worker at
 * 100 Hz (burst mode held by cpu_burst_ms=60000, cpu_cooldown_ms=0). The
 * pairs alternate their order (AB, BA, AB, ...). B's timing starts only
 * once the burst has begun; samples_taken over the timed part shows the
 * sampling rate actually reached.
 *
 * It prints ratios and figures of one run, asserts nothing and exits 0
 * whether or not the targets are met (non-zero only when the bench itself
 * cannot run).
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "perf_sdk.h"

#define POOL_THREADS 50
#define LOOP_PERIOD_NS 10000000LL /* the main loop's busy/idle period */
#define WARMUP_MIN_NS 1000000000LL
#define WARMUP_MAX_NS 5000000000LL
#define WORK_WORDS (64 * 1024 / 8) /* the host workload's buffer */
#define MAX_PAIRS 101
#define SDK_THREADS 3
#define OFF_CPU_NOTE_PERCENT 2 /* a timed part's wall time not spent on the CPU */

static const char *const k_sdk_names[SDK_THREADS] = {"perf-hang-mon", "perf-cpu-mon",
                                                     "perf-writer"};

/* ------------------------------------------------------------------------ */
/* Clocks, /proc                                                             */
/* ------------------------------------------------------------------------ */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t clock_ns(clockid_t c) {
  struct timespec ts;
  if (clock_gettime(c, &ts) != 0) return -1;
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CPU time of thread `tid` of this process from its kernel CPU clock (the
   clock id glibc's pthread_getcpuclockid builds: ~tid << 3 | per-thread |
   CPUCLOCK_SCHED), or -1 when it is gone. */
static int64_t tid_cpu_ns(pid_t tid) {
  clockid_t c = (clockid_t)((~(uint32_t)tid << 3) | 4u | 2u);
  return clock_ns(c);
}

/* A "Key:   <number>" line of /proc/self/status or /proc/self/task/TID/status,
   or -1. */
static long status_field(const char *path, const char *key) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  size_t klen = strlen(key);
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
      v = strtol(line + klen + 1, NULL, 10);
      break;
    }
  }
  fclose(f);
  return v;
}

static long rss_kib(void) {
  return status_field("/proc/self/status", "VmRSS");
}

/* Voluntary + involuntary context switches of a thread: how often it ran. */
static long ctx_switches(pid_t tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
  long v = status_field(path, "voluntary_ctxt_switches");
  long n = status_field(path, "nonvoluntary_ctxt_switches");
  return v < 0 || n < 0 ? -1 : v + n;
}

/* The SDK's threads by name: tids[i] for k_sdk_names[i], 0 when not found. */
static void find_sdk_threads(pid_t tids[SDK_THREADS]) {
  memset(tids, 0, SDK_THREADS * sizeof *tids);
  DIR *d = opendir("/proc/self/task");
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[64], comm[32] = "";
    pid_t tid = (pid_t)atoi(e->d_name);
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
    fclose(f);
    for (int i = 0; i < SDK_THREADS; i++)
      if (strcmp(comm, k_sdk_names[i]) == 0) tids[i] = tid;
  }
  closedir(d);
}

/* ------------------------------------------------------------------------ */
/* The workload: a serial hash over a buffer                                 */
/* ------------------------------------------------------------------------ */

static uint64_t g_buf[WORK_WORDS];
static volatile uint64_t g_sink;

static void fill_buffer(void) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < WORK_WORDS; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    g_buf[i] = x;
  }
}

/* One dependent chain per pass: the compiler cannot vectorize it away. */
static uint64_t hash_passes(uint64_t passes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t p = 0; p < passes; p++) {
    for (size_t i = 0; i < WORK_WORDS; i++) {
      h ^= g_buf[i];
      h *= 0x100000001b3ull;
      h ^= h >> 29;
    }
  }
  return h;
}

/* ------------------------------------------------------------------------ */
/* Part 1: idle cost                                                         */
/* ------------------------------------------------------------------------ */

static pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_pool_cond = PTHREAD_COND_INITIALIZER;
static bool g_pool_stop;
static int g_pool_pipe[2];
static atomic_int g_pool_ready;

static void *pool_cond_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_pool_lock);
  atomic_fetch_add(&g_pool_ready, 1);
  while (!g_pool_stop)
    pthread_cond_wait(&g_pool_cond, &g_pool_lock);
  pthread_mutex_unlock(&g_pool_lock);
  return NULL;
}

static void *pool_poll_main(void *arg) {
  (void)arg;
  struct pollfd p = {.fd = g_pool_pipe[0], .events = POLLIN};
  atomic_fetch_add(&g_pool_ready, 1);
  while (poll(&p, 1, -1) < 0 && errno == EINTR) {
  }
  return NULL; /* the byte stays in the pipe: every poller sees it */
}

typedef struct {
  pid_t tid;
  int64_t cpu0, cpu1; /* CPU clock at the start and end of the measured run */
  long ctx0, ctx1;    /* context switches, same points */
} sdk_thread_t;

/* The main thread's loop: busy, a few microseconds of work, idle, sleep to
   the next 10 ms tick. Returns the number of iterations. */
static long run_loop(int64_t until_ns, int64_t *next_tick) {
  long n = 0;
  while (*next_tick < until_ns) {
    perf_sdk_loop_busy();
    g_sink = hash_passes(1) + (uint64_t)n; /* ~10-20 us */
    perf_sdk_loop_idle();
    *next_tick += LOOP_PERIOD_NS;
    struct timespec ts = {(time_t)(*next_tick / 1000000000), (long)(*next_tick % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
    n++;
  }
  return n;
}

typedef struct {
  double seconds;
  double sdk_cpu_percent; /* steady state, all SDK threads, of one core */
  long rss_before, rss_init, rss_warm, rss_end;
  bool ok;
} idle_result_t;

static idle_result_t run_idle(int seconds) {
  idle_result_t r = {0};
  pthread_t pool[POOL_THREADS];
  if (pipe(g_pool_pipe) != 0) {
    perror("pipe");
    return r;
  }
  for (int i = 0; i < POOL_THREADS; i++) {
    if (pthread_create(&pool[i], NULL, i % 2 ? pool_poll_main : pool_cond_main, NULL) != 0) {
      fprintf(stderr, "overhead_bench: pthread_create failed\n");
      exit(1);
    }
    char name[16];
    snprintf(name, sizeof name, "pool-%d", i);
    pthread_setname_np(pool[i], name);
  }
  while (atomic_load(&g_pool_ready) < POOL_THREADS)
    usleep(1000);
  usleep(50000); /* let the last ones reach their wait */

  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg); /* defaults, sink none */
  r.rss_before = rss_kib();
  int64_t t_init = now_ns();
  int err = perf_sdk_init(&cfg);
  int64_t init_ns = now_ns() - t_init;
  r.rss_init = rss_kib();
  if (err) {
    fprintf(stderr, "overhead_bench: perf_sdk_init: %s\n", perf_strerror(err));
    exit(1);
  }
  pid_t tids[SDK_THREADS];
  find_sdk_threads(tids);
  for (int i = 0; i < SDK_THREADS; i++) {
    if (!tids[i]) {
      fprintf(stderr, "overhead_bench: SDK thread %s not found\n", k_sdk_names[i]);
      exit(1);
    }
  }

  /* Warm-up: at least 1 s and until the SDK threads have been quiet (under
     0.2 ms CPU in total) for a whole 100 ms slice, so one-time start-up work
     (the hang monitor compiles the modules' unwind rules) is not counted as
     idle cost. */
  int64_t start = now_ns(), next_tick = start;
  int64_t prev = 0;
  for (int i = 0; i < SDK_THREADS; i++)
    prev += tid_cpu_ns(tids[i]);
  int64_t warm_end = start;
  for (;;) {
    run_loop(next_tick + 100000000, &next_tick);
    int64_t cur = 0;
    for (int i = 0; i < SDK_THREADS; i++)
      cur += tid_cpu_ns(tids[i]);
    bool quiet = cur - prev < 200000;
    prev = cur;
    warm_end = now_ns();
    if ((warm_end - start >= WARMUP_MIN_NS && quiet) || warm_end - start >= WARMUP_MAX_NS) break;
  }
  r.rss_warm = rss_kib();
  perf_sdk_stats_t st0, st1;
  perf_sdk_get_stats(&st0);

  sdk_thread_t th[SDK_THREADS];
  int64_t startup_cpu = 0;
  for (int i = 0; i < SDK_THREADS; i++) {
    th[i].tid = tids[i];
    th[i].cpu0 = tid_cpu_ns(tids[i]);
    th[i].ctx0 = ctx_switches(tids[i]);
    startup_cpu += th[i].cpu0;
  }
  int64_t proc0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
  int64_t t0 = now_ns();
  long iterations = run_loop(t0 + (int64_t)seconds * 1000000000, &next_tick);
  int64_t t1 = now_ns();
  int64_t proc1 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
  for (int i = 0; i < SDK_THREADS; i++) {
    th[i].cpu1 = tid_cpu_ns(tids[i]);
    th[i].ctx1 = ctx_switches(tids[i]);
  }
  r.rss_end = rss_kib();
  perf_sdk_get_stats(&st1);
  pid_t after[SDK_THREADS];
  find_sdk_threads(after);
  bool same_threads = memcmp(after, tids, sizeof after) == 0;

  int64_t t_shut = now_ns();
  perf_sdk_shutdown(1000);
  int64_t shutdown_ns = now_ns() - t_shut;
  long rss_shutdown = rss_kib();

  pthread_mutex_lock(&g_pool_lock);
  g_pool_stop = true;
  pthread_cond_broadcast(&g_pool_cond);
  pthread_mutex_unlock(&g_pool_lock);
  if (write(g_pool_pipe[1], "x", 1) != 1) perror("write");
  for (int i = 0; i < POOL_THREADS; i++)
    pthread_join(pool[i], NULL);
  close(g_pool_pipe[0]);
  close(g_pool_pipe[1]);

  double wall = (double)(t1 - t0) / 1e9;
  r.seconds = wall;
  printf("== idle cost: %d pool threads blocked (%d cond var, %d poll), main loop busy/idle every "
         "%lld ms, default config, sink none\n",
         POOL_THREADS, POOL_THREADS - POOL_THREADS / 2, POOL_THREADS / 2, LOOP_PERIOD_NS / 1000000);
  printf("perf_sdk_init %.2f ms; warm-up %.2f s; measured %.2f s (%ld loop iterations); "
         "perf_sdk_shutdown %.2f ms\n\n",
         (double)init_ns / 1e6, (double)(warm_end - start) / 1e9, wall, iterations,
         (double)shutdown_ns / 1e6);
  printf("%-14s %7s %10s %10s %9s %12s\n", "thread", "tid", "start-up", "run cpu", "% core",
         "wakeups/s");
  printf("%-14s %7s %10s %10s %9s %12s\n", "", "", "ms", "ms", "", "");
  int64_t total = 0;
  long total_ctx = 0;
  for (int i = 0; i < SDK_THREADS; i++) {
    int64_t d = th[i].cpu1 - th[i].cpu0;
    long c = th[i].ctx1 - th[i].ctx0;
    total += d;
    total_ctx += c;
    printf("%-14s %7d %10.3f %10.3f %8.4f%% %12.1f\n", k_sdk_names[i], (int)th[i].tid,
           (double)th[i].cpu0 / 1e6, (double)d / 1e6, (double)d / 1e7 / wall, (double)c / wall);
  }
  r.sdk_cpu_percent = (double)total / 1e7 / wall;
  printf("%-14s %7s %10.3f %10.3f %8.4f%% %12.1f\n", "all SDK", "", (double)startup_cpu / 1e6,
         (double)total / 1e6, r.sdk_cpu_percent, (double)total_ctx / wall);
  printf("%-14s %7s %10s %10.3f %8.4f%%\n", "whole process", "", "", (double)(proc1 - proc0) / 1e6,
         (double)(proc1 - proc0) / 1e7 / wall);
  printf("\nstart-up = the thread's CPU from its start to the end of the warm-up (one-time work "
         "plus the warm-up's idle cost); run cpu = during the measured run; wakeups = voluntary + "
         "involuntary context switches.\n\n");
  printf("%-28s %10s %10s\n", "VmRSS", "KiB", "vs before");
  printf("%-28s %10ld %10s\n", "before perf_sdk_init", r.rss_before, "");
  printf("%-28s %10ld %+10ld\n", "right after perf_sdk_init", r.rss_init,
         r.rss_init - r.rss_before);
  printf("%-28s %10ld %+10ld\n", "after warm-up", r.rss_warm, r.rss_warm - r.rss_before);
  printf("%-28s %10ld %+10ld\n", "end of run", r.rss_end, r.rss_end - r.rss_before);
  printf("%-28s %10ld %+10ld\n", "after perf_sdk_shutdown", rss_shutdown,
         rss_shutdown - r.rss_before);
  printf("growth during the measured run: %+ld KiB\n", r.rss_end - r.rss_warm);
  if (st1.hangs_detected || st1.cpu_bursts || st1.events_recorded || st1.samples_taken)
    printf("note: the SDK saw triggers during the idle run: hangs %llu, cpu bursts %llu, "
           "events %llu, samples %llu\n",
           (unsigned long long)st1.hangs_detected, (unsigned long long)st1.cpu_bursts,
           (unsigned long long)st1.events_recorded, (unsigned long long)st1.samples_taken);
  if (!same_threads) printf("note: the SDK's thread ids changed during the run\n");
  printf("\n");
  r.ok = true;
  return r;
}

/* ------------------------------------------------------------------------ */
/* Part 2: host slowdown                                                     */
/* ------------------------------------------------------------------------ */

typedef struct {
  bool with_sdk;
  uint64_t passes;
  int64_t warmup_ns;  /* A: spin this long before timing */
  double wall_s;      /* timed part */
  double cpu_s;       /* the worker's own CPU clock over the timed part */
  uint64_t samples;   /* samples_taken during the timed part */
  uint64_t failed;    /* samples_failed during the timed part */
  int64_t waited_ns;  /* warm-up actually spent */
  bool burst_started; /* B: a burst was running when timing began */
  uint64_t checksum;
} run_t;

static void *worker_main(void *arg) {
  run_t *r = arg;
  pthread_setname_np(pthread_self(), "bench-worker");
  /* Warm-up: the same loop in small chunks. B waits for the CPU monitor's
     burst to begin (it needs a 100 ms window over the threshold first). */
  int64_t w0 = now_ns();
  for (;;) {
    g_sink = hash_passes(50);
    int64_t el = now_ns() - w0;
    if (r->with_sdk) {
      perf_sdk_stats_t s;
      if (perf_sdk_get_stats(&s) == 0 && s.cpu_bursts > 0 && s.samples_taken > 0) {
        r->burst_started = true;
        break;
      }
      if (el > 3000000000LL) break;
    } else if (el >= r->warmup_ns) {
      break;
    }
  }
  r->waited_ns = now_ns() - w0;
  perf_sdk_stats_t s0 = {0}, s1 = {0};
  if (r->with_sdk) perf_sdk_get_stats(&s0);
  int64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), t0 = now_ns();
  r->checksum = hash_passes(r->passes);
  int64_t t1 = now_ns(), c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  if (r->with_sdk) perf_sdk_get_stats(&s1);
  r->wall_s = (double)(t1 - t0) / 1e9;
  r->cpu_s = (double)(c1 - c0) / 1e9;
  r->samples = s1.samples_taken - s0.samples_taken;
  r->failed = s1.samples_failed - s0.samples_failed;
  return NULL;
}

static void run_one(run_t *r) {
  if (r->with_sdk) {
    perf_sdk_config_t cfg;
    perf_sdk_config_init(&cfg);
    cfg.cpu_threshold_percent = 50;
    cfg.cpu_window_ms = 100;
    cfg.cpu_burst_ms = 60000;
    cfg.cpu_sample_hz = 100;
    cfg.cpu_top_threads = 1;
    cfg.cpu_cooldown_ms = 0;
    int err = perf_sdk_init(&cfg);
    if (err) {
      fprintf(stderr, "overhead_bench: perf_sdk_init: %s\n", perf_strerror(err));
      exit(1);
    }
  }
  pthread_t t;
  if (pthread_create(&t, NULL, worker_main, r) != 0) {
    fprintf(stderr, "overhead_bench: pthread_create failed\n");
    exit(1);
  }
  pthread_join(t, NULL);
  if (r->with_sdk) perf_sdk_shutdown(1000);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(const double *v, int n) {
  double s[MAX_PAIRS];
  memcpy(s, v, (size_t)n * sizeof *v);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static double stddev(const double *v, int n, double *mean_out) {
  double m = 0, q = 0;
  for (int i = 0; i < n; i++)
    m += v[i];
  m /= n;
  for (int i = 0; i < n; i++)
    q += (v[i] - m) * (v[i] - m);
  if (mean_out) *mean_out = m;
  return n > 1 ? sqrt(q / (n - 1)) : 0;
}

typedef struct {
  double median_ratio;
  double samples_per_s; /* lowest over the B runs */
  int disturbed;        /* pairs in which another process took the CPU */
  bool all_sampled;
} host_result_t;

static host_result_t run_host(int pairs, int work_ms) {
  host_result_t hr = {0};
  /* Calibrate on this thread: passes per second over ~200 ms, after a warm
     pass. */
  g_sink = hash_passes(200);
  uint64_t n = 1;
  int64_t el = 0;
  for (;;) {
    int64_t t0 = now_ns();
    g_sink = hash_passes(n);
    el = now_ns() - t0;
    if (el >= 200000000) break;
    n *= 2;
  }
  uint64_t passes = (uint64_t)((double)n * work_ms * 1e6 / (double)el);
  if (passes == 0) passes = 1;

  printf("== host slowdown: %llu passes of a serial hash over %d KiB (calibrated to %d ms) in a "
         "worker thread; A = no SDK, B = SDK with the CPU monitor sampling the worker at 100 Hz; "
         "%d pairs, order alternating AB/BA\n\n",
         (unsigned long long)passes, (int)(sizeof g_buf / 1024), work_ms, pairs);
  printf("%4s %5s %9s %9s %8s %9s %9s %8s %7s %7s %10s %7s\n", "pair", "order", "A wall", "B wall",
         "B/A", "A cpu", "B cpu", "B/A cpu", "A off", "B off", "samples/s", "B w-up");
  printf("%4s %5s %9s %9s %8s %9s %9s %8s %7s %7s %10s %7s\n", "", "", "s", "s", "x", "s", "s", "x",
         "%", "%", "", "ms");
  double ratio[MAX_PAIRS], cpu_ratio[MAX_PAIRS], a_wall[MAX_PAIRS], b_wall[MAX_PAIRS];
  double min_rate = 1e9;
  bool all_sampled = true, checksum_ok = true;
  uint64_t checksum = 0, failed = 0;
  int64_t b_wait_ns = 150000000; /* about what B waits for its burst */
  int preempted = 0, clean = 0;
  double clean_ratio[MAX_PAIRS];
  for (int p = 0; p < pairs; p++) {
    run_t a = {.with_sdk = false, .passes = passes};
    run_t b = {.with_sdk = true, .passes = passes};
    bool b_first = p % 2 == 1;
    if (b_first) {
      run_one(&b);
      a.warmup_ns = b.waited_ns;
      run_one(&a);
    } else {
      a.warmup_ns = b_wait_ns; /* what the last B waited for its burst */
      run_one(&a);
      run_one(&b);
    }
    b_wait_ns = b.waited_ns;
    if (p == 0) checksum = a.checksum;
    checksum_ok &= a.checksum == checksum && b.checksum == checksum;
    ratio[p] = b.wall_s / a.wall_s;
    cpu_ratio[p] = b.cpu_s / a.cpu_s;
    a_wall[p] = a.wall_s;
    b_wall[p] = b.wall_s;
    double rate = (double)b.samples / b.wall_s;
    if (rate < min_rate) min_rate = rate;
    all_sampled &= b.burst_started && b.samples > 0;
    failed += b.failed;
    double a_off = 100 * (1 - a.cpu_s / a.wall_s), b_off = 100 * (1 - b.cpu_s / b.wall_s);
    if (a_off > OFF_CPU_NOTE_PERCENT || b_off > OFF_CPU_NOTE_PERCENT)
      preempted++;
    else
      clean_ratio[clean++] = ratio[p];
    printf("%4d %5s %9.4f %9.4f %8.4f %9.4f %9.4f %8.4f %7.2f %7.2f %10.1f %7.0f\n", p + 1,
           b_first ? "BA" : "AB", a.wall_s, b.wall_s, ratio[p], a.cpu_s, b.cpu_s, cpu_ratio[p],
           a_off, b_off, rate, (double)b.waited_ns / 1e6);
    fflush(stdout);
  }
  double mean_ratio, mean_a, mean_b;
  double sd_ratio = stddev(ratio, pairs, &mean_ratio);
  double sd_a = stddev(a_wall, pairs, &mean_a);
  double sd_b = stddev(b_wall, pairs, &mean_b);
  hr.median_ratio = median(ratio, pairs);
  hr.samples_per_s = min_rate;
  hr.all_sampled = all_sampled;
  hr.disturbed = preempted;
  double sorted[MAX_PAIRS];
  memcpy(sorted, ratio, (size_t)pairs * sizeof *sorted);
  qsort(sorted, (size_t)pairs, sizeof *sorted, cmp_double);
  printf("\nB/A wall: median %.4f, mean %.4f, stddev %.4f, min %.4f, max %.4f\n", hr.median_ratio,
         mean_ratio, sd_ratio, sorted[0], sorted[pairs - 1]);
  printf("B/A worker cpu: median %.4f\n", median(cpu_ratio, pairs));
  if (clean > 0)
    printf("B/A wall over the %d undisturbed pairs (both off the CPU < %d%%): median %.4f\n", clean,
           OFF_CPU_NOTE_PERCENT, median(clean_ratio, clean));
  else
    printf("B/A wall over undisturbed pairs: none (every pair lost > %d%% to other processes)\n",
           OFF_CPU_NOTE_PERCENT);
  printf("A wall: mean %.4f s, stddev %.4f s (%.2f%%); B wall: mean %.4f s, stddev %.4f s "
         "(%.2f%%)\n",
         mean_a, sd_a, 100 * sd_a / mean_a, mean_b, sd_b, 100 * sd_b / mean_b);
  printf("samples during B's timed part: lowest rate %.1f/s; failed samples %llu\n", min_rate,
         (unsigned long long)failed);
  if (preempted)
    printf("note: in %d of %d pairs the worker was off the CPU for more than %d%% of a timed part "
           "(another process took the CPU): the wall ratios are noisier than the sampling's cost; "
           "compare B/A cpu\n",
           preempted, pairs, OFF_CPU_NOTE_PERCENT);
  if (!all_sampled) printf("note: some B run was not sampled (the burst did not start)\n");
  if (!checksum_ok) printf("note: the workload's checksum differed between runs\n");
  printf("\n");
  return hr;
}

/* ------------------------------------------------------------------------ */

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--seconds N] [--pairs N] [--work-ms N]\n"
          "  --seconds N   idle run length (default 10)\n"
          "  --pairs N     A/B pairs of the host workload (default 9, 0..%d; 0 skips it)\n"
          "  --work-ms N   host workload length per run (default 1000)\n",
          argv0, MAX_PAIRS);
  exit(2);
}

static long arg_long(const char *s, long lo, long hi, const char *argv0) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < lo || v > hi) usage(argv0);
  return v;
}

int main(int argc, char **argv) {
  int seconds = 10, pairs = 9, work_ms = 1000;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
      seconds = (int)arg_long(argv[++i], 1, 3600, argv[0]);
    else if (strcmp(argv[i], "--pairs") == 0 && i + 1 < argc)
      pairs = (int)arg_long(argv[++i], 0, MAX_PAIRS, argv[0]);
    else if (strcmp(argv[i], "--work-ms") == 0 && i + 1 < argc)
      work_ms = (int)arg_long(argv[++i], 10, 600000, argv[0]);
    else
      usage(argv[0]);
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  fill_buffer();
  int64_t t0 = now_ns();
  printf("overhead_bench: %ld online CPUs\n\n", sysconf(_SC_NPROCESSORS_ONLN));
  idle_result_t ir = run_idle(seconds);
  host_result_t hr = {0};
  if (pairs > 0) hr = run_host(pairs, work_ms);
  printf("total %.1f s\n", (double)(now_ns() - t0) / 1e9);
  if (!ir.ok) return 1;
  long growth = ir.rss_end - ir.rss_before;
  printf("target: SDK threads' CPU while idle < 0.1%% of one core: %.4f%% %s\n", ir.sdk_cpu_percent,
         ir.sdk_cpu_percent < 0.1 ? "PASS" : "MISS");
  printf("target: RSS growth, before init to end of run, < 4 MiB: %.2f MiB %s\n",
         (double)growth / 1024, growth < 4 * 1024 ? "PASS" : "MISS");
  if (pairs > 0)
    printf("target: host workload median B/A < 1.01 (sampled at %.0f/s; %d of %d pairs "
           "disturbed): %.4f %s\n",
           hr.samples_per_s, hr.disturbed, pairs, hr.median_ratio,
           hr.median_ratio < 1.01 && hr.all_sampled ? "PASS" : "MISS");
  return 0;
}
