/*
 * env_text.h - the spellings the SDK accepts in PERF_SDK_* environment
 * values (booleans), and how near a misspelt name is to a known one. Pure
 * functions; any thread but the signal handler.
 */
#ifndef PERF_ENV_TEXT_H
#define PERF_ENV_TEXT_H

#include <stdbool.h>

/* The spellings of a boolean, as messages list them. */
#define PERF__BOOL_SPELLINGS "1, 0, true, false, yes, no, on or off"

/* 1/true/yes/on -> true, 0/false/no/off -> false, in any case. Returns 0,
   or -1 (and *out unchanged) when text is none of them. */
int perf__bool_parse(const char *text, bool *out);

/* The number of single-character insertions, deletions, substitutions and
   swaps of two neighbours that turn a into b (case-insensitive), or
   `cap` when it is at least cap or a string is longer than 63 bytes. */
unsigned perf__edit_distance(const char *a, const char *b, unsigned cap);

#endif
