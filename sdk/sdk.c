/*
 * sdk.c - perf_sdk_init / perf_sdk_shutdown and the public calls of a
 * running SDK, and what the SDK does when the app forks and exits. Runs on
 * app threads, and in the fork and exit handlers of the thread that forks
 * or exits.
 *
 * The watched loops' state and the counters are static, never freed: an
 * app thread calling perf_sdk_loop_busy while another shuts the SDK down
 * only ever touches memory that stays valid. Everything else lives in one
 * instance created by init and destroyed by shutdown under a write lock;
 * capture_now, flush and get_stats hold the read lock while they use it.
 *
 * Every call that locks or allocates runs inside the thread's call guard
 * (sdk/base/call_guard.h): called again on the same thread from a signal
 * handler that interrupted it, it returns PERF_E_BUSY instead of waiting
 * for a lock (or malloc) that its own thread holds.
 *
 * fork: the child handler runs in the child's only thread and must not
 * wait for anything. It forgets the parent's workers, closes the SDK's
 * copies of the parent's descriptors, gives the lifecycle lock a fresh
 * state, and sets the parent's instance aside untouched (its threads do
 * not exist here; its locks may be held by them forever). The next SDK
 * call or loop mark restarts the SDK with that instance's configuration;
 * the loop marks notice it through the g_running flag they read anyway,
 * so the hot path gains no check. The sampler's and the module cache's
 * locks are taken around fork by their own handlers.
 *
 * exit: an atexit handler shuts the SDK down with exit_timeout_ms as the
 * deadline; a lock it cannot get by then, or a thread stuck past it, is
 * left behind (the process is ending).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/call_guard.h"
#include "sdk/base/clock.h"
#include "sdk/base/lazy_lib.h"
#include "sdk/base/log.h"
#include "sdk/base/owned_fds.h"
#include "sdk/base/proc_files.h"
#include "sdk/base/stats.h"
#include "sdk/base/threads.h"
#include "sdk/base/worker.h"
#include "sdk/monitors/cpu_monitor.h"
#include "sdk/monitors/cpu_profile.h"
#include "sdk/monitors/hang_monitor.h"
#include "sdk/monitors/loop_registry.h"
#include "sdk/pipeline/capture.h"
#include "sdk/pipeline/config.h"
#include "sdk/pipeline/recorder.h"
#include "sdk/pipeline/writer.h"
#include "sdk/sampler/sampler.h"
#include "sdk/sdk_testing.h"

/* Normal shutdown gives the monitors at least this long to return from a
   capture in flight (they do no I/O); at exit the exit deadline wins. */
#define MONITOR_STOP_MIN_NS (1000 * 1000000LL)

typedef struct sdk_s {
  perf__config_t cfg;
  perf__writer_t *writer;
  perf__recorder_t recorder;
  perf__hang_monitor_t *hang;
  perf__cpu_monitor_t *cpu;
  struct sdk_s *next_left; /* g_left_behind's chain */
} sdk_t;

enum { HELD_NONE, HELD_READ, HELD_WRITE };

static pthread_rwlock_t g_lifecycle = PTHREAD_RWLOCK_INITIALIZER;
static sdk_t *g_sdk;               /* under g_lifecycle */
static atomic_bool g_running;      /* fast check for the loop calls */
static atomic_bool g_ever_started; /* stats are readable from then on */
static perf__stats_t g_stats;
static perf_sdk_stats_t g_last_batch_stats; /* the wire path's, after shutdown */
static atomic_uint g_exit_timeout_ms;       /* the running instance's */
static atomic_uint g_threshold_ms;          /* the running instance's hang_threshold_ms */
static pthread_once_t g_hooks_once = PTHREAD_ONCE_INIT;
/* Forked child: the parent's running instance, whose configuration the
   restart takes over; set by the child handler, under g_lifecycle after. */
static sdk_t *g_inherited;
static atomic_bool g_restart_pending;
/* Instances never freed: the parents' (in a child) and those whose threads
   were stuck at shutdown. Kept reachable, never used again. */
static sdk_t *g_left_behind;
/* This thread holds g_lifecycle (and how), and its tid when it forked. */
static _Thread_local int t_held __attribute__((tls_model("initial-exec")));
static _Thread_local pid_t t_fork_tid __attribute__((tls_model("initial-exec")));

