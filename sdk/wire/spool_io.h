/*
 * spool_io.h - the file I/O seam under the disk spool: every call that
 * writes, reads, renames or deletes a spool file, plus the wall clock that
 * dates batches and the boot clock that ages them, goes through a small table of function pointers,
 * so tests can fail the Nth write, fsync or rename (as SQLite's fault injection does) or move the
 * clock. The real table is POSIX.
 *
 * Each function behaves like its POSIX namesake (open, rename and unlink
 * as openat, renameat and unlinkat: a name relative to a directory
 * descriptor, so that no path is resolved again after the spool checked
 * its directory): the result, or -1 with errno set. `ctx` is the table's
 * own context, passed back on every call.
 * Directory listing, mkdir, rmdir, flock and fstat are not part of the seam
 * (they hold no batch data). Any thread.
 */
#ifndef PERF_SPOOL_IO_H
#define PERF_SPOOL_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct perf__spool_io_s {
  void *ctx;
  int (*open)(void *ctx, int dirfd, const char *name, int flags, mode_t mode);
  int (*close)(void *ctx, int fd);
  ssize_t (*write)(void *ctx, int fd, const void *buf, size_t len);
  ssize_t (*pread)(void *ctx, int fd, void *buf, size_t len, off_t offset);
  int (*fsync)(void *ctx, int fd);
  int (*rename)(void *ctx, int from_dirfd, const char *from, int to_dirfd, const char *to);
  int (*unlink)(void *ctx, int dirfd, const char *name);
  int64_t (*wall_ns)(void *ctx); /* CLOCK_REALTIME, ns since the Unix epoch */
  int64_t (*boot_ns)(void *ctx); /* CLOCK_BOOTTIME: batch ages (wall-clock jumps do not move it) */
} perf__spool_io_t;

/* The real one: POSIX calls (retried on EINTR where that applies; open
   never follows a link, keeps only regular files and gives a created file
   its mode whatever the umask: perf__openat_file), CLOCK_REALTIME and
   CLOCK_BOOTTIME. A static table, never NULL. */
const perf__spool_io_t *perf__spool_io_posix(void);

#endif
