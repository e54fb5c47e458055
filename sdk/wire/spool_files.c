/*
 * spool_files.c - the spool's files and directory, below the running spool
 * (spool.c), the open's recovery (spool_recover.c) and adoption
 * (spool_adopt.c), which all call it; it calls none of them. It holds the
 * names (`<seq>-<id>.batch`, `.tmp`, `<pid>` subdirectories, paths), the
 * on-disk header (written, read back and checked; perf__spool_read_file for
 * readers without a spool), the LOCK files' flock, a file set aside in
 * quarantine/ or unlinked, and the scan of one directory's batch files that
 * recovery and adoption share. Any thread: the quarantine's count is taken
 * under the spool's mutex; the scan runs only inside perf__spool_open.
 *
 * On-disk header (little endian, PERF__SPOOL_HEADER_SIZE = 64 bytes):
 *   0 magic "PSPL"          4 u16 version (1)       6 u16 header size (64)
 *   8 u64 payload length   16 u32 CRC-32C(payload) 20 u32 reserved (0)
 *  24 i64 created, ns since the Unix epoch         32 u8[16] batch id
 *  48 i64 created, CLOCK_BOOTTIME ns               56 u32 boot tag
 *  60 u32 CRC-32C(header bytes 0..59)
 * (files of earlier versions have 0 at 48..59: their boot is unknown).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/crc32c.h"
#include "sdk/base/fileio.h"
#include "sdk/base/hex.h"
#include "sdk/base/le.h"
#include "sdk/base/log.h"
#include "sdk/wire/spool_internal.h"

#define SPOOL_MAGIC "PSPL"
#define SPOOL_VERSION 1
#define HDR PERF__SPOOL_HEADER_SIZE
#define SEQ_DIGITS 20

static int pread_all(const perf__spool_io_t *io, int fd, void *buf, size_t len, off_t off);
static const char *header_problem(const uint8_t *h, size_t have, uint64_t file_size,
                                  const uint8_t id[16], perf__spool_rec_t *rec);
static const char *check_file(perf__spool_t *sp, int dirfd, const char *name, const char *path,
                              const uint8_t id[16], perf__spool_rec_t *rec, int *io_errno);

/* ---- names and paths ----------------------------------------------------- */

void perf__spool_batch_name(char *out, uint64_t seq, const uint8_t id[16], const char *suffix) {
  char idhex[33];
  perf__hex_encode(id, 16, idhex);
  snprintf(out, PERF__SPOOL_NAME_BYTES, "%0*" PRIu64 "-%s%s", SEQ_DIGITS, seq, idhex, suffix);
}

