/*
 * cfi_row.c - x86_64 call-frame rules into compact rows (see
 * sdk/sampler/arch.h, unwind_rules.h). On x86_64 the return address is
 * always at CFA - 8, the CFA is rsp or rbp plus an offset (rbx in glibc's
 * lazy-binding trampoline), and rbp and rbx are the callee-saved registers
 * the walk needs; GNU ld's lazy-binding PLT stubs have a rule of their own.
 * Runs where unwind rules are compiled, never in the signal handler (except
 * perf__arch_plt_cfa).
 */
#include <dwarf.h>

#include "sdk/sampler/arch.h"

enum { DWARF_REG_RBX = 3, DWARF_REG_RBP = 6, DWARF_REG_RSP = 7, DWARF_REG_RA = 16 };

static bool cfa_rule(Dwarf_Frame *frame, perf__unwind_row_t *row);
static void register_rules(Dwarf_Frame *frame, perf__unwind_row_t *row);
static int saved_reg_rule(Dwarf_Frame *frame, int reg, int64_t *off);

perf__unwind_row_t perf__arch_cfi_row(Dwarf_Frame *frame, int ra_reg, bool signal_frame) {
  perf__unwind_row_t row = {
      .cfa_kind = PERF__CFA_UNKNOWN, .rbp_rule = PERF__REG_UNKNOWN, .rbx_rule = PERF__REG_UNKNOWN};
  if (ra_reg != DWARF_REG_RA) return row;
  if (signal_frame) {
    row.cfa_kind = PERF__CFA_SIGNAL;
    return row;
  }
  Dwarf_Op *ops, mem[3];
  size_t nops;
  /* Return address: x86_64 code always stores it at CFA - 8; "undefined"
     marks the outermost frame (_start, clone). Anything else is unknown. */
  if (dwarf_frame_register(frame, DWARF_REG_RA, mem, &ops, &nops) != 0) return row;
  if (nops == 0 && ops == mem) {
    row.cfa_kind = PERF__CFA_OUTERMOST;
    return row;
  }
  if (!(nops == 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_plus_uconst &&
        (int64_t)ops[1].number == -8))
    return row;
  if (cfa_rule(frame, &row)) register_rules(frame, &row);
  return row;
}

uintptr_t perf__arch_bx_slot(const perf__unwind_row_t *row, uintptr_t cfa) {
  return cfa + 8 * (intptr_t)row->rbx_off8;
}

uintptr_t perf__arch_plt_cfa(uintptr_t pc, uintptr_t sp, int32_t arg) {
  /* CFA = rsp + 8, + 8 more once the stub has pushed its relocation index
     (from byte `arg` of its 16-byte slot on). */
  return sp + 8 + (((pc & 15) >= (uintptr_t)arg) ? 8 : 0);
}

/* The CFA rule; true when the register rules matter (the CFA is one the
   rows can express). */
static bool cfa_rule(Dwarf_Frame *frame, perf__unwind_row_t *row) {
  Dwarf_Op *ops;
  size_t nops;
  if (dwarf_frame_cfa(frame, &ops, &nops) != 0) return false;
  if (nops == 1 && ops[0].atom == DW_OP_bregx &&
      (int64_t)ops[0].number2 == (int32_t)ops[0].number2) {
    row->cfa_off = (int32_t)ops[0].number2;
    switch (ops[0].number) {
    case DWARF_REG_RSP: row->cfa_kind = PERF__CFA_RSP; return true;
    case DWARF_REG_RBP: row->cfa_kind = PERF__CFA_RBP; return true;
    case DWARF_REG_RBX: row->cfa_kind = PERF__CFA_RBX; return true;
    default: row->cfa_off = 0; return false; /* __longjmp, setcontext, _Unwind_* */
    }
  }
  if (nops == 9 && ops[0].atom == DW_OP_breg7 && ops[0].number == 8 &&
      ops[1].atom == DW_OP_breg16 && ops[2].atom == DW_OP_lit15 && ops[3].atom == DW_OP_and &&
      ops[4].atom >= DW_OP_lit0 && ops[4].atom <= DW_OP_lit31 && ops[5].atom == DW_OP_ge &&
      ops[6].atom == DW_OP_lit3 && ops[7].atom == DW_OP_shl && ops[8].atom == DW_OP_plus) {
    /* The lazy-binding PLT rule GNU ld emits for .plt and .plt.sec. */
    row->cfa_kind = PERF__CFA_PLT;
    row->cfa_off = ops[4].atom - DW_OP_lit0;
    return true;
  }
  return false;
}

/* rbp's and rbx's rules; a slot the row cannot hold makes the register
   unknown. */
static void register_rules(Dwarf_Frame *frame, perf__unwind_row_t *row) {
  int64_t off;
  row->rbp_rule = saved_reg_rule(frame, DWARF_REG_RBP, &off);
  if (row->rbp_rule == PERF__REG_SAVED && (off < INT16_MIN || off > INT16_MAX))
    row->rbp_rule = PERF__REG_UNKNOWN;
  row->rbp_off = row->rbp_rule == PERF__REG_SAVED ? (int16_t)off : 0;
  row->rbx_rule = saved_reg_rule(frame, DWARF_REG_RBX, &off);
  if (row->rbx_rule == PERF__REG_SAVED &&
      (off % 8 != 0 || off / 8 < INT8_MIN || off / 8 > INT8_MAX))
    row->rbx_rule = PERF__REG_UNKNOWN;
  row->rbx_off8 = row->rbx_rule == PERF__REG_SAVED ? (int8_t)(off / 8) : 0;
}

/* The rule of callee-saved register `reg`; *off is its slot's offset from
   the CFA when SAVED. libdw answers "undefined" for a register neither the
   CIE nor the FDE mentions unless its ABI rules (elfutils'
   backends/x86_64_cfi.c) say "same value", and those list DWARF register 0
   (rax) where rbx (3) was meant: rbx would be lost in every function that
   does not save it. The psABI makes rbx and rbp callee-saved and no
   compiler marks them undefined, so both answers mean "same value". */
static int saved_reg_rule(Dwarf_Frame *frame, int reg, int64_t *off) {
  Dwarf_Op *ops, mem[3];
  size_t nops;
  *off = 0;
  if (dwarf_frame_register(frame, reg, mem, &ops, &nops) != 0) return PERF__REG_UNKNOWN;
  if (nops == 0) return PERF__REG_SAME;
  if (nops == 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_plus_uconst) {
    *off = (int64_t)ops[1].number;
    return PERF__REG_SAVED;
  }
  return PERF__REG_UNKNOWN;
}
