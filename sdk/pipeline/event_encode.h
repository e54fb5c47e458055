/*
 * event_encode.h - an SDK event into the open batch: its pcs become the
 * batch's modules (path, build-id, load bias), frames (module-relative
 * address, and with `symbolize` the demangled function name with its raw
 * linkage name, and the inline chain with source lines when DWARF is at
 * hand: sdk/symbols) and stacks (with how they ended); its samples,
 * threads and counts follow. Writer thread
 * (and the tests and tools that build batches from events).
 *
 * The encoder keeps what makes repeated stacks cheap: pc -> frame and map
 * module -> batch module, valid for one module snapshot (it holds a
 * reference, so the snapshot's address cannot be reused) and one builder
 * generation (an aborted event or a finished batch empties them).
 */
#ifndef PERF_PIPELINE_EVENT_ENCODE_H
#define PERF_PIPELINE_EVENT_ENCODE_H

#include "sdk/pipeline/config.h"
#include "sdk/pipeline/event.h"
#include "sdk/wire/batch.h"

typedef struct perf__event_encoder_s perf__event_encoder_t;

/* NULL when memory ran out. */
perf__event_encoder_t *perf__event_encoder_new(void);
void perf__event_encoder_free(perf__event_encoder_t *enc);

/* Add `ev` to `b` as one transaction. Returns as perf__batch_add_event:
   0, PERF_E_NO_MEMORY (does not fit: finish the batch first; or out of
   memory), PERF_E_TRUNCATED (does not fit an empty batch),
   PERF_E_INVALID_ARGUMENT. */
int perf__event_encode(perf__event_encoder_t *enc, perf__batch_builder_t *b,
                       const perf__event_t *ev);

/* The batch resource of a configuration (app name, version, environment,
   tags); the strings stay cfg's. */
void perf__config_batch_resource(const perf__config_t *cfg, perf__batch_resource_t *out);

#endif
