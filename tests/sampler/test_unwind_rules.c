/*
 * test_unwind_rules.c - the CFI rule compiler on real modules: the rows it
 * emits for known code (a libc function entry, a PLT stub, the outermost
 * frame, a frame-pointer function) and the walker's bounds checks on a
 * hand-made stack; the walker's rules (restored registers at exact frames,
 * rbx-based CFAs, why a walk ended) on a made-up module, and the premise of
 * the restored-register rule on every loaded module; the function starts
 * kept beside the rows, and a blocked thread's frame-pointer search telling
 * its frame's record from stale ones by the calls before their return
 * addresses (a made-up module whose code holds real call instructions).
 */
#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "perf_sdk.h"
#include "sdk/sampler/arch.h"
#include "sdk/sampler/module_map.h"
#include "sdk/sampler/modules.h"
#include "sdk/sampler/sampler.h"
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
  /* read's FDE starts at read: the function holding any of its bytes. */
  uint32_t start = 0;
  uintptr_t read_vaddr = (uintptr_t)read_fn - m->bias;
  CHECKF(t->fn_count > 1000, "libc has only %zu functions", t->fn_count);
  CHECK(perf__unwind_table_function(t, read_vaddr, &start) && start == read_vaddr);
  CHECK(perf__unwind_table_function(t, read_vaddr + 4, &start) && start == read_vaddr);
  CHECK(!perf__unwind_table_function(t, t->fn_start[0] - 1, &start));
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
  /* ... and the PLT's FDE start is no function's: a call to a stub says
     nothing about the function it reaches. with_frame's FDE is one. */
  uint32_t start = 0;
  for (size_t i = 0; i < t->count; i++)
    if (t->rows[i].cfa_kind == PERF__CFA_PLT)
      CHECK(!perf__unwind_table_function(t, t->rows[i].pc, &start) || start != t->rows[i].pc);
  uintptr_t fn = (uintptr_t)&with_frame - m->bias;
  CHECK(perf__unwind_table_function(t, fn + 8, &start) && start == fn);
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

/* ---- the restored-register rule's premise -------------------------------- */

/* Row r (CFA from rsp) after `prev`: how many of its slots lie below sp,
   each checked to be inherited from prev. */
static size_t check_restore(const perf__module_t *m, const perf__unwind_row_t *r,
                            const perf__unwind_row_t *prev) {
  size_t checked = 0;
  if (r->rbp_rule == PERF__REG_SAVED && r->cfa_off + r->rbp_off < 0) {
    CHECKF(prev->rbp_rule == PERF__REG_SAVED && prev->rbp_off == r->rbp_off,
           "%s+%#x: rbp saved below sp", m->basename, r->pc);
    checked++;
  }
  if (r->rbx_rule == PERF__REG_SAVED && r->cfa_off + 8 * r->rbx_off8 < 0) {
    CHECKF(prev->rbx_rule == PERF__REG_SAVED && prev->rbx_off8 == r->rbx_off8,
           "%s+%#x: rbx saved below sp", m->basename, r->pc);
    checked++;
  }
  return checked;
}

/* The walker reads "a saved register's slot below an exact frame's sp" as
   "already restored" (popped, or its frame freed). That only holds if no
   register is ever saved below sp (into the red zone, by a mov): so a row
   naming a slot below sp must have inherited that save from the usable row
   before it (libgcc's eh_return tail has an inexpressible row in between).
   Returns how many such rows of `t` were checked. */
static size_t check_restores(const perf__module_t *m, const perf__unwind_table_t *t) {
  size_t checked = 0;
  const perf__unwind_row_t *prev = NULL; /* the last row the walker can use */
  for (size_t i = 0; i < t->count; i++) {
    const perf__unwind_row_t *r = &t->rows[i];
    if (r->cfa_kind == PERF__CFA_RSP && prev) checked += check_restore(m, r, prev);
    if (r->cfa_kind != PERF__CFA_UNKNOWN) prev = r;
  }
  return checked;
}

/* Over every module of this process that has rules (libc, ld.so, the vDSO,
   this program), with libstdc++, libgcc_s and libm loaded too. */
