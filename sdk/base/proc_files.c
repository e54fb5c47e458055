/*
 * proc_files.c - /proc through a directory opened before any chroot, and
 * mapped files through /proc/self/map_files (see proc_files.h). Any
 * thread.
 *
 * The /proc descriptor lives as long as the process and is never closed,
 * so it can never close an app's file; it is kept with its identity
 * (device and inode) and checked with fstat before each use, since the
 * app may close it and open a file of its own at its number.
 */
#include "sdk/base/proc_files.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "perf_sdk.h"

static atomic_int g_proc_fd = -1;
static atomic_uint_least64_t g_proc_dev, g_proc_ino;

static int proc_fd(void);
static bool find_mapping(const char *path, uintptr_t addr, uintptr_t *lo, uintptr_t *hi, char *out,
                         size_t cap);

static atomic_uint_least64_t g_root_dev, g_root_ino;
static atomic_bool g_root_known;
static atomic_bool g_by_path;

static const char *at_path(const char *rel, char *abs, size_t cap, int *dir);

int perf__proc_open(void) {
  struct stat st;
  if (!atomic_load(&g_root_known) && stat("/", &st) == 0) {
    atomic_store(&g_root_dev, (uint64_t)st.st_dev);
    atomic_store(&g_root_ino, (uint64_t)st.st_ino);
    atomic_store(&g_root_known, true);
  }
  return proc_fd() >= 0 ? PERF_OK : PERF_E_SYSTEM;
}

bool perf__root_changed(void) {
  struct stat st;
  return atomic_load(&g_root_known) && stat("/", &st) == 0 &&
         ((uint64_t)st.st_dev != atomic_load(&g_root_dev) ||
          (uint64_t)st.st_ino != atomic_load(&g_root_ino));
}

bool perf__proc_reachable(void) {
  return proc_fd() >= 0;
}

int perf__proc_openat(const char *rel, int flags) {
  char abs[256];
  int dir;
  const char *p = at_path(rel, abs, sizeof abs, &dir);
  if (!p) return -1;
  return openat(dir, p, flags | O_CLOEXEC);
}

FILE *perf__proc_fopen(const char *rel) {
  int fd = perf__proc_openat(rel, O_RDONLY);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "re");
  if (!f) {
    int e = errno;
    close(fd);
    errno = e;
  }
  return f;
}

DIR *perf__proc_opendir(const char *rel) {
  int fd = perf__proc_openat(rel, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return NULL;
  DIR *d = fdopendir(fd);
  if (!d) {
    int e = errno;
    close(fd);
    errno = e;
  }
  return d;
}

ssize_t perf__proc_readlink(const char *rel, char *buf, size_t cap) {
  char abs[256];
  int dir;
  const char *p = at_path(rel, abs, sizeof abs, &dir);
  if (!p) return -1;
  return readlinkat(dir, p, buf, cap);
}

int perf__proc_stat(const char *rel, struct stat *st) {
  char abs[256];
  int dir;
  const char *p = at_path(rel, abs, sizeof abs, &dir);
  if (!p) return -1;
  return fstatat(dir, p, st, 0);
}

int perf__proc_statx(const char *rel, int flags, unsigned mask, struct statx *sx) {
  char abs[256];
  int dir;
  const char *p = at_path(rel, abs, sizeof abs, &dir);
  if (!p) return -1;
  return statx(dir, p, flags, mask, sx);
}

int perf__mapped_file_open(const char *path, int flags) {
  int fd = open(path, flags | O_CLOEXEC);
  if (fd >= 0 || (errno != ENOENT && errno != ENOTDIR)) return fd;
  int e = errno;
  uintptr_t lo, hi;
  if (path[0] != '/' || !find_mapping(path, 0, &lo, &hi, NULL, 0)) {
    errno = e;
    return -1;
  }
  char rel[64];
  snprintf(rel, sizeof rel, "self/map_files/%" PRIxPTR "-%" PRIxPTR, lo, hi);
  return perf__proc_openat(rel, flags);
}

int perf__mapped_file_path(uintptr_t addr, char *out, size_t cap) {
  uintptr_t lo, hi;
  return find_mapping(NULL, addr, &lo, &hi, out, cap) ? 0 : -1;
}

/* Where `rel` is opened: the kept /proc directory and rel itself, or
   (under an emulator, see perf__proc_open) AT_FDCWD and "/proc/<rel>"
   written into abs. NULL (errno ENOENT) when /proc cannot be reached. */
static const char *at_path(const char *rel, char *abs, size_t cap, int *dir) {
  *dir = proc_fd(); /* first: a fresh open sets g_by_path */
  if (*dir < 0) return NULL;
  if (atomic_load(&g_by_path) && (size_t)snprintf(abs, cap, "/proc/%s", rel) < cap) {
    *dir = AT_FDCWD;
    return abs;
  }
  return rel;
}

/* The /proc directory: the one kept while it is still ours, else /proc
   opened now (by its path: only outside a chroot). -1 (errno ENOENT when
   it cannot be reached). A fresh open also learns whether this process
   runs under an emulator (g_by_path). */
static int proc_fd(void) {
  int fd = atomic_load(&g_proc_fd);
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_dev == atomic_load(&g_proc_dev) &&
      (uint64_t)st.st_ino == atomic_load(&g_proc_ino))
    return fd;
  /* Never opened, or the app closed it (its number may be the app's file
     now: forgotten, not closed). */
  int fresh = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fresh < 0 || fstat(fresh, &st) != 0) {
    if (fresh >= 0) close(fresh);
    errno = ENOENT;
    return -1;
  }
  atomic_store(&g_proc_dev, (uint64_t)st.st_dev);
  atomic_store(&g_proc_ino, (uint64_t)st.st_ino);
  /* An emulator (qemu-user) answers "/proc/self/..." by path with the
     guest's view and through a directory with its own: then the path is
     what tells the truth. */
  char by_path[256], by_dir[256];
  ssize_t a = readlink("/proc/self/exe", by_path, sizeof by_path);
  ssize_t b = readlinkat(fresh, "self/exe", by_dir, sizeof by_dir);
  if (a > 0 && b > 0 && (a != b || memcmp(by_path, by_dir, (size_t)a) != 0))
    atomic_store(&g_by_path, true);
  if (atomic_compare_exchange_strong(&g_proc_fd, &fd, fresh)) return fresh;
  close(fresh); /* another thread opened it first */
  return atomic_load(&g_proc_fd);
}

/* The first file mapping in /proc/self/maps that is of `path` (non-NULL)
   or holds `addr`: its range, and its path into out (cap bytes) when out
   is not NULL. */
static bool find_mapping(const char *path, uintptr_t addr, uintptr_t *lo, uintptr_t *hi, char *out,
                         size_t cap) {
  FILE *f = perf__proc_fopen("self/maps");
  if (!f) return false;
  char line[4096 + 128];
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    int at = 0;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %*s %*s %*s %*s %n", lo, hi, &at) != 2 || !at ||
        line[at] != '/')
      continue;
    found = path ? strcmp(line + at, path) == 0 : addr >= *lo && addr < *hi;
    if (found && out) snprintf(out, cap, "%s", line + at);
  }
  fclose(f);
  return found;
}
