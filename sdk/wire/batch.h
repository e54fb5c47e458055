/*
 * batch.h - the batch builder of the wire path: one perf.v1.Batch
 * (proto/perf/v1/perf.proto) with deduplicated tables (strings, modules,
 * functions, frames, stacks) and its events, serialized with protobuf-c and
 * compressed into one zstd frame.
 *
 * The builder knows the wire's tables, not the SDK's events: a caller adds
 * an event as a transaction. It opens it (perf__batch_begin_event), interns
 * what the event's stacks need (modules, functions, frames, stacks, strings)
 * and gives the event's description to perf__batch_add_event, which
 * commits it. Any failure on the way is handed to perf__batch_abort_event,
 * which removes every entry interned since the event was opened. The SDK's
 * events are turned into these calls by sdk/pipeline/event_encode.c; an
 * event of a decoded batch by perf__batch_copy_event (batch_copy.c).
 *
 * A builder is used by one thread at a time (the writer).
 *
 * The bound: the serialized (uncompressed) batch never grows past
 * options.max_bytes. Every table entry and event is sized exactly with
 * protobuf-c as it is added, the batch header with its largest possible
 * size, so the estimate is an upper bound of the real size. A collector can
 * cap decompression at max_bytes.
 */
#ifndef PERF_WIRE_BATCH_H
#define PERF_WIRE_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perf/v1/perf.pb-c.h"
#include "perf_sdk.h"

#define PERF__BATCH_DEFAULT_MAX_BYTES (1u << 20) /* 1 MiB */
#define PERF__BATCH_MIN_MAX_BYTES 1024u
#define PERF__BATCH_MAX_MAX_BYTES (64u << 20) /* 64 MiB */
#define PERF__BATCH_DEFAULT_ZSTD_LEVEL 3
#define PERF__BATCH_ID_BYTES 16
#define PERF__BATCH_MAX_DEPTH 1024 /* frames of one stack, the most the SDK captures */
#define PERF__BATCH_MAX_LINES 32   /* lines of one frame (its inline chain) */

/* An intern call's answer when the entry would take the batch past
   max_bytes (positive: not a perf_error_t; perf__batch_abort_event turns it
   into one). */
#define PERF__BATCH_FULL 1

typedef struct perf__batch_options_s {
  int zstd_level;    /* 1..19, default 3 */
  bool symbolize;    /* frames carry function names (Batch.symbolized); default true */
  size_t max_bytes;  /* serialized batch bound, PERF__BATCH_MIN_MAX_BYTES..
                        PERF__BATCH_MAX_MAX_BYTES; default 1 MiB */
  bool uncompressed; /* finish emits the serialized protobuf without zstd
                        (protoc --decode reads it): journal records, the file
                        sink's batch records, hang markers, tools; default
                        false (what is uploaded is zstd) */
} perf__batch_options_t;

/* Events dropped since the previous batch, by reason (DropCounters). */
typedef struct perf__batch_drops_s {
  uint64_t rate_limited; /* over max_events_per_hour */
  uint64_t queue_full;   /* writer queue full, or still queued at shutdown */
  uint64_t sink_failed;  /* the sink gave up on them */
  uint64_t spool_quota;  /* evicted from the disk spool */
  uint64_t oversized;    /* too large for an empty batch */
} perf__batch_drops_t;

/* What describes the process (Batch.resource); host, pid, os and arch are
   read by the builder. Strings are copied. */
typedef struct perf__batch_resource_s {
  const char *app_name, *app_version, *environment;
  struct {
    const char *key, *value;
  } tags[PERF_MAX_TAGS];
  size_t tag_count;
} perf__batch_resource_t;

/* A module to intern (Module). */
typedef struct perf__batch_module_s {
  const char *path;
  const uint8_t *build_id;
  size_t build_id_len;
  uint64_t load_bias, start, end; /* start and end module-relative */
  bool only_basename;
  bool executable; /* the process's executable (Module.executable) */
} perf__batch_module_t;