static void case_restored_registers(void) {
  const char *libs[] = {"libstdc++.so.6", "libgcc_s.so.1", "libm.so.6"};
  for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
    CHECKF(dlopen(libs[i], RTLD_NOW) != NULL, "dlopen(%s): %s", libs[i], dlerror());
  perf__module_map_t *map = NULL;
  CHECK_EQ_INT(perf__module_map_build(&map), 0);
  size_t checked = 0;
  for (size_t i = 0; i < map->count; i++) {
    perf__unwind_table_t *t = NULL;
    if (perf__unwind_table_build(&map->modules[i], &t) != 0) continue;
    size_t n = check_restores(&map->modules[i], t);
    fprintf(stderr, "%s: %zu rows name a slot below sp, none saves there\n",
            map->modules[i].basename, n);
    checked += n;
    perf__unwind_table_free(t);
  }
  CHECK(checked > 1000);
  perf__module_map_free(map);
}

/* ---- the walker's rules on a made-up module ------------------------------ */

/* Rows of a fake module at 0x10000 (bias 0), one function per 0x100. */
enum {
  FN_A_TAIL = 0x10000, /* an epilogue after pop %rbp: rbp's slot is below sp */
  FN_B = 0x10100,      /* a frame-pointer function: CFA = rbp + 16 */
  FN_T = 0x10200,      /* a trampoline keeping its CFA in rbx (_dl_runtime_resolve) */
  FN_C = 0x10300,      /* a function's entry */
  FN_OUTER = 0x10400,  /* the outermost frame */
  FN_D = 0x10500,      /* an epilogue row, reached as a caller: impossible */
  FN_E = 0x10600,      /* saved rbx at CFA - 16 */
  FN_E_LOST = 0x10700, /* rbx clobbered */
};

static const perf__unwind_row_t k_fake_rows[] = {
    {.pc = FN_A_TAIL,
     .cfa_kind = PERF__CFA_RSP,
     .cfa_off = 8,
     .rbp_rule = PERF__REG_SAVED,
     .rbp_off = -16},
    {.pc = FN_B,
     .cfa_kind = PERF__CFA_RBP,
     .cfa_off = 16,
     .rbp_rule = PERF__REG_SAVED,
     .rbp_off = -16},
    {.pc = FN_T,
     .cfa_kind = PERF__CFA_RBX,
     .cfa_off = 32,
     .rbx_rule = PERF__REG_SAVED,
     .rbx_off8 = -4},
    {.pc = FN_C, .cfa_kind = PERF__CFA_RSP, .cfa_off = 8},
    {.pc = FN_OUTER, .cfa_kind = PERF__CFA_OUTERMOST},
    {.pc = FN_D,
     .cfa_kind = PERF__CFA_RSP,
     .cfa_off = 8,
     .rbp_rule = PERF__REG_SAVED,
     .rbp_off = -16},
    {.pc = FN_E,
     .cfa_kind = PERF__CFA_RSP,
     .cfa_off = 16,
     .rbx_rule = PERF__REG_SAVED,
     .rbx_off8 = -2},
    {.pc = FN_E_LOST, .cfa_kind = PERF__CFA_RSP, .cfa_off = 16, .rbx_rule = PERF__REG_UNKNOWN},
    {.pc = 0x10800, .cfa_kind = PERF__CFA_UNKNOWN},
};

typedef struct {
  perf__module_t module;
  perf__module_map_t map;
  perf__unwind_table_t table;
  uint32_t block_row[1];
  perf__unwind_map_t *unwind;
} fake_module_t;

static void fake_module_init(fake_module_t *f) {
  memset(f, 0, sizeof *f);
  f->module =
      (perf__module_t){.path = "fake", .basename = "fake", .start = 0x10000, .end = 0x11000};
  f->map = (perf__module_map_t){.modules = &f->module, .count = 1};
  /* One 4 KiB block holds every row (see perf__unwind_table_find). */
  f->table = (perf__unwind_table_t){.rows = (perf__unwind_row_t *)k_fake_rows,
                                    .count = sizeof k_fake_rows / sizeof k_fake_rows[0],
                                    .block_shift = 12,
                                    .first_block = 0x10,
                                    .nblocks = 1,
                                    .block_row = f->block_row};
  f->unwind = malloc(sizeof *f->unwind + sizeof f->unwind->tables[0]);
  CHECK(f->unwind != NULL);
  f->unwind->modules = &f->map;
  f->unwind->tables[0] = &f->table;
}

static size_t fake_walk(fake_module_t *f, perf__unwind_regs_t regs, uintptr_t *stack,
                        uintptr_t *pcs, perf__walk_status_t *st) {
  perf__stack_window_t w = {(uintptr_t)stack, (uintptr_t)(stack + 16), (const uint8_t *)stack};
  return perf__unwind_walk(f->unwind, 1, regs, w, pcs, 8, st);
}

