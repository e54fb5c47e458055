/*
 * hex.h - bytes as lowercase hex digits and back: the batch ids in spool
 * and journal file names. Pure functions; any thread.
 */
#ifndef PERF_HEX_H
#define PERF_HEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* bytes[0..n) as 2n lowercase hex digits into out, then a NUL. */
void perf__hex_encode(const uint8_t *bytes, size_t n, char *out);

/* The 2n lowercase hex digits at text into bytes[0..n); false (bytes
   undefined) when one of them is not a lowercase hex digit. */
bool perf__hex_decode(const char *text, size_t n, uint8_t *bytes);

#endif
