/*
 * walk_bench.c - the stack walk the sampler's signal handler runs, against
 * libunwind's unw_backtrace() and a memcpy of the same stack, in the same
 * handler, on the same stack, in the same run. See bench/README.md.
 *
 * For each depth D (8, 32, 128, 512 frames of a recursion, counting the
 * spinning leaf) a thread recurses D frames deep and spins; a CPU-clock
 * timer of that thread (the way CPU profiles sample) interrupts it every
 * 200 us of its CPU. Each signal's handler runs every variant once, in an
 * order that rotates from signal to signal, each timed on the TSC:
 *
 *   memcpy        copy the stack bytes the walk covers, from the
 *                 interrupted sp to the top of the thread's stack: the
 *                 floor of any walk that looks at each frame
 *   cfi           the SDK's walk with its CFI rules (the default)
 *   fp            the SDK's walk by frame pointers
 *   unw_backtrace libunwind's fast trace (its per-address frame cache),
 *                 from the handler through the signal frame
 *
 * and checks that each finds the D chain frames. It prints per depth the
 * median ticks of each, ns per frame, and the ratios cfi / unw_backtrace and
 * cfi / memcpy; it asserts nothing (exit 1 only when it cannot run).
 *
 *   ./build/bench/walk_bench [--samples 2000]
 */
#define UNW_LOCAL_ONLY
#include <errno.h>
#include <libunwind.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sdk/sampler/arch.h"
#include "sdk/sampler/modules.h"
#include "sdk/sampler/sampler.h"
#include "sdk/sampler/unwind_rules.h"

#define MAX_PCS 1024
#define DEFAULT_SAMPLES 2000
#define TIMER_NS 200000

enum { V_MEMCPY, V_CFI, V_FP, V_UNW, V_COUNT };
static const char *const k_names[V_COUNT] = {"memcpy", "cfi", "fp", "unw_backtrace"};
static const int k_depths[] = {8, 32, 128, 512};
#define NDEPTHS (sizeof k_depths / sizeof k_depths[0])

/* ---- what the handler reads and fills -------------------------------- */

static const perf__unwind_map_t *g_unwind;
static uintptr_t g_stack_hi;
static long g_want; /* samples to take at this depth */
static atomic_long g_taken;
static uint64_t *g_ticks[V_COUNT]; /* per sample */
static size_t g_frames[V_COUNT];   /* frames of the last sample */
static size_t g_chain[V_COUNT];    /* the fewest chain frames any sample found */
static uint8_t g_copy[1 << 20];
static atomic_int g_stop;

#if defined(__clang__)
#define CHAIN_FN __attribute__((noinline, used, section("perf_walk_chain")))
#else
#define CHAIN_FN __attribute__((noinline, noclone, used, section("perf_walk_chain")))
#endif
extern const char __start_perf_walk_chain[], __stop_perf_walk_chain[];

static size_t chain_frames(const uintptr_t *pcs, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++)
    if (pcs[i] >= (uintptr_t)__start_perf_walk_chain && pcs[i] < (uintptr_t)__stop_perf_walk_chain)
      c++;
  return c;
}

static void on_timer(int signo, siginfo_t *si, void *ucv) {
  (void)signo, (void)si;
  int saved_errno = errno;
  long k = atomic_load(&g_taken);
  if (k >= g_want) goto out;
  perf__unwind_regs_t regs;
  perf__arch_context_regs(ucv, &regs);
  perf__stack_window_t win = {regs.sp, g_stack_hi, (const uint8_t *)regs.sp};
  for (int j = 0; j < V_COUNT; j++) {
    int v = (int)((k + j) % V_COUNT);
    uintptr_t pcs[MAX_PCS];
    size_t n = 0;
    perf__walk_status_t st;
    uint64_t t0 = perf__arch_cycles();
    switch (v) {
    case V_MEMCPY: {
      size_t len = g_stack_hi - regs.sp;
      memcpy(g_copy, (const void *)regs.sp, len < sizeof g_copy ? len : sizeof g_copy);
      break;
    }
    case V_CFI: n = perf__unwind_walk(g_unwind, 1, regs, win, pcs, MAX_PCS, &st); break;
    case V_FP: n = perf__unwind_walk(g_unwind, 0, regs, win, pcs, MAX_PCS, &st); break;
    case V_UNW: {
      int got = unw_backtrace((void **)pcs, MAX_PCS);
      n = got > 0 ? (size_t)got : 0;
      break;
    }
    }
    g_ticks[v][k] = perf__arch_cycles() - t0;
    if (v != V_MEMCPY) {
      size_t c = chain_frames(pcs, n);
      if (k == 0 || c < g_chain[v]) g_chain[v] = c;
      g_frames[v] = n;
    }
  }
  atomic_store(&g_taken, k + 1);
out:
  errno = saved_errno;
}

/* ---- the target thread ------------------------------------------------ */

static CHAIN_FN unsigned long spin_leaf(void) {
  unsigned long x = 0;
  while (atomic_load(&g_taken) < g_want && !atomic_load_explicit(&g_stop, memory_order_relaxed))
    x++;
  return x;
}

static CHAIN_FN unsigned long recurse(int depth) {
  if (depth <= 1) return spin_leaf();
  unsigned long r = recurse(depth - 1);
  __asm__ volatile("" : "+r"(r) : : "memory");
  return r + (unsigned long)depth;
}

typedef struct {
  int depth;
  int err;
} target_t;