/* Exact frames trust live registers whose slots are below sp; callers
   cannot have such slots; rbx is followed through a save into a trampoline
   that needs it, and its loss ends the walk with a reason. */
static void case_walker_rules(void) {
  fake_module_t f;
  fake_module_init(&f);
  uintptr_t stack[16] = {0}, pcs[8];
  perf__walk_status_t st;

  /* Frame 0 after pop %rbp in A: rbp (the live value) is B's frame pointer. */
  stack[0] = FN_B + 5;     /* A's return address into B */
  stack[1] = 0;            /* B's saved rbp */
  stack[2] = FN_OUTER + 5; /* B's return address */
  perf__unwind_regs_t regs = {
      .pc = FN_A_TAIL + 0x10, .sp = (uintptr_t)stack, .fp = (uintptr_t)&stack[1]};
  CHECK_EQ_INT(fake_walk(&f, regs, stack, pcs, &st), 3);
  CHECK(pcs[1] == FN_B + 5 && pcs[2] == FN_OUTER + 5);
  CHECK_EQ_INT(st, PERF__WALK_COMPLETE);

  /* The same row reached as a caller (D): its slot below sp is a bad rule. */
  stack[0] = FN_D + 5;
  regs = (perf__unwind_regs_t){.pc = FN_C + 0x10, .sp = (uintptr_t)stack};
  CHECK_EQ_INT(fake_walk(&f, regs, stack, pcs, &st), 2);
  CHECK_EQ_INT(st, PERF__WALK_BAD_READ);

  /* E saved rbx; the trampoline T above it computes its CFA from it. */
  stack[0] = (uintptr_t)&stack[2]; /* E's saved rbx: T's CFA - 32 */
  stack[1] = FN_T + 5;             /* E's return address */
  stack[5] = FN_OUTER + 5;         /* T's return address, at its CFA (stack + 6) - 8 */
  regs = (perf__unwind_regs_t){.pc = FN_E + 0x10, .sp = (uintptr_t)stack, .bx = 0xbad};
  CHECK_EQ_INT(fake_walk(&f, regs, stack, pcs, &st), 3);
  CHECK(pcs[1] == FN_T + 5 && pcs[2] == FN_OUTER + 5);
  CHECK_EQ_INT(st, PERF__WALK_COMPLETE);

  /* Frame 0 is T itself: the live rbx is its CFA - 32. */
  regs = (perf__unwind_regs_t){
      .pc = FN_T + 0x10, .sp = (uintptr_t)&stack[2], .bx = (uintptr_t)&stack[2]};
  CHECK_EQ_INT(fake_walk(&f, regs, stack, pcs, &st), 2);
  CHECK(pcs[1] == FN_OUTER + 5);
  CHECK_EQ_INT(st, PERF__WALK_COMPLETE);

  /* rbx clobbered below T: T cannot be unwound, and the walk says so. */
  regs = (perf__unwind_regs_t){.pc = FN_E_LOST + 0x10, .sp = (uintptr_t)stack};
  CHECK_EQ_INT(fake_walk(&f, regs, stack, pcs, &st), 2);
  CHECK_EQ_INT(st, PERF__WALK_NO_RULE);

  /* A pc without a rule and a frame pointer of 0: no rule, not complete. */
  regs = (perf__unwind_regs_t){.pc = 0x10810, .sp = (uintptr_t)stack, .fp = 0};
  CHECK_EQ_INT(fake_walk(&f, regs, stack, pcs, &st), 1);
  CHECK_EQ_INT(st, PERF__WALK_NO_RULE);
  free(f.unwind);
}

/* A thread blocked in a call shows only pc and sp: rbp starts unknown. A
   frame-pointer function reached before anything saved rbp finds its
   record by searching its frame; a stale record lower in the frame (an
   earlier call's, pointing at the same caller's record) loses to the real
   one at the frame's top, and a return address at a function's first byte
   is no return address. */
