/*
 * unwind_rules.h - compact x86_64 unwind rules, compiled per module from the
 * call-frame information (.eh_frame) off the signal handler, and the walker
 * the signal handler runs over them.
 *
 * A module's rules are one sorted array of rows; a row holds from its pc up
 * to the next row's pc and says how to find the caller's frame there:
 *   CFA = rsp, rbp or rbx + offset; return address at CFA - 8; rbp and rbx
 *   unchanged or saved at CFA + offset; plus the few special cases real code
 *   needs (PLT stubs, the signal trampoline, the outermost frame). This is
 *   the shape eBPF profilers use: the handler unwinds correctly at
 *   frame-pointer speed. rbx is tracked because glibc's lazy-binding
 *   trampoline (_dl_runtime_resolve_*) keeps its CFA in rbx while it calls
 *   _dl_fixup. What the rows cannot express (a CFA in another register or a
 *   DWARF expression, a return address elsewhere than CFA - 8) is UNKNOWN:
 *   the walker falls back to frame pointers there (unwind_walk.c).
 * On aarch64 the same rows name sp, x29 and x30 where they say rsp, rbp
 * and rbx, and the return address is x30's value in the caller rather
 * than the word at CFA - 8 (perf__arch.ra_in_bx, arch/aarch64/cfi_row.c).
 */
#ifndef PERF_UNWIND_RULES_H
#define PERF_UNWIND_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sdk/sampler/module_map.h"

enum perf__cfa_kind {
  PERF__CFA_UNKNOWN = 0,   /* no usable rule here: fall back to frame pointers */
  PERF__CFA_RSP = 1,       /* CFA = rsp + cfa_off */
  PERF__CFA_RBP = 2,       /* CFA = rbp + cfa_off */
  PERF__CFA_PLT = 3,       /* PLT stub: CFA = rsp + 8, + 8 more when (pc & 15) >= cfa_off */
  PERF__CFA_SIGNAL = 4,    /* signal trampoline: the interrupted registers are a ucontext at rsp */
  PERF__CFA_OUTERMOST = 5, /* the return address is undefined: the stack ends here */
  PERF__CFA_RBX = 6,       /* CFA = rbx + cfa_off */
};

/* How to find the caller's value of a callee-saved register (rbp, rbx). */
enum perf__reg_rule {
  PERF__REG_SAME = 0,   /* the caller's value is the current value */
  PERF__REG_SAVED = 1,  /* the caller's value is stored at CFA + offset */
  PERF__REG_UNKNOWN = 2 /* clobbered or computed: not recoverable */
};

/* 12 bytes. rbx's save slot is a multiple of 8 from the CFA (pushes and
   8-byte moves); one that does not fit rbx_off8 is UNKNOWN. */
typedef struct perf__unwind_row_s {
  uint32_t pc;          /* ELF virtual address where the row starts */
  int32_t cfa_off;      /* see perf__cfa_kind */
  int16_t rbp_off;      /* rbp_rule SAVED: at CFA + rbp_off */
  uint8_t cfa_kind : 3; /* enum perf__cfa_kind */
  uint8_t rbp_rule : 2; /* enum perf__reg_rule */
  uint8_t rbx_rule : 2; /* enum perf__reg_rule */
  int8_t rbx_off8;      /* rbx_rule SAVED: at CFA + 8 * rbx_off8 */
} perf__unwind_row_t;

/* The rules of one module, immutable once built. A lookup first reads the
   block index (which row covers the start of each block of code), then
   binary-searches the few rows of that one block. Blocks are sized per
   module to hold about one row each (gcc -O2 code has a row every ~50
   bytes: every push and pop of a prologue or epilogue moves the CFA), so
   the index costs about 4 bytes per row and a lookup a couple of reads.
   Beside the rows, where each function starts (its FDE's first byte, 4
   bytes per FDE; rows of equal rules merge across functions, so the rows
   cannot say it): a frame-pointer search checks that a call entered the
   frame's function (unwind_walk.c). */
