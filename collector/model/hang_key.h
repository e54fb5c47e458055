/*
 * hang_key.h - a hang event's grouping input (store_hang_t) from its
 * sampled stacks' labels, made the same way at ingest (ingest.c) and when
 * stored stacks are renamed (stack_rename.c): the majority key
 * (perf__hang_key) and the group that key makes. Any thread.
 */
#ifndef PERF_COLLECTOR_HANG_KEY_H
#define PERF_COLLECTOR_HANG_KEY_H

#include "collector/model/records.h"

/* g's signature (perf__signature_hash, 16 hex digits) and names JSON of
   names[0..n), innermost first; g->names_json malloc'ed. 0, or -1 when
   out of memory. */
int hang_key_group(const char *const *names, size_t n, store_group_t *g);

/* h->key, h->len and h->group from h->samples (filled by the caller, at
   least one stack). No majority root (len 0): the group is the whole
   stack h->samples.stacks[fallback] (the dominant one), as a CPU stack is
   keyed. 0, or -1 when out of memory; release with hang_key_release. */
int hang_key_make(store_hang_t *h, size_t fallback);

/* Free what hang_key_make made (not h->samples). */
void hang_key_release(store_hang_t *h);

#endif
