/*
 * cfi_row.c - x86_64 call-frame rules into compact rows (see
 * sdk/sampler/arch.h, unwind_rules.h). On x86_64 the return address is
 * always at CFA - 8, the CFA is rsp or rbp plus an offset, and rbp is the
 * one callee-saved register the walk needs; GNU ld's lazy-binding PLT stubs
 * have a rule of their own. Runs where unwind rules are compiled, never in
 * the signal handler (except perf__arch_plt_cfa).
 */
#include <dwarf.h>

#include "sdk/sampler/arch.h"

enum { DWARF_REG_RBP = 6, DWARF_REG_RSP = 7, DWARF_REG_RA = 16 };

static bool cfa_rule(Dwarf_Frame *frame, perf__unwind_row_t *row);
static void rbp_rule(Dwarf_Frame *frame, perf__unwind_row_t *row);

perf__unwind_row_t perf__arch_cfi_row(Dwarf_Frame *frame, int ra_reg, bool signal_frame) {
  perf__unwind_row_t row = {.cfa_kind = PERF__CFA_UNKNOWN, .rbp_kind = PERF__RBP_UNKNOWN};
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
  if (cfa_rule(frame, &row)) rbp_rule(frame, &row);
  return row;
}

uintptr_t perf__arch_plt_cfa(uintptr_t pc, uintptr_t sp, int32_t arg) {
  /* CFA = rsp + 8, + 8 more once the stub has pushed its relocation index
     (from byte `arg` of its 16-byte slot on). */
  return sp + 8 + (((pc & 15) >= (uintptr_t)arg) ? 8 : 0);
}

/* The CFA rule; true when the rbp rule matters (the CFA is one the rows can
   express). */
static bool cfa_rule(Dwarf_Frame *frame, perf__unwind_row_t *row) {
  Dwarf_Op *ops;
  size_t nops;
  if (dwarf_frame_cfa(frame, &ops, &nops) != 0) return false;
  if (nops == 1 && ops[0].atom == DW_OP_bregx &&
      (ops[0].number == DWARF_REG_RSP || ops[0].number == DWARF_REG_RBP) &&
      (int64_t)ops[0].number2 == (int32_t)ops[0].number2) {
    row->cfa_kind = ops[0].number == DWARF_REG_RSP ? PERF__CFA_RSP : PERF__CFA_RBP;
    row->cfa_off = (int32_t)ops[0].number2;
    return true;
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

static void rbp_rule(Dwarf_Frame *frame, perf__unwind_row_t *row) {
  Dwarf_Op *ops, mem[3];
  size_t nops;
  if (dwarf_frame_register(frame, DWARF_REG_RBP, mem, &ops, &nops) != 0) return;
  if (nops == 0 && ops == NULL) {
    row->rbp_kind = PERF__RBP_SAME;
  } else if (nops == 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_plus_uconst &&
             (int64_t)ops[1].number >= INT16_MIN && (int64_t)ops[1].number <= INT16_MAX) {
    row->rbp_kind = PERF__RBP_SAVED;
    row->rbp_off = (int16_t)(int64_t)ops[1].number;
  }
}
