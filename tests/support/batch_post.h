/*
 * batch_post.h - a hand-made perf.v1.Batch sent to a test collector: packed
 * with protobuf-c, compressed with zstd, POSTed to /v1/batches with the
 * SDK's headers and GOOD_KEY. For the collector tests that need exact
 * stacks (inline chains, stack ends) the SDK would not produce on demand.
 */
#ifndef PERF_TEST_BATCH_POST_H
#define PERF_TEST_BATCH_POST_H

#include "collector_rig.h"
#include "perf/v1/perf.pb-c.h"

/* Send b with batch id id (set in b; id must outlive b's use); the status
   (0: no answer), the answer in *r. Any thread. */
long batch_send(const collector_t *c, Perf__V1__Batch *b, const uint8_t id[16], reply_t *r);

/* Send b (its batch_id set from seed and the pid); the answer must be 200. */
void batch_post(const collector_t *c, Perf__V1__Batch *b, unsigned seed);

/* The same, whatever the answer: its status, the reply in *r. */
long batch_post_answer(const collector_t *c, Perf__V1__Batch *b, unsigned seed, reply_t *r);

#endif
