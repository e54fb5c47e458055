/*
 * signature.h - how the collector groups slow stacks the way people think
 * about them. A hang's signature is the part of its stack common to all its
 * samples: from the root down to the deepest frame every sample shares
 * (where the thread was stuck), so repeated hangs in the same function group
 * as one even when single samples landed in different leaf calls (a clock
 * read, a syscall wrapper). A CPU sample's signature is its whole stack.
 * Pure functions over symbolized frames; any thread.
 */
#ifndef PERF_COLLECTOR_SIGNATURE_H
#define PERF_COLLECTOR_SIGNATURE_H

#include <stddef.h>
#include <stdint.h>

/* One symbolized stack: frame names, innermost first ("fn" or, unnamed,
   "module+0xaddr"). */
typedef struct perf__named_stack_s {
  const char *const *frames;
  size_t depth;
} perf__named_stack_t;

/* A frame's name in a signature: its function, else "<module basename>+<address>"
   (address as "0x..." text); module NULL is "??". Truncated to fit out. */
void perf__frame_label(char *out, size_t size, const char *function, const char *module,
                       const char *address);

/* How many frames, counted from the root (the outermost frame), all n
   stacks share. 0 when n is 0 or the roots differ. */
size_t perf__common_root_depth(const perf__named_stack_t *stacks, size_t n);

/* The hang signature of n sample stacks: the shared root part, written
   innermost first into out[0..*len) (pointers into the first stack). */
void perf__hang_signature(const perf__named_stack_t *stacks, size_t n, const char **out, size_t max,
                          size_t *len);

/* Build the key frame by frame: h = perf__signature_add(h, frame) from
   PERF__SIGNATURE_START, innermost first; the same as perf__signature_hash. */
#define PERF__SIGNATURE_START 1469598103934665603ULL
uint64_t perf__signature_add(uint64_t h, const char *frame);

/* A stable 64-bit key of a frame list (FNV-1a over the names, with a
   separator so ["ab","c"] and ["a","bc"] differ); printed as 16 hex digits
   it is the `signature` of the API. */
uint64_t perf__signature_hash(const char *const *frames, size_t depth);

#endif