/* A function to intern (Function): the name people read (demangled) and,
   when it differs, the raw linkage name (system_name; NULL for none).
   Neither need be NUL-terminated. */
typedef struct perf__batch_function_s {
  const char *name;
  size_t name_len;
  const char *system_name;
  size_t system_name_len;
} perf__batch_function_t;

/* One line of a frame (Line): a 1-based function, the source file as a
   string index (0: unknown), line and column (0: unknown). */
typedef struct perf__batch_line_s {
  uint32_t function, file, line, column;
} perf__batch_line_t;

/* A frame to intern (Frame): module and function are 1-based references
   returned by the intern calls, 0 for none. lines: the frame's inline
   chain, innermost first, the physical function (`function`) last; at
   most PERF__BATCH_MAX_LINES, NULL for none. Lines are part of a frame's
   identity. */
typedef struct perf__batch_frame_s {
  uint32_t module, function;
  uint64_t address, function_offset, runtime_address;
  const perf__batch_line_t *lines;
  size_t line_count;
} perf__batch_frame_t;

/* A thread of an event; name need not be NUL-terminated. */
typedef struct perf__batch_thread_s {
  uint32_t tid;
  const char *name;
  size_t name_len;
  int32_t cpu_percent;
} perf__batch_thread_t;

/* How many samples of one thread had one (interned, 1-based) stack. */
typedef struct perf__batch_count_s {
  uint32_t stack, tid, samples;
} perf__batch_count_t;

/* One sample: stack 0 when the capture failed with `error`. state and
   fd_kind: the wire's SampleState and FdKind values (0: unknown, none);
   syscall: the call's name, NULL or "" for none. An event whose states
   are all unknown sends no state columns. weight_ns: the CPU time it
   stands for (events with `weighted` set; sent as whole microseconds,
   sample_weights_micros). */
typedef struct perf__batch_sample_s {
  int64_t mono_ns;
  uint32_t tid, stack;
  int32_t error;
  uint8_t state, fd_kind;
  const char *syscall;
  uint64_t weight_ns;
} perf__batch_sample_t;

/* An event whose stacks are interned already (Event). The builder sorts a
   copy of counts (a profile's most CPU time first; then most samples, ties
   in the given order): the first is the dominant stack. Sample times go out as whole-microsecond
   offsets from start_mono_ns. */
typedef struct perf__batch_event_s {
  Perf__V1__EventKind kind;
  int64_t start_unix_ns, start_mono_ns, duration_ns;
  uint32_t tid;
  int32_t cpu_percent;
  const char *reason; /* NUL-terminated; NULL or "" for none */
  const char *label;  /* the unit of work's label; NULL or "" for none */
  uint64_t samples_dropped;
  const perf__batch_thread_t *threads;
  size_t thread_count;
  const perf__batch_count_t *counts;
  size_t count_count;
  const perf__batch_sample_t *samples;
  size_t sample_count;
  bool weighted;    /* the samples carry weights (a CPU event's CPU time per sample) */
  const char *loop; /* hang, fatal hang: the loop's name; NULL or "" for none */
  /* A profile's counts (EVENT_KIND_PROFILE), one entry per count or NULL
     for none: the CPU time each count's samples stand for (sent as whole
     microseconds, StackCount.weight_micros) and their state (the wire's
     SampleState value, StackCount.state). */
  const uint64_t *count_weights_ns;
  const uint8_t *count_states;
} perf__batch_event_t;

/* The watched loop's statistics (LoopStats): time watched, time busy,
   and the units of work that ended by duration bucket. Bucket i holds
   units of [PERF__LOOP_BUCKET_UPPER_MS[i - 1], PERF__LOOP_BUCKET_UPPER_MS[i])
   milliseconds; the last bucket has no upper bound. */
#define PERF__LOOP_BUCKETS 9
#define PERF__LOOP_BUCKET_UPPER_MS                                                                 \
  { 50, 100, 250, 500, 1000, 2000, 5000, 10000 }
