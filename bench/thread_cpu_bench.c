/*
 * thread_cpu_bench.c - what reading one thread's CPU time costs: the
 * kernel's per-thread CPU clock (perf__thread_cpu_ns), against opening,
 * reading and parsing /proc/self/task/TID/stat (utime + stime) as other
 * tools do; and what one perf__thread_set_read costs over all the threads
 * when nothing changed (and when it has to list them). See bench/README.md.
 *
 * 50 threads (--threads) block on a condition variable; --busy K more spin.
 * The main thread measures, in interleaved rounds (the two per-thread
 * methods alternate which goes first), every call with CLOCK_MONOTONIC, and
 * also each whole pass over the threads (no per-call timer in it). Each
 * round also times one set read with no change, one forced to list (the
 * bench pokes set->nlink), and the two things a read does besides the
 * thread clocks: stat("/proc/self/task") and the process CPU clock.
 * It prints figures measured in one run; it asserts nothing and exits 0
 * whether or not the target (< 1 us per thread) is met (non-zero only when
 * the bench itself cannot run).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/threads.h"
#include "sdk/monitors/thread_cpu.h"

#define DEFAULT_THREADS 50
#define DEFAULT_ROUNDS 200
#define WARMUP_ROUNDS 10

enum { R_TIMER, R_CLOCK, R_PROC, R_SET_READ, R_SET_LIST, R_STAT_DIR, R_PROCESS, R_COUNT };
static const char *const k_rows[R_COUNT] = {"timer",        "clock (ours)",  "/proc stat",
                                            "set_read",     "set_read+list", "stat taskdir",
                                            "process clock"};

typedef struct {
  double *us; /* one value per measured call */
  size_t n;
  double *batch_us; /* per-thread average of each whole pass (per-thread rows) */
  size_t n_batch;
  size_t errors;
} series_t;

/* ---- the threads ---------------------------------------------------------- */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static bool g_quit;
static atomic_int g_stop_spin;
static atomic_int g_started;
static pid_t *g_tids;

typedef struct {
  int index;
  bool busy;
} worker_arg_t;

static void *worker_main(void *p) {
  worker_arg_t *a = p;
  g_tids[a->index] = perf__gettid();
  atomic_fetch_add(&g_started, 1);
  if (a->busy) {
    while (!atomic_load_explicit(&g_stop_spin, memory_order_relaxed)) {
    }
    return NULL;
  }
  pthread_mutex_lock(&g_mu);
  while (!g_quit)
    pthread_cond_wait(&g_cv, &g_mu);
  pthread_mutex_unlock(&g_mu);
  return NULL;
}

/* ---- the methods ---------------------------------------------------------- */

static inline int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t g_ns_per_tick;

/* utime + stime (fields 14 and 15) of /proc/self/task/TID/stat in ns, or -1.
   The fields are counted after the last ')': the name may hold anything. */
static int64_t proc_stat_cpu_ns(pid_t tid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  if (!p) return -1;
  p++;
  /* Fields 3 (state) to 13 (cmajflt), then utime and stime. */
  for (int field = 3; field <= 13; field++) {
    p = strchr(p + 1, ' ');
    if (!p) return -1;
  }
  char *end;
  unsigned long long utime = strtoull(p, &end, 10);
  if (end == p) return -1;
  p = end;
  unsigned long long stime = strtoull(p, &end, 10);
  if (end == p) return -1;
  return (int64_t)(utime + stime) * g_ns_per_tick;
}

static long stat_task_dir(void) {
  struct stat st;
  return stat("/proc/self/task", &st) == 0 ? (long)st.st_nlink : -1;
}

/* ---- measuring ------------------------------------------------------------ */

static volatile int64_t g_sink;

static void pass_per_thread(int row, series_t *s, const pid_t *tids, size_t n, bool record) {
  for (size_t i = 0; i < n; i++) {
    int64_t t0 = mono_ns();
    int64_t v = row == R_CLOCK ? perf__thread_cpu_ns(tids[i]) : proc_stat_cpu_ns(tids[i]);
    int64_t t1 = mono_ns();
    g_sink = v;
    if (!record) continue;
    if (v < 0) s->errors++;
    s->us[s->n++] = (double)(t1 - t0) / 1e3;
  }
  /* The same pass without the per-call timer reads. */
  int64_t batch_start = mono_ns();
  for (size_t i = 0; i < n; i++)
    g_sink = row == R_CLOCK ? perf__thread_cpu_ns(tids[i]) : proc_stat_cpu_ns(tids[i]);
  int64_t batch_end = mono_ns();
  if (record) s->batch_us[s->n_batch++] = (double)(batch_end - batch_start) / 1e3 / (double)n;
}