static void lock_read(void);
static void lock_write(void);
static bool lock_write_by(int64_t deadline_ns);
static void unlock(void);
static bool running_slow(void);
static void restart_if_forked(void);
static int start_instance(const perf_sdk_config_t *cfg);
static int run_instance(sdk_t *s, bool fresh_loop);
static int shutdown_locked(int64_t deadline_ns, int64_t monitors_deadline_ns);
static int capture_locked(sdk_t *s, const char *reason, uintptr_t caller);
static int start_threads(sdk_t *s);
static bool stop_threads(sdk_t *s, int64_t deadline_ns, int64_t monitors_deadline_ns, int *err);
static void leave_behind(sdk_t *s);
static void install_process_hooks(void);

/* Running, or a forked child's SDK restarted just now. The first load is
   the only cost on the hot path. */
#define RUNNING() (atomic_load_explicit(&g_running, memory_order_relaxed) || running_slow())

int perf_sdk_init(const perf_sdk_config_t *cfg) {
  if (!cfg) return PERF_E_INVALID_ARGUMENT;
  if (!perf__call_enter()) return PERF_E_BUSY;
  pthread_once(&g_hooks_once, install_process_hooks);
  lock_write();
  int err = PERF_E_ALREADY_INITIALIZED;
  if (!g_sdk) {
    /* A forked child's init replaces the restart it was due. */
    g_inherited = NULL;
    atomic_store(&g_restart_pending, false);
    err = start_instance(cfg);
  }
  unlock();
  perf__call_leave();
  return err;
}

int perf_sdk_shutdown(int timeout_ms) {
  if (timeout_ms < 0 || timeout_ms > 600000) return PERF_E_INVALID_ARGUMENT;
  if (!perf__call_enter()) return PERF_E_BUSY;
  int64_t now = perf__now_ns();
  int64_t deadline = now + (int64_t)timeout_ms * 1000000;
  int64_t monitors = deadline > now + MONITOR_STOP_MIN_NS ? deadline : now + MONITOR_STOP_MIN_NS;
  lock_write();
  int err = shutdown_locked(deadline, monitors);
  unlock();
  perf__call_leave();
  return err;
}

int perf_sdk_watch_current_thread(void) {
  if (!RUNNING()) return PERF_E_NOT_INITIALIZED;
  perf__loop_watch_current_thread();
  /* Its first capture paid now, by the writer (perf__writer_prepare_capture);
     skipped when called from a signal handler inside another SDK call. */
  if (perf__call_enter()) {
    lock_read();
    if (g_sdk) perf__writer_prepare_capture(g_sdk->writer, perf__gettid());
    unlock();
    perf__call_leave();
  }
  return PERF_OK;
}

int perf_sdk_loop_register(const char *name, int threshold_ms) {
  if (!RUNNING()) return PERF_E_NOT_INITIALIZED;
  /* The SDK's own threads run no loop of the app (the preload library
     asks for every thread that waits). */
  if (perf__worker_is_sdk_thread(perf__gettid())) return PERF_E_NO_THREAD;
  int err = perf__loop_register(name, threshold_ms, atomic_load(&g_threshold_ms), &g_stats);
  if (err == PERF_OK && perf__call_enter()) {
    lock_read();
    if (g_sdk) {
      /* Watched from now on, not from the monitor's next wake; its first
         capture paid now, by the writer, as for the watched thread. */
      perf__hang_monitor_nudge(g_sdk->hang);
      perf__writer_prepare_capture(g_sdk->writer, perf__gettid());
    }
    unlock();
    perf__call_leave();
  }
  return err;
}

int perf_sdk_loop_unregister(void) {
  if (!RUNNING()) return PERF_E_NOT_INITIALIZED;
  return perf__loop_unregister(atomic_load(&g_threshold_ms));
}

/* The calling thread's loop into `l`, or PERF_E_NO_THREAD. */
#define CALLER_LOOP(l)                                                                             \
  perf__loop_t *l = perf__loop_of_caller();                                                        \
  if (!l) return PERF_E_NO_THREAD

