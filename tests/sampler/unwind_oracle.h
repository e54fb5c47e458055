/*
 * unwind_oracle.h - the unwind validator (the approach of "Reliable and fast
 * DWARF-based stack unwinding", OOPSLA 2019): fork a child that runs a
 * scenario, single-step it with ptrace through every instruction, and at
 * every stop compare three stacks, frame by frame:
 *   - ours: perf__unwind_walk with this process's compiled rules and module
 *     map (a fork has the same address space and modules) over a copy of
 *     the child's stack [sp, stack top) made with process_vm_readv;
 *   - libdwfl's on the stopped child (dwfl_reference.h);
 *   - the ground truth recorded from the calls and returns the stepping saw
 *     (call_record.h).
 * Optionally, at every stop a signal is delivered (PTRACE_SINGLESTEP with
 * SIGUSR1): the stacks are compared at the handler's first instruction,
 * through the kernel's signal frame, and the registers are then set back so
 * the handler never runs.
 *
 * Runs on the test's main thread (the parent); the child only runs the
 * scenario. Not async-signal-safe, not thread-safe.
 */
#ifndef PERF_TEST_UNWIND_ORACLE_H
#define PERF_TEST_UNWIND_ORACLE_H

#include <stdbool.h>
#include <stddef.h>

/* Where frame 0 was (for signal checks: the interrupted pc). */
typedef enum {
  ORACLE_PROGRAM, /* the test program itself */
  ORACLE_LIBC,
  ORACLE_LIBSTDCXX,
  ORACLE_LD, /* the dynamic loader (lazy binding) */
  ORACLE_OTHER,
  ORACLE_CLASSES
} oracle_class_t;

/* How one comparison came out. A stop counts once, in the first that applies. */
typedef struct {
  unsigned long checks;
  unsigned long agreed;     /* ours == libdwfl == truth */
  unsigned long dwfl_wrong; /* ours == truth, libdwfl not: excluded, libdwfl's error */
  unsigned long fallback;   /* ours != truth where a frame had no rule: the documented
                               frame-pointer fallback (code without CFI) */
  unsigned long truncated;  /* ours a prefix of the truth, ended with a reason, libdwfl went on */
  unsigned long cfi_wrong;  /* ours == libdwfl != truth: the code's CFI is wrong (or the truth) */
  unsigned long wrong;      /* ours differs from both: our bug */
} oracle_counts_t;

typedef struct {
  oracle_counts_t steps[ORACLE_CLASSES];   /* plain stops, by frame 0's module */
  oracle_counts_t signals[ORACLE_CLASSES]; /* injected signals, by the interrupted pc's module */
  unsigned long budget_hits;               /* scenarios cut at their step budget */
  unsigned long injections_refused;        /* stops where the kernel would not take a signal */
} oracle_tally_t;

typedef struct {
  const char *name;
  void (*run)(void);       /* what the child runs, between the two breakpoints */
  unsigned long max_steps; /* stop stepping after this many (the rest runs freely) */
  bool inject_signals;     /* a signal at every stop (that can take one) */
  void (*handler)(int);    /* the SIGUSR1 handler (injected and raised signals) */
  bool warm_up;            /* run once here first: lazy binding done before stepping */
} oracle_scenario_t;

/* Step through one scenario in a fresh child, adding to *tally. Prints
   every disagreement that is not an exclusion (at most a few per kind). */
void oracle_run(const oracle_scenario_t *sc, oracle_tally_t *tally);

/* Print the figures of *tally (steps, agreement, exclusions and why). */
void oracle_print(const char *title, const oracle_tally_t *tally);

/* Agreement of one class in percent: agreed / (checks - dwfl_wrong): only
   libdwfl's own errors are left out; our fallbacks and truncations count as
   disagreements. 100 when nothing was checked. */
double oracle_agreement(const oracle_counts_t *c);

/* Breakpoints marking where stepping starts and ends (unwind_oracle_marks.S). */
void oracle_begin(void);
void oracle_end(void);

#endif
