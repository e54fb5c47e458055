/*
 * stale_record.h - a thread that leaves frame records on its stack, then
 * blocks in a system call from frame-pointer code whose frame covers them
 * (stale_record.c, built -fno-omit-frame-pointer). test_sampler's
 * stale_record_* cases capture it without a signal (only its pc and sp are
 * known) and compare every capture with eu-stack's frames.
 */
#ifndef PERF_TEST_STALE_RECORD_H
#define PERF_TEST_STALE_RECORD_H

#include <stdatomic.h>
#include <stdint.h>

typedef enum { STALE_NANOSLEEP, STALE_READ, STALE_POLL } stale_call_t;

typedef struct {
  stale_call_t call;
  int fd;           /* STALE_READ, STALE_POLL: a pipe's read end */
  atomic_int stop;  /* the loop ends after the call it is blocked in */
  atomic_int calls; /* blocking calls entered so far */
  /* Where stale_leave_leaf's frame record was ([0] stale_leave_inner's
     rbp, [1] the return address into it), and what it held:
     stale_block_inner's frame covers it. */
  uintptr_t stale_at, stale_words[2];
  /* stale_block_inner's frame: its scratch buffer (the lowest of its
     locals the record must lie above) and its own frame record. */
  uintptr_t scratch_at, record_at;
} stale_thread_t;

/* Until t->stop: stale_leave_outer() (which calls stale_leave_inner(),
   which calls a leaf), then stale_block_outer() -> stale_block_inner(),
   which blocks in t->call. Runs on the parked thread. */
void stale_record_loop(stale_thread_t *t);

#endif
