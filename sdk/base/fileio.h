/*
 * fileio.h - small POSIX file helpers shared by the writer, the spool, the
 * journal and the hang marker. Not for signal handlers.
 *
 * The SDK's own files are opened relative to a directory descriptor
 * (sdk/base/dir_handle.h) and never through a symbolic link, and get their
 * mode from the SDK, not from the app's umask: files 0600, directories
 * 0700 (docs/operations.md, "Security").
 */
#ifndef PERF_FILEIO_H
#define PERF_FILEIO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define PERF__FILE_MODE 0600
#define PERF__DIR_MODE 0700

/* Write all of data, retrying on EINTR and short writes. 0, or -1 with
   errno set. */
int perf__write_all(int fd, const void *data, size_t len);

/* mkdir -p; the directories it creates get mode 0700 whatever the umask.
   0, or -1 with errno set. */
int perf__mkdir_p(const char *path);

/* openat(dirfd, name, flags) never following a link in `name`'s last
   component (ELOOP) and O_CLOEXEC, retried on EINTR. Only a regular file
   is kept (EINVAL otherwise: a FIFO or device planted under our name is
   not ours). With O_CREAT a file this call creates gets `mode` exactly
   (fchmod: the umask does not take bits away); one that existed keeps its
   own. O_TRUNC is applied only once the file is
   known to be a regular file. The result, or -1 with errno set. */
int perf__openat_file(int dirfd, const char *name, int flags, mode_t mode);

/* perf__openat_file for a file the app named (the file sink's report),
   which may also be a FIFO or a device. A link is followed only when it
   and its directory are beyond another user's reach: the link belongs to
   this user or root, and the directory belongs to this user or root and
   is writable by nobody else or has the sticky bit (so /dev/stderr, or a
   link the user made in their own directory, works; a link another user
   planted is refused with ELOOP). Through a link nothing is created: its
   target must exist. */
int perf__openat_any(int dirfd, const char *name, int flags, mode_t mode);

/* mkdirat(dirfd, name) with mode 0700 whatever the umask; an existing
   entry is fine (true). False with errno set. */
bool perf__mkdirat_private(int dirfd, const char *name);

#endif
