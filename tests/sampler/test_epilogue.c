/*
 * test_epilogue.c - stacks sampled in function epilogues keep their callers.
 * A thread calls two assembly functions that spend most of their time in
 * their epilogues (long_epilogue.S: pops, `leave`, `ret`, with GCC's CFI,
 * which still names rbp's slot after rbp was popped) in a loop, and the
 * real sampler (signal + walk in the handler) captures it thousands of
 * times: every sample must hold the whole chain down to the thread's
 * outermost frame, and the walk must say it is complete. eu-stack's view of
 * the same thread confirms the callers, address for address.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "eu_stack.h"
#include "perf_sdk.h"
#include "sdk/sampler/modules.h"
#include "sdk/sampler/sampler.h"

#define MIN_SAMPLES 5000
#define MIN_RESTORED 500 /* samples after rbp's restore, in each function */
#define MAX_SAMPLES 200000
#define MAX_DEPTH 64
#define DEADLINE_S 60

void long_epilogue_leave(unsigned long *counter);
void long_epilogue_pops(unsigned long *counter);
extern const char long_epilogue_leave_tail[], long_epilogue_leave_restored[];
extern const char long_epilogue_pops_tail[], long_epilogue_pops_restored[];

static atomic_int g_stop;
static atomic_int g_tid;
static unsigned long g_counter;

/* The chain every sample must show below the epilogue functions. */
CHAIN void epilogue_loop(void) {
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
    long_epilogue_leave(&g_counter);
    long_epilogue_pops(&g_counter);
  }
}
CHAIN void epilogue_middle(void) {
  epilogue_loop();
  __asm__ volatile("" ::: "memory"); /* not a tail call */
}
CHAIN void epilogue_outer(void) {
  epilogue_middle();
  __asm__ volatile("" ::: "memory");
}
static void *epilogue_thread(void *arg) {
  (void)arg;
  atomic_store(&g_tid, (int)syscall(SYS_gettid));
  epilogue_outer();
  return NULL;
}

/* Where a sample's frame 0 was. */
typedef enum {
  LEAVE_BODY,
  LEAVE_TAIL,     /* the epilogue before `leave` */
  LEAVE_RESTORED, /* after `leave`: the row names rbp's slot, now below sp */
  POPS_BODY,
  POPS_TAIL,
  POPS_RESTORED, /* after `pop %rbp` */
  IN_LOOP,
  ELSEWHERE
} where_t;

static bool in_function(uintptr_t pc, const void *fn) {
  perf__modules_t *mods = perf__modules_acquire();
  perf__frame_info_t a, b;
  perf__modules_symbolize(mods, pc, false, &a);
  perf__modules_symbolize(mods, (uintptr_t)fn, false, &b);
  const char *sa = perf__frame_symbol(&a), *sb = perf__frame_symbol(&b);
  bool same = sa && sb && strcmp(sa, sb) == 0;
  perf__modules_release(mods);
  return same;
}

static where_t where_is(uintptr_t pc) {
  if (in_function(pc, (const void *)long_epilogue_leave)) {
    if (pc >= (uintptr_t)long_epilogue_leave_restored) return LEAVE_RESTORED;
    return pc >= (uintptr_t)long_epilogue_leave_tail ? LEAVE_TAIL : LEAVE_BODY;
  }
  if (in_function(pc, (const void *)long_epilogue_pops)) {
    if (pc >= (uintptr_t)long_epilogue_pops_restored) return POPS_RESTORED;
    return pc >= (uintptr_t)long_epilogue_pops_tail ? POPS_TAIL : POPS_BODY;
  }
  return in_function(pc, (const void *)epilogue_loop) ? IN_LOOP : ELSEWHERE;
}

/* Index of the epilogue_loop frame: 0, or 1 below an epilogue function. */
static size_t loop_frame(const uintptr_t *pcs, size_t n) {
  where_t w = where_is(pcs[0]);
  CHECKF(w != ELSEWHERE, "sample stopped outside the loop: pc %#lx", (unsigned long)pcs[0]);
  size_t k = w == IN_LOOP ? 0 : 1;
  CHECKF(k < n && (k == 0 || in_function(pcs[1] - 1, (const void *)epilogue_loop)),
         "frame 1 is not epilogue_loop (frame 0 %#lx, %zu frames)", (unsigned long)pcs[0], n);
  return k;
}

static void print_stack(const char *title, const uintptr_t *pcs, size_t n) {
  perf__modules_t *mods = perf__modules_acquire();
  fprintf(stderr, "%s:\n", title);
  for (size_t i = 0; i < n; i++) {
    perf__frame_info_t fi;
    perf__modules_symbolize(mods, pcs[i], i > 0, &fi);
    fprintf(stderr, "  #%zu %#lx %s!%s\n", i, (unsigned long)pcs[i], fi.module,
            perf__frame_symbol(&fi) ? perf__frame_symbol(&fi) : "??");
  }
  perf__modules_release(mods);
}

