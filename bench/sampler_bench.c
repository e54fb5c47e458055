/*
 * sampler_bench.c - how much a stack capture costs, compared with the bare
 * signal round trip it is built on and with the libunwind-in-the-handler
 * approach other SDKs use. See bench/README.md.
 *
 * One busy target thread recurses 32 frames deep (BENCH_DEPTH, counting the
 * spinning leaf) and spins there, never blocking. The main thread measures
 * round trips to it (request sent -> answer back, CLOCK_MONOTONIC) and the
 * time the target spends inside the handler (TSC, from handler entry to just
 * before it wakes the requester) for these variants:
 *
 *   floor       our own RT signal, empty handler: atomic store + FUTEX_WAKE;
 *               the requester sends with tgkill and waits with FUTEX_WAIT.
 *   floor (spin) the same, but the requester spins on the store.
 *   cfi         perf_backtrace_thread, PERF_UNWIND_CFI (the default)
 *   fp          perf_backtrace_thread, PERF_UNWIND_FRAME_POINTER
 *   stack_copy  perf_backtrace_thread, PERF_UNWIND_STACK_COPY (32 KiB)
 *   libunwind   another RT signal whose handler runs unw_init_local2(
 *               UNW_INIT_SIGNAL_FRAME) + unw_step/unw_get_reg into a
 *               preallocated array, then the same store + FUTEX_WAKE.
 *
 * Variants are measured in interleaved rounds so machine noise spreads over
 * all of them. It prints ratios measured in one run; it asserts nothing and
 * exits 0 whether or not the targets are met (non-zero only when the bench
 * itself cannot run).
 */
#define UNW_LOCAL_ONLY
#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/sampler/sampler.h"
#include "test_util.h" /* tests/support: wait_in_syscall */

/* Frames of the target's chain: BENCH_DEPTH - 1 recursion frames + the leaf. */
#define BENCH_DEPTH 32
#define MAX_PCS 256
#define DEFAULT_ITERATIONS 5000
#define ROUNDS 10
#define WARMUP 200

enum { V_FLOOR, V_FLOOR_SPIN, V_CFI, V_FP, V_STACK_COPY, V_LIBUNWIND, V_COUNT };
static const char *const k_names[V_COUNT] = {"floor", "floor (spin)", "cfi (default)",
                                             "fp",    "stack_copy",   "libunwind"};

typedef struct {
  double *rt_us;      /* round trip per iteration */
  double *handler_us; /* time inside the handler per iteration */
  size_t n;
  size_t min_depth, max_depth; /* frames captured */
  size_t min_chain, max_chain; /* of those, frames in the target's chain */
  size_t errors;
  int last_error;
} series_t;

/* ---- the target thread ------------------------------------------------ */

static atomic_int g_stop;
static atomic_int g_target_ready;
/* Bumped by every turn of the target's loop: the requester waits for it to
   move before the next request, so that each request finds the target back
   in its own code rather than still returning from the previous handler. */
static _Alignas(64) _Atomic unsigned long g_spins;
static pid_t g_target_tid;

/* The chain's code lives in its own section so captures can be checked
   frame by frame: the linker defines __start_/__stop_ for it. */
#if defined(__clang__)
#define CHAIN_FN __attribute__((noinline, used, section("perf_bench_chain")))
#else
#define CHAIN_FN __attribute__((noinline, noclone, used, section("perf_bench_chain")))
#endif
extern const char __start_perf_bench_chain[], __stop_perf_bench_chain[];

static CHAIN_FN unsigned long spin_leaf(void) {
  atomic_store(&g_target_ready, 1);
  unsigned long x = 0;
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
    atomic_store_explicit(&g_spins, ++x, memory_order_relaxed); /* busy: never blocks */
  }
  return x;
}

static CHAIN_FN unsigned long recurse(int depth) {
  if (depth <= 1) return spin_leaf();
  unsigned long r = recurse(depth - 1);
  /* Use the result after the call: no tail call, no loop conversion. */
  __asm__ volatile("" : "+r"(r) : : "memory");
  return r + (unsigned long)depth;
}

static void *target_main(void *arg) {
  (void)arg;
  g_target_tid = (pid_t)syscall(SYS_gettid);
  unsigned long r = recurse(BENCH_DEPTH - 1);
  __asm__ volatile("" : "+r"(r));
  return (void *)(uintptr_t)r;
}

/* ---- clocks -------------------------------------------------------------- */

static double g_ticks_per_ns;

static inline uint64_t rdtsc(void) {
  return __builtin_ia32_rdtsc();
}