typedef struct perf__batch_loop_stats_s {
  uint64_t watched_ns, busy_ns;
  uint64_t units[PERF__LOOP_BUCKETS];
} perf__batch_loop_stats_t;

/* Every watched loop's statistics: their sum (Batch.loop_stats, what
   collectors that do not know Batch.loops read) and each loop's own, one
   entry per name (Batch.loops; a name past PERF__BATCH_MAX_LOOPS counts in
   the sum only). */
#define PERF__BATCH_LOOP_NAME_BYTES 31 /* PERF_SDK_MAX_LOOP_NAME_BYTES */
#define PERF__BATCH_MAX_LOOPS 64       /* named loops per batch (PERF_SDK_MAX_LOOPS) */
typedef struct perf__batch_named_loop_s {
  char name[PERF__BATCH_LOOP_NAME_BYTES + 1];
  perf__batch_loop_stats_t stats;
} perf__batch_named_loop_t;
typedef struct perf__batch_loops_s {
  perf__batch_loop_stats_t total;
  size_t n_loops;
  perf__batch_named_loop_t loops[PERF__BATCH_MAX_LOOPS];
} perf__batch_loops_t;

/* Add loop `name`'s statistics to s: to the sum and to its name's entry. */
void perf__batch_loops_add(perf__batch_loops_t *s, const char *name,
                           const perf__batch_loop_stats_t *stats);
/* Add all of src to s (sum to sum, each named entry to its name's). */
void perf__batch_loops_merge(perf__batch_loops_t *s, const perf__batch_loops_t *src);

/* The bucket of a unit of work that lasted duration_ns (< 0 counts as 0). */
static inline unsigned perf__batch_loop_bucket(int64_t duration_ns) {
  static const int64_t upper_ms[PERF__LOOP_BUCKETS - 1] = PERF__LOOP_BUCKET_UPPER_MS;
  unsigned i = 0;
  while (i < PERF__LOOP_BUCKETS - 1 && duration_ns >= upper_ms[i] * 1000000)
    i++;
  return i;
}

typedef struct perf__batch_builder_s perf__batch_builder_t;

/* Fill *opts with the defaults above. */
void perf__batch_options_init(perf__batch_options_t *opts);

/* A new empty builder. opts NULL means the defaults. Errors:
   PERF_E_INVALID_ARGUMENT (NULL res or out, an option out of range, a
   resource that alone exceeds max_bytes), PERF_E_NO_MEMORY. */
int perf__batch_builder_new(const perf__batch_resource_t *res, const perf__batch_options_t *opts,
                            perf__batch_builder_t **out);
void perf__batch_free(perf__batch_builder_t *b);

/* Open an event: what is interned from now on belongs to it. */
void perf__batch_begin_event(perf__batch_builder_t *b);

/* The intern calls: the 1-based index (0-based for strings, where 0 is "")
   of an equal entry, added when new. 0, PERF__BATCH_FULL, or
   PERF_E_NO_MEMORY (PERF_E_INVALID_ARGUMENT for a frame with more than
   PERF__BATCH_MAX_LINES lines); after a failure the event must be
   aborted. Functions are equal when name and system name are; stacks when
   their frames and their end (Stack.end) are. */
int perf__batch_intern_string(perf__batch_builder_t *b, const char *text, size_t len,
                              uint32_t *out);
int perf__batch_intern_function(perf__batch_builder_t *b, const perf__batch_function_t *f,
                                uint32_t *out);
int perf__batch_intern_module(perf__batch_builder_t *b, const perf__batch_module_t *m,
                              uint32_t *out);
int perf__batch_intern_frame(perf__batch_builder_t *b, const perf__batch_frame_t *f, uint32_t *out);
int perf__batch_intern_stack(perf__batch_builder_t *b, const uint32_t *frames, uint32_t depth,
                             Perf__V1__StackEnd end, uint32_t *out);

