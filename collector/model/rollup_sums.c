/*
 * rollup_sums.c - rollup rows summed per key (rollup_sums.h). The keys
 * sit in an array in the order first added, each with one allocation of
 * its texts; an open-addressed index of slots (linear probing, at most
 * half full) finds a key by its hash (sdk/base/hash.h), so a fold's
 * thousands of delta rows of a few hundred keys cost a hash and a compare
 * each.
 */
#include "collector/model/rollup_sums.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/base/hash.h"

#define SUMS_FIRST_SLOTS 256

struct rollup_sums_s {
  size_t n_ints, n_texts, n_values;
  rollup_merge_t merge[ROLLUP_SUMS_MAX_VALUES];
  rollup_sum_t *keys;
  size_t n_keys, cap_keys;
  uint32_t *slots; /* 0 empty, else a key's index + 1 */
  size_t n_slots;  /* a power of two */
};

rollup_sums_t *rollup_sums_new(size_t n_ints, size_t n_texts, size_t n_values,
                               const rollup_merge_t *merge) {
  if (n_ints > ROLLUP_SUMS_MAX_INTS || n_texts > ROLLUP_SUMS_MAX_TEXTS ||
      n_values > ROLLUP_SUMS_MAX_VALUES)
    return NULL;
  rollup_sums_t *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->n_ints = n_ints;
  s->n_texts = n_texts;
  s->n_values = n_values;
  memcpy(s->merge, merge, n_values * sizeof *merge);
  s->slots = calloc(SUMS_FIRST_SLOTS, sizeof *s->slots);
  if (!s->slots) {
    free(s);
    return NULL;
  }
  s->n_slots = SUMS_FIRST_SLOTS;
  return s;
}

void rollup_sums_free(rollup_sums_t *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n_keys; i++)
    free((char *)s->keys[i].text[0]);
  free(s->keys);
  free(s->slots);
  free(s);
}

size_t rollup_sums_count(const rollup_sums_t *s) {
  return s->n_keys;
}

const rollup_sum_t *rollup_sums_at(const rollup_sums_t *s, size_t i) {
  return &s->keys[i];
}

/* The lengths hashed with the bytes: ("ab", "c") and ("a", "bc") differ. */
static uint64_t hash_of(const rollup_sums_t *s, const int64_t *ints, const char *const *text,
                        const size_t *text_len) {
  uint64_t h = perf__fnv1a(PERF__FNV_OFFSET, ints, s->n_ints * sizeof *ints);
  for (size_t i = 0; i < s->n_texts; i++) {
    h = perf__fnv1a(h, &text_len[i], sizeof text_len[i]);
    h = perf__fnv1a(h, text[i], text_len[i]);
  }
  return perf__mix64(h);
}

static bool same_key(const rollup_sums_t *s, const rollup_sum_t *k, uint64_t hash,
                     const int64_t *ints, const char *const *text, const size_t *text_len) {
  if (k->hash != hash || memcmp(k->ints, ints, s->n_ints * sizeof *ints) != 0) return false;
  for (size_t i = 0; i < s->n_texts; i++)
    if (k->text_len[i] != text_len[i] || memcmp(k->text[i], text[i], text_len[i]) != 0)
      return false;
  return true;
}

/* The slot of hash's key, or the empty slot where it would go. */
static size_t slot_of(const rollup_sums_t *s, uint64_t hash, const int64_t *ints,
                      const char *const *text, const size_t *text_len) {
  size_t mask = s->n_slots - 1;
  for (size_t at = hash & mask;; at = (at + 1) & mask) {
    uint32_t k = s->slots[at];
    if (!k || same_key(s, &s->keys[k - 1], hash, ints, text, text_len)) return at;
  }
}

/* Twice the slots, every key placed again: the index at most half full. */
static int grow_slots(rollup_sums_t *s) {
  size_t n = s->n_slots * 2;
  uint32_t *slots = calloc(n, sizeof *slots);
  if (!slots) return -1;
  for (size_t i = 0; i < s->n_keys; i++) {
    size_t at = s->keys[i].hash & (n - 1);
    while (slots[at])
      at = (at + 1) & (n - 1);
    slots[at] = (uint32_t)(i + 1);
  }
  free(s->slots);
  s->slots = slots;
  s->n_slots = n;
  return 0;
}

/* The new key's copy of the row's key, its values the row's. */
static int add_key(rollup_sums_t *s, uint64_t hash, const int64_t *ints, const char *const *text,
                   const size_t *text_len, const int64_t *values) {
  if (s->n_keys == s->cap_keys) {
    size_t cap = s->cap_keys ? s->cap_keys * 2 : 64;
    rollup_sum_t *keys = realloc(s->keys, cap * sizeof *keys);
    if (!keys) return -1;
    s->keys = keys;
    s->cap_keys = cap;
  }
  size_t bytes = 1; /* a key without texts still owns an allocation */
  for (size_t i = 0; i < s->n_texts; i++)
    bytes += text_len[i] + 1;
  char *buf = malloc(bytes);
  if (!buf) return -1;
  rollup_sum_t *k = &s->keys[s->n_keys];
  memset(k, 0, sizeof *k);
  k->hash = hash;
  memcpy(k->ints, ints, s->n_ints * sizeof *ints);
  k->text[0] = buf;
  for (size_t i = 0; i < s->n_texts; i++) {
    memcpy(buf, text[i], text_len[i]);
    buf[text_len[i]] = '\0';
    k->text[i] = buf;
    k->text_len[i] = text_len[i];
    buf += text_len[i] + 1;
  }
  memcpy(k->values, values, s->n_values * sizeof *values);
  s->n_keys++;
  return 0;
}

/* k's values with the row's merged in; -2 (k unchanged) when a sum
   overflows. */
static int merge_into(const rollup_sums_t *s, rollup_sum_t *k, const int64_t *values) {
  int64_t merged[ROLLUP_SUMS_MAX_VALUES];
  for (size_t i = 0; i < s->n_values; i++) {
    int64_t a = k->values[i], b = values[i];
    switch (s->merge[i]) {
    case ROLLUP_SUM:
      if (__builtin_add_overflow(a, b, &merged[i])) return -2;
      break;
    case ROLLUP_LEAST: merged[i] = b < a ? b : a; break;
    case ROLLUP_GREATEST: merged[i] = b > a ? b : a; break;
    }
  }
  memcpy(k->values, merged, s->n_values * sizeof *merged);
  return 0;
}

int rollup_sums_add(rollup_sums_t *s, const int64_t *ints, const char *const *text,
                    const size_t *text_len, const int64_t *values) {
  uint64_t hash = hash_of(s, ints, text, text_len);
  size_t at = slot_of(s, hash, ints, text, text_len);
  if (s->slots[at]) return merge_into(s, &s->keys[s->slots[at] - 1], values);
  if (s->n_keys >= UINT32_MAX / 2) return -1;
  if ((s->n_keys + 1) * 2 > s->n_slots) {
    if (grow_slots(s) != 0) return -1;
    at = slot_of(s, hash, ints, text, text_len);
  }
  if (add_key(s, hash, ints, text, text_len, values) != 0) return -1;
  s->slots[at] = (uint32_t)s->n_keys;
  return 0;
}