static inline int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void calibrate_tsc(void) {
  int64_t n0 = mono_ns();
  uint64_t t0 = rdtsc();
  struct timespec d = {0, 100 * 1000 * 1000};
  while (nanosleep(&d, &d) != 0 && errno == EINTR) {
  }
  int64_t n1 = mono_ns();
  uint64_t t1 = rdtsc();
  g_ticks_per_ns = (double)(t1 - t0) / (double)(n1 - n0);
}

static inline double ticks_to_us(uint64_t ticks) {
  return (double)ticks / g_ticks_per_ns / 1000.0;
}

/* ---- the floor and libunwind handlers ---------------------------------- */

static _Atomic uint32_t g_done; /* 0 pending, 1 answered */
static uint64_t g_handler_ticks;
static uintptr_t g_unw_pcs[MAX_PCS];
static size_t g_unw_count;

static void wake_requester(void) {
  atomic_store(&g_done, 1);
  syscall(SYS_futex, &g_done, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void floor_handler(int signo, siginfo_t *si, void *ucv) {
  (void)signo, (void)si, (void)ucv;
  uint64_t t0 = rdtsc();
  int saved_errno = errno;
  g_handler_ticks = rdtsc() - t0;
  wake_requester();
  errno = saved_errno;
}

static void libunwind_handler(int signo, siginfo_t *si, void *ucv) {
  (void)signo, (void)si;
  uint64_t t0 = rdtsc();
  int saved_errno = errno;
  unw_cursor_t cursor;
  size_t n = 0;
  /* On x86_64 unw_context_t is a ucontext_t: the interrupted context. */
  if (unw_init_local2(&cursor, (unw_context_t *)ucv, UNW_INIT_SIGNAL_FRAME) == 0) {
    do {
      unw_word_t ip;
      if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) break;
      g_unw_pcs[n++] = (uintptr_t)ip;
    } while (n < MAX_PCS && unw_step(&cursor) > 0);
  }
  g_unw_count = n;
  g_handler_ticks = rdtsc() - t0;
  wake_requester();
  errno = saved_errno;
}

/* One round trip with our own signal; returns 0 or -errno. `spin`: the
   requester spins on the answer instead of sleeping on the futex. */
static int signal_round_trip(int signo, int spin) {
  atomic_store(&g_done, 0);
  if (syscall(SYS_tgkill, getpid(), g_target_tid, signo) != 0) return -errno;
  int64_t give_up = mono_ns() + 1000000000LL;
  while (spin && atomic_load(&g_done) == 0)
    if (mono_ns() > give_up) return -ETIMEDOUT;
  while (atomic_load(&g_done) == 0) {
    struct timespec to = {1, 0};
    if (syscall(SYS_futex, &g_done, FUTEX_WAIT_PRIVATE, 0, &to, NULL, 0) != 0 && errno == ETIMEDOUT)
      return -ETIMEDOUT;
  }
  return 0;
}

static int free_signal(int start, int avoid1, int avoid2) {
  for (int s = start; s <= SIGRTMAX; s++) {
    struct sigaction old;
    if (s == avoid1 || s == avoid2) continue;
    if (sigaction(s, NULL, &old) == 0 && old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO))
      return s;
  }
  return 0;
}

static int install(int signo, void (*fn)(int, siginfo_t *, void *)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = fn;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  return sigaction(signo, &sa, NULL);
}

/* ---- measurement ---------------------------------------------------------- */

static size_t chain_frames(const uintptr_t *pcs, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++)
    if (pcs[i] >= (uintptr_t)__start_perf_bench_chain &&
        pcs[i] < (uintptr_t)__stop_perf_bench_chain)
      c++;
  return c;
}

static int set_mode(perf_unwind_mode_t mode) {
  perf_sampler_options_t o;
  perf_sampler_options_init(&o);
  o.unwind_mode = mode;
  o.timeout_ms = 1000;
  return perf_sampler_configure(&o);
}

static int g_floor_sig, g_unw_sig;

/* Wait (untimed) until the target is back in its loop. */
static void wait_target_running(void) {
  unsigned long v0 = atomic_load_explicit(&g_spins, memory_order_relaxed);
  while (atomic_load_explicit(&g_spins, memory_order_relaxed) == v0)
    __builtin_ia32_pause();
}

