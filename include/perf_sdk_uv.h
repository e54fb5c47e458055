/*
 * perf_sdk_uv.h - the hang monitor on a libuv loop, in one call.
 *
 *   perf_sdk_uv_run(loop);   instead of uv_run(loop, UV_RUN_DEFAULT)
 *
 * Header only: include it in the file that runs the loop (the app links
 * libuv and libperfsdk as it does anyway). The thread that runs the loop
 * must be the watched one (the thread that called perf_sdk_init, or
 * perf_sdk_watch_current_thread). A loop run by another thread (a loop per
 * thread) is watched under a name, with its own threshold (0: the
 * config's):
 *
 *   perf_sdk_uv_run_loop(loop, "worker-3", 0);   on the thread that runs it
 *
 * which registers the calling thread's loop (perf_sdk_loop_register), runs
 * as perf_sdk_uv_run, and forgets the loop when it returns.
 *
 * Why a run function and not prepare/check handles: libuv calls I/O
 * callbacks (reads, accepts, uv_poll) inside its poll phase, between the
 * prepare and check handles, so marks set there would count a read
 * callback that blocks for a second as idle time. perf_sdk_uv_run waits for
 * events itself, on the loop's backend descriptor (uv_backend_fd) for
 * uv_backend_timeout, marked idle; then runs one loop iteration
 * (uv_run(UV_RUN_NOWAIT): timers, pending, idle, prepare, I/O, check and
 * close callbacks, in libuv's order) marked busy. Every callback runs as
 * under uv_run(UV_RUN_DEFAULT), each iteration is one unit of work.
 *
 * Returns like uv_run(loop, UV_RUN_DEFAULT): 0 once no active, referenced
 * handles or requests are left; non-zero after uv_stop() in a timer, idle,
 * prepare, I/O or check callback. A uv_stop() from a close callback is seen
 * when the next iteration ends (libuv clears the flag before returning from
 * UV_RUN_NOWAIT). A negative libuv error when the run could not start.
 * The run's own check handle is closed before it returns; when the loop
 * ended because nothing was left, that close takes one more UV_RUN_NOWAIT
 * iteration, in which an unreferenced handle that is due (a uv_unref'd
 * timer) may still run once. perf_sdk_uv_run_loop returns the same, or
 * UV_EINVAL when the loop could not be registered (not running, a bad name
 * or threshold, PERF_SDK_MAX_LOOPS loops already: perf_sdk_loop_register's
 * log line says which), without running it.
 */
#ifndef PERF_SDK_UV_H
#define PERF_SDK_UV_H

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <uv.h>

#include "perf_sdk.h"

/* The run's check handle: notes uv_stop() during an iteration (libuv
   clears the flag when UV_RUN_NOWAIT returns). On the heap: its close may
   finish in the app's next uv_run. */
typedef struct {
  uv_check_t handle;
  int stopped;
} perf_sdk__uv_check_t;

static void perf_sdk__uv_checked(uv_check_t *h) {
  if (h->loop->stop_flag) ((perf_sdk__uv_check_t *)h)->stopped = 1;
}

static void perf_sdk__uv_closed(uv_handle_t *h) {
  free(h);
}

static inline int perf_sdk_uv_run(uv_loop_t *loop) {
  if (loop->stop_flag) return uv_run(loop, UV_RUN_NOWAIT); /* stopped before: returns at once */
  perf_sdk__uv_check_t *check = (perf_sdk__uv_check_t *)calloc(1, sizeof *check);
  if (!check) return UV_ENOMEM;
  int err = uv_check_init(loop, &check->handle);
  if (err) {
    free(check);
    return err;
  }
  uv_unref((uv_handle_t *)&check->handle); /* never keeps the loop alive */
  uv_check_start(&check->handle, perf_sdk__uv_checked);
  int alive;
  for (;;) {
    perf_sdk_loop_busy();
    alive = uv_run(loop, UV_RUN_NOWAIT);
    if (!alive || check->stopped) break;
    int timeout = uv_backend_timeout(loop);
    if (timeout == 0) continue;
    struct pollfd backend = {uv_backend_fd(loop), POLLIN, 0};
    perf_sdk_loop_idle();
    /* EINTR: the app's own signal; its uv_signal handle runs next. */
    (void)poll(&backend, 1, timeout);
  }
  perf_sdk_loop_idle();
  uv_close((uv_handle_t *)&check->handle, perf_sdk__uv_closed);
  /* Ended because nothing is left: finish the close now, so that
     uv_loop_close succeeds as after uv_run. After uv_stop the close ends
     in the app's next uv_run (which a loop with handles left needs anyway
     before uv_loop_close). */
  if (!alive) uv_run(loop, UV_RUN_NOWAIT);
  return alive;
}

static inline int perf_sdk_uv_run_loop(uv_loop_t *loop, const char *name, int threshold_ms) {
  if (perf_sdk_loop_register(name, threshold_ms) != PERF_OK) return UV_EINVAL;
  int ret = perf_sdk_uv_run(loop);
  perf_sdk_loop_unregister();
  return ret;
}

#endif
