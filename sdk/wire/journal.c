/*
 * journal.c - the open batch's journal (see journal.h). Writer thread.
 */
#include "sdk/wire/journal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/crc32c.h"
#include "sdk/base/dir_handle.h"
#include "sdk/base/fileio.h"
#include "sdk/base/hex.h"
#include "sdk/base/le.h"
#include "sdk/base/log.h"
#include "sdk/base/owned_fds.h"

#define RECORD_MAX (1u << 31)
#define HEX_ID 32

static int open_journal(perf__journal_t *j, int dirfd, int flags);
static bool parse_name(const char *name, uint8_t id[16]);

int perf__journal_begin(perf__journal_t *j, int dirfd, const char *dir, const uint8_t id[16]) {
  perf__hex_encode(id, 16, j->name);
  memcpy(j->name + HEX_ID, PERF__JOURNAL_SUFFIX, sizeof PERF__JOURNAL_SUFFIX);
  snprintf(j->path, sizeof j->path, "%s/%s", dir, j->name);
  memcpy(j->id, id, 16);
  j->bytes = 0;
  if (dirfd < 0 || open_journal(j, dirfd, O_TRUNC) != PERF_OK)
    PERF__FAIL(PERF_E_SYSTEM, "journal %s: %s", j->path, strerror(errno));
  return PERF_OK;
}

int perf__journal_append(perf__journal_t *j, int dirfd, const void *payload, size_t len) {
  if (j->file.fd < 0 || len == 0 || len > RECORD_MAX) return PERF_E_INVALID_ARGUMENT;
  if (!perf__owned_fd_held(&j->file)) {
    /* The app closed it and its number names another file now (the app's,
       or another part of the SDK's): forgotten (never written, never
       closed), the journal opened again. */
    perf__owned_fd_forget(&j->file);
    if (dirfd < 0 || open_journal(j, dirfd, 0) != PERF_OK)
      PERF__FAIL(PERF_E_SYSTEM, "journal %s: lost its descriptor, not opened again: %s", j->path,
                 strerror(errno));
  }
  uint8_t *rec = malloc(PERF__JOURNAL_RECORD_HEADER + len);
  if (!rec) return PERF_E_NO_MEMORY;
  perf__le_put(rec, (uint32_t)len, 4);
  perf__le_put(rec + 4, perf__crc32c(0, payload, len), 4);
  memcpy(rec + PERF__JOURNAL_RECORD_HEADER, payload, len);
  size_t total = PERF__JOURNAL_RECORD_HEADER + len;
  ssize_t n;
  do {
    n = write(j->file.fd, rec, total);
  } while (n < 0 && errno == EINTR);
  int saved = errno;
  free(rec);
  if (n == (ssize_t)total) {
    j->bytes += total;
    return PERF_OK;
  }
  /* Short (disk full) or failed: cut the partial record off, so that the
     records after it stay readable. */
  if (n >= 0) saved = ENOSPC;
  if (ftruncate(j->file.fd, (off_t)j->bytes) != 0) { /* keep saved */
  }
  perf__log(PERF__LOG_WARN, "journal %s: record not written: %s", j->path, strerror(saved));
  errno = saved;
  return PERF_E_SYSTEM;
}

void perf__journal_end(perf__journal_t *j, int dirfd) {
  if (j->file.fd < 0) return;
  perf__journal_close(j);
  if (dirfd >= 0 && unlinkat(dirfd, j->name, 0) != 0 && errno != ENOENT)
    perf__log(PERF__LOG_WARN, "journal %s: not removed: %s", j->path, strerror(errno));
}

void perf__journal_close(perf__journal_t *j) {
  perf__owned_fd_release(&j->file);
}

int perf__journal_read(int dirfd, const char *name, uint64_t max_bytes,
                       perf__journal_record_fn record, void *ctx, uint64_t *torn) {
  *torn = 0;
  int fd = perf__openat_file(dirfd, name, O_RDONLY, 0);
  if (fd < 0) return PERF_E_SYSTEM;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return PERF_E_SYSTEM;
  }
  if ((uint64_t)st.st_size > max_bytes) {
    close(fd);
    return PERF_E_TRUNCATED;
  }
  size_t size = (size_t)st.st_size;
  uint8_t *data = malloc(size ? size : 1);
  size_t got = 0;
  while (data && got < size) {
    ssize_t n = pread(fd, data + got, size - got, (off_t)got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fd);
  if (!data) return PERF_E_NO_MEMORY;
  int err = PERF_OK;
  size_t pos = 0;
  while (!err && pos < got) {
    uint32_t len =
        got - pos >= PERF__JOURNAL_RECORD_HEADER ? (uint32_t)perf__le_get(data + pos, 4) : 0;
    bool whole = len > 0 && got - pos - PERF__JOURNAL_RECORD_HEADER >= len &&
                 perf__crc32c(0, data + pos + PERF__JOURNAL_RECORD_HEADER, len) ==
                     (uint32_t)perf__le_get(data + pos + 4, 4);
    if (!whole) { /* torn: the writer died inside this record's write */
      *torn = 1;
      break;
    }
    err = record(ctx, data + pos + PERF__JOURNAL_RECORD_HEADER, len);
    pos += PERF__JOURNAL_RECORD_HEADER + len;
  }
  free(data);
  return err;
}

int perf__journal_scan(int dirfd, size_t limit, perf__journal_found_fn found, void *ctx) {
  int fd = dirfd >= 0 ? openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0) close(fd);
    return PERF_E_SYSTEM;
  }
  struct dirent *de;
  size_t n = 0;
  while (n < limit && (de = readdir(d)) != NULL) {
    uint8_t id[16];
    if (!parse_name(de->d_name, id)) continue;
    found(ctx, de->d_name, id);
    n++;
  }
  closedir(d);
  return PERF_OK;
}

/* flags: O_TRUNC for a new journal, 0 to go on appending to one. */
static int open_journal(perf__journal_t *j, int dirfd, int flags) {
  int fd =
      perf__openat_file(dirfd, j->name, O_WRONLY | O_CREAT | O_APPEND | flags, PERF__FILE_MODE);
  if (fd < 0) return PERF_E_SYSTEM;
  struct stat st;
  if (fstat(fd, &st) == 0) j->bytes = (uint64_t)st.st_size;
  perf__owned_fd_hold(&j->file, fd); /* a forked child closes its copy; checked before each write */
  return PERF_OK;
}

static bool parse_name(const char *name, uint8_t id[16]) {
  if (strlen(name) != HEX_ID + strlen(PERF__JOURNAL_SUFFIX) ||
      strcmp(name + HEX_ID, PERF__JOURNAL_SUFFIX) != 0)
    return false;
  return perf__hex_decode(name, 16, id);
}
