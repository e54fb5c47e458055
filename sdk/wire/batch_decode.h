/*
 * batch_decode.h - the bounded reader of a batch payload (perf.v1.Batch in
 * one zstd frame), shared by the collector, perf-dump, the SDK's hang
 * markers and the tests. Stateless; any thread.
 */
#ifndef PERF_WIRE_BATCH_DECODE_H
#define PERF_WIRE_BATCH_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "perf/v1/perf.pb-c.h"

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

/* The first step of perf__batch_decode alone: the capped streaming zstd
   decompression, its errors as above. *out (malloc'ed, the caller frees;
   NULL for an empty payload) holds *out_len bytes, for a reader that looks
   at the protobuf before unpacking it (the collector's limits). */
int perf__batch_decompress(const uint8_t *data, size_t len, size_t max_decompressed, uint8_t **out,
                           size_t *out_len);
/* The same with the caller's zstd context (ZSTD_createDCtx; reset here),
   for a thread that decompresses batch after batch: creating a context
   costs more than decompressing a batch of a few KB. */
struct ZSTD_DCtx_s;
int perf__batch_decompress_with(struct ZSTD_DCtx_s *d, const uint8_t *data, size_t len,
                                size_t max_decompressed, uint8_t **out, size_t *out_len);

/* The same checks on an already serialized (uncompressed) Batch. */
int perf__batch_decode_uncompressed(const uint8_t *data, size_t len, Perf__V1__Batch **out);
/* The same, unpacked with allocator a (NULL: protobuf-c's default);
   *out is freed with perf__v1__batch__free_unpacked(*out, a), or with
   the allocator's own memory (an arena). */
int perf__batch_decode_uncompressed_with(ProtobufCAllocator *a, const uint8_t *data, size_t len,
                                         Perf__V1__Batch **out);

/* A batch as the SDK keeps it on disk: one zstd frame (the http sink's
   spool), or the serialized Batch itself (the file sink's batch records and
   hang markers, never compressed: docs/protocol.md, "Batches at rest"),
   told apart by zstd's frame magic (28 b5 2f fd; a serialized Batch starts
   with a field tag, never 0x28). An uncompressed payload over
   max_decompressed is PERF_E_TRUNCATED. The collector accepts zstd only
   (perf__batch_decompress). */
int perf__batch_decode_stored(const uint8_t *data, size_t len, size_t max_decompressed,
                              Perf__V1__Batch **out);

#endif
