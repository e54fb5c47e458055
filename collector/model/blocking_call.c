/*
 * blocking_call.c - the C library's blocking calls by name (see
 * blocking_call.h).
 */
#include "collector/model/blocking_call.h"

#include <stdlib.h>
#include <string.h>

/* The calls, reduced (blocking_call.h), sorted for bsearch. */
static const char *const CALLS[] = {
    "accept",
    "accept4",
    "clock_nanosleep",
    "connect",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_wait",
    "fdatasync",
    "flock",
    "fsync",
    "futex_abstimed_wait",
    "futex_abstimed_wait_common",
    "futex_wait",
    "lll_lock_wait",
    "lll_lock_wait_private",
    "msgrcv",
    "nanosleep",
    "new_sem_wait", /* glibc's sem_wait */
    "pause",
    "poll",
    "ppoll",
    "pread",
    "preadv",
    "preadv2",
    "pselect",
    "pselect6",
    "pthread_cond_clockwait",
    "pthread_cond_timedwait",
    "pthread_cond_wait",
    "pthread_join",
    "pwrite",
    "pwritev",
    "pwritev2",
    "read",
    "readv",
    "recv",
    "recvfrom",
    "recvmmsg",
    "recvmsg",
    "select",
    "sem_clockwait",
    "sem_timedwait",
    "sem_wait",
    "send",
    "sendmmsg",
    "sendmsg",
    "sendto",
    "sigsuspend",
    "sigtimedwait",
    "sigwait",
    "sigwaitinfo",
    "sleep",
    "usleep",
    "wait",
    "wait4",
    "waitid",
    "waitpid",
    "write",
    "writev",
};

#define NAME_MAX_BYTES 64

static int cmp_call(const void *key, const void *elem) {
  return strcmp(key, *(const char *const *)elem);
}

static bool strip_prefix(const char **s, const char *prefix) {
  size_t n = strlen(prefix);
  if (strncmp(*s, prefix, n) != 0) return false;
  *s += n;
  return true;
}

static bool strip_suffix(char *s, size_t *len, const char *suffix) {
  size_t n = strlen(suffix);
  if (*len <= n || strcmp(s + *len - n, suffix) != 0) return false;
  *len -= n;
  s[*len] = '\0';
  return true;
}

static void skip_underscores(const char **s) {
  while (**s == '_')
    (*s)++;
}

bool blocking_call_is(const char *name) {
  if (!name) return false;
  const char *s = name;
  skip_underscores(&s);
  strip_prefix(&s, "GI_");
  skip_underscores(&s);
  strip_prefix(&s, "libc_");
  skip_underscores(&s);
  size_t len = strcspn(s, "@ "); /* "read@GLIBC_2.2.5", "futex_wait [inline]" */
  if (len == 0 || len >= NAME_MAX_BYTES) return false;
  char call[NAME_MAX_BYTES];
  memcpy(call, s, len);
  call[len] = '\0';
  static const char *const SUFFIXES[] = {"_time64", "64", "_nocancel", "_cancelable"};
  for (size_t i = 0; i < sizeof SUFFIXES / sizeof *SUFFIXES;)
    i = strip_suffix(call, &len, SUFFIXES[i]) ? 0 : i + 1;
  return bsearch(call, CALLS, sizeof CALLS / sizeof *CALLS, sizeof *CALLS, cmp_call) != NULL;
}
