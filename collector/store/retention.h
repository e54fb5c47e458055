/*
 * retention.h - the retention job: a thread that deletes data older than
 * --retention-days at start and then every --retention-interval seconds,
 * until stopped.
 */
#ifndef PERF_COLLECTOR_RETENTION_H
#define PERF_COLLECTOR_RETENTION_H

#include "collector/store/store.h"

typedef struct retention_s retention_t;

/* NULL when the thread cannot be started. */
retention_t *retention_start(const store_ops_t *ops, store_t *store, unsigned days,
                             unsigned interval_s);
/* Wake the thread, wait for it to end. */
void retention_stop(retention_t *r);

#endif
