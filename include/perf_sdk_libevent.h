/*
 * perf_sdk_libevent.h - the hang monitor on a libevent event_base, in one
 * call.
 *
 *   struct event *w = perf_sdk_libevent_watch(base, 0);
 *   ... event_base_dispatch(base) as before ...
 *   perf_sdk_libevent_unwatch(w);
 *
 * Header only: include it in the file that sets up the base. The thread
 * that runs the base must be the watched one (the thread that called
 * perf_sdk_init, or perf_sdk_watch_current_thread). A server with a base
 * per worker thread (memcached, a thread pool of loops) watches each one
 * under a name, on the thread that runs it, before its dispatch:
 *
 *   struct event *w = perf_sdk_libevent_watch_loop(base, "worker-3", 0);
 *
 * which registers that thread's loop (perf_sdk_loop_register: the name,
 * and its own hang threshold, 0 for the config's) and watches the base.
 * perf_sdk_loop_unregister on that thread, or its exit, forgets the loop.
 *
 * libevent 2.1 (Debian 12's) has no hook before or after its backend
 * poll: the watch is a persistent timer on the base that calls
 * perf_sdk_heartbeat every period. While the loop waits or runs short
 * callbacks, heartbeats keep coming; a callback that runs longer than the
 * hang threshold stops them, and that is the hang (its stacks sampled
 * while it lasts). The period is a quarter of the loop's hang threshold
 * (perf_sdk_loop_threshold_ms; period_ms 0, or a period_ms longer than
 * that): an idle loop's heartbeats come with three quarters of the
 * threshold to spare for a late timer, at any threshold (before
 * perf_sdk_init, or on a thread without a loop: 50 ms). Costs and
 * limits: the loop wakes every period (4 times per threshold: at the
 * lowest threshold, 20 ms, every 5 ms); a hang's duration counts from the
 * last heartbeat before it, so it reads up to a period long; and the timer
 * is an event of the base: event_base_dispatch no longer returns on its
 * own when the app's last event is gone (event_base_loopexit,
 * event_base_loopbreak or perf_sdk_libevent_unwatch end it, as before).
 *
 * Returns the timer (free it with perf_sdk_libevent_unwatch), or NULL when
 * libevent could not make it, or (watch_loop) the loop could not be
 * registered: not running, a bad name or threshold, PERF_SDK_MAX_LOOPS
 * loops already (perf_sdk_loop_register's log line says which).
 */
#ifndef PERF_SDK_LIBEVENT_H
#define PERF_SDK_LIBEVENT_H

#include <event2/event.h>

#include "perf_sdk.h"

static void perf_sdk__libevent_beat(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  (void)arg;
  perf_sdk_heartbeat();
}

static inline struct event *perf_sdk_libevent_watch(struct event_base *base, unsigned period_ms) {
  if (!base) return NULL;
  /* Not running (yet), or no loop on this thread: 50 ms, the heartbeats
     change nothing then. */
  int threshold = perf_sdk_loop_threshold_ms();
  unsigned longest = threshold > 0 ? (unsigned)threshold / 4 : 50;
  if (period_ms == 0 || period_ms > longest) period_ms = longest;
  struct event *beat = event_new(base, -1, EV_PERSIST, perf_sdk__libevent_beat, NULL);
  if (!beat) return NULL;
  struct timeval period = {(time_t)(period_ms / 1000), (suseconds_t)(period_ms % 1000) * 1000};
  if (event_add(beat, &period) != 0) {
    event_free(beat);
    return NULL;
  }
  perf_sdk_heartbeat();
  return beat;
}

static inline struct event *perf_sdk_libevent_watch_loop(struct event_base *base, const char *name,
                                                         int threshold_ms) {
  if (!base || perf_sdk_loop_register(name, threshold_ms) != PERF_OK) return NULL;
  struct event *beat = perf_sdk_libevent_watch(base, 0);
  if (!beat) perf_sdk_loop_unregister();
  return beat;
}

/* On the thread that runs the base: the timer goes, the loop is idle. A
   loop registered by perf_sdk_libevent_watch_loop stays registered until
   perf_sdk_loop_unregister or its thread's exit. */
static inline void perf_sdk_libevent_unwatch(struct event *watch) {
  if (!watch) return;
  event_free(watch);
  perf_sdk_loop_idle();
}

#endif
