/*
 * unwind_walk.c - the stack walk the signal handler runs (see unwind_rules.h).
 *
 * Runs inside the sampler's signal handler on the target thread, so it is
 * async-signal-safe: it only reads the immutable rule tables and the target's
 * own stack, every stack read checked against [sp, stack_hi).
 */
#include <stdbool.h>

#include "sdk/sampler/arch.h"
#include "sdk/sampler/unwind_rules.h"

typedef struct {
  uintptr_t lo, hi; /* readable stack window [lo, hi) */
} stack_window_t;

static bool read_word(stack_window_t w, uintptr_t addr, uintptr_t *out)
    __attribute__((no_sanitize_address));
static int step_with_rule(const perf__unwind_row_t *row, stack_window_t w, perf__unwind_regs_t *r);
static int step_frame_pointer(stack_window_t w, perf__unwind_regs_t *r);

enum { STEP_OK = 0, STEP_END = 1, STEP_FAIL = 2 };

size_t perf__unwind_walk(const perf__unwind_map_t *map, int use_rules, perf__unwind_regs_t regs,
                         uintptr_t stack_hi, uintptr_t *pcs, size_t max, int *truncated) {
  *truncated = 0;
  if (max == 0) return 0;
  stack_window_t w = {regs.sp, stack_hi};
  size_t n = 0;
  pcs[n++] = regs.pc;
  /* The interrupted pc is exact; a return address points after its call, so
     its rule is the one of the call instruction (pc - 1). */
  uintptr_t lookup = regs.pc;
  const perf__module_t *m = NULL; /* callers are mostly in the callee's module */
  for (;;) {
    const perf__unwind_row_t *row = NULL;
    if (use_rules && map) {
      if (!m || lookup < m->start || lookup >= m->end)
        m = perf__module_map_find(map->modules, lookup);
      const perf__unwind_table_t *table = m ? map->tables[m - map->modules->modules] : NULL;
      if (table) row = perf__unwind_table_find(table, lookup - m->bias);
    }
    uintptr_t prev_sp = regs.sp;
    bool exact = row && row->cfa_kind == PERF__CFA_SIGNAL;
    int step = (row && row->cfa_kind != PERF__CFA_UNKNOWN) ? step_with_rule(row, w, &regs)
                                                           : step_frame_pointer(w, &regs);
    if (step != STEP_OK || regs.pc == 0) break;
    if (regs.sp <= prev_sp) break; /* the stack only grows towards lower addresses */
    if (n == max) {
      *truncated = 1;
      break;
    }
    pcs[n++] = regs.pc;
    /* Through a signal trampoline the pc is the exact interrupted one, not a
       return address. */
    lookup = exact ? regs.pc : regs.pc - 1;
  }
  return n;
}

const perf__unwind_row_t *perf__unwind_table_find(const perf__unwind_table_t *table,
                                                  uint64_t vaddr) {
  if (!table || table->count == 0 || vaddr > UINT32_MAX) return NULL;
  uint32_t pc = (uint32_t)vaddr;
  if (pc < table->rows[0].pc) return NULL;
  /* Rows that can cover pc: from the one covering its block's first byte to
     the one covering the next block's first byte (or the last row). */
  size_t block = (pc >> table->block_shift) - table->first_block;
  if (block >= table->nblocks) return &table->rows[table->count - 1];
  size_t lo = table->block_row[block];
  size_t hi = block + 1 < table->nblocks ? table->block_row[block + 1] + 1 : table->count;
  while (hi - lo > 1) { /* invariant: rows[lo].pc <= pc < rows[hi].pc (or hi = end) */
    size_t mid = lo + (hi - lo) / 2;
    if (table->rows[mid].pc <= pc)
      lo = mid;
    else
      hi = mid;
  }
  return &table->rows[lo];
}

/* The walk reads other frames' memory, ASan redzones included: it is
   bounds-checked by hand and must not be instrumented. */
__attribute__((no_sanitize_address)) static bool read_word(stack_window_t w, uintptr_t addr,
                                                           uintptr_t *out) {
  if (addr < w.lo || addr > w.hi - sizeof(uintptr_t) || w.hi < sizeof(uintptr_t) ||
      (addr & (sizeof(uintptr_t) - 1)))
    return false;
  *out = *(const volatile uintptr_t *)addr;
  return true;
}

static int step_with_rule(const perf__unwind_row_t *row, stack_window_t w, perf__unwind_regs_t *r) {
  uintptr_t cfa;
  switch (row->cfa_kind) {
  case PERF__CFA_RSP: cfa = r->sp + (intptr_t)row->cfa_off; break;
  case PERF__CFA_RBP: cfa = r->fp + (intptr_t)row->cfa_off; break;
  case PERF__CFA_PLT: cfa = perf__arch_plt_cfa(r->pc, r->sp, row->cfa_off); break;
  case PERF__CFA_SIGNAL: {
    /* The signal trampoline: the kernel saved the interrupted registers in
       the signal frame at sp. */
    uintptr_t pc, sp, fp;
    if (!read_word(w, r->sp + perf__arch.sigframe_pc, &pc) ||
        !read_word(w, r->sp + perf__arch.sigframe_sp, &sp) ||
        !read_word(w, r->sp + perf__arch.sigframe_fp, &fp))
      return STEP_FAIL;
    r->pc = pc;
    r->sp = sp;
    r->fp = fp;
    return STEP_OK;
  }
  case PERF__CFA_OUTERMOST: return STEP_END;
  default: return STEP_FAIL;
  }
  uintptr_t ra;
  if (!read_word(w, cfa - 8, &ra)) return STEP_FAIL;
  if (row->rbp_kind == PERF__RBP_SAVED) {
    uintptr_t fp;
    if (!read_word(w, cfa + (intptr_t)row->rbp_off, &fp)) return STEP_FAIL;
    r->fp = fp;
  } else if (row->rbp_kind == PERF__RBP_UNKNOWN) {
    r->fp = 0;
  }
  r->pc = ra;
  r->sp = cfa;
  return STEP_OK;
}

static int step_frame_pointer(stack_window_t w, perf__unwind_regs_t *r) {
  /* Standard frame: [fp] = caller's fp, [fp + 8] = return address. The frame
     must lie on the stack at or above the current sp. */
  uintptr_t next_fp, ra;
  if (r->fp < r->sp || !read_word(w, r->fp, &next_fp) || !read_word(w, r->fp + 8, &ra))
    return STEP_FAIL;
  r->sp = r->fp + 16;
  r->fp = next_fp;
  r->pc = ra;
  return STEP_OK;
}
