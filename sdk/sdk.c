/*
 * sdk.c - perf_sdk_init / perf_sdk_shutdown and the public calls of a
 * running SDK. Runs on app threads.
 *
 * The watched loop's state and the counters are static, never freed: an
 * app thread calling perf_sdk_loop_busy while another shuts the SDK down
 * only ever touches memory that stays valid. Everything else lives in one
 * instance created by init and destroyed by shutdown under a write lock;
 * perf_sdk_capture_now holds the read lock while it uses it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/clock.h"
#include "sdk/base/log.h"
#include "sdk/base/stats.h"
#include "sdk/base/threads.h"
#include "sdk/base/worker.h"
#include "sdk/monitors/cpu_monitor.h"
#include "sdk/monitors/hang_monitor.h"
#include "sdk/pipeline/capture.h"
#include "sdk/pipeline/config.h"
#include "sdk/pipeline/recorder.h"
#include "sdk/pipeline/writer.h"
#include "sdk/sdk_testing.h"

typedef struct {
  perf__config_t cfg;
  perf__writer_t *writer;
  perf__recorder_t recorder;
  perf__hang_monitor_t *hang;
  perf__cpu_monitor_t *cpu;
} sdk_t;

static pthread_rwlock_t g_lifecycle = PTHREAD_RWLOCK_INITIALIZER;
static sdk_t *g_sdk;               /* under g_lifecycle */
static atomic_bool g_running;      /* fast check for the loop calls */
static atomic_bool g_ever_started; /* stats are readable from then on */
static perf__loop_t g_loop;
static perf__stats_t g_stats;
static perf_sdk_stats_t g_last_batch_stats; /* the wire path's, after shutdown */

static int start_threads(sdk_t *s);
static void stop_threads(sdk_t *s, int64_t deadline_ns, int *err);

int perf_sdk_init(const perf_sdk_config_t *cfg) {
  if (!cfg) return PERF_E_INVALID_ARGUMENT;
  pthread_rwlock_wrlock(&g_lifecycle);
  int err = PERF_OK;
  sdk_t *s = NULL;
  bool disabled = false;
  if (g_sdk) {
    err = PERF_E_ALREADY_INITIALIZED;
  } else if (!(s = calloc(1, sizeof *s))) {
    err = PERF_E_NO_MEMORY;
  } else if ((err = perf__config_resolve(cfg, &s->cfg, &disabled)) == 0 && !disabled) {
    memset(&g_stats, 0, sizeof g_stats);
    perf__loop_watch_current_thread(&g_loop);
    atomic_store(&g_loop.threshold_ns, (int64_t)s->cfg.hang_threshold_ms * 1000000);
    atomic_store(&g_loop.word, 0);
    atomic_store(&g_loop.paused, 0);
    err = start_threads(s);
  }
  if (!err && !disabled) {
    g_sdk = s;
    atomic_store(&g_ever_started, true);
    atomic_store(&g_running, true);
    perf__log(PERF__LOG_INFO, "perf sdk %s started: app %s %s (%s), sink %s", PERF_SDK_VERSION,
              s->cfg.app_name, s->cfg.app_version, s->cfg.environment,
              s->cfg.sink == PERF_SINK_FILE   ? s->cfg.sink_path
              : s->cfg.sink == PERF_SINK_HTTP ? s->cfg.endpoint
                                              : "none");
  } else if (s) {
    if (disabled) perf__log(PERF__LOG_INFO, "perf sdk disabled by PERF_SDK_DISABLED");
    perf__config_free(&s->cfg);
    free(s);
  }
  pthread_rwlock_unlock(&g_lifecycle);
  return err;
}

int perf_sdk_shutdown(int timeout_ms) {
  if (timeout_ms < 0 || timeout_ms > 600000) return PERF_E_INVALID_ARGUMENT;
  int64_t deadline = perf__now_ns() + (int64_t)timeout_ms * 1000000;
  pthread_rwlock_wrlock(&g_lifecycle);
  sdk_t *s = g_sdk;
  int err = PERF_OK;
  if (!s) {
    err = PERF_E_NOT_INITIALIZED;
  } else {
    atomic_store(&g_running, false);
    g_sdk = NULL;
    stop_threads(s, deadline, &err);
    perf__recorder_destroy(&s->recorder);
    if (err != PERF_E_TIMEOUT) { /* a writer stuck in I/O still reads the config */
      perf__config_free(&s->cfg);
      free(s);
    }
  }
  pthread_rwlock_unlock(&g_lifecycle);
  return err;
}

int perf_sdk_watch_current_thread(void) {
  if (!atomic_load(&g_running)) return PERF_E_NOT_INITIALIZED;
  perf__loop_watch_current_thread(&g_loop);
  return PERF_OK;
}

int perf_sdk_loop_busy(void) {
  if (!atomic_load_explicit(&g_running, memory_order_relaxed)) return PERF_E_NOT_INITIALIZED;
  perf__loop_busy(&g_loop);
  return PERF_OK;
}

int perf_sdk_loop_idle(void) {
  if (!atomic_load_explicit(&g_running, memory_order_relaxed)) return PERF_E_NOT_INITIALIZED;
  perf__loop_idle(&g_loop);
  return PERF_OK;
}

int perf_sdk_heartbeat(void) {
  if (!atomic_load_explicit(&g_running, memory_order_relaxed)) return PERF_E_NOT_INITIALIZED;
  perf__loop_heartbeat(&g_loop);
  return PERF_OK;
}

int perf_sdk_pause(void) {
  if (!atomic_load(&g_running)) return PERF_E_NOT_INITIALIZED;
  atomic_store(&g_loop.paused, 1);
  return PERF_OK;
}