/* One iteration of variant v; `record` adds it to s. */
static void run_one(int v, series_t *s, int record) {
  wait_target_running();
  uintptr_t pcs[MAX_PCS];
  size_t n = 0;
  int err;
  int64_t t0 = mono_ns(), t1;
  uint64_t ticks;
  const uintptr_t *got = pcs;
  if (v == V_FLOOR || v == V_FLOOR_SPIN || v == V_LIBUNWIND) {
    err = signal_round_trip(v == V_LIBUNWIND ? g_unw_sig : g_floor_sig, v == V_FLOOR_SPIN);
    t1 = mono_ns();
    ticks = g_handler_ticks;
    if (v == V_LIBUNWIND) {
      got = g_unw_pcs;
      n = g_unw_count;
    }
  } else {
    err = perf_backtrace_thread(g_target_tid, pcs, MAX_PCS, &n);
    t1 = mono_ns();
    ticks = perf__sampler_last_handler_cycles();
  }
  if (!record) return;
  if (err) {
    s->errors++;
    s->last_error = err;
    return;
  }
  s->rt_us[s->n] = (double)(t1 - t0) / 1000.0;
  s->handler_us[s->n] = ticks_to_us(ticks);
  s->n++;
  if (v != V_FLOOR && v != V_FLOOR_SPIN) {
    size_t chain = chain_frames(got, n);
    if (s->n == 1 || n < s->min_depth) s->min_depth = n;
    if (n > s->max_depth) s->max_depth = n;
    if (s->n == 1 || chain < s->min_chain) s->min_chain = chain;
    if (chain > s->max_chain) s->max_chain = chain;
  }
}

static int prepare(int v) {
  switch (v) {
  case V_CFI: return set_mode(PERF_UNWIND_CFI);
  case V_FP: return set_mode(PERF_UNWIND_FRAME_POINTER);
  case V_STACK_COPY: return set_mode(PERF_UNWIND_STACK_COPY);
  default: return 0;
  }
}

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

typedef struct {
  double rt_med, rt_p99, h_med, h_p99;
} summary_t;

static summary_t summarize(series_t *s) {
  summary_t r = {0, 0, 0, 0};
  qsort(s->rt_us, s->n, sizeof(double), cmp_double);
  qsort(s->handler_us, s->n, sizeof(double), cmp_double);
  r.rt_med = pct(s->rt_us, s->n, 50);
  r.rt_p99 = pct(s->rt_us, s->n, 99);
  r.h_med = pct(s->handler_us, s->n, 50);
  r.h_p99 = pct(s->handler_us, s->n, 99);
  return r;
}

static const char *verdict(int ok) {
  return ok ? "PASS" : "MISS";
}

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--iterations N] [--show] | --all-threads N | --snapshot N [--yield]\n"
          "  --iterations N   measured captures per variant (default %d, at least %d)\n"
          "  --show           first print one symbolized capture of the target per mode\n"
          "  --all-threads N  instead: time perf_backtrace_all_threads_text over N idle threads\n"
          "  --snapshot N     instead: N spinning threads captured one at a time and at once\n"
          "                   (--yield: they call sched_yield as they spin)\n",
          argv0, DEFAULT_ITERATIONS, ROUNDS);
}

static pthread_mutex_t g_idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_idle_cond = PTHREAD_COND_INITIALIZER;
static int g_idle_stop;

/* ---- a blocked target, and what the sampler reads about a thread ------- */

static double median_of(double *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  return pct(v, n, 50);
}

/* Median cost of reading a /proc/self/task/TID file whole: opened, read
   and closed each time (`kept` 0), or pread from offset 0 on a descriptor
   kept open (`kept` 1, as the sampler reads them; the fstat check before
   each use included). */
static double proc_read_us(pid_t tid, const char *name, int kept) {
  enum { N = 2000 };
  static double t[N];
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/self/task/%d/%s", (int)tid, name);
  int fd = kept ? open(path, O_RDONLY | O_CLOEXEC) : -1;
  for (int i = 0; i < N; i++) {
    int64_t t0 = mono_ns();
    if (kept) {
      struct stat st;
      if (fstat(fd, &st) == 0 && pread(fd, buf, sizeof buf - 1, 0) < 0) break;
    } else {
      int f = open(path, O_RDONLY | O_CLOEXEC);
      if (f >= 0 && read(f, buf, sizeof buf - 1) >= 0) close(f);
    }
    t[i] = (double)(mono_ns() - t0) / 1000.0;
  }
  if (fd >= 0) close(fd);
  return median_of(t, N);
}

static void *blocked_main(void *arg) {
  (void)arg;
  g_target_tid = (pid_t)syscall(SYS_gettid); /* not the busy one: see blocked_report */
  pthread_mutex_lock(&g_idle_lock);
  while (!g_idle_stop)
    pthread_cond_wait(&g_idle_cond, &g_idle_lock);
  pthread_mutex_unlock(&g_idle_lock);
  return NULL;
}

static _Atomic pid_t g_reader_tid;
static double g_fd_kind_us[2000]; /* statx of the reader's descriptor, each time */

