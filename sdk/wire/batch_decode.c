/*
 * batch_decode.c - the bounded batch reader (see batch_decode.h): capped
 * streaming zstd, protobuf-c, then every table reference checked. Any
 * thread.
 */
#include "sdk/wire/batch_decode.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "perf_sdk.h"
#include "sdk/wire/batch.h"

#define DECODE_CHUNK (64u << 10)

static int validate_batch(const Perf__V1__Batch *bt);

int perf__batch_decode(const uint8_t *data, size_t len, size_t max_decompressed,
                       Perf__V1__Batch **out) {
  if (!out) return PERF_E_INVALID_ARGUMENT;
  *out = NULL;
  uint8_t *buf = NULL;
  size_t n = 0;
  int err = perf__batch_decompress(data, len, max_decompressed, &buf, &n);
  if (!err) err = perf__batch_decode_uncompressed(buf, n, out);
  free(buf);
  return err;
}

int perf__batch_decompress(const uint8_t *data, size_t len, size_t max_decompressed, uint8_t **out,
                           size_t *out_len) {
  ZSTD_DCtx *d = ZSTD_createDCtx();
  if (!d) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    return PERF_E_NO_MEMORY;
  }
  int err = perf__batch_decompress_with(d, data, len, max_decompressed, out, out_len);
  ZSTD_freeDCtx(d);
  return err;
}

int perf__batch_decompress_with(ZSTD_DCtx *d, const uint8_t *data, size_t len,
                                size_t max_decompressed, uint8_t **out, size_t *out_len) {
  if (!out || !out_len) return PERF_E_INVALID_ARGUMENT;
  *out = NULL;
  *out_len = 0;
  if (!data || len == 0 || max_decompressed == 0 || max_decompressed > SIZE_MAX / 2)
    return PERF_E_INVALID_ARGUMENT;
  /* The window a frame may ask for is capped to match the output cap: a
     payload within the cap never needs more (the encoder knows the content
     size and sizes the window to it). */
  int wlog = 10; /* zstd's smallest window */
  while (wlog < 27 && ((size_t)1 << wlog) < max_decompressed)
    wlog++;
  int err = ZSTD_isError(ZSTD_DCtx_reset(d, ZSTD_reset_session_and_parameters)) ||
                    ZSTD_isError(ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, wlog))
                ? PERF_E_SYSTEM
                : 0;
  /* One byte past the cap: output reaching it proves the payload too big,
     while a payload of exactly the cap still has room to end its frame. */
  size_t limit = max_decompressed + 1;
  size_t cap = limit < DECODE_CHUNK ? limit : DECODE_CHUNK;
  uint8_t *buf = err ? NULL : malloc(cap);
  if (!err && !buf) err = PERF_E_NO_MEMORY;
  ZSTD_inBuffer in = {data, len, 0};
  size_t pos = 0;
  bool done = false;
  while (!err && !done) {
    if (pos == cap) {
      if (cap == limit) {
        err = PERF_E_TRUNCATED;
        break;
      }
      size_t bigger = cap > limit / 2 ? limit : cap * 2;
      uint8_t *grown = realloc(buf, bigger);
      if (!grown) {
        err = PERF_E_NO_MEMORY;
        break;
      }
      buf = grown;
      cap = bigger;
    }
    ZSTD_outBuffer o = {buf, cap, pos};
    size_t in_before = in.pos;
    size_t r = ZSTD_decompressStream(d, &o, &in);
    if (ZSTD_isError(r)) {
      err = ZSTD_getErrorCode(r) == ZSTD_error_frameParameter_windowTooLarge
                ? PERF_E_TRUNCATED
                : PERF_E_INVALID_ARGUMENT;
      break;
    }
    bool progress = o.pos != pos || in.pos != in_before;
    pos = o.pos;
    if (r == 0)
      done = true;
    else if (!progress && pos < cap)
      err = PERF_E_INVALID_ARGUMENT; /* input ended mid-frame */
  }
  if (!err && pos > max_decompressed) err = PERF_E_TRUNCATED;
  if (!err && in.pos != in.size) err = PERF_E_INVALID_ARGUMENT; /* bytes after the frame */
  if (err) {
    free(buf);
    return err;
  }
  *out = buf;
  *out_len = pos;
  return PERF_OK;
}

