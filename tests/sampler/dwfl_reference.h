/*
 * dwfl_reference.h - the unwind validator's independent unwinder: elfutils
 * libdwfl on a ptrace-stopped process, with its own module list
 * (/proc/PID/maps), its own reading of the call-frame information
 * (.eh_frame, then .debug_frame) and its own memory reads.
 *
 * Runs in the validator's parent process, on the test's main thread.
 */
#ifndef PERF_TEST_DWFL_REFERENCE_H
#define PERF_TEST_DWFL_REFERENCE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct dwfl_reference_s dwfl_reference_t;

/* Report pid's modules and attach to it, which the caller keeps
   ptrace-stopped whenever it walks. Fails the test on error. */
dwfl_reference_t *dwfl_reference_open(pid_t pid);

/* pid's stack as it is stopped now: pcs[0] = pc, then return addresses
   (the exact pc above a signal frame), innermost first. Returns the number
   written (at most max). */
size_t dwfl_reference_walk(dwfl_reference_t *ref, uintptr_t *pcs, size_t max);

void dwfl_reference_close(dwfl_reference_t *ref);

#endif