bool perf__spool_parse_batch_name(const char *name, uint64_t *seq, uint8_t id[16]) {
  if (strlen(name) != SEQ_DIGITS + 1 + 32 + 6 || name[SEQ_DIGITS] != '-' ||
      strcmp(name + SEQ_DIGITS + 33, ".batch") != 0)
    return false;
  uint64_t v = 0;
  for (int i = 0; i < SEQ_DIGITS; i++) {
    if (name[i] < '0' || name[i] > '9') return false;
    unsigned d = (unsigned)(name[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  if (!perf__hex_decode(name + SEQ_DIGITS + 1, 16, id)) return false;
  *seq = v;
  return true;
}

bool perf__spool_is_tmp_name(const char *name) {
  size_t n = strlen(name);
  return n > 4 && strcmp(name + n - 4, ".tmp") == 0;
}

bool perf__spool_is_pid_name(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > 10) return false;
  for (size_t i = 0; i < n; i++)
    if (name[i] < '0' || name[i] > '9') return false;
  return true;
}

/* dir/name into out (PATH_MAX bytes); -1 when it does not fit (never for
   the names the spool makes: spool.c takes a root of at most ROOT_MAX
   bytes). */
int perf__spool_join(char *out, const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  if (a + 1 + b >= PATH_MAX) {
    out[0] = '\0';
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(out, dir, a);
  out[a] = '/';
  memcpy(out + a + 1, name, b + 1);
  return 0;
}

bool perf__spool_is_regular(int dirfd, const char *name) {
  struct stat st;
  return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

DIR *perf__spool_opendir(int dirfd) {
  int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return NULL;
  DIR *d = fdopendir(fd);
  if (!d) {
    int saved = errno;
    close(fd);
    errno = saved;
  }
  return d;
}

/* ---- the header: written, read back, checked ----------------------------- */

int perf__spool_read_file(const char *path, uint8_t id[16], int64_t *created_unix_ns,
                          uint8_t **payload, size_t *len, const char **reason) {
  if (!path || !payload || !len || !reason) return PERF_E_INVALID_ARGUMENT;
  *payload = NULL;
  *len = 0;
  *reason = NULL;
  const char *slash = strrchr(path, '/');
  uint64_t seq;
  uint8_t named[16];
  bool has_name = perf__spool_parse_batch_name(slash ? slash + 1 : path, &seq, named);
  const perf__spool_io_t *io = perf__spool_io_posix();
  /* A path given by a person (perf-dump): followed, as any tool does. */
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return PERF_E_SYSTEM; /* errno kept */
  perf__spool_rec_t rec;
  int err = perf__spool_read_batch_fd(io, PERF__SPOOL_MAX_BYTES_LIMIT, fd, path,
                                      has_name ? named : NULL, &rec, payload, reason);
  int saved = errno;
  close(fd);
  errno = saved;
  if (err) return err;
  if (*reason) return PERF__E_SPOOL_CORRUPT;
  *len = (size_t)(rec.size - HDR);
  if (id) memcpy(id, rec.id, 16);
  if (created_unix_ns) *created_unix_ns = rec.created_ns;
  return PERF_OK;
}

/* Read the batch file open at fd (through io) and verify it: header, length
   (payload at most max_bytes), id (id NULL: whatever the header says), and,
   with payload != NULL, the payload's CRC into a malloc'd *payload. Returns
   0 with *bad NULL (good) or naming the problem, or PERF_E_SYSTEM /
   PERF_E_NO_MEMORY (logged; errno kept). */
int perf__spool_read_batch_fd(const perf__spool_io_t *io, uint64_t max_bytes, int fd,
                              const char *path, const uint8_t id[16], perf__spool_rec_t *rec,
                              uint8_t **payload, const char **bad) {
  struct stat st;
  uint8_t h[HDR];
  *bad = NULL;
  if (fstat(fd, &st) != 0) return perf__spool_io_failed("fstat", path, errno);
  size_t have = st.st_size < HDR ? (size_t)st.st_size : HDR;
  int r = pread_all(io, fd, h, have, 0);
  if (r < 0) return perf__spool_io_failed("read", path, errno);
  *bad = r > 0 ? "torn" : header_problem(h, have, (uint64_t)st.st_size, id, rec);
  if (!*bad && rec->size - HDR > max_bytes) *bad = "bad_length";
  if (*bad || !payload) return PERF_OK;
  size_t len = (size_t)(rec->size - HDR);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) PERF__FAIL(PERF_E_NO_MEMORY, "spool: no memory for %zu bytes of %s", len, path);
  r = pread_all(io, fd, buf, len, HDR);
  if (r < 0) {
    int saved = errno;
    free(buf);
    perf__spool_io_failed("read", path, saved);
    errno = saved;
    return PERF_E_SYSTEM;
  }
  if (r > 0)
    *bad = "torn";
  else if (perf__crc32c(0, buf, len) != (uint32_t)perf__le_get(h + 16, 4))
    *bad = "bad_crc";
  if (*bad)
    free(buf);
  else
    *payload = buf;
  return PERF_OK;
}

void perf__spool_header_encode(uint8_t h[HDR], uint64_t len, uint32_t crc, int64_t created_ns,
                               int64_t boot_ns, uint32_t boot_tag, const uint8_t id[16]) {
  memset(h, 0, HDR);
  memcpy(h, SPOOL_MAGIC, 4);
  perf__le_put(h + 4, SPOOL_VERSION, 2);
  perf__le_put(h + 6, HDR, 2);
  perf__le_put(h + 8, len, 8);
  perf__le_put(h + 16, crc, 4);
  perf__le_put(h + 24, (uint64_t)created_ns, 8);
  memcpy(h + 32, id, 16);
  perf__le_put(h + 48, (uint64_t)boot_ns, 8);
  perf__le_put(h + 56, boot_tag, 4);
  perf__le_put(h + 60, perf__crc32c(0, h, 60), 4);
}

int perf__spool_io_failed(const char *step, const char *path, int err) {
  perf__log(PERF__LOG_WARN, "spool: %s %s: %s", step, path, strerror(err));
  errno = err;
  return PERF_E_SYSTEM;
}

/* ---- locks, quarantine, unlink ------------------------------------------- */

/* flock(LOCK_EX | LOCK_NB) on dirfd's LOCK. PERF__SPOOL_LOCK_STALE: we got the lock, but
   the file was unlinked (or replaced) meanwhile, so it guards nothing. */
int perf__spool_lock_file(int dirfd, bool create, int *fd_out) {
  int fd = perf__openat_file(dirfd, "LOCK", O_RDWR | (create ? O_CREAT : 0), PERF__FILE_MODE);
  if (fd < 0) return PERF__SPOOL_LOCK_ERROR;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int r = errno == EWOULDBLOCK ? PERF__SPOOL_LOCK_HELD : PERF__SPOOL_LOCK_ERROR;
    int saved = errno;
    close(fd);
    errno = saved;
    return r;
  }
  struct stat held, named;
  if (fstat(fd, &held) != 0 || fstatat(dirfd, "LOCK", &named, AT_SYMLINK_NOFOLLOW) != 0 ||
      held.st_ino != named.st_ino || held.st_dev != named.st_dev) {
    close(fd);
    return PERF__SPOOL_LOCK_STALE;
  }
  *fd_out = fd;
  return PERF__SPOOL_LOCK_TAKEN;
}

/* Move path into quarantine/ as <name>.<reason>; delete it instead when
   quarantine/ is full or the file is larger than max_bytes, so the
   quarantine stays bounded. */
void perf__spool_quarantine_file(perf__spool_t *sp, int dirfd, const char *dir, const char *name,
                                 const char *reason, uint64_t size) {
  int qfd = perf__spool_quarantine_fd(sp);
  char path[PATH_MAX];
  perf__spool_join(path, dir, name);
  pthread_mutex_lock(&sp->lock);
  bool keep = sp->quarantine_files < PERF__SPOOL_QUARANTINE_LIMIT && size <= sp->max_bytes;
  if (keep) sp->quarantine_files++;
  pthread_mutex_unlock(&sp->lock);
  char qname[NAME_MAX + PERF__SPOOL_REASON_MAX + 2];
  int n = snprintf(qname, sizeof qname, "%s.%s", name, reason);
  if (keep && n > 0 && n <= NAME_MAX && qfd >= 0 &&
      sp->io.rename(sp->io.ctx, dirfd, name, qfd, qname) == 0)
    return;
  if (keep) {
    pthread_mutex_lock(&sp->lock);
    sp->quarantine_files--;
    pthread_mutex_unlock(&sp->lock);
  }
  if (sp->io.unlink(sp->io.ctx, dirfd, name) != 0 && errno != ENOENT)
    perf__log(PERF__LOG_WARN, "spool: cannot set aside or delete %s: %s", path, strerror(errno));
}

void perf__spool_unlink_rec(perf__spool_t *sp, const perf__spool_rec_t *r, const char *why) {
  char name[PERF__SPOOL_NAME_BYTES], path[PATH_MAX];
  perf__spool_batch_name(name, r->seq, r->id, ".batch");
  perf__spool_join(path, sp->dir, name);
  if (sp->io.unlink(sp->io.ctx, perf__spool_dir_fd(sp), name) != 0 && errno != ENOENT)
    perf__log(PERF__LOG_WARN, "spool: %s %s: %s", why, path, strerror(errno));
}

/* ---- one directory's batch files, at open -------------------------------- */

int perf__spool_scan_dir(perf__spool_t *sp, int dirfd, const char *dir,
                         perf__spool_rec_list_t *found, uint64_t *max_seq, size_t *others) {
  DIR *d = perf__spool_opendir(dirfd);
  if (!d) PERF__FAIL(PERF_E_SYSTEM, "spool: cannot list %s: %s", dir, strerror(errno));
  struct dirent *de;
  int err = PERF_OK;
  for (size_t seen = 0; !err && (de = readdir(d)) != NULL; seen++) {
    if (seen >= PERF__SPOOL_SCAN_LIMIT) {
      perf__log(PERF__LOG_WARN, "spool: over %d entries in %s: the rest wait for a later open",
                PERF__SPOOL_SCAN_LIMIT, dir);
      break;
    }
    const char *name = de->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strcmp(name, "LOCK") == 0) continue;
    uint64_t seq;
    uint8_t id[16];
    bool batch = perf__spool_parse_batch_name(name, &seq, id);
    bool tmp = !batch && perf__spool_is_tmp_name(name);
    if ((!batch && !tmp) || !perf__spool_is_regular(dirfd, name)) {
      if (strcmp(name, "quarantine") != 0 && !perf__spool_is_pid_name(name)) (*others)++;
      continue;
    }
    if (tmp) {
      uint8_t tmp_id[16];
      char stem[PERF__SPOOL_NAME_BYTES];
      size_t stem_len = strlen(name) - 4;
      if (stem_len + sizeof ".batch" <= sizeof stem) {
        memcpy(stem, name, stem_len);
        memcpy(stem + stem_len, ".batch", 7);
        if (perf__spool_parse_batch_name(stem, &seq, tmp_id) && seq > *max_seq) *max_seq = seq;
      }
    } else if (seq > *max_seq) {
      *max_seq = seq;
    }
    char path[PATH_MAX];
    perf__spool_join(path, dir, name);
    perf__spool_rec_t rec;
    int io_errno = 0;
    const char *bad = tmp ? "torn" : check_file(sp, dirfd, name, path, id, &rec, &io_errno);
    if (io_errno) { /* cannot tell: leave it */
      perf__log(PERF__LOG_WARN, "spool: %s: %s", path, strerror(io_errno));
      (*others)++;
    } else if (bad) {
      struct stat st;
      perf__log(PERF__LOG_WARN, "spool: %s is %s: quarantined", path, bad);
      perf__spool_quarantine_file(
          sp, dirfd, dir, name, bad,
          fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? (uint64_t)st.st_size : 0);
      sp->st.quarantined_corrupt++;
    } else {
      rec.seq = seq;
      err = perf__spool_list_push(found, &rec);
    }
  }
  closedir(d);
  return err;
}

int perf__spool_list_push(perf__spool_rec_list_t *l, const perf__spool_rec_t *r) {
  if (l->n == l->cap) {
    if (l->cap >= PERF__SPOOL_SCAN_LIMIT) return PERF_E_NO_MEMORY;
    size_t cap = l->cap ? l->cap * 2 : 64;
    if (cap > PERF__SPOOL_SCAN_LIMIT) cap = PERF__SPOOL_SCAN_LIMIT;
    perf__spool_rec_t *v = realloc(l->v, cap * sizeof *v);
    if (!v) return PERF_E_NO_MEMORY;
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = *r;
  return PERF_OK;
}

int perf__spool_rec_cmp(const void *a, const void *b) {
  uint64_t x = ((const perf__spool_rec_t *)a)->seq, y = ((const perf__spool_rec_t *)b)->seq;
  return x < y ? -1 : x > y;
}

/* ---- helpers ------------------------------------------------------------- */

/* 0: all read; 1: the file ended first; -1: error (errno). */
static int pread_all(const perf__spool_io_t *io, int fd, void *buf, size_t len, off_t off) {
  uint8_t *p = buf;
  while (len > 0) {
    ssize_t n = io->pread(io->ctx, fd, p, len, off);
    if (n < 0) return -1;
    if (n == 0) return 1;
    p += n;
    off += n;
    len -= (size_t)n;
  }
  return 0;
}

static const char *header_problem(const uint8_t *h, size_t have, uint64_t file_size,
                                  const uint8_t id[16], perf__spool_rec_t *rec) {
  if (file_size == 0) return "empty";
  if (memcmp(h, SPOOL_MAGIC, have < 4 ? have : 4) != 0) return "bad_magic";
  if (file_size < HDR) return "torn";
  if (perf__le_get(h + 4, 2) != SPOOL_VERSION) return "bad_version";
  if (perf__le_get(h + 6, 2) != HDR || (uint32_t)perf__le_get(h + 60, 4) != perf__crc32c(0, h, 60))
    return "bad_header";
  if (perf__le_get(h + 8, 8) != file_size - HDR) return "bad_length";
  if (id && memcmp(h + 32, id, 16) != 0) return "bad_id";
  rec->seq = 0;
  rec->size = file_size;
  rec->created_ns = (int64_t)perf__le_get(h + 24, 8);
  rec->boot_ns = (int64_t)perf__le_get(h + 48, 8);
  rec->boot_tag = (uint32_t)perf__le_get(h + 56, 4);
  memcpy(rec->id, h + 32, 16);
  return NULL;
}

/* Open-time check of the batch file at path, header only (the payload's CRC
   is checked when the batch is read): NULL and *rec filled (but for seq)
   when it looks whole, else what is wrong; *io_errno set when it could not
   be read at all. */
static const char *check_file(perf__spool_t *sp, int dirfd, const char *name, const char *path,
                              const uint8_t id[16], perf__spool_rec_t *rec, int *io_errno) {
  int fd = sp->io.open(sp->io.ctx, dirfd, name, O_RDONLY, 0);
  if (fd < 0) {
    *io_errno = errno;
    return NULL;
  }
  const char *bad = NULL;
  if (perf__spool_read_batch_fd(&sp->io, sp->max_bytes, fd, path, id, rec, NULL, &bad) != PERF_OK)
    *io_errno = errno ? errno : EIO;
  sp->io.close(sp->io.ctx, fd);
  return bad;
}
