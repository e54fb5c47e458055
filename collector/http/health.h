/*
 * health.h - GET /healthz's answer: what the store can do now, from a
 * bounded probe of the store on a connection of its own (store_ops_t
 * health, else check) and from what the ingest threads are doing (the
 * ingest pool, job_pool.h). Answered on an MHD worker, which never stores
 * a batch nor reads the store itself: the answer comes whatever the ingest
 * and read threads wait for. States,
 * first that applies (docs/api.md "GET /healthz"):
 *   503 "lost: ..."         the database path no longer names the store opened
 *   503 "unavailable: ..."  the database cannot be reached or does not answer
 *   503 "disk full: ..."    the database's file system is (nearly) full
 *   503 "locked: ..."       another session holds the lock a batch needs
 *   503 "slow: ..."         a batch has been in the store for HEALTH_SLOW_S or more
 *   200 "ok"
 * Any MHD worker thread.
 */
#ifndef PERF_COLLECTOR_HEALTH_H
#define PERF_COLLECTOR_HEALTH_H

#include <stddef.h>

#include "collector/http/job_pool.h"
#include "collector/store/store.h"

#define HEALTH_SLOW_S 5 /* a batch this long in the store: "slow" */

/* The status (200 or 503) and its one-line text (no newline) in text. */
unsigned health_answer(const store_ops_t *ops, store_t *store, const job_load_t *load, char *text,
                       size_t len);

#endif
