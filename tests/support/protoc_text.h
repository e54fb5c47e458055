/*
 * protoc_text.h - a serialized perf.v1.Batch as Google's protoc reads it
 * (`protoc --decode=perf.v1.Batch` against proto/perf/v1/perf.proto): a
 * decoder the project did not write, for the wire tests. The program needs
 * the compile definitions PERF_PROTOC and PERF_PROTO_DIR. Static inline.
 */
#ifndef PERF_TEST_PROTOC_TEXT_H
#define PERF_TEST_PROTOC_TEXT_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "tempdir.h"

/* protoc's text of the batch's len bytes, opened for reading (the caller
   closes it); its files stay in the test's temporary directory. protoc
   failing fails the case. */
static inline FILE *protoc_decode_batch(const uint8_t *batch, size_t len) {
  const char *dir = tempdir_make("perf-protoc");
  char in_path[PATH_MAX], out_path[PATH_MAX], cmd[3 * PATH_MAX];
  snprintf(in_path, sizeof in_path, "%s/batch.bin", dir);
  snprintf(out_path, sizeof out_path, "%s/batch.txt", dir);
  FILE *f = fopen(in_path, "wb");
  CHECK(f && fwrite(batch, 1, len, f) == len && fclose(f) == 0);
  snprintf(cmd, sizeof cmd, "'%s' --decode=perf.v1.Batch -I '%s' perf/v1/perf.proto < '%s' > '%s'",
           PERF_PROTOC, PERF_PROTO_DIR, in_path, out_path);
  int rc = system(cmd);
  CHECKF(rc == 0, "%s: status %d", cmd, rc);
  f = fopen(out_path, "r");
  CHECK(f != NULL);
  return f;
}

#endif
