/*
 * query_scale.h - collector_bench's scale rounds: the store the ingest run
 * filled, copied by SQL (each copy its batches, events, stack counts and
 * rollup rows moved a whole hour later per copy, under new batch ids)
 * until it holds each target's samples, then top-stacks and the flame
 * graph timed from the rollups and, as the baseline, from the raw rows
 * (the same queries with a host filter, which the rollups do not keep).
 */
#ifndef PERF_BENCH_QUERY_SCALE_H
#define PERF_BENCH_QUERY_SCALE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct scale_env_s {
  /* A collector on db (path or URI); its base URL; -1 when it did not start. */
  pid_t (*start)(const char *db, char *base, size_t base_len);
  long (*get)(const char *url, char **body); /* the status; body malloc'ed when asked */
  const char *sqlite_path;                   /* the SQLite store, or NULL */
  const char *pg_dir, *pg_name;              /* the PostgreSQL store, or NULL */
} scale_env_t;

/* Fill to each of targets[0..n) (ascending) and time the queries. */
void query_scale(const scale_env_t *env, const uint64_t *targets, size_t n);

#endif
