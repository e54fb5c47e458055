/*
 * cpu_profile_budget.h - the continuous CPU profile's budget: from what
 * each step (a quarter second) cost, the rate for the next one, so that
 * the profile stays within cpu_profile_budget_permille of a core over any
 * minute. Pure arithmetic on the costs it is given (cpu_profile.c
 * measures them); used by the CPU monitor thread only.
 *
 * A step's cost has two parts: the signals' (the handler on the sampled
 * threads, the kernel's delivery), in proportion to the rate, and the
 * monitor's (its drains, reads and wake-ups), about the same at any rate;
 * each is smoothed over about a second. Their sum may be HEADROOM of the
 * budget, and never more than what the steps of the last minute left of
 * the minute's. Over it, the rate becomes what the room beside the
 * monitor's part pays for (never under 1 Hz); after RAISE_AFTER_NS without
 * a change it may go up again, at most doubling, while RAISE_TO of that
 * room pays for it.
 */
#ifndef PERF_CPU_PROFILE_BUDGET_H
#define PERF_CPU_PROFILE_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PERF__PROFILE_STEP_NS 250000000LL /* a step */
#define PERF__PROFILE_BUDGET_STEPS 240    /* a minute of steps */

typedef struct perf__profile_budget_s {
  double per_s;                               /* the budget: ns of CPU a second */
  unsigned max_hz;                            /* cpu_profile_hz: never raised past it */
  uint64_t steps[PERF__PROFILE_BUDGET_STEPS]; /* each step's cost, ns */
  size_t step;                                /* steps so far */
  double fixed_rate, signal_rate; /* smoothed ns a second: the monitor's, the signals' */
  int64_t changed_ns;             /* when the rate last changed */
} perf__profile_budget_t;

/* A step's cost, ns: the signals' part, the monitor's, and of the
   monitor's what it did once for the whole window (once_ns, spread over
   window_ns in the rates). */
typedef struct perf__profile_cost_s {
  uint64_t signals_ns, monitor_ns, once_ns;
  int64_t window_ns;
} perf__profile_cost_t;

void perf__profile_budget_init(perf__profile_budget_t *b, unsigned permille, unsigned max_hz,
                               int64_t now_ns);

/* One step of dt_ns ending at now_ns, that cost `cost`, run at hz:
   returns the rate for the next step (hz when unchanged; *lowered set
   when it is lower). The first step (every thread armed, its stack
   learned) counts in the minute, not in the rates. */
unsigned perf__profile_budget_step(perf__profile_budget_t *b, unsigned hz, int64_t now_ns,
                                   int64_t dt_ns, const perf__profile_cost_t *cost, bool *lowered);

/* The rate went from old_hz to new_hz: the signals' part follows it. */
void perf__profile_budget_rate_changed(perf__profile_budget_t *b, unsigned old_hz, unsigned new_hz,
                                       int64_t now_ns);

#endif
