/*
 * cfi_row.c - aarch64 call-frame rules into compact rows (see
 * sdk/sampler/arch.h, unwind_rules.h). On aarch64 the return address is
 * x30 (the link register): still in x30 in a leaf function and before a
 * prologue saves it, else saved at CFA + offset (GCC's frame record
 * `stp x29, x30, [sp, #-n]!` puts it at CFA - n + 8). The row's "bx"
 * register is x30 and its "fp" is x29 (perf__arch.ra_in_bx: the walker
 * takes the return address from x30's rule). The CFA is sp or x29 plus an
 * offset. Runs where unwind rules are compiled, never in the signal
 * handler (except perf__arch_plt_cfa).
 */
#include <dwarf.h>

#include "sdk/sampler/arch.h"

enum { DWARF_REG_X29 = 29, DWARF_REG_X30 = 30, DWARF_REG_SP = 31 };

static perf__unwind_row_t unknown_row(void);
static bool cfa_rule(Dwarf_Frame *frame, perf__unwind_row_t *row);
static int saved_reg_rule(Dwarf_Frame *frame, int reg, int64_t *off, bool *undefined);

perf__unwind_row_t perf__arch_cfi_row(Dwarf_Frame *frame, int ra_reg, bool signal_frame) {
  perf__unwind_row_t row = unknown_row();
  if (ra_reg != DWARF_REG_X30) return row;
  if (signal_frame) {
    row.cfa_kind = PERF__CFA_SIGNAL;
    return row;
  }
  int64_t off;
  bool undefined;
  /* x30 "undefined" marks the outermost frame (_start, thread_start). */
  int ra_rule = saved_reg_rule(frame, DWARF_REG_X30, &off, &undefined);
  if (undefined) {
    row.cfa_kind = PERF__CFA_OUTERMOST;
    return row;
  }
  if (ra_rule == PERF__REG_UNKNOWN || !cfa_rule(frame, &row)) return unknown_row();
  int64_t fp_off;
  row.rbp_rule = saved_reg_rule(frame, DWARF_REG_X29, &fp_off, &undefined);
  if (row.rbp_rule == PERF__REG_SAVED && (fp_off < INT16_MIN || fp_off > INT16_MAX))
    row.rbp_rule = PERF__REG_UNKNOWN;
  row.rbp_off = row.rbp_rule == PERF__REG_SAVED ? (int16_t)fp_off : 0;
  /* x30's slot, relative to x29's when x29 is saved (perf__arch_bx_slot):
     frames over 1 KiB keep their record at the bottom, far from the CFA. */
  if (ra_rule == PERF__REG_SAVED) {
    off -= row.rbp_off;
    if (off % 8 != 0 || off / 8 < INT8_MIN || off / 8 > INT8_MAX) return unknown_row();
  }
  row.rbx_rule = ra_rule;
  row.rbx_off8 = ra_rule == PERF__REG_SAVED ? (int8_t)(off / 8) : 0;
  return row;
}

uintptr_t perf__arch_bx_slot(const perf__unwind_row_t *row, uintptr_t cfa) {
  intptr_t base = row->rbp_rule == PERF__REG_SAVED ? row->rbp_off : 0;
  return cfa + base + 8 * (intptr_t)row->rbx_off8;
}

uintptr_t perf__arch_plt_cfa(uintptr_t pc, uintptr_t sp, int32_t arg) {
  /* aarch64 PLT stubs have no CFI of their own: no PLT rows are made. */
  (void)pc;
  (void)arg;
  return sp;
}

/* The CFA rule: sp or x29 plus an offset; anything else (a DWARF
   expression, another register) leaves the row unknown. */
static bool cfa_rule(Dwarf_Frame *frame, perf__unwind_row_t *row) {
  Dwarf_Op *ops;
  size_t nops;
  if (dwarf_frame_cfa(frame, &ops, &nops) != 0) return false;
  if (nops != 1 || ops[0].atom != DW_OP_bregx || (int64_t)ops[0].number2 != (int32_t)ops[0].number2)
    return false;
  row->cfa_off = (int32_t)ops[0].number2;
  switch (ops[0].number) {
  case DWARF_REG_SP: row->cfa_kind = PERF__CFA_RSP; return true;
  case DWARF_REG_X29: row->cfa_kind = PERF__CFA_RBP; return true;
  default: row->cfa_off = 0; return false;
  }
}

/* The rule of register `reg`; *off is its slot's offset from the CFA when
   SAVED. libdw answers with no operations both for "same value" (*ops
   NULL) and "undefined" (*ops the caller's buffer): *undefined tells them
   apart. For x29 both mean "same value" (AAPCS64 makes it callee-saved);
   for x30 "undefined" ends the stack. */
static int saved_reg_rule(Dwarf_Frame *frame, int reg, int64_t *off, bool *undefined) {
  Dwarf_Op *ops, mem[3];
  size_t nops;
  *off = 0;
  *undefined = false;
  if (dwarf_frame_register(frame, reg, mem, &ops, &nops) != 0) return PERF__REG_UNKNOWN;
  if (nops == 0) {
    *undefined = ops == mem;
    return PERF__REG_SAME;
  }
  if (nops == 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_plus_uconst) {
    *off = (int64_t)ops[1].number;
    return PERF__REG_SAVED;
  }
  return PERF__REG_UNKNOWN;
}

/* No usable rule: the walker falls back to the frame record. */
static perf__unwind_row_t unknown_row(void) {
  return (perf__unwind_row_t){
      .cfa_kind = PERF__CFA_UNKNOWN, .rbp_rule = PERF__REG_UNKNOWN, .rbx_rule = PERF__REG_UNKNOWN};
}
