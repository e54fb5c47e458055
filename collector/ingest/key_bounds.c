/*
 * key_bounds.c - per-key bounds on new values (see key_bounds.h): the
 * known values in two open-addressed hash sets (the newer takes what is
 * learned; when it fills, the older is emptied and the two swap), the keys
 * in an open-addressed table like the rate limit's (ratelimit.c), all
 * under one mutex held for a batch's lookups only.
 */
#include "collector/ingest/key_bounds.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/base/hash.h"

#define KNOWN_SLOTS (2 * KEY_BOUNDS_KNOWN) /* a power of two: half full at most */
#define KEY_SLOTS (2 * KEY_BOUNDS_MAX_KEYS)

typedef struct known_set_s {
  uint64_t *slots; /* 0: free */
  size_t used;
} known_set_t;

typedef struct key_window_s {
  char *key; /* NULL: free slot */
  double start_s;
  bool open; /* start_s begins a window */
  uint64_t used[KEY_BOUND_COUNT];
} key_window_t;

struct key_bounds_s {
  pthread_mutex_t lock;
  key_bounds_config_t config;
  known_set_t known[2]; /* [newer]: learns; the other: the generation before */
  unsigned newer;
  size_t n_keys;
  key_window_t overflow;
  key_window_t keys[KEY_SLOTS];
};

static const char *const FLAG[KEY_BOUND_COUNT] = {"--max-new-stacks", "--max-new-labels",
                                                  "--max-new-versions", "--max-new-tags"};
static const char *const NOUN[KEY_BOUND_COUNT] = {"stacks", "labels or loop names", "versions",
                                                  "tags"};

void key_bounds_default(key_bounds_config_t *c) {
  c->window_s = KEY_BOUNDS_WINDOW_S;
  c->max_new[KEY_BOUND_STACKS] = KEY_BOUNDS_STACKS;
  c->max_new[KEY_BOUND_LABELS] = KEY_BOUNDS_LABELS;
  c->max_new[KEY_BOUND_VERSIONS] = KEY_BOUNDS_VERSIONS;
  c->max_new[KEY_BOUND_TAGS] = KEY_BOUNDS_TAGS;
}

const char *key_bound_flag(key_bound_kind_t k) {
  return (unsigned)k < KEY_BOUND_COUNT ? FLAG[k] : "?";
}

const char *key_bound_noun(key_bound_kind_t k) {
  return (unsigned)k < KEY_BOUND_COUNT ? NOUN[k] : "?";
}

key_bounds_t *key_bounds_new(const key_bounds_config_t *c) {
  if (!c->window_s) return NULL;
  key_bounds_t *kb = calloc(1, sizeof *kb);
  if (!kb) return NULL;
  kb->config = *c;
  for (int i = 0; i < 2; i++)
    if (!(kb->known[i].slots = calloc(KNOWN_SLOTS, sizeof *kb->known[i].slots))) {
      key_bounds_free(kb);
      return NULL;
    }
  pthread_mutex_init(&kb->lock, NULL);
  return kb;
}

void key_bounds_free(key_bounds_t *kb) {
  if (!kb) return;
  for (size_t i = 0; i < KEY_SLOTS; i++)
    free(kb->keys[i].key);
  free(kb->known[0].slots);
  free(kb->known[1].slots);
  if (kb->known[0].slots && kb->known[1].slots) pthread_mutex_destroy(&kb->lock);
  free(kb);
}

key_value_t key_value_of(key_bound_kind_t k, const char *text, const char *second) {
  uint8_t tag = (uint8_t)k;
  uint64_t h = perf__fnv1a(PERF__FNV_OFFSET, &tag, 1);
  h = perf__fnv1a(h, text, strlen(text) + 1); /* its NUL ends the first text */
  if (second) h = perf__fnv1a(h, second, strlen(second));
  h = perf__mix64(h);
  return (key_value_t){h ? h : 1, tag};
}

/* ---- the known values --------------------------------------------------- */

static bool set_has(const known_set_t *s, uint64_t h) {
  for (size_t i = h & (KNOWN_SLOTS - 1); s->slots[i]; i = (i + 1) & (KNOWN_SLOTS - 1))
    if (s->slots[i] == h) return true;
  return false;
}

static void set_add(known_set_t *s, uint64_t h) {
  size_t i = h & (KNOWN_SLOTS - 1);
  while (s->slots[i] && s->slots[i] != h)
    i = (i + 1) & (KNOWN_SLOTS - 1);
  if (!s->slots[i]) s->slots[i] = h, s->used++;
}

