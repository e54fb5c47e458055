/*
 * ratelimit.h - per-API-key token buckets: `rate` batches per second with
 * bursts of `burst`. The table is bounded: once it holds RATELIMIT_MAX_KEYS
 * keys, every further key shares one overflow bucket (an open collector
 * cannot be made to grow it without bound). Thread-safe (one mutex).
 */
#ifndef PERF_COLLECTOR_RATELIMIT_H
#define PERF_COLLECTOR_RATELIMIT_H

#include <stdbool.h>

#define RATELIMIT_MAX_KEYS 4096

typedef struct ratelimit_s ratelimit_t;

/* rate <= 0 disables the limit (every take succeeds). NULL when out of memory. */
ratelimit_t *ratelimit_new(double rate, double burst);
void ratelimit_free(ratelimit_t *rl);

/* Take one token from key's bucket at monotonic time now_s. False when it
   is empty; *retry_after_s is then the whole seconds until one is back. */
bool ratelimit_take(ratelimit_t *rl, const char *key, double now_s, unsigned *retry_after_s);

#endif