static void time_call(series_t *s, int64_t (*fn)(void *), void *arg, bool record) {
  int64_t t0 = mono_ns();
  int64_t v = fn(arg);
  int64_t t1 = mono_ns();
  if (!record) return;
  if (v < 0) s->errors++;
  s->us[s->n++] = (double)(t1 - t0) / 1e3;
}

static int64_t call_nothing(void *arg) {
  (void)arg;
  return 0;
}

static int64_t call_set_read(void *arg) {
  return perf__thread_set_read(arg);
}

static int64_t call_set_read_listing(void *arg) {
  perf__thread_set_t *set = arg;
  set->nlink = -1; /* poke the internal state: the link count "moved" */
  return perf__thread_set_read(set);
}

static int64_t call_process_clock(void *arg) {
  (void)arg;
  return perf__process_cpu_ns();
}

static int64_t call_stat_dir(void *arg) {
  (void)arg;
  return stat_task_dir();
}

/* ---- reporting ------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array. */
static double pct(const double *sorted, size_t n, double p) {
  if (n == 0) return 0.0;
  size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999);
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  return sorted[rank - 1];
}

static const char *verdict(int ok) {
  return ok ? "PASS" : "MISS";
}

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--threads N] [--busy K] [--rounds R]\n"
          "  --threads N  blocked threads (default %d)\n"
          "  --busy K     spinning threads on top (default 0)\n"
          "  --rounds R   measured rounds (default %d; each reads every thread once per "
          "method)\n",
          argv0, DEFAULT_THREADS, DEFAULT_ROUNDS);
}

static long parse_arg(const char *s, long lo, long hi) {
  char *end;
  long v = strtol(s, &end, 10);
  return (*s && !*end && v >= lo && v <= hi) ? v : -1;
}

