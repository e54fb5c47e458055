/*
 * state_text.h - the thread states of a set of samples in words, for the
 * file sink's reports: "waiting in read() (pipe) 62%, running 30%,
 * waiting in futex() 8%". A tally counts the samples per distinct state
 * (class, system call, descriptor kind); its text lists them most samples
 * first with their share. Writer thread (and tests).
 */
#ifndef PERF_STATE_TEXT_H
#define PERF_STATE_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "sdk/base/strbuf.h"
#include "sdk/sampler/sample_state.h"

/* Distinct states one tally keeps; more are counted as "waiting
   elsewhere" (state OTHER, syscall -2). */
#define PERF__STATE_TALLY_MAX 24

typedef struct perf__state_tally_s {
  struct {
    perf__sample_state_t state;
    uint32_t samples;
  } items[PERF__STATE_TALLY_MAX];
  size_t count;
  uint32_t total, known; /* samples counted; those with a state other than unknown */
} perf__state_tally_t;

/* Count one sample's state (start from a zeroed tally). */
void perf__state_tally_add(perf__state_tally_t *t, perf__sample_state_t s);

/* One state in words: "running", "waiting in read() (pipe)", "waiting in
   syscall 435", "waiting outside a system call", "unknown". */
void perf__state_words(perf__sample_state_t s, char *out, size_t len);

/* The tally's states, most samples first (ties: first counted first),
   each with its rounded share of the tally's samples:
   "waiting in read() (pipe) 62%, running 38%". Nothing when no sample's
   state is known. */
int perf__format_state_tally(perf__strbuf_t *b, const perf__state_tally_t *t);

#endif
