/*
 * dir_handle.h - one of the SDK's directories (the spool's, data_dir, the
 * file sink's) held open as a descriptor, so that every file in it is
 * opened relative to it (openat) and no component of its path is resolved
 * again after the directory was checked: a link planted in the path later
 * cannot redirect the SDK, and the directory stays reachable after the app
 * chroots.
 *
 * The trust rule (as ssh and gpg apply to their directories): a directory
 * the SDK writes its state into must be owned by the process's effective
 * user (or root) and not writable by group or others, unless its sticky
 * bit is set (as /tmp: nobody else can then remove or rename the SDK's
 * entries). A directory the SDK creates gets mode 0700 whatever the umask.
 *
 * The descriptor is held as the SDK's (perf__owned_fd_t,
 * sdk/base/owned_fds.h). Before each use perf__dir_fd checks that it still
 * names the directory the handle opened, and opens the path again when
 * the app closed it (closefrom) or the directory was deleted (it is made
 * again when the handle creates its directory). Opening the path again is
 * refused once the process's root directory changed (a chroot after
 * init): logged once with the reason.
 *
 * A handle is used by one thread at a time (the caller's lock).
 */
#ifndef PERF_DIR_HANDLE_H
#define PERF_DIR_HANDLE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "sdk/base/owned_fds.h"

enum {
  PERF__DIR_CREATE = 1, /* mkdir -p (0700) when missing */
  PERF__DIR_TRUST = 2,  /* apply the trust rule (above) */
};

typedef struct perf__dir_s {
  perf__owned_fd_t own; /* .fd -1: not open */
  unsigned flags;
  uint64_t root_dev, root_ino; /* "/" when the handle was opened */
  bool warned;                 /* a failure to open it again was logged */
  char what[32];               /* what it is, for the log: "data_dir", "spool" */
  char path[PATH_MAX];
} perf__dir_t;

#define PERF__DIR_INIT                                                                             \
  { .own = PERF__OWNED_FD_NONE }

/* Open `path` (made first with PERF__DIR_CREATE) and check it (with
   PERF__DIR_TRUST). `what` names it in the log. 0; PERF_E_INVALID_CONFIG
   when the trust rule refuses it; PERF_E_SYSTEM when it cannot be made or
   opened (errno kept). Logged with the path and the reason. */
int perf__dir_open(perf__dir_t *d, const char *path, unsigned flags, const char *what);

/* Make `d` the handle of the directory open at fd (taken over: held as
   the SDK's; -1: none open yet), whose path is `path`, as perf__dir_open
   would have. */
void perf__dir_set(perf__dir_t *d, int fd, const char *path, unsigned flags, const char *what);

/* The trust rule on the directory open at fd: 0, or PERF_E_INVALID_CONFIG
   with the reason logged ("<what> <path> is owned by uid 65534, not by
   this process's user 0: refused"). */
int perf__dir_check_trust(int fd, const char *path, const char *what);

/* The handle's descriptor, usable now: checked to be the SDK's still and
   its directory not deleted, else the path opened again (see above). -1
   with errno set when there is none (logged once until it works again). */
int perf__dir_fd(perf__dir_t *d);

/* Close the descriptor (only if it still names the handle's directory:
   the app may have taken its number); the handle then has none. */
void perf__dir_close(perf__dir_t *d);

/* Whether the process's root directory is still the one it was when `d`
   was opened (false after a chroot). */
bool perf__dir_same_root(const perf__dir_t *d);

#endif
