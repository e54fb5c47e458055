/*
 * sample_state.c - a blocked thread's system call classified and named,
 * and an I/O call's descriptor kind (see sample_state.h). Requesting
 * threads only (names: any thread). The numbers are the target's
 * (<sys/syscall.h>): calls an architecture lacks (poll, select, epoll_wait
 * on aarch64) drop out of the classes there; every call's name comes from
 * the table built from that header (syscall_names.h).
 */
#include "sdk/sampler/sample_state.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sdk/base/proc_files.h"
#include "sdk/sampler/syscall_names.h"

/* The calls with a class of their own (the others are PERF__STATE_OTHER). */
typedef struct call_s {
  long nr;
  uint8_t state;
  bool fd_arg; /* its first argument is the descriptor it waits on */
} call_t;

#define IO(n)                                                                                      \
  { SYS_##n, PERF__STATE_IO, true }
#define CALL(n, s)                                                                                 \
  { SYS_##n, s, false }

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
  for (size_t i = 0; i < perf__syscall_table_len; i++)
    if (perf__syscall_table[i].nr == nr) return perf__syscall_table[i].name;
  return NULL;
}

perf__fd_kind_t perf__fd_kind(long fd) {
  if (fd < 0 || fd > INT32_MAX) return PERF__FD_NONE;
  char path[48];
  snprintf(path, sizeof path, "self/fd/%ld", fd);
  /* The type of the file the descriptor is open on, without opening it:
     the type only, from what the kernel has cached (a network
     filesystem is not asked). */
  struct statx sx;
  if (perf__proc_statx(path, AT_STATX_DONT_SYNC, STATX_TYPE, &sx) != 0 ||
      !(sx.stx_mask & STATX_TYPE))
    return PERF__FD_NONE; /* closed meanwhile, or no /proc */
  mode_t type = sx.stx_mode & S_IFMT;
  if (S_ISFIFO(type)) return PERF__FD_PIPE; /* a pipe, or a named FIFO */
  if (S_ISSOCK(type)) return PERF__FD_SOCKET;
  if (S_ISREG(type) || S_ISDIR(type)) return PERF__FD_FILE;
  return PERF__FD_OTHER; /* a device, an eventfd or epoll (no type), ... */
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
