/*
 * wait_hooks.c - the waiting calls of libc, interposed: epoll_wait,
 * epoll_pwait, epoll_pwait2, poll, ppoll, select, pselect (and the
 * _FORTIFY_SOURCE forms __poll_chk, __ppoll_chk). Each calls libc's own
 * (dlsym RTLD_NEXT) with the same arguments and returns its result and
 * errno untouched. Runs on every app thread that waits.
 *
 * A thread is a loop once it has come back from
 * PERF__PRELOAD_WAITS_TO_REGISTER blocking waits (a timeout other than
 * zero): its loop is registered under its thread name, with the config's
 * threshold, as it enters the next one, and from then on it is idle
 * during each blocking wait and busy from its return to the next one. A
 * wait with a zero timeout is a look, not a wait: it marks nothing and
 * counts for nothing, so a thread spinning on zero-timeout polls stays
 * busy. The SDK's own threads are refused by perf_sdk_loop_register and
 * never asked again.
 *
 * The state is thread-local (initial-exec TLS: no call to find it); on a
 * loop's thread a wait costs the two marks (perf_sdk_loop_idle / _busy: a
 * few atomic stores and a vDSO clock read), no lock, no allocation.
 */
#undef _FORTIFY_SOURCE /* the interposed names must be the functions, not inline wrappers */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "perf_sdk.h"
#include "preload.h"

enum thread_role {
  ROLE_UNKNOWN = 0, /* counting its waits */
  ROLE_LOOP,        /* registered: marked idle and busy around each wait */
  ROLE_NOT_A_LOOP,  /* refused (an SDK thread, the loop table full): left alone */
  ROLE_REGISTERING, /* inside perf_sdk_loop_register: waits of the SDK itself pass */
};

typedef struct {
  unsigned char role;
  unsigned char waits;
} thread_state_t;

static _Thread_local thread_state_t t_state __attribute__((tls_model("initial-exec")));
static atomic_bool g_on;

typedef int (*epoll_wait_fn)(int, struct epoll_event *, int, int);
typedef int (*epoll_pwait_fn)(int, struct epoll_event *, int, int, const sigset_t *);
typedef int (*epoll_pwait2_fn)(int, struct epoll_event *, int, const struct timespec *,
                               const sigset_t *);
typedef int (*poll_fn)(struct pollfd *, nfds_t, int);
typedef int (*poll_chk_fn)(struct pollfd *, nfds_t, int, size_t);
typedef int (*ppoll_fn)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
typedef int (*ppoll_chk_fn)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *,
                            size_t);
typedef int (*select_fn)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
typedef int (*pselect_fn)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
                          const sigset_t *);

/* libc's definitions, found at the constructor or at the first call. */
static struct {
  _Atomic(epoll_wait_fn) epoll_wait;
  _Atomic(epoll_pwait_fn) epoll_pwait;
  _Atomic(epoll_pwait2_fn) epoll_pwait2;
  _Atomic(poll_fn) poll;
  _Atomic(poll_chk_fn) poll_chk;
  _Atomic(ppoll_fn) ppoll;
  _Atomic(ppoll_chk_fn) ppoll_chk;
  _Atomic(select_fn) select;
  _Atomic(pselect_fn) pselect;
} g_next;

static bool wait_begins(bool blocking);
static void wait_ends(bool watched, bool blocking);
static void become_loop(void);
static void *next_of(const char *name);

/* The next definition of `field` (libc's), looked up once. A function
   libc lacks (epoll_pwait2 before glibc 2.35) fails as libc would. */
#define NEXT(field, name)                                                                          \
  __extension__({                                                                                  \
    __typeof__(atomic_load_explicit(&g_next.field, memory_order_relaxed)) f_ =                     \
        atomic_load_explicit(&g_next.field, memory_order_relaxed);                                 \
    if (!f_) {                                                                                     \
      f_ = (__typeof__(f_))next_of(name);                                                          \
      atomic_store_explicit(&g_next.field, f_, memory_order_relaxed);                              \
    }                                                                                              \
    f_;                                                                                            \
  })

/* The wait itself between the marks; its result and errno as they came. */
#define WAIT(field, name, blocking, ...)                                                           \
  do {                                                                                             \
    __typeof__(atomic_load_explicit(&g_next.field, memory_order_relaxed)) next_ =                  \
        NEXT(field, name);                                                                         \
    if (!next_) {                                                                                  \
      errno = ENOSYS;                                                                              \
      return -1;                                                                                   \
    }                                                                                              \
    bool blocking_ = (blocking); /* select rewrites its timeout */                                 \
    bool watched_ = wait_begins(blocking_);                                                        \
    int result_ = next_(__VA_ARGS__);                                                              \
    wait_ends(watched_, blocking_);                                                                \
    return result_;                                                                                \
  } while (0)

#define TIMESPEC_BLOCKS(ts) (!(ts) || (ts)->tv_sec != 0 || (ts)->tv_nsec != 0)
#define TIMEVAL_BLOCKS(tv) (!(tv) || (tv)->tv_sec != 0 || (tv)->tv_usec != 0)

