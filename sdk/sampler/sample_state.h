/*
 * sample_state.h - what a sampled thread was doing when its stack was
 * read: running (on a CPU or runnable, captured through the signal), or
 * waiting in a system call, classified (lock, I/O, poll, sleep, other),
 * with the call's name and, for I/O, what kind of descriptor it waits on.
 * Derived on the requesting thread from the /proc reading the blocked
 * capture already made (thread_state.h); never in the signal handler.
 */
#ifndef PERF_SAMPLER_SAMPLE_STATE_H
#define PERF_SAMPLER_SAMPLE_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "sdk/sampler/thread_state.h"

/* The state of one sample. The values are the wire's (perf.v1 SampleState):
   keep them. */
typedef enum perf__state_e {
  PERF__STATE_UNKNOWN = 0, /* not known: a failed capture, an older SDK */
  PERF__STATE_RUNNING = 1, /* on a CPU or runnable: interrupted by the signal */
  PERF__STATE_LOCK = 2,    /* waiting on a futex (mutex, condition, join...) */
  PERF__STATE_IO = 3,      /* read/write/recv/send family, accept, connect */
  PERF__STATE_POLL = 4,    /* poll, ppoll, select, pselect6, epoll_wait/pwait */
  PERF__STATE_SLEEP = 5,   /* nanosleep, clock_nanosleep */
  PERF__STATE_OTHER = 6,   /* another call, or blocked outside one (syscall -1) */
} perf__state_t;

/* What an I/O call's descriptor is (perf.v1 FdKind): the type of the
   file /proc/self/fd/N names while the thread blocks. */
typedef enum perf__fd_kind_e {
  PERF__FD_NONE = 0,   /* not an I/O call, or not known */
  PERF__FD_FILE = 1,   /* a regular file or directory */
  PERF__FD_PIPE = 2,   /* a pipe or a named FIFO */
  PERF__FD_SOCKET = 3, /* a socket */
  PERF__FD_OTHER = 4,  /* a device, an eventfd, a timerfd... */
} perf__fd_kind_t;

typedef struct perf__sample_state_s {
  uint8_t state;   /* perf__state_t */
  uint8_t fd_kind; /* perf__fd_kind_t */
  int32_t syscall; /* waiting: the call's number (-1: blocked outside a call); else -1 */
} perf__sample_state_t;

#define PERF__SAMPLE_STATE_UNKNOWN ((perf__sample_state_t){PERF__STATE_UNKNOWN, PERF__FD_NONE, -1})
#define PERF__SAMPLE_STATE_RUNNING ((perf__sample_state_t){PERF__STATE_RUNNING, PERF__FD_NONE, -1})

/* The state of a thread seen blocked as `ts` shows it: its call
   classified, and for an I/O call its descriptor's kind (perf__fd_kind:
   one statx of /proc/self/fd/N). */
perf__sample_state_t perf__sample_state_blocked(const perf__thread_state_t *ts);

/* The call's class (PERF__STATE_OTHER for calls outside the classes, and
   for -1). */
perf__state_t perf__syscall_class(long nr);

/* The call's name ("read", "futex", "restart_syscall": every call of the
   target's <sys/syscall.h>, syscall_names.h), or NULL for a number it does
   not name (then say "syscall N"). Any thread. */
const char *perf__syscall_name(long nr);

/* The call as the wire names it (Event.sample_syscalls): its name, "syscall
   N" when the table has none, "" for nr < 0 (not in a call). */
void perf__syscall_label(long nr, char *out, size_t len);

/* The kind of descriptor fd of this process: the type of the file its
   /proc/self/fd link names (statx asking the type only, AT_STATX_DONT_SYNC:
   the file is never opened, and a network filesystem answers from its
   cache); PERF__FD_NONE when it cannot be read (closed meanwhile, or
   statx refused: a kernel before 4.11, a seccomp filter). */
perf__fd_kind_t perf__fd_kind(long fd);

#endif
