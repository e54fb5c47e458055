/*
 * helper_spawn.h - start and end the upload helper process without the app
 * noticing: no SIGCHLD (the child's exit signal is 0, so the app's
 * waitpid(-1, ...) and SIGCHLD handlers never see it), none of the app's
 * descriptors (only its socket, as descriptor 3, and /dev/null as 0-2), no
 * fork handler run (a vfork-style clone that execs at once, with every
 * signal blocked until the exec), and a pidfd so that the helper is
 * signalled and reaped by identity, never by a pid the kernel may have
 * reused.
 */
#ifndef PERF_HELPER_SPAWN_H
#define PERF_HELPER_SPAWN_H

#include <stdbool.h>
#include <sys/types.h>

typedef struct {
  pid_t pid;
  int pidfd; /* -1: none */
} perf__helper_proc_t;

/* Start `path` with argv {path, "<this process's pid>"} and the app's
   environment plus PERF_SDK_DISABLED=1 (an SDK preloaded into every
   process stays off in the helper). Returns 0 with *out filled, or
   PERF_E_SYSTEM with errno set: the clone's error, or the exec's (the
   helper could not be run; nothing is left behind then). */
int perf__helper_spawn(const char *path, int sock, perf__helper_proc_t *out);

/* SIGKILL the helper and reap it; returns once it is gone. Only from the
   process that spawned it. */
void perf__helper_end(perf__helper_proc_t *p);

/* Whether p->pidfd is still the pidfd of p's helper: its fdinfo names
   p->pid. Before kernel 6.9 every pidfd shares one anonymous inode with
   eventfds, epoll and timerfds, so its identity (sdk/base/owned_fds.h)
   cannot tell it from an app's descriptor at the same number. True when
   /proc cannot be read (the identity is all there is then). */
bool perf__helper_pidfd_is_its(const perf__helper_proc_t *p);

#endif
