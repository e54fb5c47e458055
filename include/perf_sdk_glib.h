/*
 * perf_sdk_glib.h - the hang monitor on a GLib main context, in one call.
 *
 *   perf_sdk_glib_watch(NULL);   the default context (or a GMainContext *)
 *   ... g_main_loop_run(loop) as before ...
 *   perf_sdk_glib_unwatch(NULL); optional, from the same source file
 *
 * Header only: include it in the file that sets up the loop. The thread
 * that iterates the context must be the watched one (the thread that
 * called perf_sdk_init, or perf_sdk_watch_current_thread). A context
 * iterated by another thread (a worker GMainContext) is watched under a
 * name, with its own threshold (0: the config's), from the thread that
 * iterates it:
 *
 *   perf_sdk_glib_watch_loop(worker_context, "worker", 0);
 *
 * which registers that thread's loop (perf_sdk_loop_register) and wraps
 * the context's poll function. perf_sdk_loop_unregister on that thread, or
 * its exit, forgets the loop. The marks act on the loop of the thread that
 * polls: each context must be iterated by the thread that watched it.
 *
 * How: the context's poll function (g_main_context_set_poll_func) is
 * wrapped: marked idle while GLib polls for events, busy from the moment
 * the poll returns, so source dispatch (every callback: timeouts, idle
 * sources, I/O watches, signals) and GLib's prepare/check work are busy
 * time, each iteration one unit of work. The previous poll function (g_poll
 * or the app's own) still does the polling. GLib polls with timeout 0 in
 * iterations that must not block; those are units too, as short as they
 * are.
 *
 * Returns 0, or -1 when the context already has this wrapper (watch) or
 * does not have it (unwatch), or (watch_loop) the loop could not be
 * registered (not running, a bad name or threshold, PERF_SDK_MAX_LOOPS
 * loops already: perf_sdk_loop_register's log line says which). Contexts
 * watched from one source file share the poll function they wrap: the
 * same for all of them (g_poll, unless the app set its own).
 */
#ifndef PERF_SDK_GLIB_H
#define PERF_SDK_GLIB_H

#include <glib.h>

#include "perf_sdk.h"

/* The poll function the wrapper calls (one per source file including this
   header: watch and unwatch a context from the same file). */
static GPollFunc perf_sdk__glib_poll_prev;

static gint perf_sdk__glib_poll(GPollFD *fds, guint nfds, gint timeout) {
  perf_sdk_loop_idle();
  gint n = perf_sdk__glib_poll_prev(fds, nfds, timeout);
  perf_sdk_loop_busy();
  return n;
}

static inline int perf_sdk_glib_watch(GMainContext *context) {
  GMainContext *ctx = context ? context : g_main_context_default();
  GPollFunc current = g_main_context_get_poll_func(ctx);
  if (current == perf_sdk__glib_poll) return -1;
  perf_sdk__glib_poll_prev = current ? current : g_poll;
  g_main_context_set_poll_func(ctx, perf_sdk__glib_poll);
  return 0;
}

static inline int perf_sdk_glib_watch_loop(GMainContext *context, const char *name,
                                           int threshold_ms) {
  if (perf_sdk_loop_register(name, threshold_ms) != PERF_OK) return -1;
  return perf_sdk_glib_watch(context);
}

static inline int perf_sdk_glib_unwatch(GMainContext *context) {
  GMainContext *ctx = context ? context : g_main_context_default();
  if (g_main_context_get_poll_func(ctx) != perf_sdk__glib_poll) return -1;
  g_main_context_set_poll_func(ctx, perf_sdk__glib_poll_prev);
  perf_sdk_loop_idle();
  return 0;
}

#endif
