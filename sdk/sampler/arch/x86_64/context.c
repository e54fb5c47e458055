/*
 * context.c - x86_64 registers of an interrupted context and of the
 * kernel's signal frame, and the TSC (see sdk/sampler/arch.h). Runs in the
 * sampler's signal handler: async-signal-safe, no calls out.
 */
#include <stddef.h>
#include <ucontext.h>

#include "sdk/sampler/arch.h"

/* At the rt_sigreturn trampoline, rsp points at the ucontext the kernel
   saved for the interrupted code. */
#define GREG_AT(reg) (offsetof(ucontext_t, uc_mcontext.gregs) + (reg) * sizeof(greg_t))

const perf__arch_t perf__arch = {
    .name = "x86_64",
    .dwarf_nregs = 17, /* rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip */
    .dwarf_sp = 7,
    .dwarf_pc = 16,
    .sigframe_pc = GREG_AT(REG_RIP),
    .sigframe_sp = GREG_AT(REG_RSP),
    .sigframe_fp = GREG_AT(REG_RBP),
    .sigframe_bx = GREG_AT(REG_RBX),
    .ra_in_bx = false,
    .syscall_insn = {0x0f, 0x05},
    .syscall_insn_len = 2,
};

uint64_t perf__arch_cycles(void) {
  return __builtin_ia32_rdtsc();
}

void perf__arch_pause(void) {
  __builtin_ia32_pause();
}

void perf__arch_context_regs(const void *ucontext, perf__unwind_regs_t *out) {
  const greg_t *g = ((const ucontext_t *)ucontext)->uc_mcontext.gregs;
  out->pc = (uintptr_t)g[REG_RIP];
  out->sp = (uintptr_t)g[REG_RSP];
  out->fp = (uintptr_t)g[REG_RBP];
  out->bx = (uintptr_t)g[REG_RBX];
  out->fp_unknown = out->bx_unknown = false;
}

void perf__arch_context_dwarf_regs(const void *ucontext, uint64_t *regs) {
  static const int dwarf_to_greg[17] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI,
                                        REG_RBP, REG_RSP, REG_R8,  REG_R9,  REG_R10, REG_R11,
                                        REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
  const greg_t *g = ((const ucontext_t *)ucontext)->uc_mcontext.gregs;
  for (int i = 0; i < 17; i++)
    regs[i] = (uint64_t)g[dwarf_to_greg[i]];
}

bool perf__arch_sigreturn_at(uintptr_t pc) {
  (void)pc;
  return false;
}