static bool known(const key_bounds_t *kb, uint64_t h) {
  return set_has(&kb->known[kb->newer], h) || set_has(&kb->known[!kb->newer], h);
}

static void learn_one(key_bounds_t *kb, uint64_t h) {
  if (known(kb, h)) return;
  known_set_t *s = &kb->known[kb->newer];
  if (s->used >= KEY_BOUNDS_KNOWN) {
    kb->newer = !kb->newer; /* the older generation is forgotten */
    s = &kb->known[kb->newer];
    memset(s->slots, 0, KNOWN_SLOTS * sizeof *s->slots);
    s->used = 0;
  }
  set_add(s, h);
}

void key_bounds_learn(key_bounds_t *kb, const key_value_t *v, size_t n) {
  if (!kb) return;
  pthread_mutex_lock(&kb->lock);
  for (size_t i = 0; i < n; i++)
    learn_one(kb, v[i].hash);
  pthread_mutex_unlock(&kb->lock);
}

/* ---- the keys' windows -------------------------------------------------- */

/* key's window, added when new; the overflow entry when the table is full
   or out of memory. */
static key_window_t *find_window(key_bounds_t *kb, const char *key) {
  size_t i = (size_t)(perf__fnv1a(PERF__FNV_OFFSET, key, strlen(key)) % KEY_SLOTS);
  while (kb->keys[i].key) {
    if (strcmp(kb->keys[i].key, key) == 0) return &kb->keys[i];
    i = (i + 1) % KEY_SLOTS;
  }
  if (kb->n_keys >= KEY_BOUNDS_MAX_KEYS || !(kb->keys[i].key = strdup(key))) return &kb->overflow;
  kb->n_keys++;
  return &kb->keys[i];
}

static int cmp_value(const void *x, const void *y) {
  uint64_t a = ((const key_value_t *)x)->hash, b = ((const key_value_t *)y)->hash;
  return (a > b) - (a < b);
}

/* The batch's values not known, per kind, each counted once. */
static void count_new(const key_bounds_t *kb, key_value_t *v, size_t n,
                      uint64_t fresh[KEY_BOUND_COUNT]) {
  if (n > 1) qsort(v, n, sizeof *v, cmp_value);
  for (size_t i = 0; i < n; i++)
    if ((i == 0 || v[i].hash != v[i - 1].hash) && v[i].kind < KEY_BOUND_COUNT &&
        !known(kb, v[i].hash))
      fresh[v[i].kind]++;
}

/* The first kind whose bound fresh passes in w, or KEY_BOUND_COUNT. */
static key_bound_kind_t over_bound(const key_bounds_t *kb, const key_window_t *w,
                                   const uint64_t fresh[KEY_BOUND_COUNT]) {
  for (int k = 0; k < KEY_BOUND_COUNT; k++) {
    uint64_t max = kb->config.max_new[k];
    if (max && fresh[k] && (fresh[k] > max || w->used[k] > max - fresh[k]))
      return (key_bound_kind_t)k;
  }
  return KEY_BOUND_COUNT;
}

static void refuse(const key_bounds_t *kb, const key_window_t *w, key_bound_kind_t k,
                   const uint64_t fresh[KEY_BOUND_COUNT], double now_s, key_refusal_t *why) {
  uint64_t max = kb->config.max_new[k];
  double left = w->start_s + kb->config.window_s - now_s;
  *why = (key_refusal_t){k, fresh[k], w->used[k], max, 0};
  if (fresh[k] <= max) why->retry_after_s = left < 1 ? 1 : (unsigned)ceil(left);
}

bool key_bounds_admit(key_bounds_t *kb, const char *key, key_value_t *v, size_t n, double now_s,
                      key_refusal_t *why) {
  if (!kb || n == 0) return true;
  uint64_t fresh[KEY_BOUND_COUNT] = {0};
  pthread_mutex_lock(&kb->lock);
  count_new(kb, v, n, fresh);
  key_window_t *w = find_window(kb, key ? key : "");
  if (w->open && now_s >= w->start_s + kb->config.window_s) w->open = false;
  if (!w->open) memset(w->used, 0, sizeof w->used), w->start_s = now_s;
  key_bound_kind_t k = over_bound(kb, w, fresh);
  bool ok = k == KEY_BOUND_COUNT;
  if (ok) {
    for (int i = 0; i < KEY_BOUND_COUNT; i++) {
      w->used[i] += fresh[i];
      if (fresh[i]) w->open = true;
    }
  } else {
    refuse(kb, w, k, fresh, now_s, why);
  }
  pthread_mutex_unlock(&kb->lock);
  return ok;
}
