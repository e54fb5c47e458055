/*
 * test_arch_chains.c - the sampler's signal-handler walk against an
 * independent unwinder on the same state, on whatever architecture the
 * program is built for (x86_64 natively, aarch64 under qemu-user: the
 * scripts/test_aarch64.sh stage).
 *
 * A thread runs a known call chain; the test's own signal handler copies
 * the interrupted registers (sdk/sampler/arch.h) and the thread's used
 * stack. Off the handler, the copy is unwound twice: by the sampler's walk
 * (perf__unwind_walk over the compiled rules, as in the handler) and by
 * libdwfl over the modules' full call-frame information
 * (perf__dwfl_unwind). The two must agree frame by frame, and the walk's
 * frames must carry the chain's function names in order. Chains: a busy
 * leaf, a read blocked on a pipe, deep recursion, many samples of a loop of
 * short calls (prologues and epilogues), an application signal handler
 * interrupted (the signal frame) and code without CFI (frame records only).
 * Each case prints "agreement: <chains> chains, <frames> frames compared,
 * <agreed> agreed". Built at -O0 and -O2 (tests/cross, tests/sampler),
 * on aarch64 with -mbranch-protection=standard (signed return addresses).
 * Along the walk, where a frame of this program returns into another, the
 * call before its return address must name the callee's first byte
 * (perf__arch_call_target against the rules' function starts: what a
 * blocked thread's frame-pointer search checks its candidates with).
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "perf_sdk.h"
#include "sdk/sampler/arch.h"
#include "sdk/sampler/dwfl_unwind.h"
#include "sdk/sampler/modules.h"
#include "sdk/sampler/unwind_rules.h"
#include "test_util.h"

#define MAX_FRAMES 512
#define STACK_COPY (256u * 1024u)
#define DEEP 200
#define EPILOGUE_SAMPLES 100
#define DEADLINE_MS 60000 /* qemu-user is slow: generous */
#define SAMPLE_SIGNAL SIGUSR2
#define APP_SIGNAL SIGUSR1

unsigned long nocfi_outer(atomic_int *stop, unsigned long x); /* arch_chains_nocfi.c */

/* What the handler copied. */
static struct {
  perf__unwind_regs_t regs;
  uint64_t dwarf[PERF__ARCH_MAX_DWARF_REGS];
  uintptr_t sp;
  size_t len;
  atomic_int done;
} g_cap;
static uint8_t g_stack[STACK_COPY];

static atomic_int g_stop;
static atomic_int g_ready;
static uintptr_t g_stack_hi; /* the target thread's stack top */

static unsigned long g_chains, g_frames, g_agreed, g_calls;

static void sample_handler(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)si;
  perf__arch_context_regs(uc, &g_cap.regs);
  perf__arch_context_dwarf_regs(uc, g_cap.dwarf);
  g_cap.sp = g_cap.regs.sp;
  size_t len = g_stack_hi > g_cap.sp ? g_stack_hi - g_cap.sp : 0;
  g_cap.len = len < STACK_COPY ? len : STACK_COPY;
  memcpy(g_stack, (const void *)g_cap.sp, g_cap.len);
  atomic_store(&g_cap.done, 1);
}

static void wait_flag(atomic_int *flag, const char *what) {
  long long end = now_ms() + DEADLINE_MS;
  while (!atomic_load(flag)) {
    CHECKF(now_ms() < end, "timed out waiting for %s", what);
    usleep(1000);
  }
}

/* Called first on the target thread: where its stack ends. */
static void note_stack(void) {
  pthread_attr_t a;
  void *lo;
  size_t size;
  CHECK(pthread_getattr_np(pthread_self(), &a) == 0);
  CHECK(pthread_attr_getstack(&a, &lo, &size) == 0);
  pthread_attr_destroy(&a);
  g_stack_hi = (uintptr_t)lo + size;
  atomic_store(&g_ready, 1);
}

/* ---- the chains ---- */

