/*
 * signature.c - stack signatures for grouping (see signature.h).
 */
#include "signature.h"

#include <stdio.h>
#include <string.h>

#include "sdk/base/utf8.h"

/* A label cut short by size ends after its last whole UTF-8 character
   (names are UTF-8 once ingest repaired them; JSON needs it). */
static void end_on_character(char *out) {
  size_t n = strlen(out), at = 0;
  while (at < n) {
    size_t k = perf__utf8_seq((const unsigned char *)out + at, n - at);
    if (k == 0) break;
    at += k;
  }
  out[at] = '\0';
}

void perf__frame_label(char *out, size_t size, const char *function, const char *module,
                       const char *address) {
  if (function && *function) {
    if ((size_t)snprintf(out, size, "%s", function) >= size) end_on_character(out);
    return;
  }
  if (!module) module = "??";
  const char *slash = strrchr(module, '/');
  if ((size_t)snprintf(out, size, "%s+%s", slash ? slash + 1 : module, address ? address : "0x0") >=
      size)
    end_on_character(out);
}

size_t perf__common_root_depth(const perf__named_stack_t *stacks, size_t n) {
  if (n == 0) return 0;
  size_t shared = stacks[0].depth;
  for (size_t s = 1; s < n && shared > 0; s++) {
    size_t k = 0;
    /* Compare from the root: the last frame of each list. */
    while (k < shared && k < stacks[s].depth &&
           strcmp(stacks[0].frames[stacks[0].depth - 1 - k],
                  stacks[s].frames[stacks[s].depth - 1 - k]) == 0)
      k++;
    shared = k;
  }
  return shared;
}

void perf__hang_signature(const perf__named_stack_t *stacks, size_t n, const char **out, size_t max,
                          size_t *len) {
  size_t shared = perf__common_root_depth(stacks, n);
  const perf__named_stack_t *first = &stacks[0];
  size_t skip = n ? first->depth - shared : 0; /* the first sample's frames below the shared part */
  if (shared > max) shared = max;              /* keep the innermost part of what is shared */
  for (size_t i = 0; i < shared; i++)
    out[i] = first->frames[skip + i];
  *len = shared;
}

uint64_t perf__signature_add(uint64_t h, const char *frame) {
  for (const unsigned char *p = (const unsigned char *)frame; *p; p++)
    h = (h ^ *p) * 1099511628211ULL;
  return (h ^ 0x1f) * 1099511628211ULL; /* unit separator between names */
}

uint64_t perf__signature_hash(const char *const *frames, size_t depth) {
  uint64_t h = PERF__SIGNATURE_START;
  for (size_t i = 0; i < depth; i++)
    h = perf__signature_add(h, frames[i]);
  return h;
}