static void case_walker_fp_search(void) {
  fake_module_t f;
  fake_module_init(&f);
  uintptr_t stack[16] = {0}, pcs[8];
  perf__walk_status_t st;
  stack[0] = FN_B + 5;             /* C (frame 0, a leaf) returns into B1 */
  stack[1] = (uintptr_t)&stack[6]; /* stale record: B2's record, */
  stack[2] = FN_B + 7;             /*   a return address into B */
  stack[3] = FN_C;                 /* a function's first byte */
  stack[4] = (uintptr_t)&stack[6]; /* B1's record: B2's rbp, */
  stack[5] = FN_B + 5;             /*   B1's return address into B2 */
  stack[6] = 0;                    /* B2's record: rbp 0, */
  stack[7] = FN_OUTER + 5;         /*   B2's return address */
  perf__unwind_regs_t regs = {
      .pc = FN_C + 0x10, .sp = (uintptr_t)stack, .fp_unknown = true, .bx_unknown = true};
  CHECK_EQ_INT(fake_walk(&f, regs, stack, pcs, &st), 4);
  CHECK(pcs[1] == FN_B + 5 && pcs[2] == FN_B + 5 && pcs[3] == FN_OUTER + 5);
  CHECK_EQ_INT(st, PERF__WALK_COMPLETE);

  /* No record checks out: the walk stops with "no rule" rather than
     guessing. */
  stack[1] = stack[2] = stack[4] = stack[5] = stack[7] = 0;
  CHECK_EQ_INT(fake_walk(&f, regs, stack, pcs, &st), 2);
  CHECK_EQ_INT(st, PERF__WALK_NO_RULE);

  /* B's record saves an rbp of 0 (its caller E keeps none); a record
     higher up saves 0 too (the thread's start). A shared saved rbp of 0
     says nothing about the caller: the first record that checks out is
     B's, not the highest (which would skip E). */
  memset(stack, 0, sizeof stack);
  stack[0] = FN_B + 5;     /* C returns into B */
  stack[1] = 0;            /* B's record: rbp 0, */
  stack[2] = FN_E + 5;     /*   its return address into E */
  stack[4] = FN_OUTER + 5; /* E's return address (E: CFA = sp + 16) */
  stack[5] = 0;            /* an outer record: rbp 0, */
  stack[6] = FN_OUTER + 5; /*   a return address into the outermost frame */
  CHECK_EQ_INT(fake_walk(&f, regs, stack, pcs, &st), 4);
  CHECKF(pcs[1] == FN_B + 5 && pcs[2] == FN_E + 5 && pcs[3] == FN_OUTER + 5,
         "walked C, %#lx, %#lx, %#lx", (unsigned long)pcs[1], (unsigned long)pcs[2],
         (unsigned long)pcs[3]);
  CHECK_EQ_INT(st, PERF__WALK_COMPLETE);
  free(f.unwind);
}

/* ---- the search's call checks, on a made-up module with code ----------- */

/* A module whose code is real bytes (calls written where return addresses
   point), at vaddr 0x20000 + offset, one function per 0x100. */
enum {
  K_LEAF = 0x20000,   /* CFA = rsp + 8 (a libc wrapper) */
  K_BLOCK = 0x20100,  /* frame 0, blocked in a call; the frame searched: CFA = rbp + 16 */
  K_OUTER = 0x20200,  /* calls K_BLOCK */
  K_OTHER = 0x20300,  /* calls K_HELPER, and K_BLOCK */
  K_HELPER = 0x20400, /* CFA = rsp + 8 */
  K_MAIN = 0x20500,   /* calls K_OUTER */
  K_START = 0x20600,  /* the outermost frame, calls K_MAIN */
  K_CODE_SIZE = 0x800,
};
/* A frame-pointer function's row: CFA = rbp + 16, rbp saved at CFA - 16
   (aarch64: x29, and x30, the return address, at CFA - 8). */
#if defined(__aarch64__)
#define FP_ROW(at)                                                                                 \
  {                                                                                                \
    .pc = (at), .cfa_kind = PERF__CFA_RBP, .cfa_off = 16, .rbp_rule = PERF__REG_SAVED,             \
    .rbp_off = -16, .rbx_rule = PERF__REG_SAVED, .rbx_off8 = 1                                     \
  }
#else
#define FP_ROW(at)                                                                                 \
  {                                                                                                \
    .pc = (at), .cfa_kind = PERF__CFA_RBP, .cfa_off = 16, .rbp_rule = PERF__REG_SAVED,             \
    .rbp_off = -16                                                                                 \
  }
#endif
static const perf__unwind_row_t k_code_rows[] = {
    {.pc = K_LEAF, .cfa_kind = PERF__CFA_RSP, .cfa_off = 8},
    FP_ROW(K_BLOCK),
    FP_ROW(K_OUTER),
    FP_ROW(K_OTHER),
    {.pc = K_HELPER, .cfa_kind = PERF__CFA_RSP, .cfa_off = 8},
    FP_ROW(K_MAIN),
    {.pc = K_START, .cfa_kind = PERF__CFA_OUTERMOST},
    {.pc = K_START + 0x100, .cfa_kind = PERF__CFA_UNKNOWN},
};
static uint32_t k_code_fns[] = {K_LEAF, K_BLOCK, K_OUTER, K_OTHER, K_HELPER, K_MAIN, K_START};