static CHAIN unsigned long chain_spin_leaf(unsigned long x) {
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed))
    x = x * 2862933555777941757ul + 3037000493ul;
  return x;
}
static CHAIN unsigned long chain_spin_middle(unsigned long x) {
  return chain_spin_leaf(x + 1) + 1;
}
static void *spin_body(void *arg) {
  (void)arg;
  note_stack();
  return (void *)chain_spin_middle(7);
}

static int g_pipe[2];
static CHAIN long chain_read_inner(int fd) {
  char c;
  return read(fd, &c, 1);
}
static CHAIN long chain_read_middle(int fd) {
  return chain_read_inner(fd) + 1;
}
static void *read_body(void *arg) {
  (void)arg;
  note_stack();
  return (void *)chain_read_middle(g_pipe[0]);
}

static CHAIN unsigned long chain_recurse(int depth, unsigned long x) {
  if (depth == 0) return chain_spin_leaf(x);
  return chain_recurse(depth - 1, x * 3) + 1;
}
static void *deep_body(void *arg) {
  (void)arg;
  note_stack();
  return (void *)chain_recurse(DEEP, 1);
}

static CHAIN unsigned long short_leaf(unsigned long x) {
  return x * 31 + 7;
}
static CHAIN unsigned long short_call(unsigned long x) {
  unsigned long v[4] = {x, x + 1, x + 2, x + 3};
  __asm__ volatile("" ::"r"(v) : "memory");
  return short_leaf(v[x & 3]) ^ v[(x + 1) & 3];
}
static void *epilogue_body(void *arg) {
  (void)arg;
  note_stack();
  unsigned long x = 1;
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed))
    x = short_call(x);
  return (void *)x;
}

static CHAIN void chain_in_handler_leaf(void) {
  chain_spin_leaf(5);
}
static CHAIN void app_handler(int sig) {
  (void)sig;
  chain_in_handler_leaf();
}
static CHAIN unsigned long chain_interrupted(unsigned long x) {
  pthread_kill(pthread_self(), APP_SIGNAL);
  return x + 1;
}
static void *interrupted_body(void *arg) {
  (void)arg;
  note_stack();
  return (void *)chain_interrupted(3);
}

static void *nocfi_body(void *arg) {
  (void)arg;
  note_stack();
  return (void *)nocfi_outer(&g_stop, 9);
}

/* ---- capture and comparison ---- */

static void install_handlers(void) {
  struct sigaction sa = {.sa_sigaction = sample_handler, .sa_flags = SA_SIGINFO | SA_RESTART};
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SAMPLE_SIGNAL, &sa, NULL) == 0);
  struct sigaction app = {.sa_handler = app_handler, .sa_flags = SA_RESTART};
  sigemptyset(&app.sa_mask);
  CHECK(sigaction(APP_SIGNAL, &app, NULL) == 0);
}

static pthread_t start(void *(*body)(void *)) {
  atomic_store(&g_stop, 0);
  atomic_store(&g_ready, 0);
  install_handlers();
  pthread_t t;
  CHECK(pthread_create(&t, NULL, body, NULL) == 0);
  wait_flag(&g_ready, "the target thread");
  return t;
}

static void stop(pthread_t t) {
  atomic_store(&g_stop, 1);
  if (g_pipe[1] > 0) CHECK(write(g_pipe[1], "x", 1) == 1);
  CHECK(pthread_join(t, NULL) == 0);
}

typedef struct {
  uintptr_t pcs[MAX_FRAMES];
  size_t n;
  perf__walk_status_t status;
  const char *names[MAX_FRAMES];
} chain_t;

static bool has_name(const chain_t *walk, const char *name) {
  for (size_t k = 0; k < walk->n; k++)
    if (walk->names[k] && strcmp(walk->names[k], name) == 0) return true;
  return false;
}

/* Whether pc (a lookup address) lies in this program, where a rule holds,
   and the first byte of its function (the rules' function starts). */
