/*
 * state_text.h - the thread states of a set of samples in words, as the
 * file sink's reports and perf-dump print them: "waiting in read() (pipe)
 * 62%, running 30%, waiting in futex() 8%". A state is the wire's
 * (Event.sample_states, sample_syscalls, sample_fds): a SampleState value,
 * the system call's name ("" none) and an FdKind value. A tally counts the
 * samples per distinct state; its text lists them most samples first with
 * their rounded share. Any thread (the writer's reports, perf-dump).
 */
#ifndef PERF_WIRE_STATE_TEXT_H
#define PERF_WIRE_STATE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perf/v1/perf.pb-c.h"
#include "sdk/base/strbuf.h"

/* Distinct states one tally keeps; the samples of any further ones are
   counted together as "waiting elsewhere" (the last slot). */
#define PERF__STATE_TALLY_MAX 24
/* A call's name as a tally keeps it ("clock_nanosleep", "syscall 100000"). */
#define PERF__STATE_CALL_MAX 24

typedef struct perf__state_count_s {
  uint8_t state, fd;               /* SampleState, FdKind */
  bool elsewhere;                  /* the overflow slot */
  char call[PERF__STATE_CALL_MAX]; /* "" none */
  uint32_t samples;
} perf__state_count_t;

typedef struct perf__state_tally_s {
  perf__state_count_t items[PERF__STATE_TALLY_MAX];
  size_t count;
  uint32_t total, known; /* samples counted; those whose state is not unknown (0) */
} perf__state_tally_t;

/* A SampleState value's name: "unknown", "running", "lock", "io", "poll",
   "sleep", "other" ("unknown" for a value outside the enum). */
const char *perf__state_name(int state);

/* An FdKind value's name: "file", "pipe", "socket", "other", or "" for
   none and values outside the enum. */
const char *perf__fd_name(int fd);

/* Count one sample's state (start from a zeroed tally). call NULL or ""
   for none; a longer name than PERF__STATE_CALL_MAX - 1 is cut. */
void perf__state_tally_add(perf__state_tally_t *t, int state, int fd, const char *call);

/* One state in words: "running", "waiting in read() (pipe)", "waiting in
   syscall 100000", "waiting outside a system call" (waiting, no call),
   "unknown". */
void perf__state_words(int state, int fd, const char *call, char *out, size_t len);

/* The tally's states, most samples first (ties: first counted first),
   each with its share of the tally's samples rounded to a whole percent:
   "waiting in read() (pipe) 62%, running 38%". Nothing when no sample's
   state is known. 0 or the strbuf's error. */
int perf__format_state_tally(perf__strbuf_t *b, const perf__state_tally_t *t);

/* The states of decoded event e's samples of thread tid (and of stack
   `stack`, a 1-based Batch.stacks index; 0: any) into *t (zeroed first);
   nothing for an event without states (an older SDK). */
void perf__state_tally_event(const Perf__V1__Batch *b, const Perf__V1__Event *e, uint32_t tid,
                             uint32_t stack, perf__state_tally_t *t);

/* Threads perf__state_threads lists at most (a crafted batch's further
   ones are left out). */
#define PERF__STATE_THREADS_MAX 1024

/* The threads of decoded event e with a known state, in the order first
   sampled (at most PERF__STATE_THREADS_MAX): *tids (malloc'd, free with
   free(); NULL when none) and *n. 0, or PERF_E_NO_MEMORY. */
int perf__state_threads(const Perf__V1__Event *e, uint32_t **tids, size_t *n);

#endif