static void *reader_main(void *arg) {
  char c;
  atomic_store(&g_reader_tid, (pid_t)syscall(SYS_gettid));
  return read(*(int *)arg, &c, 1) == 1 ? NULL : arg;
}

/* Median capture of a thread blocked in read() on a pipe: the blocked path
   plus the thread state's descriptor kind (one statx of /proc/self/fd/N
   asking the type, sample_state.c). */
static double blocked_read_us(void) {
  enum { N = 2000 };
  static double t[N];
  int fds[2];
  pthread_t th;
  if (pipe(fds) != 0) return -1;
  atomic_store(&g_reader_tid, 0);
  if (pthread_create(&th, NULL, reader_main, &fds[0]) != 0) return -1;
  while (!atomic_load(&g_reader_tid))
    usleep(1000);
  wait_in_syscall(atomic_load(&g_reader_tid), SYS_read, 10000); /* blocked, not on its way */
  size_t n = 0, frames = 0;
  for (int i = 0; i < N; i++) {
    uintptr_t pcs[MAX_PCS];
    int64_t t0 = mono_ns();
    if (perf_backtrace_thread(atomic_load(&g_reader_tid), pcs, MAX_PCS, &frames) == PERF_OK)
      t[n++] = (double)(mono_ns() - t0) / 1000.0;
  }
  for (int i = 0; i < N; i++) {
    char path[48];
    struct statx sx;
    snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
    int64_t t0 = mono_ns();
    if (statx(AT_FDCWD, path, AT_STATX_DONT_SYNC, STATX_TYPE, &sx) == 0)
      g_fd_kind_us[i] = (double)(mono_ns() - t0) / 1e3;
  }
  if (write(fds[1], "x", 1) != 1) return -1;
  pthread_join(th, NULL);
  close(fds[0]);
  close(fds[1]);
  return n ? median_of(t, n) : -1;
}

/* Captures of a thread blocked in pthread_cond_wait (no signal: /proc and
   a copy of its stack), and the /proc reads behind every capture. */
static void blocked_report(pid_t busy_tid) {
  enum { N = 2000 };
  static double t[N];
  pid_t saved = g_target_tid;
  g_target_tid = 0;
  pthread_t th;
  if (pthread_create(&th, NULL, blocked_main, NULL) != 0) return;
  while (!g_target_tid)
    usleep(1000);
  wait_in_syscall(g_target_tid, SYS_futex, 10000); /* in pthread_cond_wait, not on its way */
  pid_t tid = g_target_tid;
  size_t frames = 0, n = 0;
  for (int i = 0; i < N; i++) {
    uintptr_t pcs[MAX_PCS];
    int64_t t0 = mono_ns();
    int err = perf_backtrace_thread(tid, pcs, MAX_PCS, &frames);
    if (!err) t[n++] = (double)(mono_ns() - t0) / 1000.0;
  }
  printf(
      "blocked target (pthread_cond_wait, no signal): capture med %.2f us, %zu frames, %zu of %d "
      "ok\n",
      median_of(t, n), frames, n, N);
  double futex_us = pct(t, n, 50), read_us = blocked_read_us();
  printf("blocked target in read() on a pipe (thread state io, + the descriptor's kind): capture "
         "med %.2f us, %.2fx the futex wait's; statx of /proc/self/fd/N alone med %.2f us\n",
         read_us, read_us / futex_us, median_of(g_fd_kind_us, 2000));
  printf("/proc reads (med), open+read+close / pread on a kept descriptor: syscall %.2f / %.2f us "
         "blocked, %.2f / %.2f us running; status (State, SigBlk) %.2f / %.2f us running\n",
         proc_read_us(tid, "syscall", 0), proc_read_us(tid, "syscall", 1),
         proc_read_us(busy_tid, "syscall", 0), proc_read_us(busy_tid, "syscall", 1),
         proc_read_us(busy_tid, "status", 0), proc_read_us(busy_tid, "status", 1));
  pthread_mutex_lock(&g_idle_lock);
  g_idle_stop = 1;
  pthread_cond_broadcast(&g_idle_cond);
  pthread_mutex_unlock(&g_idle_lock);
  pthread_join(th, NULL);
  g_idle_stop = 0;
  g_target_tid = saved;
}

/* ---- --all-threads: one capture of every thread of a big process ------- */

static void *idle_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_idle_lock);
  while (!g_idle_stop)
    pthread_cond_wait(&g_idle_cond, &g_idle_lock);
  pthread_mutex_unlock(&g_idle_lock);
  return NULL;
}

