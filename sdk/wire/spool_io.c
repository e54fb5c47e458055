/*
 * spool_io.c - the POSIX implementation of the spool's I/O seam (see
 * spool_io.h). Any thread.
 */
#include "sdk/wire/spool_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "sdk/base/clock.h"
#include "sdk/base/fileio.h"

static int posix_open(void *ctx, int dirfd, const char *name, int flags, mode_t mode);
static int posix_close(void *ctx, int fd);
static ssize_t posix_write(void *ctx, int fd, const void *buf, size_t len);
static ssize_t posix_pread(void *ctx, int fd, void *buf, size_t len, off_t offset);
static int posix_fsync(void *ctx, int fd);
static int posix_rename(void *ctx, int from_dirfd, const char *from, int to_dirfd, const char *to);
static int posix_unlink(void *ctx, int dirfd, const char *name);
static int64_t posix_wall_ns(void *ctx);
static int64_t posix_boot_ns(void *ctx);

static const perf__spool_io_t g_posix = {
    .ctx = NULL,
    .open = posix_open,
    .close = posix_close,
    .write = posix_write,
    .pread = posix_pread,
    .fsync = posix_fsync,
    .rename = posix_rename,
    .unlink = posix_unlink,
    .wall_ns = posix_wall_ns,
    .boot_ns = posix_boot_ns,
};

const perf__spool_io_t *perf__spool_io_posix(void) {
  return &g_posix;
}

static int posix_open(void *ctx, int dirfd, const char *name, int flags, mode_t mode) {
  (void)ctx;
  return perf__openat_file(dirfd, name, flags, mode);
}

static int posix_close(void *ctx, int fd) {
  (void)ctx;
  return close(fd); /* never retried: the descriptor is gone either way */
}

static ssize_t posix_write(void *ctx, int fd, const void *buf, size_t len) {
  (void)ctx;
  ssize_t n;
  do {
    n = write(fd, buf, len);
  } while (n < 0 && errno == EINTR);
  return n;
}

static ssize_t posix_pread(void *ctx, int fd, void *buf, size_t len, off_t offset) {
  (void)ctx;
  ssize_t n;
  do {
    n = pread(fd, buf, len, offset);
  } while (n < 0 && errno == EINTR);
  return n;
}

static int posix_fsync(void *ctx, int fd) {
  (void)ctx;
  int r;
  do {
    r = fsync(fd);
  } while (r != 0 && errno == EINTR);
  return r;
}

static int posix_rename(void *ctx, int from_dirfd, const char *from, int to_dirfd, const char *to) {
  (void)ctx;
  return renameat(from_dirfd, from, to_dirfd, to);
}

static int posix_unlink(void *ctx, int dirfd, const char *name) {
  (void)ctx;
  return unlinkat(dirfd, name, 0);
}

static int64_t posix_wall_ns(void *ctx) {
  (void)ctx;
  return perf__wall_ns();
}

static int64_t posix_boot_ns(void *ctx) {
  (void)ctx;
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
