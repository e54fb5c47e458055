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
 * perf_sdk_init, or perf_sdk_watch_current_thread).
 *
 * libevent 2.1 (Debian 12's) has no hook before or after its backend
 * poll: the watch is a persistent timer on the base that calls
 * perf_sdk_heartbeat every period_ms (0: 50 ms). While the loop waits or
 * runs short callbacks, heartbeats keep coming; a callback that runs
 * longer than the hang threshold stops them, and that is the hang (its
 * stacks sampled while it lasts). Costs and limits: the loop wakes every
 * period_ms; a hang's duration counts from the last heartbeat before it,
 * so it reads up to period_ms long; and the timer is an event of the base:
 * event_base_dispatch no longer returns on its own when the app's last
 * event is gone (event_base_loopexit, event_base_loopbreak or
 * perf_sdk_libevent_unwatch end it, as before). Keep period_ms well under
 * the hang threshold.
 *
 * Returns the timer (free it with perf_sdk_libevent_unwatch), or NULL when
 * libevent could not make it.
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
  if (period_ms == 0) period_ms = 50;
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

static inline void perf_sdk_libevent_unwatch(struct event *watch) {
  if (!watch) return;
  event_free(watch);
  perf_sdk_loop_idle();
}

#endif