int perf__batch_decode_stored(const uint8_t *data, size_t len, size_t max_decompressed,
                              Perf__V1__Batch **out) {
  static const uint8_t zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
  if (!out) return PERF_E_INVALID_ARGUMENT;
  *out = NULL;
  if (data && len >= sizeof zstd_magic && memcmp(data, zstd_magic, sizeof zstd_magic) == 0)
    return perf__batch_decode(data, len, max_decompressed, out);
  if (len > max_decompressed) return PERF_E_TRUNCATED;
  return perf__batch_decode_uncompressed(data, len, out);
}

int perf__batch_decode_uncompressed(const uint8_t *data, size_t len, Perf__V1__Batch **out) {
  return perf__batch_decode_uncompressed_with(NULL, data, len, out);
}

int perf__batch_decode_uncompressed_with(ProtobufCAllocator *a, const uint8_t *data, size_t len,
                                         Perf__V1__Batch **out) {
  if (!out) return PERF_E_INVALID_ARGUMENT;
  *out = NULL;
  if (!data && len) return PERF_E_INVALID_ARGUMENT;
  static const uint8_t empty[1];
  Perf__V1__Batch *bt = perf__v1__batch__unpack(a, len, data ? data : empty);
  if (!bt) return PERF_E_INVALID_ARGUMENT;
  if (validate_batch(bt) != 0) {
    perf__v1__batch__free_unpacked(bt, a);
    return PERF_E_INVALID_ARGUMENT;
  }
  *out = bt;
  return PERF_OK;
}

/* Every reference in range, the per-sample arrays consistent. */
static int validate_batch(const Perf__V1__Batch *bt) {
  size_t ns = bt->n_strings, nm = bt->n_modules, nf = bt->n_functions, nfr = bt->n_frames,
         nst = bt->n_stacks;
#define STRING_OK(i) ((i) == 0 || (i) < ns)
  if (bt->batch_id.len != PERF__BATCH_ID_BYTES) return -1;
  for (size_t i = 0; i < nf; i++)
    if (!STRING_OK(bt->functions[i]->name) || !STRING_OK(bt->functions[i]->system_name)) return -1;
  for (size_t i = 0; i < nfr; i++) {
    const Perf__V1__Frame *f = bt->frames[i];
    if (f->module > nm || f->function > nf) return -1;
    for (size_t j = 0; j < f->n_lines; j++)
      if (f->lines[j]->function == 0 || f->lines[j]->function > nf || !STRING_OK(f->lines[j]->file))
        return -1;
  }
  for (size_t i = 0; i < nst; i++)
    for (size_t j = 0; j < bt->stacks[i]->n_frames; j++)
      if (bt->stacks[i]->frames[j] == 0 || bt->stacks[i]->frames[j] > nfr) return -1;
  for (size_t i = 0; i < bt->n_events; i++) {
    const Perf__V1__Event *e = bt->events[i];
    for (size_t j = 0; j < e->n_threads; j++)
      if (!STRING_OK(e->threads[j]->name)) return -1;
    for (size_t j = 0; j < e->n_stack_counts; j++)
      if (e->stack_counts[j]->stack == 0 || e->stack_counts[j]->stack > nst) return -1;
    if (e->dominant_stack > nst) return -1;
    size_t n = e->n_sample_stacks, failed = 0;
    if (e->n_sample_offsets_micros != n || (e->n_sample_tids != 0 && e->n_sample_tids != n) ||
        (e->n_sample_weights_micros != 0 && e->n_sample_weights_micros != n))
      return -1;
    for (size_t j = 0; j < n; j++) {
      if (e->sample_stacks[j] > nst) return -1;
      failed += e->sample_stacks[j] == 0;
    }
    if (e->n_sample_errors != failed) return -1;
    if ((e->n_sample_states != 0 && e->n_sample_states != n) ||
        (e->n_sample_syscalls != 0 && e->n_sample_syscalls != n) ||
        (e->n_sample_fds != 0 && e->n_sample_fds != n))
      return -1;
    for (size_t j = 0; j < e->n_sample_syscalls; j++)
      if (!STRING_OK(e->sample_syscalls[j])) return -1;
  }
#undef STRING_OK
  return 0;
}
