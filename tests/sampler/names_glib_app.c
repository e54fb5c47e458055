/*
 * names_glib_app.c - a GLib program (-O2 -g) with the SDK's GLib
 * integration (perf_sdk_glib_watch) and the file sink, whose hangs come
 * after idle gaps of 0.5, 2, 3 and 10 s, for test_names: the writer's idle
 * release (2 s after an event) drops the symbol tables and DWARF and
 * unloads libdw and libelf, and each hang after a gap is in functions no
 * earlier event named (in this program, in libc, in names_glib_lib), so
 * every name must be read again.
 *
 * The hangs, each a timeout callback run by g_main_loop_run, each 800 ms
 * in a static function the compiler inlines into it:
 *   on_rebuild           rebuild_index: spins, reading the clock (the PLT
 *                        stub, libc and the vDSO's clock_gettime)
 *   on_flush (0.5 s)     flush_journal: usleep
 *   on_sync (2 s)        wait_for_peer: poll on a pipe nobody writes
 *   on_compact (3 s)     compact_store: pthread_cond_timedwait
 *   on_reload (10 s)     names_glib_reload_settings (names_glib_lib.c):
 *                        select, in a module no earlier event touched
 *
 * Protocol: names_glib_app <dir> writes <dir>/report.txt (and its
 * .batches/), prints on stdout "hang <n> gap_ms <ms> libdw <mapped|gone>"
 * as each hang starts (whether libdw was mapped after the gap), then
 * "ready <pid>" once every event is written; it waits for a line on stdin
 * (test_names reads the report and asks gdb about the same addresses
 * meanwhile), then shuts the SDK down and exits 0.
 */
#define _GNU_SOURCE /* usleep, clock_gettime (built with its own options) */
#include <glib.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "names_glib_lib.h"
#include "perf_sdk.h"
#include "perf_sdk_glib.h"
#include "test_util.h"

#define HANG_MS 800 /* over the 100 ms threshold by far: found on a busy machine too */

static GMainLoop *g_loop;
static volatile unsigned long g_sink;
static int g_never_written[2];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_never_signalled = PTHREAD_COND_INITIALIZER;

static inline __attribute__((always_inline)) void rebuild_index(int ms) {
  for (long long end = now_ms() + ms; now_ms() < end;)
    for (int i = 0; i < 1000; i++)
      g_sink += (unsigned long)i;
}

static inline __attribute__((always_inline)) void flush_journal(int ms) {
  for (long long end = now_ms() + ms, left = ms; left > 0; left = end - now_ms())
    usleep((useconds_t)left * 1000);
}

static inline __attribute__((always_inline)) void wait_for_peer(int ms) {
  for (long long end = now_ms() + ms, left = ms; left > 0; left = end - now_ms()) {
    struct pollfd p = {g_never_written[0], POLLIN, 0};
    poll(&p, 1, (int)left);
  }
}

static inline __attribute__((always_inline)) void compact_store(int ms) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += ms / 1000;
  until.tv_nsec += (ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&g_lock);
  while (pthread_cond_timedwait(&g_never_signalled, &g_lock, &until) == 0)
    ;
  pthread_mutex_unlock(&g_lock);
}

static gboolean on_rebuild(gpointer data);
static gboolean on_flush(gpointer data);
static gboolean on_sync(gpointer data);
static gboolean on_compact(gpointer data);
static gboolean on_reload(gpointer data);

/* The hangs in order, each with the idle gap before it. */
static const struct {
  unsigned gap_ms;
  GSourceFunc hang;
} k_steps[] = {
    {100, on_rebuild}, {500, on_flush}, {2000, on_sync}, {3000, on_compact}, {10000, on_reload},
};
#define STEPS (sizeof k_steps / sizeof k_steps[0])
static size_t g_step;

/* Whether libdw is mapped now (the SDK loads it to name frames). */
static bool libdw_mapped(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[4096];
  bool found = false;
  while (f && !found && fgets(line, sizeof line, f))
    found = strstr(line, "/libdw") != NULL;
  if (f) fclose(f);
  return found;
}

/* Said as a hang starts. */
static void starting(void) {
  printf("hang %zu gap_ms %u libdw %s\n", g_step, k_steps[g_step].gap_ms,
         libdw_mapped() ? "mapped" : "gone");
  fflush(stdout);
}

static gboolean quit(gpointer data) {
  (void)data;
  g_main_loop_quit(g_loop);
  return G_SOURCE_REMOVE;
}

/* After a hang: the next one after its gap; after the last, the loop goes
   idle once more (the hang ends there) and stops. */
static void finished(void) {
  if (++g_step < STEPS)
    g_timeout_add(k_steps[g_step].gap_ms, k_steps[g_step].hang, NULL);
  else
    g_timeout_add(100, quit, NULL);
}

/* Every hang's event written (the monitor records a hang once the loop
   goes idle again), within 60 s. */
static bool all_written(void) {
  for (int i = 0; i < 600; i++) {
    perf_sdk_stats_t st;
    if (perf_sdk_get_stats(&st) == PERF_OK && st.events_written >= STEPS) return true;
    usleep(100 * 1000);
  }
  return false;
}

static gboolean on_rebuild(gpointer data) {
  (void)data;
  starting();
  rebuild_index(HANG_MS);
  finished();
  return G_SOURCE_REMOVE;
}

static gboolean on_flush(gpointer data) {
  (void)data;
  starting();
  flush_journal(HANG_MS);
  finished();
  return G_SOURCE_REMOVE;
}

static gboolean on_sync(gpointer data) {
  (void)data;
  starting();
  wait_for_peer(HANG_MS);
  finished();
  return G_SOURCE_REMOVE;
}

static gboolean on_compact(gpointer data) {
  (void)data;
  starting();
  compact_store(HANG_MS);
  finished();
  return G_SOURCE_REMOVE;
}

static gboolean on_reload(gpointer data) {
  (void)data;
  starting();
  g_sink += (unsigned long)names_glib_reload_settings(HANG_MS);
  finished();
  return G_SOURCE_REMOVE;
}

int main(int argc, char **argv) {
  if (argc != 2 || pipe(g_never_written) != 0) return 2;
  char report[4096];
  snprintf(report, sizeof report, "%s/report.txt", argv[1]);
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "names_glib_app";
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = report;
  cfg.data_dir = ""; /* no fatal-hang markers */
  cfg.hang_threshold_ms = 100;
  cfg.hang_sample_interval_ms = 50;
  cfg.cpu_threshold_percent = 25600; /* hangs only */
  if (perf_sdk_init(&cfg) != PERF_OK || perf_sdk_glib_watch(NULL) != 0) return 3;
  g_loop = g_main_loop_new(NULL, FALSE);
  g_timeout_add(k_steps[0].gap_ms, k_steps[0].hang, NULL);
  g_main_loop_run(g_loop);
  perf_sdk_glib_unwatch(NULL);
  if (!all_written() || perf_sdk_flush(30000) != PERF_OK) return 4;
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  char line[16];
  if (!fgets(line, sizeof line, stdin)) return 5;
  g_main_loop_unref(g_loop);
  return perf_sdk_shutdown(5000) == PERF_OK ? 0 : 6;
}