typedef struct perf__unwind_table_s {
  perf__unwind_row_t *rows;
  size_t count;
  unsigned block_shift; /* log2 of the block size in bytes */
  uint32_t first_block; /* rows[0].pc >> block_shift */
  size_t nblocks;
  uint32_t *block_row; /* per block: index of the row covering its first byte */
  /* Sorted ELF virtual addresses of the FDEs' first bytes, one per FDE of
     .eh_frame_hdr, without those in PLT sections (.plt, .plt.sec,
     .plt.got, .iplt: one FDE covers many stubs there). */
  uint32_t *fn_start;
  size_t fn_count;
  /* Lookups the walk made, remembered: the return addresses of a thread's
     stacks recur from sample to sample, and one seen before is found again
     with two independent reads instead of the block index, its search and
     the row (perf__unwind_memo_get). memo_mask + 1 entries (a power of
     two), each two words: memo[i] and memo[memo_mask + 1 + i]. The only
     part of a table written after it is built. */
  uint64_t *memo;
  uint32_t memo_mask;
} perf__unwind_table_t;

/* Compile the rules of `module` from its .eh_frame (through .eh_frame_hdr).
   Returns 0 and *out (free with perf__unwind_table_free), or a negative
   perf_error_t when the module has no usable call-frame information. */
int perf__unwind_table_build(const perf__module_t *module, perf__unwind_table_t **out);
void perf__unwind_table_free(perf__unwind_table_t *table);

/* The row covering ELF virtual address `vaddr`, or NULL. Async-signal-safe. */
const perf__unwind_row_t *perf__unwind_table_find(const perf__unwind_table_t *table,
                                                  uint64_t vaddr);

/* A row's rule (all of it but its pc) packed in one word, by explicit
   shifts: cfa_off in bits 0-31, cfa_kind 32-34, rbp_rule 35-36, rbx_rule
   37-38, rbx_off8 40-47, rbp_off 48-63. What the lookup memo keeps, and
   what the walk's fast path decodes in registers. */
static inline uint64_t perf__unwind_rule_pack(const perf__unwind_row_t *row) {
  return (uint64_t)(uint32_t)row->cfa_off | (uint64_t)row->cfa_kind << 32 |
         (uint64_t)row->rbp_rule << 35 | (uint64_t)row->rbx_rule << 37 |
         (uint64_t)(uint8_t)row->rbx_off8 << 40 | (uint64_t)(uint16_t)row->rbp_off << 48;
}
static inline int32_t perf__unwind_rule_cfa_off(uint64_t rule) {
  return (int32_t)(uint32_t)rule;
}
static inline unsigned perf__unwind_rule_cfa_kind(uint64_t rule) {
  return (unsigned)(rule >> 32) & 7;
}
static inline unsigned perf__unwind_rule_rbp_rule(uint64_t rule) {
  return (unsigned)(rule >> 35) & 3;
}
static inline unsigned perf__unwind_rule_rbx_rule(uint64_t rule) {
  return (unsigned)(rule >> 37) & 3;
}
static inline int8_t perf__unwind_rule_rbx_off8(uint64_t rule) {
  return (int8_t)(uint8_t)(rule >> 40);
}
static inline int16_t perf__unwind_rule_rbp_off(uint64_t rule) {
  return (int16_t)(uint16_t)(rule >> 48);
}
/* The row a packed rule came from, with pc 0 (not kept). */
static inline perf__unwind_row_t perf__unwind_rule_row(uint64_t rule) {
  return (perf__unwind_row_t){.cfa_off = perf__unwind_rule_cfa_off(rule),
                              .rbp_off = perf__unwind_rule_rbp_off(rule),
                              .cfa_kind = perf__unwind_rule_cfa_kind(rule),
                              .rbp_rule = perf__unwind_rule_rbp_rule(rule),
                              .rbx_rule = perf__unwind_rule_rbx_rule(rule),
                              .rbx_off8 = perf__unwind_rule_rbx_off8(rule)};
}