/* N threads parked in pthread_cond_wait (a thread pool at rest), then
   perf_backtrace_all_threads_text three times: the first learns every
   thread's stack bounds, the others find them cached. */
static int all_threads(long n) {
  pthread_t *th = calloc((size_t)n, sizeof *th);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  long made = 0;
  while (th && made < n && pthread_create(&th[made], &attr, idle_main, NULL) == 0)
    made++;
  if (made < n) {
    fprintf(stderr, "only %ld of %ld threads could be made\n", made, n);
    return 1;
  }
  usleep(200000); /* all parked */
  char *warm = NULL;
  perf_backtrace_thread_text(0, &warm); /* rules and names of the modules */
  perf_free(warm);
  printf("all_threads: %ld idle threads (+ main), perf_backtrace_all_threads_text\n", n);
  for (int round = 0; round < 3; round++) {
    char *text = NULL;
    int64_t t0 = mono_ns();
    int err = perf_backtrace_all_threads_text(&text);
    int64_t t1 = mono_ns();
    size_t shown = 0;
    for (const char *p = text; p && (p = strstr(p, "idle_main")) != NULL; p++)
      shown++;
    printf("  round %d: %s, %.1f ms, %.1f us per thread, %zu threads shown in idle_main\n",
           round + 1, err ? perf_strerror(err) : "ok", (double)(t1 - t0) / 1e6,
           (double)(t1 - t0) / 1e3 / (double)(n + 1), shown);
    perf_free(text);
  }
  pthread_mutex_lock(&g_idle_lock);
  g_idle_stop = 1;
  pthread_cond_broadcast(&g_idle_cond);
  pthread_mutex_unlock(&g_idle_lock);
  for (long i = 0; i < made; i++)
    pthread_join(th[i], NULL);
  free(th);
  return 0;
}

/* ---- --snapshot: N running threads, captured one after another and at once */

static atomic_int g_snap_stop;
static int g_snap_yield;
static int g_snap_last_err;

static CHAIN_FN unsigned long snap_spin(void) {
  unsigned long x = 0;
  while (!atomic_load_explicit(&g_snap_stop, memory_order_relaxed)) {
    x = x * 2862933555777941757UL + 3;
    if (g_snap_yield) sched_yield(); /* lets the other threads on a CPU at once */
  }
  return x;
}

static void *snap_main(void *arg) {
  *(pid_t *)arg = (pid_t)syscall(SYS_gettid);
  unsigned long r = snap_spin();
  __asm__ volatile("" : "+r"(r));
  return NULL;
}

typedef struct {
  double spread_us, total_us;
  size_t ok, shots;
} snap_result_t;

/* One snapshot of the n threads with `in_flight` requests outstanding:
   the spread of the stacks' read times (first to last) and the call's
   time. */
static snap_result_t snapshot_once(perf__modules_t *mods, const pid_t *tids, size_t n,
                                   size_t in_flight, perf__sampler_shot_t *shots, uintptr_t *pcs) {
  for (size_t i = 0; i < n; i++)
    shots[i] = (perf__sampler_shot_t){.tid = tids[i], .pcs = pcs + i * MAX_PCS, .max = MAX_PCS};
  int64_t t0 = mono_ns();
  perf__sampler_capture_threads(mods, shots, n, in_flight);
  int64_t t1 = mono_ns();
  snap_result_t r = {0, (double)(t1 - t0) / 1000.0, 0, n};
  int64_t lo = INT64_MAX, hi = 0;
  for (size_t i = 0; i < n; i++) {
    if (shots[i].err != PERF_OK || chain_frames(shots[i].pcs, shots[i].count) == 0) {
      g_snap_last_err = shots[i].err ? shots[i].err : -1;
      continue;
    }
    r.ok++;
    if (shots[i].taken_ns < lo) lo = shots[i].taken_ns;
    if (shots[i].taken_ns > hi) hi = shots[i].taken_ns;
  }
  if (r.ok > 1) r.spread_us = (double)(hi - lo) / 1000.0;
  return r;
}

/* N threads spinning in their own code (never blocking: each is signalled),
   then `rounds` snapshots one thread at a time (in flight 1: one capture
   after another) and at once (in flight N, at most
   PERF__SAMPLER_IN_FLIGHT_MAX), interleaved. Prints the median spread
   (first to last stack read) and call time of each, and their ratios. */
