/*
 * rollup_sums.h - rollup rows (rollup_sql.h's tables) summed per key in
 * memory, as the SQL's GROUP BY of a fold sums them: a row's key is its
 * bucket, text columns and integer columns; its values are summed, or
 * kept least or greatest, column by column. A fold of the SQLite store
 * (sqlite_rollups.c) reads its delta rows into one and upserts each key
 * once, instead of sorting every delta row in SQLite to group them.
 * Not thread-safe by itself.
 */
#ifndef PERF_COLLECTOR_ROLLUP_SUMS_H
#define PERF_COLLECTOR_ROLLUP_SUMS_H

#include <stddef.h>
#include <stdint.h>

#define ROLLUP_SUMS_MAX_TEXTS 8
#define ROLLUP_SUMS_MAX_INTS 2
#define ROLLUP_SUMS_MAX_VALUES 8

/* How a value column merges: sum(), min() or max() in the SQL. */
typedef enum { ROLLUP_SUM, ROLLUP_LEAST, ROLLUP_GREATEST } rollup_merge_t;

/* A key and its merged values. The texts are the table's own copies,
   each of text_len[i] bytes with a NUL after them. */
typedef struct rollup_sum_s {
  uint64_t hash;
  int64_t ints[ROLLUP_SUMS_MAX_INTS];
  const char *text[ROLLUP_SUMS_MAX_TEXTS];
  size_t text_len[ROLLUP_SUMS_MAX_TEXTS];
  int64_t values[ROLLUP_SUMS_MAX_VALUES];
} rollup_sum_t;

typedef struct rollup_sums_s rollup_sums_t;

/* A table of keys of n_ints integers (the bucket first) and n_texts
   texts, and n_values values merged as merge says. NULL when out of
   memory or past the maxima. */
rollup_sums_t *rollup_sums_new(size_t n_ints, size_t n_texts, size_t n_values,
                               const rollup_merge_t *merge);
void rollup_sums_free(rollup_sums_t *s);

/* A row added: its values merged into its key's, or a new key. 0; -1 when
   out of memory; -2 when a sum leaves the 64-bit integers (as SQLite's
   sum() fails). The table is unchanged by a failed add. */
int rollup_sums_add(rollup_sums_t *s, const int64_t *ints, const char *const *text,
                    const size_t *text_len, const int64_t *values);

/* The keys, in the order they were first added. */
size_t rollup_sums_count(const rollup_sums_t *s);
const rollup_sum_t *rollup_sums_at(const rollup_sums_t *s, size_t i);

#endif