/* A table's memo as a walk holds it across frames: its two arrays and
   its mask, in registers (lo NULL: the table has no memo). */
typedef struct perf__unwind_memo_view_s {
  uint64_t *lo, *hi;
  uint32_t mask;
} perf__unwind_memo_view_t;

static inline perf__unwind_memo_view_t perf__unwind_memo_view(const perf__unwind_table_t *table) {
  return (perf__unwind_memo_view_t){
      table->memo, table->memo ? table->memo + table->memo_mask + 1 : NULL, table->memo_mask};
}

/* The memo's entry for `key` (a looked-up ELF virtual address, 1 to
   UINT32_MAX) is two words, each carrying the key in its high half and one
   half of the packed rule in its low half. Any signal handler reads and
   writes the words with relaxed atomics; a reader whose two words name
   different keys (another thread was writing) has a miss, and two writes
   for one key write the same rule, so a hit is always the table's answer.
   The slot is the key's low bits (return addresses differ there), which
   are also the absolute address's (`at`, the key plus the module's load
   bias, a multiple of the page size, over 8 times the most entries): the
   walk needs no subtraction to find the slot. Async-signal-safe. */
__attribute__((always_inline)) static inline bool
perf__unwind_memo_get(perf__unwind_memo_view_t v, uint64_t key, uintptr_t at, uint64_t *rule) {
  if (!v.lo || key == 0 || key > UINT32_MAX) return false;
  uint32_t slot = (uint32_t)at & v.mask;
  uint64_t lo = __atomic_load_n(&v.lo[slot], __ATOMIC_RELAXED);
  uint64_t hi = __atomic_load_n(&v.hi[slot], __ATOMIC_RELAXED);
  if ((uint32_t)(lo >> 32) != (uint32_t)key || (uint32_t)(hi >> 32) != (uint32_t)key) return false;
  *rule = (lo & UINT32_MAX) | hi << 32;
  return true;
}
static inline void perf__unwind_memo_put(perf__unwind_memo_view_t v, uint64_t key, uint64_t rule) {
  if (!v.lo || key == 0 || key > UINT32_MAX) return;
  uint32_t slot = (uint32_t)key & v.mask;
  __atomic_store_n(&v.lo[slot], key << 32 | (rule & UINT32_MAX), __ATOMIC_RELAXED);
  __atomic_store_n(&v.hi[slot], key << 32 | rule >> 32, __ATOMIC_RELAXED);
}

/* The packed rule of the row covering `vaddr` (the absolute address `at`
   in a module loaded with a page-aligned bias), through the table's memo
   `v` (found there, else looked up and remembered: the out-of-line
   perf__unwind_table_rule_slow), or PERF__UNWIND_NO_RULE when no row
   covers vaddr. By value: the walk keeps it in a register.
   Async-signal-safe. */
#define PERF__UNWIND_NO_RULE UINT64_MAX /* cfa_kind 7: no row packs to it */
uint64_t perf__unwind_table_rule_slow(const perf__unwind_table_t *table, uint64_t vaddr);
__attribute__((always_inline)) static inline uint64_t
perf__unwind_table_rule(const perf__unwind_table_t *table, perf__unwind_memo_view_t v,
                        uint64_t vaddr, uintptr_t at) {
  uint64_t rule;
  if (perf__unwind_memo_get(v, vaddr, at, &rule)) return rule;
  return perf__unwind_table_rule_slow(table, vaddr);
}

/* The first byte of the function holding ELF virtual address `vaddr`: the
   greatest fn_start at or below it (a gap after a function's FDE, where
   rows say UNKNOWN, still answers that function). False when no function
   starts at or below vaddr. Async-signal-safe. */
bool perf__unwind_table_function(const perf__unwind_table_t *table, uint64_t vaddr,
                                 uint32_t *start);