static bool program_function(const perf__modules_t *mods, uintptr_t pc, uintptr_t *start) {
  const perf__module_t *m = perf__module_map_find(mods->map, pc);
  if (!m || !m->executable) return false;
  const perf__unwind_table_t *t = mods->unwind->tables[m - mods->map->modules];
  CHECK(t != NULL && t != &perf__unwind_table_pending);
  const perf__unwind_row_t *row = perf__unwind_table_find(t, pc - m->bias);
  uint32_t s;
  if (!row || row->cfa_kind == PERF__CFA_UNKNOWN ||
      !perf__unwind_table_function(t, pc - m->bias, &s))
    return false; /* code without CFI (arch_chains_nocfi.c) */
  *start = m->bias + s;
  return true;
}

/* Where a frame of this program returns into another of its functions
   (the chains' calls are direct: -fno-optimize-sibling-calls, noinline),
   the call before the return address names the callee's first byte.
   Returns how many such calls were checked. */
static unsigned long check_direct_calls(const perf__modules_t *mods, const chain_t *walk) {
  unsigned long checked = 0;
  for (size_t k = 1; k < walk->n; k++) {
    uintptr_t callee, caller, target;
    if (!program_function(mods, k == 1 ? walk->pcs[0] : walk->pcs[k - 1] - 1, &callee) ||
        !program_function(mods, walk->pcs[k] - 1, &caller))
      continue;
    uint8_t code[PERF__ARCH_RETURN_SITE_BYTES];
    memcpy(code, (const void *)(walk->pcs[k] - 8), sizeof code);
    CHECKF(perf__arch_return_site(code), "frame %zu (%s): no call before %#lx", k,
           walk->names[k] ? walk->names[k] : "?", (unsigned long)walk->pcs[k]);
    CHECKF(perf__arch_call_target(code, walk->pcs[k], &target) && target == callee,
           "frame %zu (%s): the call before %#lx is not a direct call of %s at %#lx", k,
           walk->names[k] ? walk->names[k] : "?", (unsigned long)walk->pcs[k],
           walk->names[k - 1] ? walk->names[k - 1] : "?", (unsigned long)callee);
    checked++;
  }
  return checked;
}

/* One sample of thread t: the walk (*walk, with names) and libdwfl's
   frames compared, the agreement tallied. With `at`: only when the walk
   names it (the thread is where the case wants it; on its way there it
   may stop in a PLT stub, which has no CFI on aarch64 and where libdwfl
   0.188 ends the chain); returns whether it was compared. */
