/*
 * eu_stack.h - an independent view of this process's stacks for the sampler
 * tests: elfutils' eu-stack (ptrace + libdwfl) run on our own pid, and its
 * report parsed. Runs on the calling test thread; eu-stack stops every
 * thread of the process while it unwinds.
 */
#ifndef PERF_TEST_EU_STACK_H
#define PERF_TEST_EU_STACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Run `eu-stack -p <our pid>` and return its whole report (static storage,
   overwritten by the next call). Its exit status is not checked: it may fail
   to unwind a thread caught inside popen's own clone. */
const char *eu_stack_report(void);

/* The frames of thread `tid` in `report` ("#N 0xPC ..." lines after
   "TID n:"): pcs[0] is where the thread stopped, then return addresses.
   Returns the number parsed (0: no such thread). */
size_t eu_stack_pcs(const char *report, pid_t tid, uintptr_t *pcs, size_t max);

#endif