/*
 * Commit the open event. Returns 0, or, with the batch as it was before
 * perf__batch_begin_event:
 *  - PERF_E_NO_MEMORY when the event does not fit in what is left of
 *    max_bytes (finish this batch and add it to the next one), or when an
 *    allocation failed;
 *  - PERF_E_TRUNCATED when it does not fit even in an empty batch (drop it
 *    and count it as oversized).
 */
int perf__batch_add_event(perf__batch_builder_t *b, const perf__batch_event_t *ev);

/* Give up the open event after a failed intern call `err`: the batch is as
   it was before perf__batch_begin_event. Returns `err` as add_event would
   (PERF__BATCH_FULL becomes PERF_E_NO_MEMORY or PERF_E_TRUNCATED). */
int perf__batch_abort_event(perf__batch_builder_t *b, int err);

/* Copy event `index` of the decoded batch `src` into the builder as one
   transaction, with its kind and reason replaced (reason NULL: kept).
   Errors as perf__batch_add_event; PERF_E_INVALID_ARGUMENT for a bad index. */
int perf__batch_copy_event(perf__batch_builder_t *b, const Perf__V1__Batch *src, size_t index,
                           Perf__V1__EventKind kind, const char *reason);

/* Add `stats` to the batch's LoopStats (summed with what it holds). A
   batch with loop stats and no event is a batch too (a stats-only batch):
   perf__batch_opened_ns and perf__batch_has_content count it. 0,
   PERF_E_NO_MEMORY when the batch has no room left for them (finish it
   and add them to the next: an empty batch always has), or
   PERF_E_INVALID_ARGUMENT for NULL arguments. */
int perf__batch_add_loop_stats(perf__batch_builder_t *b, const perf__batch_loop_stats_t *stats);

/* The decoded batch's LoopStats into *out (all 0 when it has none);
   whether it had some. More than PERF__LOOP_BUCKETS buckets: the rest are
   added to the last. */
bool perf__batch_loop_stats_of(const Perf__V1__Batch *src, perf__batch_loop_stats_t *out);

/* perf__batch_add_loop_stats for every loop: the sum, and each named
   loop's entry (Batch.loops), each new name's room taken at its largest. */
int perf__batch_add_loops(perf__batch_builder_t *b, const perf__batch_loops_t *loops);

/* The decoded batch's LoopStats and its Batch.loops into *out (a batch of
   an SDK that watched one loop: the sum alone, no named entry); whether it
   had loop stats. */
bool perf__batch_loops_of(const Perf__V1__Batch *src, perf__batch_loops_t *out);

/* The batch holds an event or loop stats. */
bool perf__batch_has_content(const perf__batch_builder_t *b);

/* Counts a caller may key caches of interned entries on: it changes whenever
   entries may have been removed (an aborted event, a finished or reset
   batch). */
uint64_t perf__batch_generation(const perf__batch_builder_t *b);

/* Whether frames are to carry function names (options.symbolize). */
bool perf__batch_symbolized(const perf__batch_builder_t *b);

/* Events in the current batch. */
size_t perf__batch_event_count(const perf__batch_builder_t *b);

/* Upper bound of the current batch's serialized size (<= max_bytes). */
size_t perf__batch_encoded_size(const perf__batch_builder_t *b);

/* Monotonic time (perf__now_ns) the current batch's first event (or its
   first loop stats) was added; 0 when empty. The writer finishes a batch batch_max_delay_ms after
   it. */
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

/* perf__batch_finish with a batch id chosen by the caller (the journal's:
   the id is picked when the batch opens, so that a batch rebuilt from its
   journal after a crash carries the same id). Same results. */
int perf__batch_finish_as(perf__batch_builder_t *b, const perf__batch_drops_t *drops,
                          const uint8_t batch_id[PERF__BATCH_ID_BYTES], uint8_t **out, size_t *len);

/* A new random batch id (getrandom): 0 or PERF_E_SYSTEM. */
int perf__batch_new_id(uint8_t id[PERF__BATCH_ID_BYTES]);

/* Empty the builder without producing a batch (the sequence is kept). */
void perf__batch_reset(perf__batch_builder_t *b);

#endif