static bool sample(pthread_t t, chain_t *walk, const char *at) {
  atomic_store(&g_cap.done, 0);
  CHECK(pthread_kill(t, SAMPLE_SIGNAL) == 0);
  wait_flag(&g_cap.done, "the sample");
  perf__modules_t *mods = perf__modules_acquire();
  CHECK(mods != NULL);
  perf__modules_compile_all_rules(mods);
  perf__stack_window_t w = {.lo = g_cap.sp, .hi = g_cap.sp + g_cap.len, .base = g_stack};
  walk->n = perf__unwind_walk(mods->unwind, 1, g_cap.regs, w, walk->pcs, MAX_FRAMES, &walk->status);
  for (size_t i = 0; i < walk->n; i++) {
    perf__frame_info_t fi;
    perf__modules_symbolize(mods, walk->pcs[i], i > 0, &fi);
    walk->names[i] = perf__frame_symbol(&fi);
  }
  if (at && !has_name(walk, at)) {
    perf__modules_release(mods);
    return false;
  }
  g_calls += check_direct_calls(mods, walk);
  static chain_t ref;
  memset(&ref, 0, sizeof ref);
  size_t walk_compared = walk->n; /* frames of the walk compared */
  perf__dwfl_unwinder_t *u = perf__modules_dwfl_unwinder(mods);
  CHECK(u != NULL);
  const uint8_t *ref_stack = g_stack;
  uint64_t ref_regs[PERF__ARCH_MAX_DWARF_REGS];
  memcpy(ref_regs, g_cap.dwarf, sizeof ref_regs);
#ifdef ARCH_CHAINS_PAC
  /* elfutils 0.188's libdwfl looks up a signed return address as is and
     loses the chain there: it gets a copy of the state with every word's
     pointer-authentication code stripped (xpaclri leaves unsigned words,
     pointers and small or negative numbers alike, as they are), the walk
     the original, signed state. */
  static uint8_t stripped[STACK_COPY];
  for (size_t off = 0; off + 8 <= g_cap.len; off += 8) {
    uint64_t word;
    memcpy(&word, g_stack + off, 8);
    word = perf__arch_strip_ra(word);
    memcpy(stripped + off, &word, 8);
  }
  ref_stack = stripped;
  for (unsigned r = 0; r < perf__arch.dwarf_nregs; r++)
    ref_regs[r] = perf__arch_strip_ra(ref_regs[r]);
#endif
  int rc = perf__dwfl_unwind(u, ref_regs, g_cap.sp, ref_stack, g_cap.len, ref.pcs, MAX_FRAMES,
                             &ref.n, &ref.status);
  CHECKF(rc == 0 || rc == PERF_E_TRUNCATED, "perf__dwfl_unwind: %d", rc);
  /* A signal trampoline without CFI (qemu-user's page; the kernel's vDSO
     has CFI): libdwfl 0.188 does not recognise it, so the frames past it
     are compared by name only (expect_names). */
  for (size_t i = 1; i < walk_compared; i++)
    if (perf__arch_sigreturn_at(walk->pcs[i])) {
      walk_compared = i + 1;
      if (ref.n > walk_compared) ref.n = walk_compared;
      break;
    }
  size_t n = walk_compared < ref.n ? walk_compared : ref.n, agreed = 0;
  while (agreed < n && walk->pcs[agreed] == perf__arch_strip_ra(ref.pcs[agreed]))
    agreed++;
  g_chains++;
  g_frames += walk_compared > ref.n ? walk_compared : ref.n;
  g_agreed += agreed;
  if (agreed != walk_compared || agreed != ref.n) {
    fprintf(stderr, "disagreement after %zu frames (walk %zu frames, %s; libdwfl %zu, %s):\n",
            agreed, walk->n, perf__walk_status_name(walk->status), ref.n,
            perf__walk_status_name(ref.status));
    for (size_t i = 0; i < walk->n || i < ref.n; i++)
      fprintf(stderr, "  #%zu walk %#lx %s | libdwfl %#lx\n", i,
              i < walk->n ? (unsigned long)walk->pcs[i] : 0ul,
              i < walk->n && walk->names[i] ? walk->names[i] : "?",
              i < ref.n ? (unsigned long)ref.pcs[i] : 0ul);
  }
  perf__modules_release(mods);
  return true;
}

/* The walk names `chain` (innermost first; NULL: any one frame) in a row,
   from its first frame named chain[0]. */
static void expect_names(const chain_t *walk, const char *const *chain, size_t n) {
  size_t i = 0;
  while (i < walk->n && !(walk->names[i] && strcmp(walk->names[i], chain[0]) == 0))
    i++;
  CHECKF(i < walk->n, "%s not on the walk (%zu frames, %s)", chain[0], walk->n,
         perf__walk_status_name(walk->status));
  for (size_t k = 0; k < n; k++, i++) {
    CHECKF(i < walk->n, "the walk ends (%s) before %s", perf__walk_status_name(walk->status),
           chain[k] ? chain[k] : "?");
    if (chain[k])
      CHECKF(walk->names[i] && strcmp(walk->names[i], chain[k]) == 0,
             "frame %zu: %s where %s was expected", i, walk->names[i] ? walk->names[i] : "?",
             chain[k]);
  }
}

static void report(void) {
  printf("agreement: %lu chains, %lu frames compared, %lu agreed; %lu direct calls checked\n",
         g_chains, g_frames, g_agreed, g_calls);
  CHECKF(g_agreed == g_frames, "%lu of %lu frames differ from libdwfl", g_frames - g_agreed,
         g_frames);
}

