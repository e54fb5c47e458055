/*
 * unit_end.h - when a long unit of work ended, in one 64-bit word the
 * loop's thread stores at its idle mark and the hang monitor reads back.
 *
 * The word holds the end in microseconds in 40 bits (12 days of range) and
 * the unit's epoch's low 24 bits. The end is read back relative to the
 * reader's own clock reading, which may be taken before the loop's thread
 * marked the end: the 40-bit difference is signed, so an end a little
 * after `now` reads as after it, never as 12 days before.
 */
#ifndef PERF_SDK_MONITORS_UNIT_END_H
#define PERF_SDK_MONITORS_UNIT_END_H

#include <stdbool.h>
#include <stdint.h>

#define PERF__UNIT_END_US_BITS 40
#define PERF__UNIT_END_US_MASK ((UINT64_C(1) << PERF__UNIT_END_US_BITS) - 1)
#define PERF__UNIT_END_EPOCH_MASK ((UINT64_C(1) << (64 - PERF__UNIT_END_US_BITS)) - 1)

/* The word for unit `epoch` ending at end_ns (monotonic). */
static inline uint64_t perf__unit_end_pack(uint64_t epoch, int64_t end_ns) {
  return (epoch & PERF__UNIT_END_EPOCH_MASK) << PERF__UNIT_END_US_BITS |
         ((uint64_t)(end_ns / 1000) & PERF__UNIT_END_US_MASK);
}

/* The end of unit `epoch` from word v, read at now_ns; false when v holds
   another unit's end. */
static inline bool perf__unit_end_read(uint64_t v, uint64_t epoch, int64_t now_ns,
                                       int64_t *end_ns) {
  if (v >> PERF__UNIT_END_US_BITS != (epoch & PERF__UNIT_END_EPOCH_MASK)) return false;
  uint64_t now_us = (uint64_t)(now_ns / 1000);
  int64_t ago_us = (int64_t)((now_us - (v & PERF__UNIT_END_US_MASK)) & PERF__UNIT_END_US_MASK);
  if (ago_us >= (INT64_C(1) << (PERF__UNIT_END_US_BITS - 1))) /* after now */
    ago_us -= INT64_C(1) << PERF__UNIT_END_US_BITS;
  *end_ns = (now_ns / 1000 - ago_us) * 1000; /* to the microsecond stored */
  return true;
}

#endif
