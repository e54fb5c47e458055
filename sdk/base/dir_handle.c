/*
 * dir_handle.c - the SDK's directories held open (see dir_handle.h). The
 * caller's thread, under the caller's lock.
 */
#include "sdk/base/dir_handle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/fileio.h"
#include "sdk/base/log.h"
#include "sdk/base/owned_fds.h"

static int open_path(perf__dir_t *d, bool quiet);

static void set_fields(perf__dir_t *d, const char *path, unsigned flags, const char *what);

int perf__dir_open(perf__dir_t *d, const char *path, unsigned flags, const char *what) {
  set_fields(d, path, flags, what);
  if (strlen(path) >= sizeof d->path) PERF__FAIL(PERF_E_SYSTEM, "%s %s: path too long", what, path);
  return open_path(d, false);
}

void perf__dir_set(perf__dir_t *d, int fd, const char *path, unsigned flags, const char *what) {
  set_fields(d, path, flags, what);
  perf__owned_fd_hold(&d->own, fd);
}

int perf__dir_check_trust(int fd, const char *path, const char *what) {
  struct stat st;
  if (fstat(fd, &st) != 0)
    PERF__FAIL(PERF_E_SYSTEM, "%s %s: fstat: %s", what, path, strerror(errno));
  uid_t me = geteuid();
  if (st.st_uid != me && st.st_uid != 0)
    PERF__FAIL(PERF_E_INVALID_CONFIG,
               "%s %s is owned by uid %u, not by this process's user %u: refused (another "
               "user could replace the SDK's files)",
               what, path, (unsigned)st.st_uid, (unsigned)me);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
    PERF__FAIL(PERF_E_INVALID_CONFIG,
               "%s %s is writable by group or others (mode %04o) without the sticky bit: "
               "refused (chmod go-w, or 0700)",
               what, path, (unsigned)(st.st_mode & 07777));
  return PERF_OK;
}

int perf__dir_fd(perf__dir_t *d) {
  if (d->own.fd >= 0) {
    struct stat st;
    if (!perf__owned_fd_held(&d->own)) {
      perf__owned_fd_forget(&d->own); /* the app's now: forgotten, never closed */
    } else if (fstat(d->own.fd, &st) == 0 && st.st_nlink > 0) {
      return d->own.fd;
    } else {
      perf__dir_close(d); /* deleted: its path is opened (made) again */
    }
  }
  if (!d->path[0]) {
    errno = EBADF;
    return -1;
  }
  if (!perf__dir_same_root(d)) {
    if (!d->warned)
      perf__log(PERF__LOG_WARN,
                "%s %s: cannot be opened by its path after the process changed its root "
                "directory (chroot): its files are not written",
                d->what, d->path);
    d->warned = true;
    errno = ENOENT;
    return -1;
  }
  return open_path(d, true) == PERF_OK ? d->own.fd : -1;
}

void perf__dir_close(perf__dir_t *d) {
  perf__owned_fd_release(&d->own);
}

bool perf__dir_same_root(const perf__dir_t *d) {
  struct stat root;
  return stat("/", &root) == 0 && (uint64_t)root.st_dev == d->root_dev &&
         (uint64_t)root.st_ino == d->root_ino;
}

static void set_fields(perf__dir_t *d, const char *path, unsigned flags, const char *what) {
  d->own = (perf__owned_fd_t)PERF__OWNED_FD_NONE;
  d->flags = flags;
  d->warned = false;
  snprintf(d->what, sizeof d->what, "%s", what);
  snprintf(d->path, sizeof d->path, "%s", path);
  struct stat root;
  d->root_dev = d->root_ino = 0;
  if (stat("/", &root) == 0) {
    d->root_dev = (uint64_t)root.st_dev;
    d->root_ino = (uint64_t)root.st_ino;
  }
}

/* Make (with PERF__DIR_CREATE), open and check the path. Quiet: a failure
   is logged once until the directory works again. */
static int unusable(perf__dir_t *d, bool quiet) {
  int e = errno;
  if (!quiet || !d->warned)
    perf__log(quiet ? PERF__LOG_WARN : PERF__LOG_ERROR, "%s %s is unusable: %s (errno %d)", d->what,
              d->path, strerror(e), e);
  d->warned = true;
  errno = e;
  return PERF_E_SYSTEM;
}

static int open_path(perf__dir_t *d, bool quiet) {
  if ((d->flags & PERF__DIR_CREATE) && perf__mkdir_p(d->path) != 0) return unusable(d, quiet);
  int fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return unusable(d, quiet);
  int err = (d->flags & PERF__DIR_TRUST) ? perf__dir_check_trust(fd, d->path, d->what) : PERF_OK;
  if (err) {
    close(fd);
    d->warned = true;
    errno = EPERM;
    return err;
  }
  perf__owned_fd_hold(&d->own, fd); /* a forked child closes its copy; checked before each use */
  d->warned = false;
  return PERF_OK;
}
