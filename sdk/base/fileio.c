/*
 * fileio.c - see fileio.h.
 */
#include "sdk/base/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int perf__write_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) {
      errno = EIO;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int perf__mkdir_p(const char *path) {
  char buf[PATH_MAX];
  size_t len = strlen(path);
  if (len == 0 || len >= sizeof buf) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(buf, path, len + 1);
  for (char *p = buf + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char c = *p;
    *p = '\0';
    if (mkdir(buf, PERF__DIR_MODE) == 0) {
      /* ours: its mode is ours too, not what the umask left of it */
      if (chmod(buf, PERF__DIR_MODE) != 0) return -1;
    } else if (errno != EEXIST) {
      return -1;
    }
    if (c == '\0') return 0;
    *p = c;
  }
}

static int open_nofollow(int dirfd, const char *name, int flags, mode_t mode, bool regular_only);

int perf__openat_file(int dirfd, const char *name, int flags, mode_t mode) {
  return open_nofollow(dirfd, name, flags, mode, true);
}

static bool link_trusted(int dirfd, const char *name);

int perf__openat_any(int dirfd, const char *name, int flags, mode_t mode) {
  int fd = open_nofollow(dirfd, name, flags, mode, false);
  if (fd >= 0 || errno != ELOOP || !link_trusted(dirfd, name)) return fd;
  /* A link its owner (this user or root) made in a directory nobody else
     can change it in: followed, to a file that must exist already. */
  int saved = errno;
  do
    fd = openat(dirfd, name, (flags & ~(O_CREAT | O_EXCL | O_TRUNC)) | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0 && errno == ENOENT) errno = saved;
  return fd;
}

/* The rule of the kernel's protected_symlinks, made stricter: the link
   belongs to this user or root, and its directory belongs to this user or
   root and is writable by nobody else, or has the sticky bit (where only
   a link's owner can remove or replace it). */
static bool link_trusted(int dirfd, const char *name) {
  struct stat link, dir;
  if (fstatat(dirfd, name, &link, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISLNK(link.st_mode)) return false;
  if (fstat(dirfd, &dir) != 0) return false;
  uid_t me = geteuid();
  bool link_ok = link.st_uid == me || link.st_uid == 0;
  bool dir_ok = (dir.st_uid == me || dir.st_uid == 0) &&
                (!(dir.st_mode & (S_IWGRP | S_IWOTH)) || (dir.st_mode & S_ISVTX));
  return link_ok && dir_ok;
}

static int open_nofollow(int dirfd, const char *name, int flags, mode_t mode, bool regular_only) {
  /* Created here or found: only a file this call created gets `mode`. */
  bool exclusive = (flags & O_CREAT) && !(flags & O_EXCL);
  int base = (flags & ~O_TRUNC) | O_NOFOLLOW | O_CLOEXEC;
  int fd;
  do {
    fd = openat(dirfd, name, exclusive ? base | O_EXCL : base, mode);
    if (fd < 0 && exclusive && errno == EEXIST) {
      exclusive = false;
      base &= ~O_CREAT;
      errno = EINTR; /* once more, without creating */
    }
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return -1;
  bool created = (flags & O_CREAT) && (base & O_CREAT);
  struct stat st;
  int err = 0;
  if (fstat(fd, &st) != 0)
    err = errno;
  else if (!S_ISREG(st.st_mode) && regular_only)
    err = EINVAL;
  else if (created && (st.st_mode & 07777) != mode && fchmod(fd, mode) != 0)
    err = errno;
  else if (S_ISREG(st.st_mode) && (flags & O_TRUNC) && ftruncate(fd, 0) != 0)
    err = errno;
  if (err) {
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

bool perf__mkdirat_private(int dirfd, const char *name) {
  if (mkdirat(dirfd, name, PERF__DIR_MODE) != 0) return errno == EEXIST;
  int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  int r = fchmod(fd, PERF__DIR_MODE);
  int saved = errno;
  close(fd);
  errno = saved;
  return r == 0;
}