static void *target_main(void *arg) {
  target_t *t = arg;
  pid_t tid = (pid_t)syscall(SYS_gettid);
  uintptr_t lo, hi, sp = (uintptr_t)__builtin_frame_address(0);
  if (perf__sampler_learn_bounds(tid, sp, &lo, &hi) != 0) {
    t->err = ENOENT;
    return NULL;
  }
  g_stack_hi = hi;
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = SIGRTMIN + 3;
  sev._sigev_un._tid = tid;
  timer_t timer;
  if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &timer) != 0) {
    t->err = errno;
    return NULL;
  }
  struct itimerspec its = {{0, TIMER_NS}, {0, TIMER_NS}};
  timer_settime(timer, 0, &its, NULL);
  unsigned long r = recurse(t->depth);
  __asm__ volatile("" : "+r"(r));
  timer_delete(timer);
  return NULL;
}

/* ---- report ------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static double median_ticks(uint64_t *t, size_t n) {
  qsort(t, n, sizeof *t, cmp_u64);
  return n % 2 ? (double)t[n / 2] : ((double)t[n / 2 - 1] + (double)t[n / 2]) / 2.0;
}

static double ticks_per_ns(void) {
  struct timespec a, b, d = {0, 100 * 1000 * 1000};
  clock_gettime(CLOCK_MONOTONIC, &a);
  uint64_t t0 = perf__arch_cycles();
  while (nanosleep(&d, &d) != 0 && errno == EINTR) {
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  uint64_t t1 = perf__arch_cycles();
  double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
  return (double)(t1 - t0) / ns;
}

int main(int argc, char **argv) {
  long samples = DEFAULT_SAMPLES;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--samples") == 0 && i + 1 < argc) {
      samples = strtol(argv[++i], NULL, 10);
      if (samples < 10 || samples > 1000000) samples = 0;
    } else {
      samples = 0;
    }
    if (!samples) {
      fprintf(stderr, "usage: %s [--samples N (10..1000000)]\n", argv[0]);
      return 2;
    }
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_timer;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGRTMIN + 3, &sa, NULL) != 0) {
    perror("sigaction");
    return 1;
  }
  perf__modules_t *mods = perf__modules_acquire();
  if (!mods) {
    fprintf(stderr, "no module snapshot\n");
    return 1;
  }
  perf__modules_compile_all_rules(mods);
  g_unwind = mods->unwind;
  for (int v = 0; v < V_COUNT; v++)
    if (!(g_ticks[v] = calloc((size_t)samples, sizeof(uint64_t)))) return 1;
  double tpn = ticks_per_ns();

  printf("walk_bench: %ld samples per depth, each variant once per signal (CPU-clock timer, "
         "every %d us of the thread's CPU), order rotating; %.3f TSC ticks/ns; %ld online CPUs\n",
         samples, TIMER_NS / 1000, tpn, sysconf(_SC_NPROCESSORS_ONLN));
  printf("\n%6s  %-14s %8s %8s %9s %7s  %9s %9s\n", "depth", "variant", "med ns", "frames",
         "ns/frame", "chain", "this/unw", "this/cpy");
  int ok = 1;
  for (size_t d = 0; d < NDEPTHS; d++) {
    /* The first pass warms libunwind's cache and the rules' pages; the
       second is measured. */
    double med[V_COUNT];
    for (int pass = 0; pass < 2; pass++) {
      g_want = pass ? samples : 50;
      atomic_store(&g_taken, 0);
      target_t t = {k_depths[d], 0};
      pthread_t th;
      if (pthread_create(&th, NULL, target_main, &t) != 0) return 1;
      pthread_join(th, NULL);
      if (t.err) {
        fprintf(stderr, "target thread: %s\n", strerror(t.err));
        return 1;
      }
    }
    for (int v = 0; v < V_COUNT; v++)
      med[v] = median_ticks(g_ticks[v], (size_t)samples) / tpn;
    for (int v = 0; v < V_COUNT; v++) {
      char frames[16] = "-", per[16] = "-", chain[16] = "-", vs_unw[16] = "-", vs_cpy[16] = "-";
      if (v != V_MEMCPY) {
        snprintf(frames, sizeof frames, "%zu", g_frames[v]);
        snprintf(per, sizeof per, "%.1f", g_frames[v] ? med[v] / (double)g_frames[v] : 0.0);
        snprintf(chain, sizeof chain, "%zu", g_chain[v]);
        if (g_chain[v] < (size_t)k_depths[d]) ok = 0;
      }
      if (v != V_UNW) snprintf(vs_unw, sizeof vs_unw, "%.2f", med[v] / med[V_UNW]);
      if (v != V_MEMCPY) snprintf(vs_cpy, sizeof vs_cpy, "%.2f", med[v] / med[V_MEMCPY]);
      printf("%6d  %-14s %8.0f %8s %9s %7s  %9s %9s\n", k_depths[d], k_names[v], med[v], frames,
             per, chain, vs_unw, vs_cpy);
    }
    printf("target: cfi walk <= unw_backtrace at %d frames: %.2fx %s\n", k_depths[d],
           med[V_CFI] / med[V_UNW], med[V_CFI] <= med[V_UNW] ? "PASS" : "MISS");
  }
  printf("\nmed ns = median time in the handler per variant; frames = frames of the last sample; "
         "chain = the fewest of the recursion's frames any sample held; this/unw, this/cpy = the "
         "row's median over unw_backtrace's and memcpy's at the same depth.\n");
  if (!ok) printf("note: a walk missed chain frames (see the chain column)\n");
  perf__modules_release(mods);
  return 0;
}
