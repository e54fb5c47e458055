/*
 * dwfl_unwind.h - the PERF_UNWIND_STACK_COPY back end: unwind a copy of a
 * thread's registers and the top of its stack with elfutils libdwfl, on the
 * requesting thread (never in the signal handler).
 *
 * The signal handler only copies registers and stack bytes; this file turns
 * them into a call chain with the modules' full call-frame information, using
 * libdwfl's state callbacks over the copy (no ptrace, no /proc/PID/mem).
 */
#ifndef PERF_DWFL_UNWIND_H
#define PERF_DWFL_UNWIND_H

#include <stddef.h>
#include <stdint.h>

#include "sdk/sampler/module_map.h"
#include "sdk/sampler/unwind_rules.h"

typedef struct perf__dwfl_unwinder_s perf__dwfl_unwinder_t;

/* Report every module of `map` to a new libdwfl session. The map must stay
   alive as long as the unwinder. *out is freed with
   perf__dwfl_unwinder_free(). Returns 0 or a negative perf_error_t. */
int perf__dwfl_unwinder_create(const perf__module_map_t *map, perf__dwfl_unwinder_t **out);

/* Unwind from `regs` (registers 0..perf__arch.dwarf_nregs-1 in DWARF
   numbering, sdk/sampler/arch.h) over the stack copy [stack_base,
   stack_base + stack_len) held at `stack`. Reads outside the copy fail
   (the walk stops there). Writes pcs[0] = the pc register, then the return
   addresses, innermost first, at most `max`; sets *count. Returns 0,
   PERF_E_TRUNCATED when more frames remained, or a negative perf_error_t.
   *status (may be NULL) says how the walk ended: COMPLETE (libdwfl found
   an undefined return address, or a return address of 0), DEPTH,
   NOT_ASCENDING, or BAD_READ for any other stop of libdwfl (usually a read
   past the copy's end; libdwfl does not say which). */
int perf__dwfl_unwind(perf__dwfl_unwinder_t *u, const uint64_t *regs, uintptr_t stack_base,
                      const void *stack, size_t stack_len, uintptr_t *pcs, size_t max,
                      size_t *count, perf__walk_status_t *status);

void perf__dwfl_unwinder_free(perf__dwfl_unwinder_t *u);

#endif
