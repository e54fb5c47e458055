/*
 * stack_cache.h - a stack's row as ingest built it (frames JSON, labels,
 * signature, group names) kept for the next batch that sends the same
 * stack: an app sends the same few hundred stacks in batch after batch,
 * and building a row (symbolizing every frame, the frames as JSON) is most
 * of what ingest costs (bench/README.md "collector_bench").
 *
 * Keyed by 128 bits of hash over everything the row is made from: each
 * frame's module path and build-id, address, the device's function,
 * linkage name, offset and line chain, and the stack's end. An entry is
 * good while the symbolizer's generation (symbolizer_generation: a debug
 * file arrived) is the one it was built under, and, when a module of the
 * stack had no debug file then, for as long as the symbolizer itself keeps
 * a missing file missing (so a file dropped into the symbols directory is
 * seen as soon as without the cache). Bounded in entries and bytes;
 * least recently used evicted. Thread-safe (one mutex). A row is shared,
 * not copied: the cache and every batch that uses it hold a reference,
 * and the last one frees it.
 */
#ifndef PERF_COLLECTOR_STACK_CACHE_H
#define PERF_COLLECTOR_STACK_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/store/store.h"
#include "collector/symbols/symbol_files.h"

#define STACK_CACHE_UNRESOLVED 4 /* build-ids without a debug file kept per entry */

/* A built stack row (ingest.c): every string malloc'ed, owned by the row;
   the row counted by its references (stack_built_new, stack_built_unref),
   read-only once in the cache. */
typedef struct stack_built_s {
  unsigned refs; /* atomic */
  char signature[STORE_SIG_CHARS + 1];
  char *frames_json, *names_json;
  char **labels; /* depth of them */
  size_t depth;
  uint32_t named, unnamed; /* frames the device did not name: named here, or not */
  char unresolved[STACK_CACHE_UNRESOLVED][SYMBOL_ID_MAX_HEX + 1];
  size_t n_unresolved;
} stack_built_t;

typedef struct stack_cache_s stack_cache_t;

stack_cache_t *stack_cache_new(size_t max_entries, size_t max_bytes);
void stack_cache_free(stack_cache_t *c);

/* The row of key built under generation, still good at now_s, with a
   reference for the caller (stack_built_unref); NULL on a miss. */
stack_built_t *stack_cache_get(stack_cache_t *c, const uint64_t key[2], uint64_t generation,
                               double now_s);

/* The row of key built under generation whose good_until_s passed (which
   stack_cache_get does not return), with a reference for the caller, who
   checks what it waited for (its build-ids without a debug file still
   without one) and either renews it (stack_cache_renew: good until
   good_until_s, when the cache still holds b under key) or builds the
   row afresh and puts that. NULL when there is none. Checking a row's
   few build-ids costs a fraction of building it again, which every
   cached stack of a module without a debug file otherwise needs each
   SYMBOLIZER_MISSING_RECHECK_S. */
stack_built_t *stack_cache_get_due(stack_cache_t *c, const uint64_t key[2], uint64_t generation);
void stack_cache_renew(stack_cache_t *c, const uint64_t key[2], const stack_built_t *b,
                       double good_until_s);

/* Keep b under key (a reference of the cache's own) until good_until_s
   (0: while generation lasts). Nothing when it does not fit. */
void stack_cache_put(stack_cache_t *c, const uint64_t key[2], uint64_t generation,
                     double good_until_s, stack_built_t *b);

/* An empty row with one reference; NULL when out of memory. */
stack_built_t *stack_built_new(void);
/* The row's strings freed, the row empty again (its references kept). */
void stack_built_release(stack_built_t *b);
/* One reference dropped; the last frees the row. NULL: nothing. */
void stack_built_unref(stack_built_t *b);

#endif