int perf_sdk_loop_threshold_ms(void) {
  if (!RUNNING()) return PERF_E_NOT_INITIALIZED;
  CALLER_LOOP(l);
  return (int)(atomic_load_explicit(&l->threshold_ns, memory_order_relaxed) / 1000000);
}

int perf_sdk_loop_busy(void) {
  if (!RUNNING()) return PERF_E_NOT_INITIALIZED;
  CALLER_LOOP(l);
  perf__loop_busy(l);
  return PERF_OK;
}

int perf_sdk_loop_busy_label(const char *label) {
  if (!RUNNING()) return PERF_E_NOT_INITIALIZED;
  CALLER_LOOP(l);
  perf__loop_busy_label(l, label);
  return PERF_OK;
}

int perf_sdk_loop_idle(void) {
  if (!RUNNING()) return PERF_E_NOT_INITIALIZED;
  CALLER_LOOP(l);
  perf__loop_idle(l);
  return PERF_OK;
}

int perf_sdk_heartbeat(void) {
  if (!RUNNING()) return PERF_E_NOT_INITIALIZED;
  CALLER_LOOP(l);
  perf__loop_heartbeat(l);
  return PERF_OK;
}

int perf_sdk_loop_nested_begin(void) {
  if (!RUNNING()) return PERF_E_NOT_INITIALIZED;
  CALLER_LOOP(l);
  atomic_fetch_add_explicit(&l->nested, 1, memory_order_relaxed);
  return PERF_OK;
}

int perf_sdk_loop_nested_end(void) {
  if (!RUNNING()) return PERF_E_NOT_INITIALIZED;
  CALLER_LOOP(l);
  /* Only the loop's thread changes the depth: load and store suffice. */
  int depth = atomic_load_explicit(&l->nested, memory_order_relaxed);
  if (depth <= 0) return PERF_E_INVALID_ARGUMENT;
  atomic_store_explicit(&l->nested, depth - 1, memory_order_relaxed);
  return PERF_OK;
}

int perf_sdk_pause(void) {
  if (!RUNNING()) return PERF_E_NOT_INITIALIZED;
  perf__loops_pause();
  return PERF_OK;
}

int perf_sdk_resume(void) {
  if (!RUNNING()) return PERF_E_NOT_INITIALIZED;
  perf__loops_resume();
  return PERF_OK;
}

int perf_sdk_capture_now(const char *reason) {
  if (!perf__call_enter()) return PERF_E_BUSY;
  restart_if_forked();
  lock_read();
  int err = g_sdk ? capture_locked(g_sdk, reason, (uintptr_t)__builtin_return_address(0))
                  : PERF_E_NOT_INITIALIZED;
  unlock();
  perf__call_leave();
  return err;
}

int perf_sdk_flush(int timeout_ms) {
  if (timeout_ms < 0 || timeout_ms > 600000) return PERF_E_INVALID_ARGUMENT;
  if (!perf__call_enter()) return PERF_E_BUSY;
  int64_t deadline = perf__now_ns() + (int64_t)timeout_ms * 1000000;
  restart_if_forked();
  lock_read();
  int err = PERF_E_NOT_INITIALIZED;
  if (g_sdk) {
    /* A hang whose unit of work has just ended is recorded first. */
    perf__hang_monitor_look(g_sdk->hang, deadline);
    err = perf__writer_flush(g_sdk->writer, deadline);
  }
  unlock();
  perf__call_leave();
  return err;
}

static int read_stats(perf_sdk_stats_t *out);

int perf_sdk_get_stats_sized(perf_sdk_stats_t *stats, size_t struct_size) {
  if (!stats || struct_size < sizeof(uint64_t) || struct_size % sizeof(uint64_t))
    return PERF_E_INVALID_ARGUMENT;
  perf_sdk_stats_t all;
  int err = read_stats(&all);
  if (err == PERF_OK) memcpy(stats, &all, struct_size < sizeof all ? struct_size : sizeof all);
  return err;
}