static int snapshot_bench(long n, long rounds) {
  pthread_t *th = calloc((size_t)n, sizeof *th);
  pid_t *tids = calloc((size_t)n, sizeof *tids);
  perf__sampler_shot_t *shots = calloc((size_t)n, sizeof *shots);
  uintptr_t *pcs = calloc((size_t)n * MAX_PCS, sizeof *pcs);
  double *spread[2], *total[2];
  for (int k = 0; k < 2; k++) {
    spread[k] = calloc((size_t)rounds, sizeof(double));
    total[k] = calloc((size_t)rounds, sizeof(double));
  }
  if (!th || !tids || !shots || !pcs || !spread[1] || !total[1]) return 1;
  for (long i = 0; i < n; i++)
    if (pthread_create(&th[i], NULL, snap_main, &tids[i]) != 0) return 1;
  for (long i = 0; i < n; i++)
    while (!tids[i])
      usleep(1000);
  perf_sampler_options_t o;
  perf_sampler_options_init(&o);
  o.timeout_ms = 1000;
  perf_sampler_configure(&o);
  perf__modules_t *mods = perf__modules_acquire();
  size_t in_flight[2] = {1, (size_t)n < PERF__SAMPLER_IN_FLIGHT_MAX ? (size_t)n
                                                                    : PERF__SAMPLER_IN_FLIGHT_MAX};
  for (int k = 0; k < 2; k++) /* warm-up: bounds and rules */
    for (int i = 0; i < 10; i++)
      snapshot_once(mods, tids, (size_t)n, in_flight[k], shots, pcs);
  size_t ok[2] = {0, 0}, all[2] = {0, 0}, kept[2] = {0, 0};
  for (long r = 0; r < rounds; r++)
    for (int k = 0; k < 2; k++) {
      snap_result_t res = snapshot_once(mods, tids, (size_t)n, in_flight[k], shots, pcs);
      ok[k] += res.ok;
      all[k] += res.shots;
      if (res.ok > 1) {
        spread[k][kept[k]] = res.spread_us;
        total[k][kept[k]++] = res.total_us;
      }
    }
  perf__modules_release(mods);
  atomic_store(&g_snap_stop, 1);
  for (long i = 0; i < n; i++)
    pthread_join(th[i], NULL);
  double s_med[2], t_med[2];
  for (int k = 0; k < 2; k++) {
    s_med[k] = median_of(spread[k], kept[k]);
    t_med[k] = median_of(total[k], kept[k]);
  }
  printf("snapshot: %ld spinning threads, %ld rounds (interleaved), %ld online CPUs\n", n, rounds,
         sysconf(_SC_NPROCESSORS_ONLN));
  printf("%-22s %12s %12s %12s\n", "", "spread med", "call med", "stacks ok");
  for (int k = 0; k < 2; k++)
    printf("%-13s in flight %-2zu %9.1f us %9.1f us %6zu/%zu\n", k ? "at once," : "serial,",
           in_flight[k], s_med[k], t_med[k], ok[k], all[k]);
  printf("at once / serial: spread %.2fx, call %.2fx\n", s_med[0] > 0 ? s_med[1] / s_med[0] : 0.0,
         t_med[0] > 0 ? t_med[1] / t_med[0] : 0.0);
  if (g_snap_last_err)
    printf("a stack was missing or not in the thread's code; last: %s\n",
           g_snap_last_err == -1 ? "no frame of snap_spin" : perf_strerror(g_snap_last_err));
  for (int k = 0; k < 2; k++) {
    free(spread[k]);
    free(total[k]);
  }
  free(th);
  free(tids);
  free(shots);
  free(pcs);
  return 0;
}

/* One capture of the target per SDK mode as text, and libunwind's pcs
   named through the SDK's symbolizer, to see which frames a mode loses. */
static void show_captures(void) {
  static const perf_unwind_mode_t modes[] = {PERF_UNWIND_CFI, PERF_UNWIND_FRAME_POINTER,
                                             PERF_UNWIND_STACK_COPY};
  static const char *const names[] = {"cfi", "fp", "stack_copy"};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    char *text = NULL;
    int err = set_mode(modes[i]);
    if (!err) err = perf_backtrace_thread_text(g_target_tid, &text);
    printf("--- %s ---\n%s\n", names[i], err ? perf_strerror(err) : text);
    perf_free(text);
  }
  printf("--- libunwind ---\n");
  if (signal_round_trip(g_unw_sig, 0) != 0) {
    printf("no answer\n\n");
    return;
  }
  for (size_t i = 0; i < g_unw_count; i++)
    printf("%zu 0x%lx\n", i, (unsigned long)g_unw_pcs[i]);
  printf("\n");
}

