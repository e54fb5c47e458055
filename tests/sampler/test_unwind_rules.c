/*
 * test_unwind_rules.c - the CFI rule compiler on real modules: the rows it
 * emits for known code (a libc function entry, a PLT stub, the outermost
 * frame, a frame-pointer function) and the walker's bounds checks on a
 * hand-made stack.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "sdk/sampler/module_map.h"
#include "sdk/sampler/unwind_rules.h"

extern void _start(void);

static const perf__module_t *module_for(const perf__module_map_t *map, const void *addr) {
  const perf__module_t *m = perf__module_map_find(map, (uintptr_t)addr);
  CHECKF(m != NULL, "no module holds %p", addr);
  return m;
}

static const perf__unwind_row_t *row_at(const perf__unwind_table_t *t, const perf__module_t *m,
                                        const void *addr) {
  const perf__unwind_row_t *row = perf__unwind_table_find(t, (uintptr_t)addr - m->bias);
  CHECKF(row != NULL, "no row for %p", addr);
  return row;
}

__attribute__((noinline, optimize("no-omit-frame-pointer"))) int with_frame(int x) {
  volatile int y = x;
  return y + 1;
}

static void check_libc(const perf__module_map_t *map) {
  void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  CHECK(libc != NULL);
  void *read_fn = dlsym(libc, "read");
  CHECK(read_fn != NULL);
  const perf__module_t *m = module_for(map, read_fn);
  perf__unwind_table_t *t = NULL;
  CHECK_EQ_INT(perf__unwind_table_build(m, &t), 0);
  CHECKF(t->count > 1000, "libc has only %zu rows", t->count);
  for (size_t i = 1; i < t->count; i++)
    CHECK(t->rows[i - 1].pc < t->rows[i].pc);
  /* At a function's first instruction the return address is at rsp. */
  const perf__unwind_row_t *r = row_at(t, m, read_fn);
  CHECK_EQ_INT(r->cfa_kind, PERF__CFA_RSP);
  CHECK_EQ_INT(r->cfa_off, 8);
  CHECK_EQ_INT(r->rbp_rule, PERF__REG_SAME);
  dlclose(libc);
  perf__unwind_table_free(t);
}

static void check_executable(const perf__module_map_t *map) {
  const perf__module_t *m = module_for(map, (const void *)&with_frame);
  perf__unwind_table_t *t = NULL;
  CHECK_EQ_INT(perf__unwind_table_build(m, &t), 0);
  /* _start marks the outermost frame (return address undefined). */
  CHECK_EQ_INT(row_at(t, m, (const char *)&_start + 4)->cfa_kind, PERF__CFA_OUTERMOST);
  /* A frame-pointer function: after `push rbp; mov rsp, rbp` CFA = rbp + 16
     and the caller's rbp is saved at CFA - 16. Find such a row inside it. */
  int found = 0;
  for (int off = 0; off < 32 && !found; off++) {
    const perf__unwind_row_t *r = row_at(t, m, (const char *)&with_frame + off);
    found = r->cfa_kind == PERF__CFA_RBP && r->cfa_off == 16 && r->rbp_rule == PERF__REG_SAVED &&
            r->rbp_off == -16;
  }
  CHECK(found);
  /* The PLT stubs have their expression rule. */
  int plt = 0;
  for (size_t i = 0; i < t->count; i++)
    plt += t->rows[i].cfa_kind == PERF__CFA_PLT;
  CHECK(plt >= 1);
  perf__unwind_table_free(t);
}

/* The walker on a fake stack: it follows good frames and stops, without
   reading outside [sp, hi), on bad ones, and says why it stopped. */
