/*
 * encoder.h - the batch builder of the wire path: turns events into one
 * perf.v1.Batch (proto/perf/v1/perf.proto) with deduplicated tables
 * (strings, modules, functions, frames, stacks), serializes it with
 * protobuf-c and compresses it into one zstd frame; and the bounded decoder
 * the tests and tools use to read such a payload back.
 *
 * A builder is used by one thread at a time: the writer thread, which adds
 * events until the batch is full (PERF_E_NO_MEMORY) or old enough, then
 * finishes it. The decoder is stateless and may run on any thread.
 *
 * The bound: a builder never lets the serialized (uncompressed) batch grow
 * past options.max_bytes. Every table entry and event is sized exactly with
 * protobuf-c as it is added, the batch header with its largest possible
 * size, so the estimate is an upper bound of the real size. The zstd payload
 * is smaller than that in practice and never larger than
 * ZSTD_compressBound(max_bytes); a collector can cap decompression at
 * max_bytes.
 */
#ifndef PERF_ENCODER_H
#define PERF_ENCODER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perf/v1/perf.pb-c.h"
#include "sdk/pipeline/config.h"
#include "sdk/pipeline/event.h"

#define PERF__BATCH_DEFAULT_MAX_BYTES (1u << 20) /* 1 MiB */
#define PERF__BATCH_MIN_MAX_BYTES 1024u
#define PERF__BATCH_MAX_MAX_BYTES (64u << 20) /* 64 MiB */
#define PERF__BATCH_DEFAULT_ZSTD_LEVEL 3
#define PERF__BATCH_ID_BYTES 16

typedef struct perf__batch_options_s {
  int zstd_level;    /* 1..19, default 3 */
  bool symbolize;    /* name functions on the device; default true */
  size_t max_bytes;  /* serialized batch bound, PERF__BATCH_MIN_MAX_BYTES..
                        PERF__BATCH_MAX_MAX_BYTES; default 1 MiB */
  bool uncompressed; /* debug and tools: finish emits the serialized protobuf
                        without zstd (protoc --decode reads it); default false */
} perf__batch_options_t;

/* Events dropped since the previous batch, by reason (DropCounters). */
typedef struct perf__batch_drops_s {
  uint64_t rate_limited; /* over max_events_per_hour */
  uint64_t queue_full;   /* writer queue full, or still queued at shutdown */
  uint64_t sink_failed;  /* the sink gave up on them */
  uint64_t spool_quota;  /* evicted from the disk spool */
  uint64_t oversized;    /* too large for an empty batch */
} perf__batch_drops_t;

typedef struct perf__batch_builder_s perf__batch_builder_t;

/* Fill *opts with the defaults above. */
void perf__batch_options_init(perf__batch_options_t *opts);

/* A new empty builder. The resource (app name, version, environment, tags)
   is copied from cfg; host, pid, os and arch are read here. opts NULL means
   the defaults. Errors: PERF_E_INVALID_ARGUMENT (NULL cfg or out, an option
   out of range, a resource that alone exceeds max_bytes), PERF_E_NO_MEMORY. */
int perf__batch_builder_new(const perf__config_t *cfg, const perf__batch_options_t *opts,
                            perf__batch_builder_t **out);

/*
 * Add one event: its threads, samples and stacks, with every module,
 * function, frame and stack deduplicated against the whole batch. Frames
 * are named with ev->mods (when symbolize is on); events carrying
 * stacks_text (fatal hangs from a previous run) have that text parsed into
 * frames of basename-only modules with function names and counts.
 * Returns 0, or, with the batch unchanged:
 *  - PERF_E_NO_MEMORY when the event does not fit in what is left of
 *    max_bytes (finish this batch and add it to the next one), or when an
 *    allocation failed;
 *  - PERF_E_TRUNCATED when the event does not fit even in an empty batch
 *    (drop it and count it as oversized);
 *  - PERF_E_INVALID_ARGUMENT for NULL arguments.
 */
int perf__batch_add_event(perf__batch_builder_t *b, const perf__event_t *ev);

/* Events in the current batch. */
size_t perf__batch_event_count(const perf__batch_builder_t *b);

/* Upper bound of the current batch's serialized size (<= max_bytes). */
size_t perf__batch_encoded_size(const perf__batch_builder_t *b);

/* Monotonic time (perf__now_ns) the current batch's first event was added;
   0 when empty. The writer finishes a batch batch_max_delay_ms after it. */
int64_t perf__batch_opened_ns(const perf__batch_builder_t *b);

/*
 * Serialize and compress the current batch (even an empty one) into
 * *out (*len bytes, malloc'd, the caller frees it with free()); the random
 * batch id is copied to batch_id when not NULL. drops may be NULL (all 0).
 * On success the builder is empty again and its sequence number advances;
 * on failure (PERF_E_NO_MEMORY, PERF_E_SYSTEM when getrandom or zstd fail)
 * it is unchanged.
 */
int perf__batch_finish(perf__batch_builder_t *b, const perf__batch_drops_t *drops, uint8_t **out,
                       size_t *len, uint8_t batch_id[PERF__BATCH_ID_BYTES]);

/* Empty the builder without producing a batch (the sequence is kept). */
void perf__batch_reset(perf__batch_builder_t *b);

void perf__batch_free(perf__batch_builder_t *b);

/*
 * Decode a payload made by perf__batch_finish: zstd decompression streamed
 * into a buffer that never grows past max_decompressed (the frame's declared
 * content size is not trusted, the window is capped to match), then the
 * protobuf, then a check that every table reference is in range and the
 * per-sample arrays agree in length. Exactly one zstd frame, nothing after it.
 * *out is freed with perf__v1__batch__free_unpacked(*out, NULL).
 * Errors: PERF_E_INVALID_ARGUMENT (not zstd, corrupt, trailing bytes, not a
 * valid Batch, a reference out of range), PERF_E_TRUNCATED (decompresses to
 * more than max_decompressed), PERF_E_NO_MEMORY.
 */
int perf__batch_decode(const uint8_t *data, size_t len, size_t max_decompressed,
                       Perf__V1__Batch **out);

/* The same checks on an already serialized (uncompressed) Batch. */
int perf__batch_decode_uncompressed(const uint8_t *data, size_t len, Perf__V1__Batch **out);

#endif
