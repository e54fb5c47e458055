/*
 * consumer/main.c - an app that uses the installed SDK as a user would:
 * the public header only. It writes one manual event to the report named
 * by argv[1] from inside consumer_checkpoint, whose name the report must
 * show (check_install.sh). Exit 0 only when every call said PERF_OK.
 */
#include <perf_sdk.h>
#include <stdio.h>

__attribute__((noinline)) int consumer_checkpoint(void) {
  int err = perf_sdk_capture_now("installed");
  __asm__ volatile("" ::: "memory"); /* not a tail call: this frame stays on the stack */
  return err;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s REPORT\n", argv[0]);
    return 2;
  }
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "consumer";
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = argv[1];
  int steps[4] = {perf_sdk_init(&cfg), consumer_checkpoint(), perf_sdk_flush(10000),
                  perf_sdk_shutdown(5000)};
  const char *names[4] = {"perf_sdk_init", "perf_sdk_capture_now", "perf_sdk_flush",
                          "perf_sdk_shutdown"};
  for (int i = 0; i < 4; i++) {
    if (steps[i] != PERF_OK) {
      fprintf(stderr, "%s: %s\n", names[i], perf_strerror(steps[i]));
      return 1;
    }
  }
  return 0;
}
