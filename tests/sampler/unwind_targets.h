/*
 * unwind_targets.h - code for the unwind validator to single-step
 * (test_unwind_validate.c), built in the flavour of the test program that
 * links it. Runs in the validator's forked child.
 */
#ifndef PERF_TEST_UNWIND_TARGETS_H
#define PERF_TEST_UNWIND_TARGETS_H

/* Every frame shape of unwind_targets.c, one after the other. */
void targets_run(void);

/* The SIGUSR1 handler of the scenarios: a frame with a callee. */
void targets_signal_handler(int sig);

/* Hand-written assembly (unwind_targets_asm.S): a frame-pointer function
   without any CFI calling a leaf with CFI, n times. */
void targets_run_no_cfi(void);

/* libc: qsort with a callback, memcpy/strlen, snprintf/printf, malloc/free. */
void targets_run_libc(void);

/* libstdc++ (unwind_targets_cxx.cc): std::sort, std::string, std::map,
   std::ostringstream, a thrown and caught exception. */
void targets_run_libstdcxx(void);

#endif