typedef struct {
  uint8_t code[K_CODE_SIZE] __attribute__((aligned(16)));
  perf__module_t module;
  perf__module_map_t map;
  perf__unwind_table_t table;
  uint32_t block_row[1];
  perf__unwind_map_t *unwind;
} code_module_t;

static uintptr_t code_addr(const code_module_t *c, uint32_t vaddr) {
  return c->module.bias + vaddr;
}

/* A direct call to `callee` (a vaddr) ending at at + 8 (returning there),
   or an indirect one; returns the return address. */
static uintptr_t put_call(code_module_t *c, uint32_t at, uint32_t callee, bool direct) {
  uintptr_t ra = code_addr(c, at + 8);
  uint8_t *end = c->code + (at + 8 - K_LEAF);
#if defined(__x86_64__)
  if (direct) {
    int32_t rel = (int32_t)(code_addr(c, callee) - ra);
    end[-5] = 0xe8;
    memcpy(end - 4, &rel, 4);
  } else {
    end[-2] = 0xff, end[-1] = 0xd0; /* call *%rax */
  }
#elif defined(__aarch64__)
  uint32_t insn = 0xd63f0000u; /* blr x0 */
  if (direct)
    insn = 0x94000000u | (((uint32_t)((code_addr(c, callee) - (ra - 4)) / 4)) & 0x03ffffffu);
  memcpy(end - 4, &insn, 4);
#endif
  return ra;
}

static void code_module_init(code_module_t *c) {
  memset(c, 0, sizeof *c);
  uintptr_t base = (uintptr_t)c->code;
  c->module = (perf__module_t){.path = "code",
                               .basename = "code",
                               .bias = base - K_LEAF,
                               .start = base,
                               .end = base + K_CODE_SIZE};
  c->map = (perf__module_map_t){.modules = &c->module, .count = 1};
  c->table = (perf__unwind_table_t){.rows = (perf__unwind_row_t *)k_code_rows,
                                    .count = ARRAY_LEN(k_code_rows),
                                    .block_shift = 12,
                                    .first_block = K_LEAF >> 12,
                                    .nblocks = 1,
                                    .block_row = c->block_row,
                                    .fn_start = k_code_fns,
                                    .fn_count = ARRAY_LEN(k_code_fns)};
  c->unwind = malloc(sizeof *c->unwind + sizeof c->unwind->tables[0]);
  CHECK(c->unwind != NULL);
  c->unwind->modules = &c->map;
  c->unwind->tables[0] = &c->table;
}

/* The walk from inside K_BLOCK (blocked: pc and sp only) over stack[],
   which must give `want` (n frames after frame 0) and end complete. */
static void expect_code_walk(code_module_t *c, const char *what, uintptr_t *stack,
                             const uintptr_t *want, size_t n) {
  uintptr_t pcs[8];
  perf__walk_status_t st;
  perf__unwind_regs_t regs = {.pc = code_addr(c, K_BLOCK + 0x10),
                              .sp = (uintptr_t)stack,
                              .fp_unknown = true,
                              .bx_unknown = true};
  perf__stack_window_t w = {(uintptr_t)stack, (uintptr_t)(stack + 16), (const uint8_t *)stack};
  size_t got = perf__unwind_walk(c->unwind, 1, regs, w, pcs, 8, &st);
  bool same = got == n + 1 && st == PERF__WALK_COMPLETE;
  for (size_t i = 0; same && i < n; i++)
    same = pcs[i + 1] == want[i];
  if (!same) {
    fprintf(stderr, "%s: %zu frames, %s:\n", what, got, perf__walk_status_name(st));
    for (size_t i = 1; i < got || i <= n; i++)
      fprintf(stderr, "  #%zu walked %#lx want %#lx\n", i,
              i < got ? (unsigned long)(pcs[i] - c->module.bias) : 0UL,
              i <= n ? (unsigned long)(want[i - 1] - c->module.bias) : 0UL);
    exit(1);
  }
}

/* Stale records below the real one in K_BLOCK's frame, each with a
   different saved rbp (so the positional rule alone picks them): the
   call before the real record's return address entered K_BLOCK, theirs
   went elsewhere, or entered K_BLOCK from a caller whose own return
   address says it was entered by another call. When the real call cannot
   be told, a stale record seen going elsewhere still loses; when the real
   record's call names another function too (a tail call) and it is the
   only record, it is taken; when its caller was entered by a tail call,
   it still beats a record that tells nothing. */