int main(int argc, char **argv) {
  long idle = DEFAULT_THREADS, busy = 0, rounds = DEFAULT_ROUNDS;
  for (int i = 1; i < argc; i++) {
    long *target = NULL, lo = 0, hi = 0;
    if (strcmp(argv[i], "--threads") == 0)
      target = &idle, lo = 1, hi = 10000;
    else if (strcmp(argv[i], "--busy") == 0)
      target = &busy, lo = 0, hi = 64;
    else if (strcmp(argv[i], "--rounds") == 0)
      target = &rounds, lo = 1, hi = 1000000;
    if (!target || i + 1 >= argc || (*target = parse_arg(argv[++i], lo, hi)) < 0) {
      usage(argv[0]);
      return 2;
    }
  }
  long tick_hz = sysconf(_SC_CLK_TCK);
  if (tick_hz <= 0) {
    fprintf(stderr, "sysconf(_SC_CLK_TCK) failed\n");
    return 1;
  }
  g_ns_per_tick = 1000000000 / tick_hz;

  size_t n = (size_t)(idle + busy);
  g_tids = calloc(n, sizeof *g_tids);
  pthread_t *threads = calloc(n, sizeof *threads);
  worker_arg_t *args = calloc(n, sizeof *args);
  series_t series[R_COUNT];
  memset(series, 0, sizeof series);
  size_t per_thread_calls = (size_t)rounds * n;
  for (int r = 0; r < R_COUNT; r++) {
    bool per_thread = r == R_CLOCK || r == R_PROC;
    series[r].us = calloc(per_thread ? per_thread_calls : (size_t)rounds, sizeof(double));
    series[r].batch_us = calloc((size_t)rounds, sizeof(double));
    if (!series[r].us || !series[r].batch_us) {
      fprintf(stderr, "out of memory\n");
      return 1;
    }
  }
  if (!g_tids || !threads || !args) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < n; i++) {
    args[i].index = (int)i;
    args[i].busy = i >= (size_t)idle;
    if (pthread_create(&threads[i], NULL, worker_main, &args[i]) != 0) {
      fprintf(stderr, "pthread_create failed after %zu threads\n", i);
      return 1;
    }
  }
  while (atomic_load(&g_started) < (int)n)
    sched_yield();

  perf__thread_set_t set, listing_set;
  perf__thread_set_init(&set, 4096);
  perf__thread_set_init(&listing_set, 4096);
  if (perf__thread_set_read(&set) != PERF_OK || perf__thread_set_read(&listing_set) != PERF_OK) {
    fprintf(stderr, "perf__thread_set_read failed\n");
    return 1;
  }
  unsigned enumerations_before = set.enumerations;

  int64_t start = mono_ns();
  for (long round = -WARMUP_ROUNDS; round < rounds; round++) {
    bool record = round >= 0;
    if (round % 2 == 0) {
      pass_per_thread(R_CLOCK, &series[R_CLOCK], g_tids, n, record);
      pass_per_thread(R_PROC, &series[R_PROC], g_tids, n, record);
    } else {
      pass_per_thread(R_PROC, &series[R_PROC], g_tids, n, record);
      pass_per_thread(R_CLOCK, &series[R_CLOCK], g_tids, n, record);
    }
    time_call(&series[R_TIMER], call_nothing, NULL, record);
    time_call(&series[R_SET_READ], call_set_read, &set, record);
    time_call(&series[R_SET_LIST], call_set_read_listing, &listing_set, record);
    time_call(&series[R_STAT_DIR], call_stat_dir, NULL, record);
    time_call(&series[R_PROCESS], call_process_clock, NULL, record);
  }
  double elapsed_s = (double)(mono_ns() - start) / 1e9;
  unsigned set_listings = set.enumerations - enumerations_before;
  size_t set_count = set.count;

  atomic_store(&g_stop_spin, 1);
  pthread_mutex_lock(&g_mu);
  g_quit = true;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
  for (size_t i = 0; i < n; i++)
    pthread_join(threads[i], NULL);

  double med[R_COUNT], p99[R_COUNT], per_thread[R_COUNT];
  for (int r = 0; r < R_COUNT; r++) {
    series_t *s = &series[r];
    qsort(s->us, s->n, sizeof(double), cmp_double);
    qsort(s->batch_us, s->n_batch, sizeof(double), cmp_double);
    med[r] = pct(s->us, s->n, 50);
    p99[r] = pct(s->us, s->n, 99);
    if (r == R_CLOCK || r == R_PROC)
      per_thread[r] = pct(s->batch_us, s->n_batch, 50);
    else if (r == R_SET_READ || r == R_SET_LIST)
      per_thread[r] = med[r] / (double)set_count;
    else
      per_thread[r] = -1;
  }

  printf("thread_cpu_bench: %ld blocked + %ld spinning threads (+ main); %ld rounds after %d "
         "warm-up; %.1f s; %ld online CPUs\n",
         idle, busy, rounds, WARMUP_ROUNDS, elapsed_s, sysconf(_SC_NPROCESSORS_ONLN));
  printf("\n%-14s %8s %8s %10s %9s %7s %6s\n", "row", "med", "p99", "per-thread", "x clock",
         "calls", "errors");
  printf("%-14s %8s %8s %10s %9s %7s %6s\n", "", "us", "us", "us", "", "", "");
  for (int r = 0; r < R_COUNT; r++) {
    char pt[32] = "-", ratio[32] = "-";
    if (per_thread[r] >= 0) snprintf(pt, sizeof pt, "%.3f", per_thread[r]);
    if (r == R_PROC) snprintf(ratio, sizeof ratio, "%.1f", med[R_PROC] / med[R_CLOCK]);
    printf("%-14s %8.3f %8.3f %10s %9s %7zu %6zu\n", k_rows[r], med[r], p99[r], pt, ratio,
           series[r].n, series[r].errors);
  }
  printf(
      "\ntimer = two CLOCK_MONOTONIC reads, included in every med/p99; clock and /proc stat: "
      "med/p99 per call (one thread), per-thread = median over rounds of a whole pass over "
      "the %zu threads without per-call timers / %zu; set_read: one "
      "perf__thread_set_read over the %zu threads of the set (per-thread = med / %zu), with no "
      "change (+list: forced to list /proc/self/task); stat taskdir = stat(\"/proc/self/task\"), "
      "the change check of every read; process clock = perf__process_cpu_ns(), twice per read.\n",
      n, n, set_count, set_count);
  printf("set_read with no change listed the threads %u times in %ld reads\n\n", set_listings,
         rounds + WARMUP_ROUNDS);
  printf("target: clock < 1 us per thread (median per call): %.3f us %s\n", med[R_CLOCK],
         verdict(med[R_CLOCK] < 1.0));
  printf("target: set_read with no change < 1 us per thread: %.3f us %s\n", per_thread[R_SET_READ],
         verdict(per_thread[R_SET_READ] < 1.0));
  printf("ratio: /proc stat / clock, median per call: %.1fx; p99: %.1fx; whole pass: %.1fx\n",
         med[R_PROC] / med[R_CLOCK], p99[R_PROC] / p99[R_CLOCK],
         per_thread[R_PROC] / per_thread[R_CLOCK]);

  perf__thread_set_free(&set);
  perf__thread_set_free(&listing_set);
  for (int r = 0; r < R_COUNT; r++) {
    free(series[r].us);
    free(series[r].batch_us);
  }
  free(g_tids);
  free(threads);
  free(args);
  return 0;
}
