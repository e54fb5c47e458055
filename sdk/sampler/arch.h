/*
 * arch.h - what the sampler needs to know about the CPU it runs on: the
 * registers of an interrupted context, the kernel's signal frame, the
 * DWARF register numbers, how call-frame rules become compact rows, and a
 * cycle counter, return-address signing and the signal trampoline. One implementation per
 * architecture in arch/<arch>/; CMake compiles the one of the target (sdk/sampler/CMakeLists.txt).
 * Everything marked async-signal-safe runs in the sampler's signal handler.
 */
#ifndef PERF_SAMPLER_ARCH_H
#define PERF_SAMPLER_ARCH_H

#include <elfutils/libdw.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sdk/sampler/unwind_rules.h"

/* The most registers any architecture's stack-copy unwind needs. */
#define PERF__ARCH_MAX_DWARF_REGS 34

typedef struct perf__arch_s {
  const char *name;     /* "x86_64" */
  unsigned dwarf_nregs; /* DWARF registers 0..n-1 the stack-copy unwinder gets */
  unsigned dwarf_sp;    /* DWARF numbers of the stack pointer, */
  unsigned dwarf_pc;    /* the interrupted pc (in a context's register set), */
  size_t sigframe_pc;   /* where the kernel saved the interrupted pc, sp, frame */
  size_t sigframe_sp;   /* pointer and second frame register (x86_64: rbx) in a */
  size_t sigframe_fp;   /* signal frame: offsets from the sp the signal */
  size_t sigframe_bx;   /* trampoline runs with (aarch64: x30) */
  /* false (x86_64): the return address is at CFA - 8 and the rows' second
     register is rbx. true (aarch64): the rows' second register is the link
     register (x30) and the return address is its value in the caller: in
     x30 itself in a leaf, else where the row says x30 was saved. */
  bool ra_in_bx;
  /* The system call instruction (x86_64: syscall, 0f 05; aarch64: svc #0,
     01 00 00 d4): a signal sent while the thread was inside a call is
     handled as the call returns, with the interrupted pc just after it. */
  unsigned char syscall_insn[4];
  size_t syscall_insn_len;
} perf__arch_t;

extern const perf__arch_t perf__arch;

/* A cycle counter (TSC ticks on x86_64, the virtual counter cntvct_el0 on
   aarch64). Async-signal-safe. */
uint64_t perf__arch_cycles(void);

/* A spin-wait hint (x86_64: pause, aarch64: yield). */
void perf__arch_pause(void);

/* pc, sp, frame pointer and rbx (aarch64: x30) of an interrupted context (a signal
   handler's ucontext_t). Async-signal-safe. */
void perf__arch_context_regs(const void *ucontext, perf__unwind_regs_t *out);

/* The context's registers 0..perf__arch.dwarf_nregs-1 in DWARF numbering,
   for the stack-copy unwinder, and the pc at regs[perf__arch.dwarf_pc]
   (aarch64: 32, past the DWARF registers; x86_64: rip is register 16).
   At most PERF__ARCH_MAX_DWARF_REGS words. Async-signal-safe. */
void perf__arch_context_dwarf_regs(const void *ucontext, uint64_t *regs);

/* The compact row for the call-frame rule libdw found at an address
   (`ra_reg`: the rule's return-address column; `signal_frame`: the FDE is a
   signal trampoline's). The row's pc is left to the caller. */
perf__unwind_row_t perf__arch_cfi_row(Dwarf_Frame *frame, int ra_reg, bool signal_frame);

/* Where a row with rbx_rule SAVED says the second register was saved, for
   a frame whose CFA is `cfa`: x86_64, cfa + 8 * rbx_off8; aarch64, where
   x30 sits beside x29 in the frame record, relative to x29's slot when
   x29 is saved too (frames over 1 KiB put the record at the bottom).
   Async-signal-safe. */
uintptr_t perf__arch_bx_slot(const perf__unwind_row_t *row, uintptr_t cfa);

/* The CFA inside a lazy-binding PLT stub at pc (row PERF__CFA_PLT with
   argument `arg`). Async-signal-safe. */
uintptr_t perf__arch_plt_cfa(uintptr_t pc, uintptr_t sp, int32_t arg);

/* A return address as read from the stack or a register, without the
   pointer authentication code aarch64 code built with
   -mbranch-protection=standard signs it with (xpaclri); x86_64: as is.
   Async-signal-safe. Inline (the walk calls it at every frame): each
   architecture's arch/<arch>/strip_ra.h. */
#if defined(__aarch64__)
#include "sdk/sampler/arch/aarch64/strip_ra.h"
#else
#include "sdk/sampler/arch/x86_64/strip_ra.h"
#endif

/* Whether pc is the signal trampoline a handler returns to, recognised by
   its code where it has no call-frame information (aarch64 under
   qemu-user, whose trampoline page is in no module); the pc's page is
   checked to be mapped before it is read. x86_64: always false (glibc's
   __restore_rt has CFI). Async-signal-safe. */
bool perf__arch_sigreturn_at(uintptr_t pc);

/* Whether ra can be where a call returns to, from the code around it:
   `code` holds the PERF__ARCH_RETURN_SITE_BYTES bytes from ra - 8 (ra is
   code[8]). True when the code before ra ends with a call instruction
   (x86_64: call rel32 or call r/m64 of the length its ModRM byte gives;
   aarch64: bl, blr and the signed blr forms) or ra is a signal trampoline
   (a handler's return address follows no call). A frame-pointer search
   checks its candidates with it (unwind_walk.c); requesting threads only. */
#define PERF__ARCH_RETURN_SITE_BYTES 24
bool perf__arch_return_site(const uint8_t *code);

/* Where the call that returns to ra went, when it was a direct call whose
   target the code names: `code` as for perf__arch_return_site (ra is
   code[8]). x86_64: call rel32 (e8) ending at ra, *target = ra + rel32;
   aarch64: bl, *target = ra - 4 + imm26 * 4. False for any other code
   (indirect calls). x86_64 code is not decoded backwards: an e8 byte 5
   bytes before ra that belongs to another instruction gives a target
   made of whatever bytes follow it. A frame-pointer search checks with it
   that a candidate's call entered the frame's function (unwind_walk.c);
   requesting threads only. */
bool perf__arch_call_target(const uint8_t *code, uintptr_t ra, uintptr_t *target);

#endif
