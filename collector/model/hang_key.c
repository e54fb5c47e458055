/*
 * hang_key.c - a hang's key and its group (see hang_key.h).
 */
#include "collector/model/hang_key.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

int hang_key_group(const char *const *names, size_t n, store_group_t *g) {
  snprintf(g->signature, sizeof g->signature, "%016llx",
           (unsigned long long)perf__signature_hash(names, n));
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++)
    if (json_array_append_new(a, json_string(names[i])) != 0) {
      json_decref(a);
      a = NULL;
    }
  g->names_json = a ? json_dumps(a, JSON_COMPACT) : NULL;
  json_decref(a);
  return g->names_json ? 0 : -1;
}

int hang_key_make(store_hang_t *h, size_t fallback) {
  size_t max = 0;
  for (size_t i = 0; i < h->samples.n; i++)
    if (h->samples.stacks[i].depth > max) max = h->samples.stacks[i].depth;
  const char **key = calloc(max ? max : 1, sizeof *key);
  if (!key) return -1;
  perf__hang_key(&h->samples, key, max, &h->len);
  h->key = key;
  if (h->len) return hang_key_group(key, h->len, &h->group);
  const perf__named_stack_t *s = &h->samples.stacks[fallback < h->samples.n ? fallback : 0];
  return hang_key_group(s->frames, s->depth, &h->group);
}

void hang_key_release(store_hang_t *h) {
  free((void *)h->key);
  free((char *)h->group.names_json);
  h->key = NULL;
  h->group.names_json = NULL;
  h->len = 0;
}
