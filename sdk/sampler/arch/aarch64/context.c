/*
 * context.c - aarch64 registers of an interrupted context and of the
 * kernel's signal frame, the virtual counter, return-address signing and
 * the sigreturn trampoline (see sdk/sampler/arch.h). Runs in the sampler's
 * signal handler: async-signal-safe, no calls out but mincore(2) and
 * sysconf(_SC_PAGESIZE) (glibc reads the loader's page size).
 */
#include <stddef.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "sdk/sampler/arch.h"

/* At the sigreturn trampoline, sp points at the kernel's struct
   rt_sigframe: a siginfo (128 bytes), then the ucontext saved for the
   interrupted code (glibc's ucontext_t has the kernel's layout: a 128-byte
   signal mask area, then the 16-byte aligned mcontext). qemu-user builds
   the same frame. */
#define SIGINFO_BYTES 128
#define MC_AT(field) (SIGINFO_BYTES + offsetof(ucontext_t, uc_mcontext.field))
#define REG_AT(n) (MC_AT(regs) + (n) * sizeof(unsigned long long))

enum { X29 = 29, X30 = 30 };

const perf__arch_t perf__arch = {
    .name = "aarch64",
    .dwarf_nregs = 32, /* x0..x30, sp; the pc is not a DWARF register here */
    .dwarf_sp = 31,
    .dwarf_pc = 32, /* where perf__arch_context_dwarf_regs puts the pc */
    .sigframe_pc = MC_AT(pc),
    .sigframe_sp = MC_AT(sp),
    .sigframe_fp = REG_AT(X29),
    .sigframe_bx = REG_AT(X30),
    .ra_in_bx = true,
    /* svc #0 (0xd4000001, little-endian): the kernel returns from a call
       (and delivers a signal pending then) at the instruction after it,
       as x86_64's syscall; a call to be restarted is rewound onto the svc. */
    .syscall_insn = {0x01, 0x00, 0x00, 0xd4},
    .syscall_insn_len = 4,
};

uint64_t perf__arch_cycles(void) {
  uint64_t v;
  __asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(v)::"memory");
  return v;
}

void perf__arch_pause(void) {
  __asm__ volatile("yield" ::: "memory");
}

void perf__arch_context_regs(const void *ucontext, perf__unwind_regs_t *out) {
  const mcontext_t *mc = &((const ucontext_t *)ucontext)->uc_mcontext;
  out->pc = (uintptr_t)mc->pc;
  out->sp = (uintptr_t)mc->sp;
  out->fp = (uintptr_t)mc->regs[X29];
  out->bx = (uintptr_t)mc->regs[X30];
  out->fp_unknown = out->bx_unknown = false;
}

void perf__arch_context_dwarf_regs(const void *ucontext, uint64_t *regs) {
  const mcontext_t *mc = &((const ucontext_t *)ucontext)->uc_mcontext;
  for (int i = 0; i < 31; i++)
    regs[i] = (uint64_t)mc->regs[i];
  regs[31] = (uint64_t)mc->sp;
  regs[32] = (uint64_t)mc->pc;
}

bool perf__arch_sigreturn_at(uintptr_t pc) {
  /* The trampoline every signal handler returns to: the vDSO's
     __kernel_rt_sigreturn, glibc's or qemu-user's: mov x8, #139
     (__NR_rt_sigreturn); svc #0. Only a mapped page is read (mincore
     fails with ENOMEM on an unmapped one). */
  if (pc & 3) return false;
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t base = pc & ~(uintptr_t)(page - 1);
  if (pc + 8 > base + (uintptr_t)page) return false; /* both words on one page */
  unsigned char vec;
  if (mincore((void *)base, (size_t)page, &vec) != 0) return false;
  const volatile uint32_t *insn = (const volatile uint32_t *)pc;
  return insn[0] == 0xd2801168u && insn[1] == 0xd4000001u;
}