/* The callers of epilogue_loop in pcs[0..n) (after its own frame) are
   callers[0..ncallers); the first sample defines them. */
static bool same_callers(const uintptr_t *pcs, size_t n, uintptr_t *callers, size_t *ncallers) {
  size_t k = loop_frame(pcs, n);
  if (*ncallers == 0) {
    *ncallers = n - k - 1;
    memcpy(callers, pcs + k + 1, *ncallers * sizeof *pcs);
  }
  return n - k - 1 == *ncallers && memcmp(callers, pcs + k + 1, *ncallers * sizeof *pcs) == 0;
}

/* One sample of tid, which must be complete and have the expected callers.
   False when the machine was too loaded to answer in time. */
static bool sample(pid_t tid, uintptr_t *callers, size_t *ncallers, size_t *where) {
  uintptr_t pcs[MAX_DEPTH];
  size_t n = 0;
  perf__walk_status_t status;
  perf__modules_t *mods = perf__modules_acquire();
  int err = perf__sampler_capture_status(mods, tid, pcs, MAX_DEPTH, &n, &status);
  perf__modules_release(mods);
  if (err == PERF_E_TIMEOUT) return false;
  CHECKF(err == PERF_OK, "capture: %s", perf_strerror(err));
  if (status != PERF__WALK_COMPLETE) print_stack("incomplete sample", pcs, n);
  CHECKF(status == PERF__WALK_COMPLETE, "walk ended: %s", perf__walk_status_name(status));
  bool same = same_callers(pcs, n, callers, ncallers);
  if (!same) print_stack("sample with other callers", pcs, n);
  CHECKF(same, "the callers of epilogue_loop differ from the first sample's");
  where[where_is(pcs[0])]++;
  return true;
}

/* Thousands of samples, at least MIN_RESTORED of them in each function
   after rbp was restored: every one has epilogue_loop's callers exactly as
   the first one has them, down to the outermost frame (clone3). */
static void case_sampled_epilogues(void) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, epilogue_thread, NULL) == 0);
  while (atomic_load(&g_tid) == 0)
    sched_yield();
  pid_t tid = atomic_load(&g_tid);
  uintptr_t callers[MAX_DEPTH];
  size_t ncallers = 0, taken = 0, timeouts = 0, where[ELSEWHERE + 1] = {0};
  time_t deadline = time(NULL) + DEADLINE_S;
  while (taken < MIN_SAMPLES || where[LEAVE_RESTORED] < MIN_RESTORED ||
         where[POPS_RESTORED] < MIN_RESTORED) {
    CHECKF(time(NULL) < deadline && taken < MAX_SAMPLES,
           "%zu samples in %d s, %zu and %zu after rbp's restore", taken, DEADLINE_S,
           where[LEAVE_RESTORED], where[POPS_RESTORED]);
    if (sample(tid, callers, &ncallers, where))
      taken++;
    else
      timeouts++; /* the machine is loaded: ask again */
  }
  fprintf(stderr,
          "%zu samples (%zu timeouts asked again), all complete with the same %zu callers of "
          "epilogue_loop. Frame 0 in long_epilogue_leave: body %zu, epilogue %zu, after leave "
          "%zu; in long_epilogue_pops: body %zu, epilogue %zu, after pop %%rbp %zu; in the loop "
          "%zu\n",
          taken, timeouts, ncallers, where[LEAVE_BODY], where[LEAVE_TAIL], where[LEAVE_RESTORED],
          where[POPS_BODY], where[POPS_TAIL], where[POPS_RESTORED], where[IN_LOOP]);

  /* eu-stack (libdwfl over ptrace) sees the same callers. */
  for (int i = 0; i < 3; i++) {
    uintptr_t theirs[MAX_DEPTH];
    size_t n = eu_stack_pcs(eu_stack_report(), tid, theirs, MAX_DEPTH);
    CHECKF(n > 0, "eu-stack did not report thread %d", (int)tid);
    bool same = same_callers(theirs, n, callers, &ncallers);
    if (!same) {
      print_stack("eu-stack", theirs, n);
      print_stack("our callers of epilogue_loop", callers, ncallers);
    }
    CHECKF(same, "eu-stack's callers of epilogue_loop differ from ours");
  }
  atomic_store(&g_stop, 1);
  pthread_join(t, NULL);
}

static const test_case_t g_cases[] = {TEST_CASE(sampled_epilogues)};

int main(int argc, char **argv) {
  return test_main(g_cases, sizeof g_cases / sizeof g_cases[0], argc, argv);
}