int perf_sdk_resume(void) {
  if (!atomic_load(&g_running)) return PERF_E_NOT_INITIALIZED;
  /* Work that began while paused does not count from its start. */
  atomic_store_explicit(&g_loop.busy_since_ns, perf__now_ns(), memory_order_relaxed);
  atomic_store_explicit(&g_loop.paused, 0, memory_order_release);
  return PERF_OK;
}

int perf_sdk_capture_now(const char *reason) {
  pthread_rwlock_rdlock(&g_lifecycle);
  sdk_t *s = g_sdk;
  if (!s) {
    pthread_rwlock_unlock(&g_lifecycle);
    return PERF_E_NOT_INITIALIZED;
  }
  pid_t *tids = NULL;
  size_t n = 0;
  perf__modules_t *mods = perf__modules_acquire();
  perf__event_t *ev = mods ? perf__event_new(PERF__EVENT_MANUAL, mods) : NULL;
  perf__modules_release(mods);
  int err = ev ? perf__thread_list(&tids, &n) : PERF_E_NO_MEMORY;
  if (!err) {
    ev->tid = perf__gettid();
    ev->start_mono_ns = perf__now_ns();
    ev->start_wall_ns = perf__mono_to_wall_ns(ev->start_mono_ns);
    if (reason) snprintf(ev->reason, sizeof ev->reason, "%s", reason);
    uintptr_t caller = (uintptr_t)__builtin_return_address(0);
    for (size_t i = 0; i < n && !err; i++) {
      /* The SDK's own threads (every perf__worker: the monitors, the
         writer, the uploader) are not the app's story. */
      if (perf__worker_is_sdk_thread(tids[i])) continue;
      char name[16];
      perf__thread_name(tids[i], name, sizeof name);
      err = perf__event_set_thread(ev, tids[i], name, -1);
      if (!err)
        err = tids[i] == ev->tid ? perf__capture_self(ev, caller, &g_stats)
                                 : perf__capture_sample(ev, tids[i], &g_stats);
    }
    ev->duration_ns = perf__now_ns() - ev->start_mono_ns;
  }
  free(tids);
  if (!err) {
    err = perf__recorder_record(&s->recorder, ev);
  } else {
    perf__event_free(ev);
  }
  pthread_rwlock_unlock(&g_lifecycle);
  return err;
}

int perf_sdk_flush(int timeout_ms) {
  if (timeout_ms < 0 || timeout_ms > 600000) return PERF_E_INVALID_ARGUMENT;
  int64_t deadline = perf__now_ns() + (int64_t)timeout_ms * 1000000;
  pthread_rwlock_rdlock(&g_lifecycle);
  int err = g_sdk ? perf__writer_flush(g_sdk->writer, deadline) : PERF_E_NOT_INITIALIZED;
  pthread_rwlock_unlock(&g_lifecycle);
  return err;
}

int perf_sdk_get_stats(perf_sdk_stats_t *out) {
  if (!out) return PERF_E_INVALID_ARGUMENT;
  if (!atomic_load(&g_ever_started)) return PERF_E_NOT_INITIALIZED;
  memset(out, 0, sizeof *out);
  pthread_rwlock_rdlock(&g_lifecycle);
  if (g_sdk)
    perf__writer_batch_stats(g_sdk->writer, out);
  else
    *out = g_last_batch_stats;
  pthread_rwlock_unlock(&g_lifecycle);
  out->events_dropped_oversized = atomic_load(&g_stats.events_dropped_oversized);
  out->events_recorded = atomic_load(&g_stats.events_recorded);
  out->events_written = atomic_load(&g_stats.events_written);
  out->events_dropped_rate = atomic_load(&g_stats.events_dropped_rate);
  out->events_dropped_queue = atomic_load(&g_stats.events_dropped_queue);
  out->events_dropped_sink = atomic_load(&g_stats.events_dropped_sink);
  out->hangs_detected = atomic_load(&g_stats.hangs_detected);
  out->cpu_bursts = atomic_load(&g_stats.cpu_bursts);
  out->samples_taken = atomic_load(&g_stats.samples_taken);
  out->samples_failed = atomic_load(&g_stats.samples_failed);
  return PERF_OK;
}

/* Tests only (tests link the static library): hold the writer so the queue
   fills. */
int perf__sdk_hold_writer(bool hold) {
  pthread_rwlock_rdlock(&g_lifecycle);
  int err = g_sdk ? PERF_OK : PERF_E_NOT_INITIALIZED;
  if (g_sdk) perf__writer_hold(g_sdk->writer, hold);
  pthread_rwlock_unlock(&g_lifecycle);
  return err;
}

static int start_threads(sdk_t *s) {
  int err = perf__writer_start(&s->cfg, &g_stats, &s->writer);
  if (err) return err;
  perf__recorder_init(&s->recorder, s->cfg.max_events_per_hour, s->writer, &g_stats);
  err = perf__hang_monitor_start(&s->cfg, &g_loop, &s->recorder, &g_stats, &s->hang);
  if (!err) err = perf__cpu_monitor_start(&s->cfg, &s->recorder, &g_stats, &s->cpu);
  if (err) {
    int ignored = 0;
    stop_threads(s, perf__now_ns() + 1000000000, &ignored);
    perf__recorder_destroy(&s->recorder);
  }
  return err;
}

static void stop_threads(sdk_t *s, int64_t deadline_ns, int *err) {
  if (s->cpu) perf__cpu_monitor_stop(s->cpu);
  if (s->hang) perf__hang_monitor_stop(s->hang); /* records a hang in progress */
  s->cpu = NULL;
  s->hang = NULL;
  if (s->writer) *err = perf__writer_stop(s->writer, deadline_ns, &g_last_batch_stats);
  s->writer = NULL;
}