int main(int argc, char **argv) {
  long iterations = DEFAULT_ITERATIONS;
  int show = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--show") == 0) {
      show = 1;
    } else if (strcmp(argv[i], "--all-threads") == 0 && i + 1 < argc) {
      long n = strtol(argv[++i], NULL, 10);
      if (n < 1 || n > 100000) {
        usage(argv[0]);
        return 2;
      }
      return all_threads(n);
    } else if (strcmp(argv[i], "--snapshot") == 0 && i + 1 < argc) {
      long n = strtol(argv[++i], NULL, 10);
      if (n < 2 || n > 1000) {
        usage(argv[0]);
        return 2;
      }
      g_snap_yield = i + 1 < argc && strcmp(argv[i + 1], "--yield") == 0;
      return snapshot_bench(n, 200);
    } else if (strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      char *end;
      iterations = strtol(argv[++i], &end, 10);
      if (*end || iterations < ROUNDS || iterations > 10000000) {
        usage(argv[0]);
        return 2;
      }
    } else {
      usage(argv[0]);
      return 2;
    }
  }
  /* The bench picks the modes itself; environment overrides would silently
     measure something else. */
  static const char *const k_env[] = {"PERF_SDK_UNWIND_MODE", "PERF_SDK_STACK_COPY_BYTES"};
  for (size_t i = 0; i < sizeof k_env / sizeof k_env[0]; i++)
    if (getenv(k_env[i])) {
      fprintf(stderr, "note: ignoring %s for the bench\n", k_env[i]);
      unsetenv(k_env[i]);
    }

  /* The sampler's signal first (it takes the highest free one), then ours. */
  int sdk_sig = perf_sampler_signal();
  if (sdk_sig < 0) {
    fprintf(stderr, "perf_sampler_signal: %s\n", perf_strerror(sdk_sig));
    return 1;
  }
  g_floor_sig = free_signal(SIGRTMIN + 2, sdk_sig, 0);
  g_unw_sig = g_floor_sig ? free_signal(g_floor_sig + 1, sdk_sig, 0) : 0;
  if (!g_floor_sig || !g_unw_sig || install(g_floor_sig, floor_handler) != 0 ||
      install(g_unw_sig, libunwind_handler) != 0) {
    fprintf(stderr, "no two free real-time signals for the floor and libunwind handlers\n");
    return 1;
  }

  calibrate_tsc();

  pthread_t th;
  if (pthread_create(&th, NULL, target_main, NULL) != 0) {
    fprintf(stderr, "pthread_create failed\n");
    return 1;
  }
  while (!atomic_load(&g_target_ready))
    sched_yield();
  if (show) show_captures();

  series_t series[V_COUNT];
  memset(series, 0, sizeof series);
  for (int v = 0; v < V_COUNT; v++) {
    series[v].rt_us = calloc((size_t)iterations, sizeof(double));
    series[v].handler_us = calloc((size_t)iterations, sizeof(double));
    if (!series[v].rt_us || !series[v].handler_us) {
      fprintf(stderr, "out of memory\n");
      return 1;
    }
  }

  int64_t start = mono_ns();
  /* Warm-up: the sampler learns the thread's stack bounds and builds its
     rules, libdwfl loads the modules, libunwind fills its caches. */
  for (int v = 0; v < V_COUNT; v++) {
    int err = prepare(v);
    if (err) {
      fprintf(stderr, "configure %s: %s\n", k_names[v], perf_strerror(err));
      return 1;
    }
    for (int i = 0; i < WARMUP; i++)
      run_one(v, &series[v], 0);
  }
  /* Interleaved rounds: each variant gets iterations/ROUNDS per round. */
  for (int round = 0; round < ROUNDS; round++) {
    long per = iterations / ROUNDS + (round < iterations % ROUNDS ? 1 : 0);
    for (int v = 0; v < V_COUNT; v++) {
      int err = prepare(v);
      if (err) {
        fprintf(stderr, "configure %s: %s\n", k_names[v], perf_strerror(err));
        return 1;
      }
      for (long i = 0; i < per; i++)
        run_one(v, &series[v], 1);
    }
  }
  double elapsed_s = (double)(mono_ns() - start) / 1e9;
  prepare(V_CFI);
  blocked_report(g_target_tid);

  atomic_store(&g_stop, 1);
  pthread_join(th, NULL);

  summary_t sum[V_COUNT];
  for (int v = 0; v < V_COUNT; v++)
    sum[v] = summarize(&series[v]);

  printf("sampler_bench: busy target thread %d frames deep; %ld iterations per variant in %d "
         "interleaved rounds after %d warm-up; %.1f s\n",
         BENCH_DEPTH, iterations, ROUNDS, WARMUP, elapsed_s);
  printf("signals: sampler %d, floor %d, libunwind %d; TSC %.3f ticks/ns; %ld online CPUs\n",
         sdk_sig, g_floor_sig, g_unw_sig, g_ticks_per_ns, sysconf(_SC_NPROCESSORS_ONLN));
  printf("\n%-14s %9s %9s %8s %8s  %10s %10s %8s  %6s %6s %6s\n", "variant", "rt med", "rt p99",
         "rt/floor", "rt/spin", "in-hdl med", "in-hdl p99", "unw/this", "depth", "chain", "errors");
  printf("%-14s %9s %9s %8s %8s  %10s %10s %8s  %6s %6s %6s\n", "", "us", "us", "x", "x", "us",
         "us", "x", "", "", "");
  for (int v = 0; v < V_COUNT; v++) {
    series_t *s = &series[v];
    char depth[32] = "-", chain[32] = "-", unw[32] = "-";
    if (v != V_FLOOR && v != V_FLOOR_SPIN && s->n) {
      if (s->min_depth == s->max_depth)
        snprintf(depth, sizeof depth, "%zu", s->min_depth);
      else
        snprintf(depth, sizeof depth, "%zu-%zu", s->min_depth, s->max_depth);
      if (s->min_chain == s->max_chain)
        snprintf(chain, sizeof chain, "%zu", s->min_chain);
      else
        snprintf(chain, sizeof chain, "%zu-%zu", s->min_chain, s->max_chain);
    }
    if (v >= V_CFI && v != V_LIBUNWIND && sum[v].h_med > 0)
      snprintf(unw, sizeof unw, "%.1f", sum[V_LIBUNWIND].h_med / sum[v].h_med);
    printf("%-14s %9.2f %9.2f %8.2f %8.2f  %10.3f %10.3f %8s  %6s %6s %6zu\n", k_names[v],
           sum[v].rt_med, sum[v].rt_p99, sum[v].rt_med / sum[V_FLOOR].rt_med,
           sum[v].rt_med / sum[V_FLOOR_SPIN].rt_med, sum[v].h_med, sum[v].h_p99, unw, depth, chain,
           s->errors);
    if (s->errors)
      printf("  %s: %zu captures failed, last: %s\n", k_names[v], s->errors,
             s->last_error < 0 && v >= V_CFI && v != V_LIBUNWIND ? perf_strerror(s->last_error)
                                                                 : strerror(-s->last_error));
  }
  printf("\nrt = round trip seen by the requester; rt/floor, rt/spin = its median over the floor's "
         "with a sleeping (futex) and a spinning requester; in-hdl = time the target spent in the "
         "handler "
         "(entry to just before the wake); depth = frames captured (min-max); chain = of those, "
         "frames of the target's %d-frame recursion; unw/this = libunwind in-handler median / "
         "this row's.\n\n",
         BENCH_DEPTH);

  for (int v = V_CFI; v < V_COUNT; v++)
    if (series[v].n && series[v].min_chain < BENCH_DEPTH)
      printf("note: %s found only %zu..%zu of the chain's %d frames\n", k_names[v],
             series[v].min_chain, series[v].max_chain, BENCH_DEPTH);

  double rt_ratio = sum[V_CFI].rt_med / sum[V_FLOOR].rt_med;
  int correct = series[V_CFI].n && series[V_CFI].min_chain >= BENCH_DEPTH && !series[V_CFI].errors;
  printf("target: default capture stacks correct (all %d chain frames): %zu..%zu %s\n", BENCH_DEPTH,
         series[V_CFI].min_chain, series[V_CFI].max_chain, verdict(correct));
  printf("target: default round trip <= 1.2x floor (sleeping requester): %.2fx %s\n", rt_ratio,
         verdict(rt_ratio <= 1.2));
  double spin_ratio = sum[V_CFI].rt_med / sum[V_FLOOR_SPIN].rt_med;
  printf("target: default round trip <= 1.3x floor (spinning requester): %.2fx %s\n", spin_ratio,
         verdict(spin_ratio <= 1.3));
  printf("target: default in-handler < 1 us (32 frames): %.3f us %s\n", sum[V_CFI].h_med,
         verdict(sum[V_CFI].h_med < 1.0));
  printf("target: stack_copy in-handler < 3 us (32 KiB copy): %.3f us %s\n",
         sum[V_STACK_COPY].h_med, verdict(sum[V_STACK_COPY].h_med < 3.0));
  double unw_ratio = sum[V_CFI].h_med > 0 ? sum[V_LIBUNWIND].h_med / sum[V_CFI].h_med : 0;
  printf("target: libunwind in-handler >= 10x default's: %.1fx %s\n", unw_ratio,
         verdict(unw_ratio >= 10.0));

  for (int v = 0; v < V_COUNT; v++) {
    free(series[v].rt_us);
    free(series[v].handler_us);
  }
  return 0;
}