int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout) {
  WAIT(epoll_wait, "epoll_wait", timeout != 0, epfd, events, maxevents, timeout);
}

int epoll_pwait(int epfd, struct epoll_event *events, int maxevents, int timeout,
                const sigset_t *sigmask) {
  WAIT(epoll_pwait, "epoll_pwait", timeout != 0, epfd, events, maxevents, timeout, sigmask);
}

int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
                 const struct timespec *timeout, const sigset_t *sigmask) {
  WAIT(epoll_pwait2, "epoll_pwait2", TIMESPEC_BLOCKS(timeout), epfd, events, maxevents, timeout,
       sigmask);
}

int poll(struct pollfd *fds, nfds_t nfds, int timeout) {
  WAIT(poll, "poll", timeout != 0, fds, nfds, timeout);
}

int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen) {
  WAIT(poll_chk, "__poll_chk", timeout != 0, fds, nfds, timeout, fdslen);
}

int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
          const sigset_t *sigmask) {
  WAIT(ppoll, "ppoll", TIMESPEC_BLOCKS(timeout), fds, nfds, timeout, sigmask);
}

int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
                const sigset_t *sigmask, size_t fdslen) {
  WAIT(ppoll_chk, "__ppoll_chk", TIMESPEC_BLOCKS(timeout), fds, nfds, timeout, sigmask, fdslen);
}

int select(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
           struct timeval *timeout) {
  WAIT(select, "select", TIMEVAL_BLOCKS(timeout), nfds, readfds, writefds, exceptfds, timeout);
}

int pselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
            const struct timespec *timeout, const sigset_t *sigmask) {
  WAIT(pselect, "pselect", TIMESPEC_BLOCKS(timeout), nfds, readfds, writefds, exceptfds, timeout,
       sigmask);
}

bool perf__preload_on(void) {
  return atomic_load_explicit(&g_on, memory_order_relaxed);
}

void perf__preload_set_on(void) {
  atomic_store(&g_on, true);
}

void perf__preload_resolve_waits(void) {
  (void)NEXT(epoll_wait, "epoll_wait");
  (void)NEXT(epoll_pwait, "epoll_pwait");
  (void)NEXT(epoll_pwait2, "epoll_pwait2");
  (void)NEXT(poll, "poll");
  (void)NEXT(poll_chk, "__poll_chk");
  (void)NEXT(ppoll, "ppoll");
  (void)NEXT(ppoll_chk, "__ppoll_chk");
  (void)NEXT(select, "select");
  (void)NEXT(pselect, "pselect");
}

/* Before a wait: a loop's blocking wait is idle time. A thread that came
   back from enough blocking waits becomes a loop here, on its way into the
   next one: its first capture, which the SDK takes at registration, then
   finds it blocked in the wait and reads it without a signal (a signal
   while a thread enters poll or select would end the wait with EINTR).
   Returns whether the wait is watched (its return marks busy). */
static bool wait_begins(bool blocking) {
  if (!blocking || !perf__preload_on()) return false;
  if (t_state.role == ROLE_UNKNOWN && t_state.waits >= PERF__PRELOAD_WAITS_TO_REGISTER) {
    int saved = errno;
    become_loop(); /* registered loops start idle */
    errno = saved;
    return t_state.role == ROLE_LOOP;
  }
  if (t_state.role != ROLE_LOOP) return false;
  int saved = errno;
  perf_sdk_loop_idle();
  errno = saved;
  return true;
}

/* After a wait: a watched one's return is busy; an unknown thread's
   blocking waits are counted. */
static void wait_ends(bool watched, bool blocking) {
  if (watched) {
    int saved = errno;
    /* No loop any more (unregistered by the app, or a forked child's SDK
       that knows only the forking thread): counted again from zero. */
    if (perf_sdk_loop_busy() == PERF_E_NO_THREAD) t_state = (thread_state_t){ROLE_UNKNOWN, 0};
    errno = saved;
  } else if (blocking && t_state.role == ROLE_UNKNOWN &&
             t_state.waits < PERF__PRELOAD_WAITS_TO_REGISTER) {
    t_state.waits++;
  }
}

/* Register the calling thread's loop under its thread name, with the
   config's threshold. */
static void become_loop(void) {
  char name[PERF_SDK_MAX_LOOP_NAME_BYTES + 1] = "";
  char comm[16] = "";
  pthread_getname_np(pthread_self(), comm, sizeof comm);
  size_t n = 0;
  for (const char *c = comm; *c && n < PERF_SDK_MAX_LOOP_NAME_BYTES; c++, n++) {
    bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '.' || *c == '_' || *c == '-';
    name[n] = ok ? *c : '_';
  }
  if (n == 0) memcpy(name, "thread", sizeof "thread");
  t_state.role = ROLE_REGISTERING;
  int err = perf_sdk_loop_register(name, 0);
  t_state.role = err == PERF_OK ? ROLE_LOOP : ROLE_NOT_A_LOOP;
}

static void *next_of(const char *name) {
  return dlsym(RTLD_NEXT, name);
}
