/*
 * cross_batch_app.c - writes a batch on the target architecture for the
 * host's collector to read (scripts/test_aarch64.sh): the SDK with a file
 * sink and symbolize = 0 (addresses only: every name the host finds is its
 * own), one manual capture from cross_batch_marker(). Usage:
 *   cross_batch_app REPORT            batches in REPORT.batches
 *   cross_batch_app --http URL DIR    uploaded to the collector at URL
 *                                     (DIR: the SDK's data directory)
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "perf_sdk.h"

static int fail(const char *what, int err) {
  fprintf(stderr, "%s: %s\n", what, perf_strerror(err));
  return 1;
}

__attribute__((noinline)) int cross_batch_marker(void) {
  int err = perf_sdk_capture_now("cross_batch");
  __asm__ volatile("" ::: "memory"); /* keeps the call a call, not a tail call */
  return err;
}

int main(int argc, char **argv) {
  bool http = argc == 4 && strcmp(argv[1], "--http") == 0;
  if (argc != 2 && !http) {
    fprintf(stderr, "usage: cross_batch_app REPORT | cross_batch_app --http URL DATA_DIR\n");
    return 2;
  }
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "cross_batch_app";
  if (http) {
    cfg.sink = PERF_SINK_HTTP;
    cfg.endpoint = argv[2];
    cfg.api_key = "cross-key";
    cfg.data_dir = argv[3];
  } else {
    cfg.sink = PERF_SINK_FILE;
    cfg.sink_path = argv[1];
    cfg.data_dir = NULL;
  }
  cfg.symbolize = 0;
  int err = perf_sdk_init(&cfg);
  if (err != PERF_OK) return fail("perf_sdk_init", err);
  if ((err = cross_batch_marker()) != PERF_OK) return fail("perf_sdk_capture_now", err);
  if ((err = perf_sdk_flush(60000)) != PERF_OK) return fail("perf_sdk_flush", err);
  if ((err = perf_sdk_shutdown(60000)) != PERF_OK) return fail("perf_sdk_shutdown", err);
  return 0;
}