/* What the signal handler sees: the module map (immutable, and its lookup
   is async-signal-safe) and each module's rules. A module's slot holds
   &perf__unwind_table_pending until its rules are first needed; the
   capturing thread then compiles them and publishes the table with a
   release store (the walk loads slots with acquire). NULL: no rules
   (frame pointers). */
typedef struct perf__unwind_map_s {
  const perf__module_map_t *modules;
  const perf__unwind_table_t *tables[]; /* parallel to modules; NULL: frame pointers */
} perf__unwind_map_t;

extern const perf__unwind_table_t perf__unwind_table_pending;

/* The registers a walk starts from (and, for rbx, reads when a row needs it).
   A thread blocked in a system call shows only its pc and sp (thread_state.h):
   its rbp and rbx are then unknown until a frame's rule finds them saved. */
typedef struct perf__unwind_regs_s {
  uintptr_t pc, sp, fp, bx;
  bool fp_unknown, bx_unknown;
} perf__unwind_regs_t;

/* The stack memory a walk may read: the target's addresses [lo, hi),
   readable here at base + (address - lo). In the signal handler the stack
   is the thread's own (base == lo, lo = the interrupted sp); the unwind
   validator (tests/sampler) walks a copy of another process's stack. */
typedef struct perf__stack_window_s {
  uintptr_t lo, hi;
  const uint8_t *base;
} perf__stack_window_t;

/* How a walk ended. Only COMPLETE means the stack reached its outermost
   frame; every other status means frames beyond the last one written are
   missing (later stages show them as a `<truncated: reason>` frame). */
typedef enum perf__walk_status_e {
  /* The outermost frame: a rule with an undefined return address (_start,
     clone3), a return address of 0, or in frame-pointer mode a frame
     pointer of 0 (what _start and clone3 leave in rbp). */
  PERF__WALK_COMPLETE = 0,
  /* No rule for a pc (no module, a module without CFI, an FDE gap, a rule
     shape rows cannot express, a rule needing an rbp or rbx an inner frame
     lost) and the frame-pointer fallback could not take a step either. */
  PERF__WALK_NO_RULE = 1,
  /* A rule or a frame pointer pointed outside [the frame's sp, stack top)
     or at a misaligned word. */
  PERF__WALK_BAD_READ = 2,
  /* A caller's CFA was not above the previous frame's sp: a loop or garbage. */
  PERF__WALK_NOT_ASCENDING = 3,
  /* `max` frames written and the stack went on. */
  PERF__WALK_DEPTH = 4,
  /* The last pc written lies in a module whose rules are not compiled yet
     (perf__unwind_table_pending): the capturing thread compiles them
     (perf__modules_compile_rules) and walks again. That pc may be a
     frame-pointer search's candidate not yet checked, not a frame: a
     capture that runs out of rounds leaves it out. Never leaves the
     sampler. */
  PERF__WALK_RULES_PENDING = 5,
} perf__walk_status_t;

/* "complete", "no rule", "bad read", "not ascending", "depth",
   "rules pending". */
const char *perf__walk_status_name(perf__walk_status_t status);

/* Walk the stack from `regs` (regs.sp within the window). Every memory read
   lies in [current frame's sp, stack.hi), and every frame's CFA must be
   strictly above the previous one. `map` may be NULL (frame pointers
   only), as may `use_rules` be 0. Writes pcs[0] = regs.pc, then return
   addresses (the exact interrupted pc after a signal frame); returns the
   number written (at most max) and sets *status. How each kind of code is
   unwound (prologues, epilogues, PLT stubs, signal frames, code without
   CFI) is described at the top of unwind_walk.c.
   Async-signal-safe: no allocation, no locks, no system calls. */
size_t perf__unwind_walk(const perf__unwind_map_t *map, int use_rules, perf__unwind_regs_t regs,
                         perf__stack_window_t stack, uintptr_t *pcs, size_t max,
                         perf__walk_status_t *status);

#endif
