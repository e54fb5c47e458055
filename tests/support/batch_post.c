/*
 * batch_post.c - hand-made batches to a test collector (see batch_post.h).
 */
#include "batch_post.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zstd.h>

#include "check.h"

long batch_send(const collector_t *c, Perf__V1__Batch *b, const uint8_t id[16], reply_t *r) {
  char hex[33];
  for (int i = 0; i < 16; i++)
    snprintf(hex + 2 * i, 3, "%02x", id[i]);
  b->batch_id = (ProtobufCBinaryData){16, (uint8_t *)id};
  size_t len = perf__v1__batch__get_packed_size(b);
  uint8_t *raw = malloc(len ? len : 1), *z = malloc(ZSTD_compressBound(len));
  CHECK(raw && z);
  perf__v1__batch__pack(b, raw);
  size_t zn = ZSTD_compress(z, ZSTD_compressBound(len), raw, len, 3);
  CHECK(!ZSTD_isError(zn));
  char idh[64];
  snprintf(idh, sizeof idh, "X-Perf-Batch-Id: %s", hex);
  const char *headers[] = {"Content-Type: application/x-protobuf", "Content-Encoding: zstd",
                           "Authorization: Bearer " GOOD_KEY, idh, NULL};
  long status = request(c, "POST", "/v1/batches", headers, z, zn, false, r);
  free(raw);
  free(z);
  return status;
}

long batch_post_answer(const collector_t *c, Perf__V1__Batch *b, unsigned seed, reply_t *r) {
  static uint8_t id[16];
  for (int i = 0; i < 16; i++)
    id[i] = (uint8_t)(seed * 37 + (unsigned)i + (unsigned)getpid());
  return batch_send(c, b, id, r);
}

void batch_post(const collector_t *c, Perf__V1__Batch *b, unsigned seed) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  long status = batch_post_answer(c, b, seed, r);
  CHECKF(status == 200, "batch -> %ld %.300s", status, r->body);
  free(r);
}
