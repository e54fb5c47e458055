/*
 * loop_registry.h - the watched loops: a fixed table of PERF_SDK_MAX_LOOPS
 * perf__loop_t, static and never freed (a mark racing a shutdown touches
 * valid memory). Slot 0 is the watched thread's loop, "main"; the others
 * are claimed by perf_sdk_loop_register on the thread that runs the loop
 * and freed by perf_sdk_loop_unregister, the thread's exit (its
 * thread-specific key's destructor) or the hang monitor when the thread
 * is gone.
 *
 * A thread finds its own loop through a thread-local pointer with the
 * generation it saw: the marks' lookup is one thread-local load and one
 * relaxed load of the loop's gen, no lock, no system call.
 */
#ifndef PERF_LOOP_REGISTRY_H
#define PERF_LOOP_REGISTRY_H

#include <stdbool.h>

#include "sdk/base/stats.h"
#include "sdk/monitors/hang_monitor.h"

typedef struct perf__loop_ref_s {
  perf__loop_t *loop;
  unsigned gen;
} perf__loop_ref_t;

extern _Thread_local perf__loop_ref_t perf__t_loop __attribute__((tls_model("initial-exec")));

/* The calling thread's loop, or NULL when it has none. */
static inline perf__loop_t *perf__loop_of_caller(void) {
  perf__loop_t *l = perf__t_loop.loop;
  if (!l || atomic_load_explicit(&l->gen, memory_order_relaxed) != perf__t_loop.gen) return NULL;
  return l;
}

/* The table: PERF_SDK_MAX_LOOPS loops, [0] the watched thread's. */
perf__loop_t *perf__loops(void);

/* Make the calling thread the main loop's (its name is read here, with
   prctl, so that the monitor never reads /proc for it). A loop the thread
   had registered is forgotten first. */
void perf__loop_watch_current_thread(void);

/* perf_sdk_loop_register / _unregister (see perf_sdk.h); cfg_threshold_ms
   is the running config's. */
int perf__loop_register(const char *name, int threshold_ms, unsigned cfg_threshold_ms,
                        perf__stats_t *stats);
int perf__loop_unregister(unsigned cfg_threshold_ms);

/* At init: the main loop starts over (idle, not paused, "main"), the
   refusal is logged again once, and every loop registered with threshold 0
   takes cfg_threshold_ms. */
void perf__loops_start(unsigned cfg_threshold_ms, bool fresh_main);

/* perf_sdk_pause / perf_sdk_resume: every slot, in use or not. */
void perf__loops_pause(void);
void perf__loops_resume(void);

/* In a forked child (async-signal-safe): the other threads' loops are
   gone with their threads. */
void perf__loops_fork_child(void);

/* The loop's name into out (PERF_SDK_MAX_LOOP_NAME_BYTES + 1 bytes) as of
   generation gen; false when the loop changed meanwhile. */
bool perf__loop_read_name(const perf__loop_t *loop, unsigned gen, char *out);

/* Hang monitor: free slot i (not the main loop's) when its thread is gone. */
void perf__loop_drop_if_gone(size_t i);

#endif
