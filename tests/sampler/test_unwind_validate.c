/*
 * test_unwind_validate.c - the unwind validator (unwind_oracle.h) over this
 * program's own code, built in one flavour (see CMakeLists.txt: -O0, -O2,
 * -O3, each with and without frame pointers), and over libc and libstdc++.
 * Every instruction is single-stepped in a forked child, a signal is
 * delivered at every instruction, and our walk is compared with libdwfl's
 * and with the true stack, frame by frame. Each case prints its figures.
 *
 * What is not counted as agreement, and why (the figures name the places):
 *  - "libdwfl wrong": ours matches the true stack, libdwfl does not.
 *    Excluded from the agreement figure. Seen in ld.so's _dl_fixup before
 *    it pushes rbx, called from the lazy-binding trampoline whose CFA is
 *    rbx-based: elfutils' x86_64 ABI rules name register 0 (rax) as
 *    call-saved where rbx (3) was meant, so libdwfl takes rbx as undefined
 *    there and stops (see cfi_row.c). And at a stop or two of __longjmp and
 *    _Unwind_RaiseException where libdwfl follows CFI that describes the
 *    jump's target while our frame-pointer fallback happens to match.
 *  - "no-CFI fallback": a frame without a usable rule, walked by frame
 *    pointers: the no_cfi case's assembly (by design), glibc's __longjmp
 *    after it switches its CFI to the jump target (CFA = rdi), libgcc's
 *    _Unwind_RaiseException after its stack switch (CFA = rcx). Counted as
 *    disagreements.
 *  - "CFI wrong": ours and libdwfl's agree, the true stack differs. Seen in
 *    libgcc_s's _Unwind_RaiseException between writing the landing pad into
 *    its return-address slot and switching the stack (__builtin_eh_return):
 *    its CFI describes the frame as before. Counted as disagreements.
 */
#include <stdbool.h>
#include <stdio.h>

#include "check.h"
#include "unwind_oracle.h"
#include "unwind_targets.h"

#ifndef FLAVOUR
#define FLAVOUR "?"
#endif

/* Under the sanitizers every instruction costs more to step, and the first
   allocations step through libasan's allocator: the budgets keep each case
   within about half a minute on a loaded 2-core machine, and the library
   cases check what they reached rather than how much. */
#ifdef UNWIND_VALIDATE_SHORT
#define BUDGET(steps) ((steps) / 16)
#define SHORT_RUN 1
#else
#define BUDGET(steps) (steps)
#define SHORT_RUN 0
#endif

static void require_exact(const char *what, const oracle_counts_t *c) {
  CHECKF(c->wrong == 0 && c->truncated == 0 && c->cfi_wrong == 0 && c->fallback == 0,
         "%s: %lu wrong, %lu truncated, %lu CFI-wrong, %lu fallback stops of %lu", what, c->wrong,
         c->truncated, c->cfi_wrong, c->fallback, c->checks);
  CHECKF(c->agreed + c->dwfl_wrong == c->checks, "%s: not every stop agreed", what);
}

/* This program's code: every stop and every signal delivered at it exact. */
static void case_targets(void) {
  oracle_tally_t t = {0};
  oracle_scenario_t sc = {.name = "targets",
                          .run = targets_run,
                          .max_steps = BUDGET(400000),
                          .inject_signals = true,
                          .handler = targets_signal_handler};
  oracle_run(&sc, &t);
  oracle_print("this program's code, " FLAVOUR, &t);
  CHECK(t.steps[ORACLE_PROGRAM].checks > 100);
  CHECK_EQ_INT(t.budget_hits, 0);
  require_exact("program", &t.steps[ORACLE_PROGRAM]);
  require_exact("signal in program", &t.signals[ORACLE_PROGRAM]);
}

/* The documented fallback: in a function without CFI, frame pointers give
   the right caller in its body, not in its prologue and epilogue. */
static void case_no_cfi(void) {
  oracle_tally_t t = {0};
  oracle_scenario_t sc = {.name = "no_cfi",
                          .run = targets_run_no_cfi,
                          .max_steps = BUDGET(10000),
                          .inject_signals = true,
                          .handler = targets_signal_handler};
  oracle_run(&sc, &t);
  oracle_print("assembly without CFI (frame-pointer fallback), " FLAVOUR, &t);
  const oracle_counts_t *c = &t.steps[ORACLE_PROGRAM];
  CHECK(c->checks > 20);
  CHECK(c->wrong == 0 && c->cfi_wrong == 0 && c->truncated == 0);
  CHECK(c->agreed + c->fallback == c->checks);
}

#ifdef UNWIND_VALIDATE_LIBS
static void require_reached(const char *what, const oracle_counts_t *c) {
  CHECKF(SHORT_RUN || c->checks >= 1000, "%s: only %lu stops", what, c->checks);
}

static void require_agreement(const char *what, const oracle_counts_t *c, double percent) {
  CHECKF(c->wrong == 0, "%s: %lu stops where our stack was wrong", what, c->wrong);
  CHECKF(oracle_agreement(c) >= percent, "%s: %.3f%% agreement, below %.1f%%", what,
         oracle_agreement(c), percent);
}

static void case_libc(void) {
  oracle_tally_t t = {0};
  oracle_scenario_t sc = {.name = "libc",
                          .run = targets_run_libc,
                          .max_steps = BUDGET(400000),
                          .inject_signals = true,
                          .handler = targets_signal_handler};
  oracle_run(&sc, &t);
  oracle_print("libc, " FLAVOUR, &t);
  require_reached("libc", &t.steps[ORACLE_LIBC]);
  require_exact("program", &t.steps[ORACLE_PROGRAM]);
  require_agreement("libc", &t.steps[ORACLE_LIBC], 99.9);
  require_agreement("signal in libc", &t.signals[ORACLE_LIBC], 99.9);
}

static void case_libstdcxx(void) {
  oracle_tally_t t = {0};
  oracle_scenario_t sc = {.name = "libstdcxx",
                          .run = targets_run_libstdcxx,
                          .max_steps = BUDGET(600000),
                          .inject_signals = true,
                          .handler = targets_signal_handler,
                          .warm_up = true};
  oracle_run(&sc, &t);
  oracle_print("libstdc++, " FLAVOUR, &t);
  require_reached("libstdc++", &t.steps[ORACLE_LIBSTDCXX]);
  require_exact("program", &t.steps[ORACLE_PROGRAM]);
  require_agreement("libstdc++", &t.steps[ORACLE_LIBSTDCXX], 99.9);
  require_agreement("signal in libstdc++", &t.signals[ORACLE_LIBSTDCXX], 99.9);
}

#endif

/* libc's and libstdc++'s code is the same in every flavour (only the
   callbacks differ): two flavours step through it (CMakeLists.txt). */
static const test_case_t g_cases[] = {
    TEST_CASE(targets),
    TEST_CASE(no_cfi),
#ifdef UNWIND_VALIDATE_LIBS
    TEST_CASE(libc),
    TEST_CASE(libstdcxx),
#endif
};

int main(int argc, char **argv) {
  return test_main(g_cases, sizeof g_cases / sizeof g_cases[0], argc, argv);
}
