/*
 * helper_spawn.c - the upload helper's process (see helper_spawn.h).
 *
 * Two vfork-style clones (CLONE_VM | CLONE_VFORK: each child runs on a
 * stack of its own in the parent's memory while its parent waits, so they
 * make raw system calls only and touch nothing but the spawn record):
 *   - the go-between, exit signal 0 (no SIGCHLD) and the app's descriptor
 *     table (CLONE_FILES: the helper's pidfd lands in it), which only
 *     starts the helper and exits; this thread reaps it (__WCLONE);
 *   - the helper, its child (CLONE_PIDFD), which arranges its descriptors
 *     and execs. Orphaned at once, it is reparented to init (or the
 *     nearest subreaper), which reaps it: an exec resets a process's exit
 *     signal to SIGCHLD, so a helper that stayed the app's child would
 *     reach the app's SIGCHLD handler and its waitpid(-1).
 * Every signal is blocked across the clones: no handler of the app may run
 * in them; the helper unblocks them after the exec.
 */
#include "uploader/helper_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/proc_files.h"

#define CHILD_STACK_BYTES (64u << 10)
#define HELPER_FD 3
#define FIRST_FREE_FD 10 /* where the socket waits before it becomes 3 */

extern char **environ;

typedef struct {
  const char *path;
  char *const *argv;
  char *const *envp;
  int sock;
  char *helper_stack; /* its top */
  pid_t helper;       /* written by the go-between */
  int pidfd;          /* ... */
  int err;            /* written by either when the helper could not start */
} spawn_t;

static int between_main(void *arg);
static int helper_main(void *arg);
static char **helper_environment(void);

int perf__helper_spawn(const char *path, int sock, perf__helper_proc_t *out) {
  out->pid = -1;
  out->pidfd = -1;
  char pid_text[24];
  snprintf(pid_text, sizeof pid_text, "%d", (int)getpid());
  char *argv[] = {(char *)path, pid_text, NULL};
  char **envp = helper_environment();
  uint8_t *stack = mmap(NULL, 2 * CHILD_STACK_BYTES, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (!envp || stack == MAP_FAILED) {
    free(envp);
    if (stack != MAP_FAILED) munmap(stack, 2 * CHILD_STACK_BYTES);
    errno = ENOMEM;
    return PERF_E_SYSTEM;
  }
  spawn_t s = {path, argv, envp, sock, (char *)stack + 2 * CHILD_STACK_BYTES, -1, -1, 0};
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  /* The low byte of the flags is the exit signal: 0, no SIGCHLD. */
  pid_t between = clone(between_main, (char *)stack + CHILD_STACK_BYTES,
                        CLONE_VM | CLONE_VFORK | CLONE_FILES, &s);
  int clone_errno = errno;
  if (between > 0)
    while (waitpid(between, NULL, __WCLONE) < 0 && errno == EINTR) {
    }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  munmap(stack, 2 * CHILD_STACK_BYTES);
  free(envp);
  if (between < 0 || s.helper <= 0) {
    if (s.pidfd >= 0) close(s.pidfd);
    errno = between < 0 ? clone_errno : s.err ? s.err : EIO;
    return PERF_E_SYSTEM;
  }
  out->pid = s.helper;
  out->pidfd = s.pidfd;
  if (s.err) { /* it could not exec and has exited */
    close(s.pidfd);
    out->pid = -1;
    out->pidfd = -1;
    errno = s.err;
    return PERF_E_SYSTEM;
  }
  return PERF_OK;
}

void perf__helper_end(perf__helper_proc_t *p) {
  if (p->pidfd >= 0) {
    /* Not this process's child: init reaps it. */
    syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
    close(p->pidfd);
  }
  p->pid = -1;
  p->pidfd = -1;
}

bool perf__helper_pidfd_is_its(const perf__helper_proc_t *p) {
  if (p->pidfd < 0) return false;
  char rel[48];
  snprintf(rel, sizeof rel, "self/fdinfo/%d", p->pidfd);
  FILE *f = perf__proc_fopen(rel);
  if (!f) return true;
  char line[128];
  bool its = false;
  long pid = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "Pid: %ld", &pid) == 1) {
      its = pid == (long)p->pid;
      break;
    }
  fclose(f);
  return its;
}

/* The go-between, sharing the parent's memory and descriptor table: raw
   system calls only. */
__attribute__((no_sanitize("address", "undefined"))) static int between_main(void *arg) {
  spawn_t *s = arg;
  int pidfd = -1;
  pid_t helper =
      clone(helper_main, s->helper_stack, CLONE_VM | CLONE_VFORK | CLONE_PIDFD, s, &pidfd);
  if (helper < 0) s->err = errno;
  s->helper = helper;
  s->pidfd = pidfd;
  syscall(SYS_exit, 0);
  return 0;
}

/* The helper until its exec, sharing the parent's memory: raw system
   calls only. */
__attribute__((no_sanitize("address", "undefined"))) static int helper_main(void *arg) {
  spawn_t *s = arg;
  long sock = syscall(SYS_fcntl, s->sock, F_DUPFD_CLOEXEC, FIRST_FREE_FD);
  long null = syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR | O_CLOEXEC);
  if (sock < 0 || null < 0) goto fail;
  for (long fd = 0; fd < 3; fd++)
    if (fd != null && syscall(SYS_dup3, null, fd, 0) < 0) goto fail;
  if (null < 3 && syscall(SYS_fcntl, null, F_SETFD, 0) < 0) goto fail;
  if (syscall(SYS_dup3, sock, HELPER_FD, 0) < 0) goto fail;
  /* Every other descriptor of the app: closed in this process only. */
  if (syscall(SYS_close_range, HELPER_FD + 1, ~0u, 0) < 0)
    for (long fd = HELPER_FD + 1; fd < 65536; fd++)
      syscall(SYS_close, fd);
  syscall(SYS_execve, s->path, s->argv, s->envp);
fail:
  s->err = errno ? errno : EIO;
  syscall(SYS_exit, 127);
  return 127;
}

/* The app's environment with PERF_SDK_DISABLED=1 in place of its own. */
static char **helper_environment(void) {
  static char disabled[] = "PERF_SDK_DISABLED=1";
  size_t n = 0;
  for (char **e = environ; e && *e; e++)
    n++;
  char **out = malloc((n + 2) * sizeof *out);
  if (!out) return NULL;
  size_t k = 0;
  for (char **e = environ; e && *e; e++)
    if (strncmp(*e, "PERF_SDK_DISABLED=", 18) != 0) out[k++] = *e;
  out[k++] = disabled;
  out[k] = NULL;
  return out;
}
