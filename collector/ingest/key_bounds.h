/*
 * key_bounds.h - how much one ingest key may create per window: new
 * distinct stacks, event labels, app versions and resource tags. An
 * ingest key ships inside every copy of an app, so anyone can take it and
 * send batches that are each valid and within the rate limit but name
 * values never seen before: every one is a new stored stack, or new
 * rollup rows (a label or a version is a rollup dimension), and the
 * database and every read over it grow without end. An honest app sends
 * the same stacks and values batch after batch; the bounds sit far above
 * what it creates in a window.
 *
 * What is new: a value not in the collector's memory of values stored
 * (one set of 64-bit hashes over stacks' signatures, labels, app/version
 * pairs and tag key=value pairs, learned after each stored batch; two
 * generations of KEY_BOUNDS_KNOWN hashes each, the older dropped when the
 * newer fills). A value another key stored is not new. A collector that
 * just started, or forgot a value, counts it again: the defaults leave
 * room for an app's whole working set in one window.
 *
 * Per key: a fixed window of window_s seconds from its first new value,
 * with the values created in it per kind. A batch that would take a kind
 * past its bound is refused whole (nothing stored, the SDK keeps it and
 * retries after the seconds left in the window). Keys are kept in a table
 * of KEY_BOUNDS_MAX_KEYS; further keys share one overflow entry. Memory is
 * fixed at creation. Thread-safe (one mutex); MHD's worker threads call it.
 */
#ifndef PERF_COLLECTOR_KEY_BOUNDS_H
#define PERF_COLLECTOR_KEY_BOUNDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum key_bound_kind {
  KEY_BOUND_STACKS,
  KEY_BOUND_LABELS,
  KEY_BOUND_VERSIONS,
  KEY_BOUND_TAGS,
  KEY_BOUND_COUNT
} key_bound_kind_t;

/* The defaults per window (docs/operations.md "Per-key bounds"). An app
   sends a few hundred to a few thousand distinct stacks; a release renames
   its own; a fleet runs a few dozen versions at once. */
#define KEY_BOUNDS_WINDOW_S 3600
#define KEY_BOUNDS_STACKS 20000
#define KEY_BOUNDS_LABELS 2000
#define KEY_BOUNDS_VERSIONS 200
#define KEY_BOUNDS_TAGS 2000

#define KEY_BOUNDS_MAX_KEYS 4096
#define KEY_BOUNDS_KNOWN (1u << 17) /* hashes per generation: 2 MiB of table each */

typedef struct key_bounds_config_s {
  uint64_t max_new[KEY_BOUND_COUNT]; /* per window; 0: that kind is not bounded */
  unsigned window_s;                 /* 0: no bounds at all */
} key_bounds_config_t;

void key_bounds_default(key_bounds_config_t *c);

/* The --max-new-* flag of a kind ("--max-new-stacks") and its plural noun
   ("stacks"). */
const char *key_bound_flag(key_bound_kind_t k);
const char *key_bound_noun(key_bound_kind_t k);

typedef struct key_bounds_s key_bounds_t;

/* NULL when out of memory, or when c bounds nothing (window_s 0). */
key_bounds_t *key_bounds_new(const key_bounds_config_t *c);
void key_bounds_free(key_bounds_t *kb);

/* A value of a batch: its kind and text (a signature, a label; an app
   and its version, a tag's key and value: two texts), hashed. */
typedef struct key_value_s {
  uint64_t hash;
  uint8_t kind; /* key_bound_kind_t */
} key_value_t;

/* The value of kind k named by text, or by the pair (text, second) when
   second is not NULL. */
key_value_t key_value_of(key_bound_kind_t k, const char *text, const char *second);

/* What a refusal says. */
typedef struct key_refusal_s {
  key_bound_kind_t kind;
  uint64_t batch_new;   /* the batch's new values of that kind */
  uint64_t window_used; /* created in the key's window so far */
  uint64_t bound;
  unsigned retry_after_s; /* seconds until the window ends, >= 1; 0: never (batch_new > bound) */
} key_refusal_t;

/* May key's batch with values v[0..n) (any order, repeats counted once)
   be stored at monotonic time now_s? True, and its new values are counted
   in key's window; false with *why. v is sorted in place. */
bool key_bounds_admit(key_bounds_t *kb, const char *key, key_value_t *v, size_t n, double now_s,
                      key_refusal_t *why);

/* The values of a batch that was stored (admitted first): known from now
   on, to every key. */
void key_bounds_learn(key_bounds_t *kb, const key_value_t *v, size_t n);

#endif