static int read_stats(perf_sdk_stats_t *out) {
  if (!perf__call_enter()) return PERF_E_BUSY;
  restart_if_forked();
  if (!atomic_load(&g_ever_started)) {
    perf__call_leave();
    return PERF_E_NOT_INITIALIZED;
  }
  memset(out, 0, sizeof *out);
  lock_read();
  if (g_sdk)
    perf__writer_batch_stats(g_sdk->writer, out);
  else
    *out = g_last_batch_stats;
  unlock();
  perf__call_leave();
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
  out->events_journaled = atomic_load(&g_stats.events_journaled);
  out->events_replayed = atomic_load(&g_stats.events_replayed);
  out->journal_torn = atomic_load(&g_stats.journal_torn);
  out->journal_write_failed = atomic_load(&g_stats.journal_write_failed);
  out->cpu_bursts_empty = atomic_load(&g_stats.cpu_bursts_empty);
  out->cpu_samples_off_cpu = atomic_load(&g_stats.cpu_samples_off_cpu);
  out->loops_refused = atomic_load(&g_stats.loops_refused);
  out->cpu_profile_windows = atomic_load(&g_stats.cpu_profile_windows);
  out->cpu_profile_samples = atomic_load(&g_stats.cpu_profile_samples);
  out->cpu_profile_samples_dropped = atomic_load(&g_stats.cpu_profile_samples_dropped);
  out->cpu_profile_rate_lowered = atomic_load(&g_stats.cpu_profile_rate_lowered);
  out->cpu_profile_hz_now = atomic_load(&g_stats.cpu_profile_hz_now);
  out->cpu_profile_cost_us = atomic_load(&g_stats.cpu_profile_cost_us);
  return PERF_OK;
}

/* Tests only (tests link the static library): hold the writer so the queue
   fills. */
int perf__sdk_hold_writer(bool hold) {
  lock_read();
  int err = g_sdk ? PERF_OK : PERF_E_NOT_INITIALIZED;
  if (g_sdk) perf__writer_hold(g_sdk->writer, hold);
  unlock();
  return err;
}

/* Tests only: short profile windows, small tables. */
void perf__sdk_profile_testing(unsigned window_ms, unsigned entries) {
  perf__cpu_profile_set_testing(window_ms, entries);
}

/* ---- the lifecycle lock --------------------------------------------------- */

static void lock_read(void) {
  pthread_rwlock_rdlock(&g_lifecycle);
  t_held = HELD_READ;
}

static void lock_write(void) {
  pthread_rwlock_wrlock(&g_lifecycle);
  t_held = HELD_WRITE;
}

static bool lock_write_by(int64_t deadline_ns) {
  struct timespec ts = {(time_t)(deadline_ns / 1000000000), (long)(deadline_ns % 1000000000)};
  if (pthread_rwlock_clockwrlock(&g_lifecycle, CLOCK_MONOTONIC, &ts) != 0) return false;
  t_held = HELD_WRITE;
  return true;
}

static void unlock(void) {
  t_held = HELD_NONE;
  pthread_rwlock_unlock(&g_lifecycle);
}

/* ---- start and stop ------------------------------------------------------- */

static int start_instance(const perf_sdk_config_t *cfg) {
  sdk_t *s = calloc(1, sizeof *s);
  if (!s) return PERF_E_NO_MEMORY;
  bool disabled = false;
  int err = perf__config_resolve(cfg, &s->cfg, &disabled, false);
  /* /proc opened now, before the app may chroot (sdk/base/proc_files.h);
     when it cannot be, the sampler says so at its first read. */
  if (!err && !disabled) perf__proc_open();
  if (!err && !disabled) err = run_instance(s, true);
  if (!err && !disabled) {
    perf__log(PERF__LOG_INFO, "perf sdk %s started: app %s %s (%s), sink %s", PERF_SDK_VERSION,
              s->cfg.app_name, s->cfg.app_version, s->cfg.environment,
              s->cfg.sink == PERF_SINK_FILE   ? s->cfg.sink_path
              : s->cfg.sink == PERF_SINK_HTTP ? s->cfg.endpoint
                                              : "none");
    return PERF_OK;
  }
  if (disabled) perf__log(PERF__LOG_INFO, "perf sdk disabled by PERF_SDK_DISABLED");
  perf__config_free(&s->cfg);
  free(s);
  return err;
}

/* With the write lock: start s (its config resolved) and publish it. A
   forked child keeps the loop's state: its thread goes on with the unit of
   work it forked in. */
