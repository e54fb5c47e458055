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

/* A batch as it goes on the wire: its zstd-compressed bytes (malloc'ed,
   the holder frees data) and its id as X-Perf-Batch-Id gives it. */
typedef struct payload_s {
  uint8_t *data;
  size_t len;
  char id_hex[33];
} payload_t;

/* raw's len bytes compressed with zstd at level (the SDK's is 3) into
   p->data and p->len; p->id_hex is left as it is. */
void payload_compress(payload_t *p, const void *raw, size_t len, int level);

/* b packed and compressed at level into p, p->id_hex from b's batch_id
   ("" when it is not 16 bytes). */
void payload_pack(payload_t *p, const Perf__V1__Batch *b, int level);

/* POST p to /v1/batches with key (as post_batch); the status, the answer
   in *r. */
long payload_post(const collector_t *c, const char *key, const payload_t *p, reply_t *r);

/* Send b with batch id id (set in b; id must outlive b's use); the status
   (0: no answer), the answer in *r. Any thread. */
long batch_send(const collector_t *c, Perf__V1__Batch *b, const uint8_t id[16], reply_t *r);

/* Send b (its batch_id set from seed and the pid); the answer must be 200. */
void batch_post(const collector_t *c, Perf__V1__Batch *b, unsigned seed);

/* The same, whatever the answer: its status, the reply in *r. */
long batch_post_answer(const collector_t *c, Perf__V1__Batch *b, unsigned seed, reply_t *r);

/* A hand-made batch begun: *b empty but for its resource *res, which
   names app (version, environment and host: NULL leaves them unset). res
   must outlive b's use; the caller adds the rest. */
void batch_begin(Perf__V1__Batch *b, Perf__V1__Resource *res, const char *app, const char *version,
                 const char *env, const char *host);

/* The batch of one event with one stack, counted once: the shape of the
   bad-input and access cases. batch_one_event_init sets b's id (copied),
   its resource (app), one module (module_path), one function (named
   function, string 1), the stack (stack 1, its frames not set), its count
   (stack 1) and the event (holding that count, stack 1 dominant), all
   linked. The caller sets what its case needs: b's frames, st's frame
   ids, sc's tid and samples, the event's kind, times, tid and reason.
   Its messages point into it: not to be copied once initialized. */
typedef struct batch_one_event_s {
  Perf__V1__Batch b;
  Perf__V1__Resource res;
  Perf__V1__Module mod, *mods[1];
  Perf__V1__Function fn, *fns[1];
  Perf__V1__Stack st, *sts[1];
  Perf__V1__StackCount sc, *scs[1];
  Perf__V1__Event ev, *evs[1];
  char *strings[2];
  uint8_t id[16];
} batch_one_event_t;
void batch_one_event_init(batch_one_event_t *o, const uint8_t id[16], const char *app,
                          const char *module_path, const char *function);

/* The functions and frames of a hand-made batch: one of each per name of
   strings[1..n_strings-1] (at most BATCH_MAX_FRAMES), function i naming
   strings[i] and frame i calling function i at 0x1000 + 0x100 * (i - 1).
   batch_set_frames sets b's strings, functions and frames to them (f and
   strings must outlive b's use). */
#define BATCH_MAX_FRAMES 8
typedef struct batch_frames_s {
  Perf__V1__Function fn[BATCH_MAX_FRAMES], *fns[BATCH_MAX_FRAMES];
  Perf__V1__Frame fr[BATCH_MAX_FRAMES], *frs[BATCH_MAX_FRAMES];
} batch_frames_t;
void batch_set_frames(Perf__V1__Batch *b, batch_frames_t *f, char **strings, size_t n_strings);

/* A batch of app/version/environment with loop stats (watched_ns 0 and
   units NULL: none) and `hangs` (at most 8) hang events of hang_ms each,
   started a second ago, each sampled in one of two stacks: slow_query <-
   handle_db (the first `db` hangs), else render <- draw_frame. Sent with
   its batch_id made from seed; the status, the answer in *r. */
typedef struct loop_batch_s {
  const char *app, *version, *env;
  uint64_t watched_ns, busy_ns;
  const uint64_t *units;
  size_t n_units;
  int hangs, db;
  int64_t hang_ms;
} loop_batch_t;
long batch_post_loop(const collector_t *c, const loop_batch_t *sp, unsigned seed, reply_t *r);

/* The same batch with Batch.loops: n_loops entries of loops. */
long batch_post_loops(const collector_t *c, const loop_batch_t *sp, Perf__V1__LoopStats **loops,
                      size_t n_loops, unsigned seed, reply_t *r);

/* A batch of one window of the always-on CPU profile (EVENT_KIND_PROFILE)
   as the SDK sends it: its samples aggregated per (stack, thread, state)
   in stack_counts with their CPU time (weight_micros), no per-sample
   arrays. Stack i (1-based) is leaves[i - 1] called by root (at most
   BATCH_MAX_FRAMES - 1 leaves). */
typedef struct profile_count_s {
  uint32_t stack, tid, samples;
  uint64_t weight_micros;
  int state; /* a Perf__V1__SampleState */
} profile_count_t;
typedef struct profile_window_s {
  const char *app, *version, *host; /* version, host: NULL unset */
  const char *root;
  const char *const *leaves;
  size_t n_leaves;
  int64_t start_ns, duration_ns;
  const profile_count_t *counts; /* at most 16 */
  size_t n_counts;
} profile_window_t;

/* w's batch sent with its batch id from seed (batch_post_answer); edit
   (NULL: none) changes the event just before. The status, the answer in
   *r. */
long batch_post_profile(const collector_t *c, const profile_window_t *w,
                        void (*edit)(Perf__V1__Event *), unsigned seed, reply_t *r);

/* A batch of n distinct stacks, the flood an ingest key's bounds are
   for: stack i is one frame of module "/opt/flood/app" calling
   "<prefix>_<first + i>", sampled once by one cpu event (100 ms), started
   a second ago, labelled label (NULL: none). The resource names app and
   version (NULL: unset) and at most one tag (tag_key NULL: none). */
typedef struct distinct_batch_s {
  const char *app, *version, *label, *tag_key, *tag_value, *prefix;
  size_t first, n;
} distinct_batch_t;

/* spec's batch, its batch id made from seed and the pid, packed and
   compressed into p (p->data malloc'ed, the caller frees it). */
void batch_distinct_payload(payload_t *p, const distinct_batch_t *spec, unsigned seed);

#endif