static void case_walker_fp_search_calls(void) {
  code_module_t *c = malloc(sizeof *c);
  CHECK(c != NULL);
  code_module_init(c);
  uintptr_t block_ra = put_call(c, K_OUTER + 0x20, K_BLOCK, true);
  uintptr_t block_ra_indirect = put_call(c, K_OUTER + 0x40, 0, false);
  uintptr_t tail_ra = put_call(c, K_OUTER + 0x60, K_HELPER, true); /* K_HELPER tail-calls */
  uintptr_t helper_ra = put_call(c, K_OTHER + 0x20, K_HELPER, true);
  uintptr_t other_block_ra = put_call(c, K_OTHER + 0x40, K_BLOCK, true);
  uintptr_t other_indirect_ra = put_call(c, K_OTHER + 0x60, 0, false);
  uintptr_t outer_ra = put_call(c, K_MAIN + 0x20, K_OUTER, true);
  uintptr_t main_helper_ra = put_call(c, K_MAIN + 0x40, K_HELPER, true); /* tail-calls */
  uintptr_t main_ra = put_call(c, K_START + 0x20, K_MAIN, true);
  uintptr_t start_indirect_ra = put_call(c, K_START + 0x40, 0, false);
  uintptr_t stack[16];
  const uintptr_t want[] = {block_ra, outer_ra, main_ra};

  /* The real chain: K_BLOCK's record at stack[4], K_OUTER's at [6],
     K_MAIN's at [8] (saved rbp 0: K_START keeps none). */
  memset(stack, 0, sizeof stack);
  stack[4] = (uintptr_t)&stack[6], stack[5] = block_ra;
  stack[6] = (uintptr_t)&stack[8], stack[7] = outer_ra;
  stack[8] = 0, stack[9] = main_ra;
  expect_code_walk(c, "no stale record", stack, want, 3);

  /* K_OTHER's call of K_HELPER left a record at [2], its saved rbp
     K_MAIN's record: it went to K_HELPER, not K_BLOCK. */
  stack[2] = (uintptr_t)&stack[8], stack[3] = helper_ra;
  expect_code_walk(c, "a stale record of a call elsewhere", stack, want, 3);

  /* An earlier call of K_BLOCK itself, from K_OTHER: its call entered
     K_BLOCK, but its caller's return address (K_MAIN's into K_START)
     follows a call of K_MAIN, not K_OTHER. */
  stack[2] = (uintptr_t)&stack[8], stack[3] = other_block_ra;
  expect_code_walk(c, "a stale record of K_BLOCK's, from another caller", stack, want, 3);

  /* The real call cannot be told (indirect): the stale record seen going
     elsewhere still loses. */
  const uintptr_t want_indirect[] = {block_ra_indirect, outer_ra, main_ra};
  stack[2] = (uintptr_t)&stack[8], stack[3] = helper_ra;
  stack[5] = block_ra_indirect;
  expect_code_walk(c, "an indirect call", stack, want_indirect, 3);

  /* K_OUTER called K_HELPER, which tail-called K_BLOCK: the only record
     names another function, and is taken. */
  const uintptr_t want_tail[] = {tail_ra, outer_ra, main_ra};
  stack[2] = stack[3] = 0;
  stack[5] = tail_ra;
  expect_code_walk(c, "a tail call", stack, want_tail, 3);

  /* K_OUTER was entered by a tail call (K_MAIN called K_HELPER): the real
     record's call entered K_BLOCK, its caller's went elsewhere; a stale
     record below it tells nothing (indirect calls, its saved rbp at a
     record returning into K_START): the record that entered K_BLOCK wins. */
  const uintptr_t want_tail_caller[] = {block_ra, main_helper_ra, main_ra};
  stack[2] = (uintptr_t)&stack[10], stack[3] = other_indirect_ra;
  stack[5] = block_ra;
  stack[7] = main_helper_ra;
  stack[10] = 0, stack[11] = start_indirect_ra;
  expect_code_walk(c, "a caller entered by a tail call", stack, want_tail_caller, 3);
  free(c->unwind);
  free(c);
}

/* A candidate record whose return address lies in a module with rules
   still to be compiled cannot be checked: the walk ends there, the
   candidate's return address last, as "rules pending", so that the
   capture compiles that module and walks again. */