static int run_instance(sdk_t *s, bool fresh_loop) {
  memset(&g_stats, 0, sizeof g_stats);
  memset(&g_last_batch_stats, 0, sizeof g_last_batch_stats);
  perf__loops_start(s->cfg.hang_threshold_ms, fresh_loop);
  atomic_store(&g_threshold_ms, s->cfg.hang_threshold_ms);
  int err = start_threads(s);
  if (err) return err;
  g_sdk = s;
  atomic_store(&g_exit_timeout_ms, s->cfg.exit_timeout_ms);
  atomic_store(&g_ever_started, true);
  atomic_store(&g_running, true);
  return PERF_OK;
}

/* With the write lock. */
static int shutdown_locked(int64_t deadline_ns, int64_t monitors_deadline_ns) {
  sdk_t *s = g_sdk;
  if (!s) {
    /* A forked child before its restart: the restart is cancelled. */
    bool pending = atomic_exchange(&g_restart_pending, false);
    g_inherited = NULL;
    return pending ? PERF_OK : PERF_E_NOT_INITIALIZED;
  }
  atomic_store(&g_running, false);
  g_sdk = NULL;
  int err = PERF_OK;
  if (stop_threads(s, deadline_ns, monitors_deadline_ns, &err)) {
    perf__recorder_destroy(&s->recorder);
    perf__config_free(&s->cfg);
    free(s);
  } else {
    leave_behind(s); /* a thread still running uses it */
  }
  perf__sampler_close_files(); /* idle now: no /proc file stays open for it */
  return err;
}

static int start_threads(sdk_t *s) {
  int err =
      perf__writer_start(&s->cfg, &g_stats, atomic_load(&perf__loops()[0].watched_tid), &s->writer);
  if (err) return err;
  perf__recorder_init(&s->recorder, s->cfg.max_events_per_hour, s->writer, &g_stats);
  err = perf__hang_monitor_start(&s->cfg, &s->recorder, &g_stats, &s->hang);
  if (!err) err = perf__cpu_monitor_start(&s->cfg, &s->recorder, &g_stats, &s->cpu);
  if (err) {
    int ignored = 0;
    int64_t deadline = perf__now_ns() + MONITOR_STOP_MIN_NS;
    if (stop_threads(s, deadline, deadline, &ignored)) perf__recorder_destroy(&s->recorder);
  }
  return err;
}

/* Stop every thread of s by the deadlines; true when all of them were
   joined (false: *err is PERF_E_DEADLINE and s must stay alive). */
static bool stop_threads(sdk_t *s, int64_t deadline_ns, int64_t monitors_deadline_ns, int *err) {
  bool joined = true;
  if (s->cpu && perf__cpu_monitor_stop(s->cpu, monitors_deadline_ns) != PERF_OK) joined = false;
  /* The hang monitor records a hang in progress as it stops. */
  if (s->hang && perf__hang_monitor_stop(s->hang, monitors_deadline_ns) != PERF_OK) joined = false;
  s->cpu = NULL;
  s->hang = NULL;
  if (s->writer && perf__writer_stop(s->writer, deadline_ns, &g_last_batch_stats) != PERF_OK)
    joined = false;
  s->writer = NULL;
  if (!joined) *err = PERF_E_DEADLINE;
  return joined;
}

static void leave_behind(sdk_t *s) {
  s->next_left = g_left_behind;
  g_left_behind = s;
}

/* ---- capture_now ---------------------------------------------------------- */

/* With the read lock: every app thread's stack into one manual event. */
static int capture_locked(sdk_t *s, const char *reason, uintptr_t caller) {
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
    size_t others = 0; /* the app's other threads, moved to the front of tids */
    for (size_t i = 0; i < n && !err; i++) {
      /* The SDK's own threads (every perf__worker: the monitors, the
         writer, the uploader) are not the app's story. */
      if (perf__worker_is_sdk_thread(tids[i])) continue;
      char name[16];
      perf__thread_name(tids[i], name, sizeof name);
      err = perf__event_set_thread(ev, tids[i], name, -1);
      if (!err && tids[i] == ev->tid) err = perf__capture_self(ev, caller, &g_stats);
      if (!err && tids[i] != ev->tid) tids[others++] = tids[i];
    }
    /* All of them at once (snapshots): their stacks are from one moment. */
    if (!err) err = perf__capture_samples(ev, tids, others, &g_stats);
    ev->duration_ns = perf__now_ns() - ev->start_mono_ns;
  }
  free(tids);
  if (err) {
    perf__event_free(ev);
    return err;
  }
  return perf__recorder_record(&s->recorder, ev);
}

