/*
 * sample_state.c - a blocked thread's system call classified and named,
 * and an I/O call's descriptor kind (see sample_state.h). Requesting
 * threads only. The numbers are the target's (<sys/syscall.h>): calls an
 * architecture lacks (poll, select, epoll_wait on aarch64) drop out of the
 * table there.
 */
#include "sdk/sampler/sample_state.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct call_s {
  long nr;
  const char *name;
  uint8_t state;
  bool fd_arg; /* its first argument is the descriptor it waits on */
} call_t;

#define IO(n)                                                                                      \
  { SYS_##n, #n, PERF__STATE_IO, true }
#define CALL(n, s)                                                                                 \
  { SYS_##n, #n, s, false }

static const call_t CALLS[] = {
    CALL(futex, PERF__STATE_LOCK),
#ifdef SYS_futex_waitv
    CALL(futex_waitv, PERF__STATE_LOCK),
#endif
    IO(read),
    IO(write),
    IO(pread64),
    IO(pwrite64),
    IO(readv),
    IO(writev),
    IO(preadv),
    IO(pwritev),
    IO(recvfrom),
    IO(recvmsg),
    IO(recvmmsg),
    IO(sendto),
    IO(sendmsg),
    IO(sendmmsg),
    IO(accept),
    IO(accept4),
    IO(connect),
#ifdef SYS_preadv2
    IO(preadv2),
    IO(pwritev2),
#endif
#ifdef SYS_poll
    CALL(poll, PERF__STATE_POLL),
#endif
#ifdef SYS_select
    CALL(select, PERF__STATE_POLL),
#endif
#ifdef SYS_epoll_wait
    CALL(epoll_wait, PERF__STATE_POLL),
#endif
#ifdef SYS_epoll_pwait2
    CALL(epoll_pwait2, PERF__STATE_POLL),
#endif
    CALL(ppoll, PERF__STATE_POLL),
    CALL(pselect6, PERF__STATE_POLL),
    CALL(epoll_pwait, PERF__STATE_POLL),
    CALL(nanosleep, PERF__STATE_SLEEP),
    CALL(clock_nanosleep, PERF__STATE_SLEEP),
    /* Named only: waits of other kinds. */
    CALL(wait4, PERF__STATE_OTHER),
    CALL(waitid, PERF__STATE_OTHER),
    CALL(rt_sigtimedwait, PERF__STATE_OTHER),
    CALL(rt_sigsuspend, PERF__STATE_OTHER),
    CALL(ioctl, PERF__STATE_OTHER),
    CALL(openat, PERF__STATE_OTHER),
    CALL(fsync, PERF__STATE_OTHER),
    CALL(fdatasync, PERF__STATE_OTHER),
    CALL(flock, PERF__STATE_OTHER),
    CALL(fcntl, PERF__STATE_OTHER),
    CALL(msgrcv, PERF__STATE_OTHER),
    CALL(semtimedop, PERF__STATE_OTHER),
    CALL(io_getevents, PERF__STATE_OTHER),
    CALL(io_uring_enter, PERF__STATE_OTHER),
    CALL(sched_yield, PERF__STATE_OTHER),
#ifdef SYS_pause
    CALL(pause, PERF__STATE_OTHER),
#endif
};

static const call_t *find_call(long nr);

perf__sample_state_t perf__sample_state_blocked(const perf__thread_state_t *ts) {
  perf__sample_state_t s = {PERF__STATE_OTHER, PERF__FD_NONE, -1};
  if (ts->nr < 0) return s; /* off the CPU outside a call: a page fault, a stop */
  s.syscall = ts->nr > INT32_MAX ? INT32_MAX : (int32_t)ts->nr;
  const call_t *c = find_call(ts->nr);
  if (!c) return s;
  s.state = c->state;
  if (c->fd_arg) s.fd_kind = (uint8_t)perf__fd_kind((long)ts->args[0]);
  return s;
}

perf__state_t perf__syscall_class(long nr) {
  const call_t *c = find_call(nr);
  return c ? (perf__state_t)c->state : PERF__STATE_OTHER;
}

const char *perf__syscall_name(long nr) {
  const call_t *c = find_call(nr);
  return c ? c->name : NULL;
}

perf__fd_kind_t perf__fd_kind(long fd) {
  if (fd < 0 || fd > INT32_MAX) return PERF__FD_NONE;
  char path[48], target[64];
  snprintf(path, sizeof path, "/proc/self/fd/%ld", fd);
  ssize_t n = readlink(path, target, sizeof target - 1);
  if (n <= 0) return PERF__FD_NONE; /* closed meanwhile, or no /proc */
  target[n] = '\0';
  if (strncmp(target, "pipe:", 5) == 0) return PERF__FD_PIPE;
  if (strncmp(target, "socket:", 7) == 0) return PERF__FD_SOCKET;
  if (target[0] == '/' && strncmp(target, "/dev/", 5) != 0) return PERF__FD_FILE;
  return PERF__FD_OTHER; /* a device, anon_inode:[eventfd], ... */
}

void perf__syscall_label(long nr, char *out, size_t len) {
  const char *name = nr >= 0 ? perf__syscall_name(nr) : "";
  if (name)
    snprintf(out, len, "%s", name);
  else
    snprintf(out, len, "syscall %ld", nr);
}

static const call_t *find_call(long nr) {
  for (size_t i = 0; i < sizeof CALLS / sizeof CALLS[0]; i++)
    if (CALLS[i].nr == nr) return &CALLS[i];
  return NULL;
}