static void case_walker_fp_search_pending(void) {
  fake_module_t f;
  fake_module_init(&f);
  enum { PENDING_START = 0x20000 };
  perf__module_t mods[2] = {
      f.module, {.path = "later", .basename = "later", .start = PENDING_START, .end = 0x21000}};
  f.map = (perf__module_map_t){.modules = mods, .count = 2};
  perf__unwind_map_t *unwind = malloc(sizeof *unwind + 2 * sizeof unwind->tables[0]);
  CHECK(unwind != NULL);
  unwind->modules = &f.map;
  unwind->tables[0] = &f.table;
  unwind->tables[1] = &perf__unwind_table_pending;
  free(f.unwind);
  f.unwind = unwind;
  uintptr_t stack[16] = {0}, pcs[8];
  perf__walk_status_t st;
  stack[0] = FN_B + 5;             /* C returns into B */
  stack[1] = (uintptr_t)&stack[6]; /* a candidate record: */
  stack[2] = PENDING_START + 5;    /*   returning into the module not compiled yet */
  stack[4] = (uintptr_t)&stack[6]; /* B's record */
  stack[5] = FN_OUTER + 5;
  perf__unwind_regs_t regs = {
      .pc = FN_C + 0x10, .sp = (uintptr_t)stack, .fp_unknown = true, .bx_unknown = true};
  CHECK_EQ_INT(fake_walk(&f, regs, stack, pcs, &st), 3);
  CHECK(pcs[1] == FN_B + 5 && pcs[2] == PENDING_START + 5);
  CHECK_EQ_INT(st, PERF__WALK_RULES_PENDING);
  free(f.unwind);
}

/* A frame-pointer search's candidates must return to where a call
   returns (perf__arch_return_site): the code before them a call. */