/* Samples until the thread is seen where `leaf` names frame 0 (or after
   `tries`, failing). */
static void sample_at(pthread_t t, chain_t *walk, const char *leaf, int tries) {
  for (int i = 0; i < tries; i++) {
    if (sample(t, walk, leaf)) return;
    usleep(2000);
  }
  CHECKF(0, "%s never seen in %d samples", leaf, tries);
}

static void case_busy_leaf(void) {
  pthread_t t = start(spin_body);
  static chain_t walk;
  sample_at(t, &walk, "chain_spin_leaf", 50);
  const char *chain[] = {"chain_spin_leaf", "chain_spin_middle", "spin_body"};
  expect_names(&walk, chain, 3);
  CHECK(walk.status == PERF__WALK_COMPLETE);
  CHECK_EQ_INT(g_calls, 2); /* spin_body -> chain_spin_middle -> chain_spin_leaf */
  stop(t);
  report();
}

static void case_blocked_read(void) {
  CHECK(pipe(g_pipe) == 0);
  pthread_t t = start(read_body);
  static chain_t walk;
  sample_at(t, &walk, "chain_read_inner", 200);
  const char *chain[] = {"chain_read_inner", "chain_read_middle", "read_body"};
  expect_names(&walk, chain, 3);
  CHECK(walk.status == PERF__WALK_COMPLETE);
  stop(t);
  report();
}

static void case_deep_recursion(void) {
  pthread_t t = start(deep_body);
  static chain_t walk;
  sample_at(t, &walk, "chain_spin_leaf", 50);
  size_t recursions = 0;
  for (size_t i = 0; i < walk.n; i++)
    recursions += walk.names[i] && strcmp(walk.names[i], "chain_recurse") == 0;
  CHECKF(recursions == DEEP + 1, "%zu chain_recurse frames, %d expected", recursions, DEEP + 1);
  CHECK(walk.status == PERF__WALK_COMPLETE);
  CHECK_EQ_INT(g_calls, DEEP + 2); /* the leaf's call, the recursion's, deep_body's */
  stop(t);
  report();
}

static void case_epilogue(void) {
  pthread_t t = start(epilogue_body);
  static chain_t walk;
  for (int i = 0; i < EPILOGUE_SAMPLES; i++) {
    sample(t, &walk, NULL);
    const char *chain[] = {"epilogue_body"};
    expect_names(&walk, chain, 1);
    CHECK(walk.status == PERF__WALK_COMPLETE);
  }
  stop(t);
  report();
}

static void case_signal_frame(void) {
  pthread_t t = start(interrupted_body);
  static chain_t walk;
  sample_at(t, &walk, "chain_spin_leaf", 200);
  /* The trampoline's frame has no name (qemu-user's page, or the vDSO). */
  const char *chain[] = {"chain_spin_leaf", "chain_in_handler_leaf", "app_handler", NULL};
  expect_names(&walk, chain, 4);
  const char *after[] = {"chain_interrupted", "interrupted_body"};
  expect_names(&walk, after, 2);
  CHECK(walk.status == PERF__WALK_COMPLETE);
  stop(t);
  report();
}

static void case_no_cfi(void) {
  pthread_t t = start(nocfi_body);
  static chain_t walk;
  sample_at(t, &walk, "nocfi_leaf", 50);
  const char *chain[] = {"nocfi_leaf", "nocfi_outer", "nocfi_body"};
  expect_names(&walk, chain, 3);
  CHECK(walk.status == PERF__WALK_COMPLETE);
  stop(t);
  report();
}

static const test_case_t g_cases[] = {
    TEST_CASE(busy_leaf), TEST_CASE(blocked_read), TEST_CASE(deep_recursion),
    TEST_CASE(epilogue),  TEST_CASE(signal_frame), TEST_CASE(no_cfi),
};

int main(int argc, char **argv) {
  return test_main(g_cases, sizeof g_cases / sizeof g_cases[0], argc, argv);
}
