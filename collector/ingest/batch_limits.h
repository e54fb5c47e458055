/*
 * batch_limits.h - what one batch may hold, checked before it costs memory.
 * A hostile body is small and expands: zstd (capped by
 * --max-decompressed-bytes), then protobuf-c's unpack (an empty Frame is 2
 * bytes on the wire and about 90 in memory), then the record ingest builds
 * (one JSON object and one label per frame of every stack). So the
 * decompressed bytes are walked once before the unpack, without allocating
 * (batch_limits_scan: table sizes, per-event arrays, and what protobuf-c
 * would allocate), and the unpacked batch is sized again as text before the
 * record is built (batch_limits_text). Stateless; any thread (ingest runs
 * it on the MHD worker that received the body).
 */
#ifndef PERF_COLLECTOR_BATCH_LIMITS_H
#define PERF_COLLECTOR_BATCH_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#include "perf/v1/perf.pb-c.h"

typedef struct batch_limits_s {
  /* Per batch, 413 above: the tables. */
  size_t strings, modules, functions, frames, stacks, events;
  size_t event_samples; /* per event: samples, stack_counts and threads each; 413 */
  size_t stack_frames;  /* per stack: deeper stacks are cut (batch_limits_cut_stack) */
  size_t string_bytes;  /* longer strings are cut (batch_limits_cut_string) */
  size_t decoded_bytes; /* protobuf-c's allocations for the batch, estimated; 413 */
  size_t text_bytes;    /* the stacks as ingest stores them (JSON, labels); 413 */
} batch_limits_t;

/* The defaults (docs/api.md, "Limits"). */
#define BATCH_LIMIT_STRINGS 65536
#define BATCH_LIMIT_MODULES 4096
#define BATCH_LIMIT_FUNCTIONS 65536
#define BATCH_LIMIT_FRAMES 65536
#define BATCH_LIMIT_STACKS 16384
#define BATCH_LIMIT_EVENTS 4096
#define BATCH_LIMIT_EVENT_SAMPLES 20000 /* the SDK's own cap per event */
/* Frames per stack: the SDK sends at most 256 per sample (docs/operations.md);
   512 keeps the flame graph's JSON nesting (2 levels a frame) under the
   2048 levels common JSON parsers accept (jansson, browsers' are deeper). */
#define BATCH_LIMIT_STACK_FRAMES 512
#define BATCH_LIMIT_STRING_BYTES 4096
#define BATCH_LIMIT_DECODED_BYTES (64u << 20)
#define BATCH_LIMIT_TEXT_BYTES (32u << 20)

/* The frame that stands for the cut part of a stack, and the end of a cut
   string. */
#define BATCH_TRUNCATED "<truncated>"

void batch_limits_default(batch_limits_t *l);

/* Walk the serialized Batch (data, len) without unpacking it: 0 when it is
   within l; 413 with why naming the limit ("batch over the limit: 70000
   frames (--max-batch-frames 65536)"); 400 when it is not protobuf (why
   says so). The walk is iterative, its depth fixed by the schema. */
unsigned batch_limits_scan(const batch_limits_t *l, const uint8_t *data, size_t len, char *why,
                           size_t why_size);

/* The bytes ingest's record of bt will take (frames JSON, labels, group
   names), once stacks are cut at l->stack_frames; 413 with why when over
   l->text_bytes, else 0. */
unsigned batch_limits_text(const batch_limits_t *l, const Perf__V1__Batch *bt, char *why,
                           size_t why_size);

/* Every stack deeper than max keeps its innermost max - 1 frames and gets
   one frame named BATCH_TRUNCATED as its outermost (added once to bt's
   tables, allocated with a as the batch was unpacked: NULL for
   protobuf-c's default); the stack's array is reused. 0, or -1 when out
   of memory. */
int batch_limits_cut_stacks(ProtobufCAllocator *a, Perf__V1__Batch *bt, size_t max);

/* A string longer than max bytes is cut on a whole UTF-8 character and
   ends in BATCH_TRUNCATED, in place (it only gets shorter); max below the
   mark's length leaves it whole. */
void batch_limits_cut_string(char *s, size_t max);

#endif
