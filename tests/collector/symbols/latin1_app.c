/*
 * latin1_app.c - a small program with the SDK linked, built by
 * test_collector_debug_text at test time inside a directory whose name is
 * Latin-1 (bytes that are not UTF-8), so its debug information's source
 * paths hold such bytes, and one function's symbol name too (an assembler
 * label). It runs HANGS hangs of its watched loop (each ~HANG_MS in
 * burn_in_latin1_dir <- handle_job <- main) and exits after its events
 * are uploaded; the sink, endpoint, key and data directory come from the
 * PERF_SDK_* environment.
 */
#include <perf_sdk.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define HANGS 5
#define HANG_MS 600

static volatile unsigned long g_sink;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Its symbol is "caf\xe9_spin": the symbol table's name is not UTF-8. */
void latin1_spin(void) __asm__("caf\xe9_spin");
__attribute__((noinline)) void latin1_spin(void) {
  for (int i = 0; i < 1000; i++)
    g_sink += (unsigned long)i * 7u;
}

__attribute__((noinline)) static void burn_in_latin1_dir(double ms) {
  double end = now_ms() + ms;
  while (now_ms() < end)
    latin1_spin();
}

__attribute__((noinline)) static void handle_job(double ms) {
  burn_in_latin1_dir(ms);
  g_sink++; /* not a tail call: handle_job stays on the stack */
}

int main(void) {
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "latin1_app";
  cfg.app_version = "1.0";
  int rc = perf_sdk_init(&cfg);
  if (rc != PERF_OK) {
    fprintf(stderr, "perf_sdk_init: %s\n", perf_strerror(rc));
    return 1;
  }
  for (int i = 0; i < HANGS; i++) {
    perf_sdk_loop_busy();
    handle_job(HANG_MS);
    perf_sdk_loop_idle();
    usleep(200000);
  }
  perf_sdk_stats_t st;
  perf_sdk_get_stats(&st);
  printf("hangs %d detected %llu recorded %llu dropped rate %llu queue %llu sink %llu\n", HANGS,
         (unsigned long long)st.hangs_detected, (unsigned long long)st.events_recorded,
         (unsigned long long)st.events_dropped_rate, (unsigned long long)st.events_dropped_queue,
         (unsigned long long)st.events_dropped_sink);
  rc = perf_sdk_shutdown(30000);
  printf("shutdown %d\n", rc);
  return rc == PERF_OK ? 0 : 1;
}
