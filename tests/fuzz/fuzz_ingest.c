/*
 * fuzz_ingest.c - libFuzzer target for the collector's ingest path: the
 * bytes of one POST /v1/batches body go through ingest_batch (collector/
 * ingest.c) exactly as server.c hands them over: the capped streaming zstd
 * decompression and protobuf decode of perf__batch_decode, the collector's
 * checks, the store record (signatures, frames as JSON, hang groups) and
 * the real SQLite store on ":memory:".
 *
 * A custom mutator keeps the fuzzer past zstd: a frame (the SDK's carry a
 * checksum) is decompressed, its protobuf mutated with libFuzzer's own
 * mutator, and compressed again, so most inputs reach the protobuf decoder,
 * the reference checks and the record building; one in eight mutations
 * works on the compressed bytes themselves (zstd's error paths).
 *
 * The header batch id is taken from the payload when it decodes (so the
 * id check does not stop every input before the record is built); inputs
 * that do not decode get an all-zero id and stop at the decoder.
 *
 * Invariants checked per input (a violation aborts, which libFuzzer reports):
 * the status is one ingest.h promises; an input the decoder accepts with a
 * resource is stored (200) unless it is over a batch limit (413 naming the
 * flag, batch_limits.h) or has loop stats of more than 9 buckets (400) with the decoded event and
 * sample counts, and the store then holds exactly that batch and its events, and one stack_counts
 * row per stack signature and thread of each event: at least one for each event with counts, at
 * most one per distinct (stack, thread) of the batch (stacks of the same frame names are one
 * signature). The store is emptied after each input (delete_older_than) so memory stays
 * bounded over millions of runs.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "collector/ingest/ingest.h"
#include "collector/store/store.h"
#include "collector/symbols/symbolize.h"
#include "perf_sdk.h"
#include "sdk/wire/batch_decode.h"

/* The collector's default --max-decompressed-bytes (main.c). */
#define MAX_DECOMPRESSED (16u << 20)
#define MUTATE_RAW_MAX (256u << 10) /* a mutated protobuf's size bound */

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

static store_t *g_store;
/* Unnamed frames are looked up by build-id in a symbols directory that
   does not exist: the lookup path runs, every build-id is "no file". */
static symbolizer_t *g_symbols;

static void close_store(void) {
  store_sqlite_ops.close(g_store);
  g_store = NULL;
  symbolizer_free(g_symbols);
  g_symbols = NULL;
}

#define REQUIRE(cond)                                                                              \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_ingest: invariant failed: %s (line %d)\n", #cond, __LINE__);           \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  if (store_sqlite_ops.open(":memory:", &(store_config_t){STORE_DURABLE_PROCESS, 0, 0}, &g_store) !=
      STORE_OK) {
    fprintf(stderr, "fuzz_ingest: cannot open the in-memory store\n");
    abort();
  }
  if (!(g_symbols = symbolizer_new("/nonexistent/perf-fuzz-symbols", 4))) abort();
  atexit(close_store);
  return 0;
}

/* What the decoder alone says about data: decoded, and if so its batch id,
   resource, events and samples (the sum of its stack_counts), the events
   with counts and the distinct (stack, thread) pairs of each event. */
typedef struct expected_s {
  int decoded, has_resource;
  uint8_t id[STORE_BATCH_ID_BYTES];
  uint64_t events, samples, events_counted, pairs;
} expected_t;

static expected_t expect(const uint8_t *data, size_t size) {
  expected_t x = {0};
  Perf__V1__Batch *bt = NULL;
  if (perf__batch_decode(data, size, MAX_DECOMPRESSED, &bt) != PERF_OK) return x;
  x.decoded = 1;
  x.has_resource = bt->resource != NULL;
  memcpy(x.id, bt->batch_id.data, STORE_BATCH_ID_BYTES); /* the decoder checked its length */
  x.events = bt->n_events;
  for (size_t i = 0; i < bt->n_events; i++) {
    const Perf__V1__Event *e = bt->events[i];
    x.events_counted += e->n_stack_counts > 0;
    for (size_t j = 0; j < e->n_stack_counts; j++) {
      x.samples += e->stack_counts[j]->samples;
      bool seen = false;
      for (size_t k = 0; k < j && !seen; k++)
        seen = e->stack_counts[k]->stack == e->stack_counts[j]->stack &&
               e->stack_counts[k]->tid == e->stack_counts[j]->tid;
      x.pairs += !seen;
    }
  }
  perf__v1__batch__free_unpacked(bt, NULL);
  return x;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  expected_t x = expect(data, size);
  ingest_target_t target = {
      &store_sqlite_ops, g_store, MAX_DECOMPRESSED, g_symbols, NULL, NULL, NULL, NULL, NULL, NULL};
  ingest_result_t res;
  unsigned status = ingest_batch(&target, NULL, data, size, x.id, &res);
  REQUIRE(status == res.status);
  REQUIRE(status == 200 || status == 400 || status == 413 || status == 503);
  REQUIRE(memchr(res.message, '\0', sizeof res.message) != NULL);
  bool over_limit = status == 413 && strstr(res.message, "(--max-") != NULL;
  /* A field numbered 0 (invalid protobuf; corpus/ingest/field_number_zero.zst
     has one in an Event, the tag written as the varint 0x80 0x00), which the
     collector's walk (batch_limits.c) refuses and protobuf-c's unpack keeps
     as an unknown field: a refusal of malformed bytes, not a lost batch. */
  bool stricter = status == 400 && strstr(res.message, "a bad field tag") != NULL;
  /* Loop stats of more buckets than the protocol's 9 (docs/protocol.md
     "Loop stats"): well-formed protobuf the collector refuses by meaning. */
  stricter = stricter ||
             (status == 400 && strstr(res.message, "loop_stats.busy_units_by_bucket has") != NULL);
  if (x.decoded && x.has_resource && !over_limit && !stricter) {
    if (status != 200) fprintf(stderr, "fuzz_ingest: %u %s\n", status, res.message);
    REQUIRE(status == 200 && !res.duplicate);
    REQUIRE(res.events == x.events && res.samples == x.samples);
    store_stats_t st;
    REQUIRE(store_sqlite_ops.stats(g_store, &st) == STORE_OK);
    REQUIRE(st.batches == 1 && st.events == x.events);
    REQUIRE(st.stack_counts >= x.events_counted && st.stack_counts <= x.pairs);
  } else if (!over_limit) {
    REQUIRE(status != 200);
  }
  REQUIRE(store_sqlite_ops.delete_older_than(g_store, INT64_MAX, NULL) == STORE_OK);
  return 0;
}

/* Mutate the protobuf inside a zstd frame (see the top of the file). */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned seed) {
  static uint8_t raw[MUTATE_RAW_MAX];
  if (seed % 8 == 0) return LLVMFuzzerMutate(data, size, max_size);
  size_t n = ZSTD_decompress(raw, sizeof raw, data, size);
  if (ZSTD_isError(n)) return LLVMFuzzerMutate(data, size, max_size);
  n = LLVMFuzzerMutate(raw, n, sizeof raw);
  size_t packed = ZSTD_compress(data, max_size, raw, n, 1);
  if (ZSTD_isError(packed)) return LLVMFuzzerMutate(data, size, max_size);
  return packed;
}
