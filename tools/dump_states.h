/*
 * dump_states.h - perf-dump's view of an event's thread states
 * (Event.sample_states, sample_syscalls, sample_fds): counted per thread,
 * or per thread and stack, and said in words as the file sink's reports
 * say them (sdk/wire/state_text.h).
 */
#ifndef PERF_TOOLS_DUMP_STATES_H
#define PERF_TOOLS_DUMP_STATES_H

#include <jansson.h>
#include <stdint.h>

#include "perf/v1/perf.pb-c.h"
#include "sdk/wire/state_text.h"

/* The tally in words ("waiting in read() (pipe) 62%, running 38%"),
   malloc'd; "" when no state is known; NULL when memory ran out. */
char *dump_states_words(const perf__state_tally_t *t);

/* e's states for --json: [{"tid","states":"<words>","counts":[{"state",
   "syscall","fd","samples"}]}] per thread with known states (state:
   "running", "lock", "io", "poll", "sleep", "other", "unknown"; syscall
   and fd "" when none). A new reference, NULL when memory ran out. */
json_t *dump_states_json(const Perf__V1__Batch *b, const Perf__V1__Event *e);

#endif
