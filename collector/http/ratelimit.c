/*
 * ratelimit.c - token buckets per key in an open-addressing table (FNV-1a),
 * guarded by one mutex; called from MHD's worker threads.
 */
#include "collector/http/ratelimit.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TABLE_SLOTS (RATELIMIT_MAX_KEYS * 2)

typedef struct bucket_s {
  char *key; /* NULL: free slot */
  double tokens;
  double updated_s;
} bucket_t;

struct ratelimit_s {
  pthread_mutex_t lock;
  double rate, burst;
  size_t used;
  bucket_t overflow;
  bucket_t slots[TABLE_SLOTS];
};

ratelimit_t *ratelimit_new(double rate, double burst) {
  ratelimit_t *rl = calloc(1, sizeof *rl);
  if (!rl) return NULL;
  pthread_mutex_init(&rl->lock, NULL);
  rl->rate = rate;
  rl->burst = burst < 1 ? 1 : burst;
  rl->overflow.tokens = rl->burst;
  rl->overflow.updated_s = -1;
  return rl;
}

void ratelimit_free(ratelimit_t *rl) {
  if (!rl) return;
  for (size_t i = 0; i < TABLE_SLOTS; i++)
    free(rl->slots[i].key);
  pthread_mutex_destroy(&rl->lock);
  free(rl);
}

static uint64_t key_hash(const char *key) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char *p = (const unsigned char *)key; *p; p++)
    h = (h ^ *p) * 1099511628211ull;
  return h;
}

/* key's bucket, added when new; the overflow bucket when the table is full
   or out of memory. */
static bucket_t *find_bucket(ratelimit_t *rl, const char *key) {
  size_t i = (size_t)(key_hash(key) % TABLE_SLOTS);
  while (rl->slots[i].key) {
    if (strcmp(rl->slots[i].key, key) == 0) return &rl->slots[i];
    i = (i + 1) % TABLE_SLOTS;
  }
  if (rl->used >= RATELIMIT_MAX_KEYS || !(rl->slots[i].key = strdup(key))) return &rl->overflow;
  rl->used++;
  rl->slots[i].tokens = rl->burst;
  rl->slots[i].updated_s = -1;
  return &rl->slots[i];
}

static bool take_token(const ratelimit_t *rl, bucket_t *b, double now_s, unsigned *retry_after_s) {
  if (b->updated_s >= 0 && now_s > b->updated_s)
    b->tokens = fmin(rl->burst, b->tokens + (now_s - b->updated_s) * rl->rate);
  b->updated_s = now_s;
  if (b->tokens >= 1) {
    b->tokens -= 1;
    return true;
  }
  double wait = (1 - b->tokens) / rl->rate;
  *retry_after_s = (unsigned)ceil(wait < 1 ? 1 : wait);
  return false;
}

bool ratelimit_take(ratelimit_t *rl, const char *key, double now_s, unsigned *retry_after_s) {
  if (rl->rate <= 0) return true;
  pthread_mutex_lock(&rl->lock);
  bool ok = take_token(rl, find_bucket(rl, key), now_s, retry_after_s);
  pthread_mutex_unlock(&rl->lock);
  return ok;
}