static void case_return_site(void) {
  uint8_t code[PERF__ARCH_RETURN_SITE_BYTES];
#if defined(__x86_64__)
  static const struct {
    uint8_t before[8]; /* the 8 bytes before the return address */
    bool call;
    const char *what;
  } k_sites[] = {
      {{0x90, 0x90, 0x90, 0xe8, 0x10, 0x20, 0x30, 0x40}, true, "call rel32"},
      {{0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0xd0}, true, "call *%rax"},
      {{0x90, 0x90, 0x90, 0x90, 0x90, 0x41, 0xff, 0xd3}, true, "call *%r11"},
      {{0x90, 0x90, 0xff, 0x15, 0x10, 0x20, 0x30, 0x40}, true, "call *disp32(%rip)"},
      {{0x90, 0x90, 0x90, 0x90, 0xff, 0x54, 0x24, 0x08}, true, "call *8(%rsp)"},
      {{0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0x50, 0x18}, true, "call *0x18(%rax)"},
      {{0x90, 0xff, 0x94, 0xc8, 0x10, 0x20, 0x30, 0x40}, true, "call *disp32(%rax,%rcx,8)"},
      {{0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90}, false, "nops"},
      {{0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0xe0}, false, "jmp *%rax"},
      {{0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xc3}, false, "ret"},
      {{0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0x15, 0x10}, false, "a cut call *disp32(%rip)"},
  };
  for (size_t i = 0; i < ARRAY_LEN(k_sites); i++) {
    memset(code, 0xcc, sizeof code);
    memcpy(code, k_sites[i].before, 8);
    CHECKF(perf__arch_return_site(code) == k_sites[i].call, "%s: %s", k_sites[i].what,
           k_sites[i].call ? "not taken for a call" : "taken for a call");
  }
  /* glibc's __restore_rt, where a signal handler returns: no call before */
  static const uint8_t restore_rt[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  memset(code, 0x90, sizeof code);
  memcpy(code + 8, restore_rt, sizeof restore_rt);
  CHECK(perf__arch_return_site(code));
  /* Where a direct call went: ra + rel32, forwards and backwards; an
     indirect call names no target. */
  uintptr_t target = 0;
  static const uint8_t fwd[8] = {0x90, 0x90, 0x90, 0xe8, 0x10, 0x20, 0x00, 0x00};
  static const uint8_t back[8] = {0x90, 0x90, 0x90, 0xe8, 0xf0, 0xff, 0xff, 0xff};
  static const uint8_t ind[8] = {0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0xd0};
  memcpy(code, fwd, 8);
  CHECK(perf__arch_call_target(code, 0x400000, &target) && target == 0x400000 + 0x2010);
  memcpy(code, back, 8);
  CHECK(perf__arch_call_target(code, 0x400000, &target) && target == 0x400000 - 16);
  memcpy(code, ind, 8);
  CHECK(!perf__arch_call_target(code, 0x400000, &target));
#elif defined(__aarch64__)
  static const struct {
    uint32_t insn;
    bool call;
  } k_sites[] = {{0x94000010u, true},   /* bl */
                 {0xd63f0020u, true},   /* blr x1 */
                 {0xd63f083fu, true},   /* blraaz x1 */
                 {0x14000010u, false},  /* b */
                 {0xd61f0020u, false},  /* br x1 */
                 {0xd65f03c0u, false},  /* ret */
                 {0xd503201fu, false}}; /* nop */
  for (size_t i = 0; i < ARRAY_LEN(k_sites); i++) {
    memset(code, 0, sizeof code);
    memcpy(code + 4, &k_sites[i].insn, 4);
    CHECKF(perf__arch_return_site(code) == k_sites[i].call, "insn %#x", k_sites[i].insn);
  }
  static const uint32_t trampoline[2] = {0xd2801168u, 0xd4000001u};
  memset(code, 0, sizeof code);
  memcpy(code + 8, trampoline, sizeof trampoline);
  CHECK(perf__arch_return_site(code));
  /* Where a bl went: ra - 4 + imm26 * 4, forwards and backwards; blr
     names no target. */
  uintptr_t target = 0;
  static const uint32_t k_targets[][2] = {{0x94000010u, 0x400000 - 4 + 0x40},
                                          {0x97fffffcu, 0x400000 - 4 - 16}};
  for (size_t i = 0; i < ARRAY_LEN(k_targets); i++) {
    memcpy(code + 4, &k_targets[i][0], 4);
    CHECK(perf__arch_call_target(code, 0x400000, &target) && target == k_targets[i][1]);
  }
  static const uint32_t blr = 0xd63f0020u;
  memcpy(code + 4, &blr, 4);
  CHECK(!perf__arch_call_target(code, 0x400000, &target));
#endif
  /* And on a live stack: this function's own return address follows a
     call. */
  uintptr_t ra = (uintptr_t)__builtin_return_address(0);
  memcpy(code, (const void *)(ra - 8), sizeof code);
  CHECK(perf__arch_return_site(code));
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

/* Rules are compiled per module when a walk first reaches it
   (sdk/sampler/modules.c): a capture of this thread compiles the modules
   on its stack and leaves the others (libdw, libzstd, ... mapped for the
   SDK, never on this stack) pending. */
static size_t pending_rules(const perf__modules_t *mods, size_t *total) {
  size_t pending = 0;
  *total = mods->map->count;
  for (size_t i = 0; i < mods->map->count; i++)
    pending +=
        __atomic_load_n(&mods->unwind->tables[i], __ATOMIC_ACQUIRE) == &perf__unwind_table_pending;
  return pending;
}

static void case_rules_compiled_lazily(void) {
  perf__modules_t *mods = perf__modules_acquire();
  CHECK(mods != NULL);
  size_t total, before = pending_rules(mods, &total);
  uintptr_t pcs[64];
  size_t n;
  perf__walk_status_t status;
  CHECK_EQ_INT(perf__sampler_capture_status(mods, 0, pcs, 64, &n, &status), PERF_OK);
  CHECKF(status == PERF__WALK_COMPLETE, "the walk ended: %s", perf__walk_status_name(status));
  size_t after = pending_rules(mods, &total);
  CHECKF(after < before, "no module compiled by the capture (%zu of %zu pending)", after, total);
  CHECKF(after > 0, "every one of %zu modules compiled for one stack", total);
  const perf__module_t *self =
      perf__module_map_find(mods->map, (uintptr_t)case_rules_compiled_lazily);
  CHECK(self != NULL);
  CHECK(mods->unwind->tables[self - mods->map->modules] != &perf__unwind_table_pending);
  perf__modules_release(mods);
}

static const test_case_t g_cases[] = {TEST_CASE(rules_and_map),
                                      TEST_CASE(walker_rules),
                                      TEST_CASE(walker_fp_search),
                                      TEST_CASE(walker_fp_search_calls),
                                      TEST_CASE(walker_fp_search_pending),
                                      TEST_CASE(return_site),
                                      TEST_CASE(restored_registers),
                                      TEST_CASE(rules_compiled_lazily)};

int main(int argc, char **argv) {
  return test_main(g_cases, sizeof g_cases / sizeof g_cases[0], argc, argv);
}