/* ---- fork ----------------------------------------------------------------- */

/* The loop marks' slow path: not running, but maybe a forked child due to
   restart (not from a signal handler inside another SDK call). */
static bool running_slow(void) {
  if (atomic_load(&g_restart_pending) && perf__call_enter()) {
    restart_if_forked();
    perf__call_leave();
  }
  return atomic_load(&g_running);
}

/* Inside the call guard, without the lock: a forked child whose SDK has
   not restarted yet restarts it now, with the parent's configuration. */
static void restart_if_forked(void) {
  if (!atomic_load(&g_restart_pending)) return;
  lock_write();
  sdk_t *old = g_inherited;
  if (atomic_exchange(&g_restart_pending, false) && old && !g_sdk) {
    g_inherited = NULL;
    sdk_t *s = calloc(1, sizeof *s);
    int err = PERF_E_NO_MEMORY;
    if (s) {
      /* The configuration moves over: the parent's instance is never used
         again here. */
      s->cfg = old->cfg;
      memset(&old->cfg, 0, sizeof old->cfg);
      err = run_instance(s, false);
    }
    if (!err) {
      perf__log(PERF__LOG_INFO, "perf sdk restarted in forked child %d", (int)getpid());
    } else {
      perf__log(PERF__LOG_ERROR, "perf sdk could not restart in forked child %d: %s", (int)getpid(),
                perf_strerror(err));
      if (s) perf__config_free(&s->cfg);
      free(s);
    }
  }
  unlock();
}

static void fork_prepare(void) {
  t_fork_tid = perf__gettid();
}

/* In the child, its only thread (the one that forked). Async-signal-safe
   calls only: the child may be about to exec. */
static void fork_child(void) {
  perf__worker_forget_all();
  perf__owned_fds_close_all();
  perf__lazy_libs_fork_child();
  /* The parent's other threads may have held the lock; they are gone. If
     this thread held it (fork from the log callback), it still does. */
  pthread_rwlock_t fresh = PTHREAD_RWLOCK_INITIALIZER;
  memcpy(&g_lifecycle, &fresh, sizeof fresh);
  if (t_held == HELD_READ) pthread_rwlock_rdlock(&g_lifecycle);
  if (t_held == HELD_WRITE) pthread_rwlock_wrlock(&g_lifecycle);
  sdk_t *s = g_sdk;
  g_sdk = NULL;
  atomic_store(&g_running, false);
  if (!s) return; /* not running, or a restart inherited from further up */
  leave_behind(s);
  g_inherited = s;
  atomic_store(&g_restart_pending, true);
  perf__loop_t *main_loop = &perf__loops()[0];
  if (atomic_load(&main_loop->watched_tid) != t_fork_tid) {
    /* Another thread's loop: the one that forked starts idle. */
    atomic_store(&main_loop->word, 0);
    atomic_store(&main_loop->nested, 0);
  }
  perf__loops_fork_child(); /* the other threads' loops are gone */
  perf__loop_watch_current_thread();
}

/* ---- exit ----------------------------------------------------------------- */

/* atexit: write, spool and send what was recorded, within exit_timeout_ms.
   Not from an SDK thread (it would join itself), nor from a signal handler
   inside another SDK call. */
static void at_exit(void) {
  unsigned ms = atomic_load(&g_exit_timeout_ms);
  if (!ms || !atomic_load(&g_running) || perf__worker_is_sdk_thread(perf__gettid())) return;
  if (!perf__call_enter()) return;
  int64_t deadline = perf__now_ns() + (int64_t)ms * 1000000;
  if (lock_write_by(deadline)) {
    int err = shutdown_locked(deadline, deadline);
    unlock();
    if (err == PERF_E_DEADLINE)
      perf__log(PERF__LOG_WARN,
                "at exit: an SDK thread still busy after exit_timeout_ms (%u) is "
                "left running",
                ms);
  }
  perf__call_leave();
}

static void install_process_hooks(void) {
  pthread_atfork(fork_prepare, NULL, fork_child);
  atexit(at_exit);
}