static void check_walker_bounds(void) {
  uintptr_t stack[16] = {0};
  uintptr_t base = (uintptr_t)stack, hi = (uintptr_t)(stack + 16);
  perf__stack_window_t w = {base, hi, (const uint8_t *)stack};
  /* Frame chain: fp0 at stack[2] -> fp1 at stack[6] -> fp out of bounds. */
  stack[2] = (uintptr_t)&stack[6];
  stack[3] = 0x1111;
  stack[6] = hi + 4096; /* points past the stack top: must stop here */
  stack[7] = 0x2222;
  perf__unwind_regs_t regs = {.pc = 0x1000, .sp = base, .fp = (uintptr_t)&stack[2]};
  uintptr_t pcs[8];
  perf__walk_status_t st;
  size_t n = perf__unwind_walk(NULL, 0, regs, w, pcs, 8, &st);
  CHECK_EQ_INT(n, 3);
  CHECK(pcs[0] == 0x1000 && pcs[1] == 0x1111 && pcs[2] == 0x2222);
  CHECK_EQ_INT(st, PERF__WALK_BAD_READ);
  /* A frame pointer of 0 is the thread's base: a complete stack. */
  stack[6] = 0;
  CHECK_EQ_INT(perf__unwind_walk(NULL, 0, regs, w, pcs, 8, &st), 3);
  CHECK_EQ_INT(st, PERF__WALK_COMPLETE);
  /* A frame pointer below sp (a loop or garbage) ends the walk at once. */
  regs.fp = base - 64;
  CHECK_EQ_INT(perf__unwind_walk(NULL, 0, regs, w, pcs, 8, &st), 1);
  CHECK_EQ_INT(st, PERF__WALK_NOT_ASCENDING);
  /* A cycle (fp pointing at itself) cannot loop: sp must strictly grow. */
  stack[2] = (uintptr_t)&stack[2];
  regs.fp = (uintptr_t)&stack[2];
  n = perf__unwind_walk(NULL, 0, regs, w, pcs, 8, &st);
  CHECK(n <= 3);
  CHECK_EQ_INT(st, PERF__WALK_NOT_ASCENDING);
  /* Misaligned frame pointers are refused. */
  regs.fp = (uintptr_t)&stack[2] + 3;
  CHECK_EQ_INT(perf__unwind_walk(NULL, 0, regs, w, pcs, 8, &st), 1);
  CHECK_EQ_INT(st, PERF__WALK_BAD_READ);
  /* max = 1: only the pc, and the stack went on. */
  stack[2] = (uintptr_t)&stack[6];
  regs.fp = (uintptr_t)&stack[2];
  CHECK_EQ_INT(perf__unwind_walk(NULL, 0, regs, w, pcs, 1, &st), 1);
  CHECK_EQ_INT(st, PERF__WALK_DEPTH);
  /* The window's base: the same stack read from a copy elsewhere. */
  uintptr_t copy[16];
  memcpy(copy, stack, sizeof copy);
  memset(stack, 0, sizeof stack);
  w.base = (const uint8_t *)copy;
  CHECK_EQ_INT(perf__unwind_walk(NULL, 0, regs, w, pcs, 8, &st), 3);
  CHECK(pcs[1] == 0x1111 && pcs[2] == 0x2222);
  CHECK_EQ_INT(st, PERF__WALK_COMPLETE);
  /* An sp outside the window: nothing is read. */
  regs.sp = hi;
  CHECK_EQ_INT(perf__unwind_walk(NULL, 0, regs, w, pcs, 8, &st), 1);
  CHECK_EQ_INT(st, PERF__WALK_BAD_READ);
}

/* The libc and executable rules, the walker's bounds, and a dlopen making
   the map stale; then a walk through this test's own frames. */
static void case_rules_and_map(void) {
  perf__module_map_t *map = NULL;
  CHECK_EQ_INT(perf__module_map_build(&map), 0);
  CHECK(!perf__module_map_is_stale(map));
  check_libc(map);
  check_executable(map);
  check_walker_bounds();
  /* Loading a library (one of glibc's, not loaded yet) makes the map stale. */
  const char *candidates[] = {"libanl.so.1", "libresolv.so.2", "libutil.so.1", "libm.so.6"};
  const char *fresh = NULL;
  for (size_t i = 0; i < 4 && !fresh; i++) {
    void *loaded = dlopen(candidates[i], RTLD_NOW | RTLD_NOLOAD);
    if (loaded)
      dlclose(loaded);
    else
      fresh = candidates[i];
  }
  CHECK(fresh != NULL);
  void *h = dlopen(fresh, RTLD_NOW);
  CHECKF(h != NULL, "dlopen(%s): %s", fresh, dlerror());
  CHECK(perf__module_map_is_stale(map));
  dlclose(h);
  perf__module_map_free(map);
  CHECK_EQ_INT(with_frame(0), 1);
}

static const test_case_t g_cases[] = {TEST_CASE(rules_and_map)};

int main(int argc, char **argv) {
  return test_main(g_cases, sizeof g_cases / sizeof g_cases[0], argc, argv);
}
