/*
 * spool.c - the disk spool (see spool.h). The writer thread puts batches,
 * the uploader thread peeks, reads, removes and quarantines them, any thread
 * reads the stats; open and close run at SDK start and shutdown.
 *
 * The index is the batches of our directory sorted by seq, in a ring of
 * max_files records allocated at open. One mutex guards the index, the
 * counters and the busy_* sums, and is never held across a write, fsync or
 * read of batch data. The rule that keeps threads off each other's files: a
 * batch file is unlinked or renamed only by the caller that took its record
 * out of the index under the mutex. While a file is on disk but not in the
 * index (being written, evicted, removed or quarantined) its bytes count in
 * busy_files/busy_bytes, so the bounds hold for what is on disk.
 *
 * Ages (max_age_s) are measured on CLOCK_BOOTTIME, which wall-clock
 * corrections do not move: a batch written in this boot (its tag is a
 * CRC-32C of /proc/sys/kernel/random/boot_id) is as old as the boot clock
 * says; one from an earlier boot is dated by the wall clock once, at open,
 * its age clamped at 0 when it claims to come from the future, and then
 * ages on the boot clock like the others.
 *
 * This file is the running spool: open and close, puts, reads, removals,
 * quarantine and eviction of indexed batches, the index. What an open finds
 * in its own directory is spool_recover.c's, what it takes over from dead
 * processes spool_adopt.c's; the files themselves (names, the header format
 * written and checked, locks, quarantine and unlink, the directory scan) are
 * spool_files.c's, below all three. Calls go one way: spool.c ->
 * spool_recover.c -> spool_adopt.c, and each of them -> spool_files.c. The
 * state they share is spool_internal.h.
 */
#include "sdk/wire/spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sdk/base/crc32c.h"
#include "sdk/base/fileio.h"
#include "sdk/base/log.h"
#include "sdk/base/owned_fds.h"
#include "sdk/wire/spool_internal.h"

#define HDR PERF__SPOOL_HEADER_SIZE
#define MAX_AGE_LIMIT_S (10u * 366 * 24 * 3600)
#define ROOT_MAX (PATH_MAX - 160) /* room for "/<pid>/LOCK" and quarantine names */
#define LOCK_TRIES 8

static int check_options(const perf__spool_options_t *opt);
static int take_directory(perf__spool_t *sp, perf__dir_t *given);
static int take_subdir(perf__spool_t *sp, int root_fd);
static bool dir_holds_only_lock(int dirfd);
static void retake_lock_locked(perf__spool_t *sp, int dirfd);
static int write_batch(perf__spool_t *sp, uint64_t seq, const uint8_t id[16], const void *payload,
                       size_t len, int64_t created_ns, int64_t boot_ns);
static uint32_t read_boot_tag(void);
static bool over_file_size_limit(uint64_t size);
static int write_all(perf__spool_t *sp, int fd, const void *data, size_t len);
static void discard(perf__spool_t *sp, int dirfd, const char *name, const char *path);
static int quarantine_rec(perf__spool_t *sp, uint64_t seq, const uint8_t id[16], const char *reason,
                          bool rejected);
static void evict_expired_locked(perf__spool_t *sp, int64_t now_ns);
static void evict_oldest_locked(perf__spool_t *sp);
static perf__spool_rec_t *rec_at(perf__spool_t *sp, size_t i);
static bool index_find(perf__spool_t *sp, uint64_t seq, const uint8_t id[16], size_t *pos);
static void index_insert(perf__spool_t *sp, const perf__spool_rec_t *r);
static perf__spool_rec_t index_take(perf__spool_t *sp, size_t pos);
static void settle_busy_locked(perf__spool_t *sp, uint64_t size);

int perf__spool_open(const perf__spool_options_t *opt, perf__spool_t **out) {
  if (!out) return PERF_E_INVALID_ARGUMENT;
  *out = NULL;
  int err = check_options(opt);
  if (err) return err;
  perf__spool_t *sp = calloc(1, sizeof *sp);
  if (!sp) return PERF_E_NO_MEMORY;
  sp->ring = calloc(opt->max_files, sizeof *sp->ring);
  if (!sp->ring) {
    free(sp);
    return PERF_E_NO_MEMORY;
  }
  pthread_mutex_init(&sp->lock, NULL);
  sp->io = opt->io ? *opt->io : *perf__spool_io_posix();
  sp->max_bytes = opt->max_bytes;
  sp->max_files = opt->max_files;
  sp->max_age_s = opt->max_age_s;
  sp->boot_tag = read_boot_tag();
  sp->lock_fd = (perf__owned_fd_t)PERF__OWNED_FD_NONE;
  sp->root_h = sp->dir_h = sp->quarantine_h = (perf__dir_t)PERF__DIR_INIT;
  sp->next_seq = 1;
  snprintf(sp->root, sizeof sp->root, "%s", opt->dir);
  err = take_directory(sp, opt->root);
  if (!err) err = perf__spool_recover(sp);
  if (err) {
    perf__spool_close(sp);
    return err;
  }
  perf__log(PERF__LOG_INFO, "spool %s: %zu batches, %" PRIu64 " bytes (%" PRIu64 " adopted)",
            sp->dir, sp->count, sp->bytes, sp->st.adopted);
  *out = sp;
  return PERF_OK;
}

void perf__spool_close(perf__spool_t *sp) {
  if (!sp) return;
  /* An empty subdirectory of ours goes; with batches left in it, it stays
     for the next opener to adopt. We still hold its lock here. */
  int dfd = sp->dir_h.own.fd >= 0 ? perf__spool_dir_fd(sp) : -1;
  int root_fd = sp->subdir && dfd >= 0 ? perf__spool_root_fd(sp) : -1;
  if (root_fd >= 0 && sp->lock_fd.fd >= 0 && sp->count == 0 && dir_holds_only_lock(dfd) &&
      unlinkat(dfd, "LOCK", 0) == 0)
    unlinkat(root_fd, strrchr(sp->dir, '/') + 1, AT_REMOVEDIR);
  perf__dir_close(&sp->dir_h);
  perf__dir_close(&sp->root_h);
  perf__dir_close(&sp->quarantine_h);
  perf__owned_fd_release(&sp->lock_fd);
  pthread_mutex_destroy(&sp->lock);
  free(sp->ring);
  free(sp);
}

const char *perf__spool_dir(const perf__spool_t *sp) {
  return sp ? sp->dir : NULL;
}

int perf__spool_dir_fd(perf__spool_t *sp) {
  pthread_mutex_lock(&sp->lock);
  int before = sp->dir_h.own.fd;
  int fd = perf__dir_fd(&sp->dir_h);
  int saved = errno;
  /* The directory opened again (the app closed its descriptor, or it was
     deleted and made again): our LOCK is taken again in it. */
  if (fd >= 0 && (fd != before || !perf__owned_fd_held(&sp->lock_fd))) retake_lock_locked(sp, fd);
  pthread_mutex_unlock(&sp->lock);
  errno = saved;
  return fd;
}

int perf__spool_root_fd(perf__spool_t *sp) {
  pthread_mutex_lock(&sp->lock);
  int fd = perf__dir_fd(&sp->root_h);
  int saved = errno;
  pthread_mutex_unlock(&sp->lock);
  errno = saved;
  return fd;
}

int perf__spool_quarantine_fd(perf__spool_t *sp) {
  pthread_mutex_lock(&sp->lock);
  int fd = perf__dir_fd(&sp->quarantine_h);
  int saved = errno;
  pthread_mutex_unlock(&sp->lock);
  errno = saved;
  return fd;
}

int perf__spool_put(perf__spool_t *sp, const uint8_t batch_id[16], const void *payload, size_t len,
                    uint64_t *seq_out) {
  if (!sp || !batch_id || (!payload && len > 0)) return PERF_E_INVALID_ARGUMENT;
  int64_t now = sp->io.wall_ns(sp->io.ctx), boot = sp->io.boot_ns(sp->io.ctx);
  pthread_mutex_lock(&sp->lock);
  if (len > sp->max_bytes - HDR) {
    sp->st.refused_too_big++;
    pthread_mutex_unlock(&sp->lock);
    perf__log(PERF__LOG_WARN, "spool: a batch of %zu bytes is over max_bytes %" PRIu64, len,
              sp->max_bytes);
    return PERF_E_NO_MEMORY;
  }
  uint64_t size = HDR + (uint64_t)len;
  evict_expired_locked(sp, boot);
  /* Room first, then the write: what is on disk never exceeds the bounds,
     the file being written included. */
  while (sp->count + sp->busy_files + 1 > sp->max_files ||
         sp->bytes + sp->busy_bytes + size > sp->max_bytes) {
    if (sp->count == 0) { /* the room is held by other calls in flight */
      sp->st.write_failed++;
      pthread_mutex_unlock(&sp->lock);
      perf__log(PERF__LOG_WARN, "spool: no room for a batch while other writes are in flight");
      return PERF_E_BUSY;
    }
    evict_oldest_locked(sp);
  }
  sp->busy_files++;
  sp->busy_bytes += size;
  uint64_t seq = sp->next_seq++;
  pthread_mutex_unlock(&sp->lock);

  int err = write_batch(sp, seq, batch_id, payload, len, now, boot);

  pthread_mutex_lock(&sp->lock);
  settle_busy_locked(sp, size);
  if (err) {
    sp->st.write_failed++;
  } else {
    perf__spool_rec_t r = {
        .seq = seq, .size = size, .created_ns = now, .boot_ns = boot, .boot_tag = sp->boot_tag};
    memcpy(r.id, batch_id, 16);
    index_insert(sp, &r);
    sp->st.written++;
  }
  pthread_mutex_unlock(&sp->lock);
  if (!err && seq_out) *seq_out = seq;
  return err;
}

int perf__spool_peek_oldest(perf__spool_t *sp, perf__spool_entry_t *e) {
  if (!sp || !e) return PERF_E_INVALID_ARGUMENT;
  int64_t boot = sp->io.boot_ns(sp->io.ctx);
  pthread_mutex_lock(&sp->lock);
  evict_expired_locked(sp, boot);
  if (sp->count == 0) {
    pthread_mutex_unlock(&sp->lock);
    return PERF__E_SPOOL_EMPTY;
  }
  perf__spool_rec_t r = *rec_at(sp, 0);
  pthread_mutex_unlock(&sp->lock);
  memset(e, 0, sizeof *e);
  e->seq = r.seq;
  memcpy(e->id, r.id, 16);
  e->size = r.size;
  e->payload_len = r.size - HDR;
  e->created_unix_ns = r.created_ns;
  char name[PERF__SPOOL_NAME_BYTES];
  perf__spool_batch_name(name, r.seq, r.id, ".batch");
  perf__spool_join(e->path, sp->dir, name);
  return PERF_OK;
}

int perf__spool_read(perf__spool_t *sp, const perf__spool_entry_t *e, uint8_t **payload,
                     size_t *len) {
  if (!sp || !e || !payload || !len) return PERF_E_INVALID_ARGUMENT;
  *payload = NULL;
  *len = 0;
  char name[PERF__SPOOL_NAME_BYTES];
  perf__spool_batch_name(name, e->seq, e->id, ".batch");
  int dfd = perf__spool_dir_fd(sp);
  if (dfd < 0) return perf__spool_io_failed("open", sp->dir, errno);
  int fd = sp->io.open(sp->io.ctx, dfd, name, O_RDONLY, 0);
  if (fd < 0) {
    if (errno == ENOENT) return PERF__E_SPOOL_GONE;
    return perf__spool_io_failed("open", e->path, errno);
  }
  perf__spool_rec_t rec;
  const char *bad = NULL;
  int err =
      perf__spool_read_batch_fd(&sp->io, sp->max_bytes, fd, e->path, e->id, &rec, payload, &bad);
  sp->io.close(sp->io.ctx, fd);
  if (err) return err;
  if (bad) {
    perf__log(PERF__LOG_WARN, "spool: %s is bad (%s): quarantined", e->path, bad);
    quarantine_rec(sp, e->seq, e->id, bad, false);
    return PERF__E_SPOOL_CORRUPT;
  }
  *len = (size_t)(rec.size - HDR);
  return PERF_OK;
}

int perf__spool_remove(perf__spool_t *sp, const perf__spool_entry_t *e) {
  if (!sp || !e) return PERF_E_INVALID_ARGUMENT;
  size_t pos;
  pthread_mutex_lock(&sp->lock);
  if (!index_find(sp, e->seq, e->id, &pos)) {
    pthread_mutex_unlock(&sp->lock);
    return PERF__E_SPOOL_GONE;
  }
  perf__spool_rec_t r = index_take(sp, pos);
  pthread_mutex_unlock(&sp->lock);
  perf__spool_unlink_rec(sp, &r, "remove");
  pthread_mutex_lock(&sp->lock);
  settle_busy_locked(sp, r.size);
  pthread_mutex_unlock(&sp->lock);
  return PERF_OK;
}

int perf__spool_quarantine(perf__spool_t *sp, const perf__spool_entry_t *e, const char *reason) {
  if (!sp || !e) return PERF_E_INVALID_ARGUMENT;
  char clean[PERF__SPOOL_REASON_MAX + 1] = "rejected";
  if (reason && reason[0]) {
    size_t i = 0;
    for (; i < PERF__SPOOL_REASON_MAX && reason[i]; i++) {
      char c = reason[i];
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      clean[i] = ok ? c : '_';
    }
    clean[i] = '\0';
  }
  return quarantine_rec(sp, e->seq, e->id, clean, true);
}

bool perf__spool_has_batch(perf__spool_t *sp, const uint8_t batch_id[16]) {
  if (!sp || !batch_id) return false;
  pthread_mutex_lock(&sp->lock);
  bool found = false;
  for (size_t i = 0; i < sp->count && !found; i++)
    found = memcmp(rec_at(sp, i)->id, batch_id, 16) == 0;
  pthread_mutex_unlock(&sp->lock);
  return found;
}

void perf__spool_stats(perf__spool_t *sp, perf__spool_stats_t *out) {
  if (!sp || !out) return;
  pthread_mutex_lock(&sp->lock);
  *out = sp->st;
  out->files = sp->count;
  out->bytes = sp->bytes;
  pthread_mutex_unlock(&sp->lock);
}

/* ---- open: options, directory, lock ------------------------------------- */

static int check_options(const perf__spool_options_t *opt) {
  if (!opt) return PERF_E_INVALID_ARGUMENT;
  if (!opt->dir || !opt->dir[0] || strlen(opt->dir) > ROOT_MAX)
    PERF__FAIL(PERF_E_INVALID_ARGUMENT, "spool: dir must be a path of 1..%d bytes", ROOT_MAX);
  if (opt->max_bytes <= HDR || opt->max_bytes > PERF__SPOOL_MAX_BYTES_LIMIT)
    PERF__FAIL(PERF_E_INVALID_ARGUMENT, "spool: max_bytes must be %d..%llu", HDR + 1,
               PERF__SPOOL_MAX_BYTES_LIMIT);
  if (opt->max_files == 0 || opt->max_files > PERF__SPOOL_MAX_FILES_LIMIT)
    PERF__FAIL(PERF_E_INVALID_ARGUMENT, "spool: max_files must be 1..%d",
               PERF__SPOOL_MAX_FILES_LIMIT);
  if (opt->max_age_s > MAX_AGE_LIMIT_S)
    PERF__FAIL(PERF_E_INVALID_ARGUMENT, "spool: max_age_s must be 0..%u", MAX_AGE_LIMIT_S);
  const perf__spool_io_t *io = opt->io;
  if (io && (!io->open || !io->close || !io->write || !io->pread || !io->fsync || !io->rename ||
             !io->unlink || !io->wall_ns || !io->boot_ns))
    PERF__FAIL(PERF_E_INVALID_ARGUMENT, "spool: an I/O table with a NULL function");
  return PERF_OK;
}

/* Lock the root, or else a subdirectory <root>/<pid> of our own; keep
   both open (every file is reached from them, never by path again); make
   sure quarantine/ exists. */
static int take_directory(perf__spool_t *sp, perf__dir_t *given) {
  const unsigned flags = PERF__DIR_CREATE | PERF__DIR_TRUST;
  if (given) {
    sp->root_h = *given; /* the holding moves with it */
    given->own = (perf__owned_fd_t)PERF__OWNED_FD_NONE;
  } else {
    int err = perf__dir_open(&sp->root_h, sp->root, flags, "spool");
    if (err) return err;
  }
  int root_fd = sp->root_h.own.fd;
  snprintf(sp->dir, sizeof sp->dir, "%s", sp->root);
  int lock = -1;
  int r = perf__spool_lock_file(root_fd, true, &lock);
  if (r == PERF__SPOOL_LOCK_TAKEN) {
    perf__owned_fd_hold(&sp->lock_fd, lock);
    int fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) PERF__FAIL(PERF_E_SYSTEM, "spool: open %s: %s", sp->dir, strerror(errno));
    perf__dir_set(&sp->dir_h, fd, sp->dir, flags, "spool");
  } else if (r == PERF__SPOOL_LOCK_HELD) {
    int err = take_subdir(sp, root_fd);
    if (err) return err;
  } else {
    PERF__FAIL(PERF_E_SYSTEM, "spool: cannot lock %s/LOCK: %s", sp->root,
               r == PERF__SPOOL_LOCK_STALE ? "removed under us repeatedly" : strerror(errno));
  }
  perf__spool_join(sp->quarantine, sp->root, "quarantine");
  int qfd = perf__mkdirat_private(root_fd, "quarantine")
                ? openat(root_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                : -1;
  if (qfd < 0)
    PERF__FAIL(PERF_E_SYSTEM, "spool: cannot create %s: %s", sp->quarantine, strerror(errno));
  perf__dir_set(&sp->quarantine_h, qfd, sp->quarantine, flags, "spool quarantine");
  return PERF_OK;
}

/* Another live process owns the root: we take <root>/<pid>. An adopter may
   remove a dead subdirectory of that name (lock file first) between our
   mkdir and our lock; the lock we got is then on an unlinked file (stale)
   and we start over. */
static int take_subdir(perf__spool_t *sp, int root_fd) {
  sp->subdir = true;
  char pid[16];
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  perf__spool_join(sp->dir, sp->root, pid);
  int r = PERF__SPOOL_LOCK_STALE, fd = -1, lock = -1;
  for (int tries = 0; r == PERF__SPOOL_LOCK_STALE && tries < LOCK_TRIES; tries++) {
    fd = perf__mkdirat_private(root_fd, pid)
             ? openat(root_fd, pid, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
             : -1;
    if (fd < 0) {
      r = errno == ENOENT ? PERF__SPOOL_LOCK_STALE : PERF__SPOOL_LOCK_ERROR;
      continue;
    }
    r = perf__spool_lock_file(fd, true, &lock);
    if (r == PERF__SPOOL_LOCK_ERROR && errno == ENOENT) r = PERF__SPOOL_LOCK_STALE;
    if (r != PERF__SPOOL_LOCK_TAKEN) {
      int saved = errno;
      close(fd);
      errno = saved;
      fd = -1;
    }
  }
  if (r == PERF__SPOOL_LOCK_TAKEN) perf__owned_fd_hold(&sp->lock_fd, lock);
  /* Held: this process already has two spools on this root. */
  if (r == PERF__SPOOL_LOCK_HELD)
    PERF__FAIL(PERF_E_BUSY, "spool: %s is in use by this process", sp->dir);
  if (r != PERF__SPOOL_LOCK_TAKEN)
    PERF__FAIL(PERF_E_SYSTEM, "spool: cannot lock %s/LOCK: %s", sp->dir,
               r == PERF__SPOOL_LOCK_STALE ? "removed under us repeatedly" : strerror(errno));
  perf__dir_set(&sp->dir_h, fd, sp->dir, PERF__DIR_TRUST, "spool");
  int err = perf__dir_check_trust(fd, sp->dir, "spool");
  return err;
}

/* With the mutex: our LOCK's descriptor was closed by the app, or our
   directory was made again: the lock is taken again. */
static void retake_lock_locked(perf__spool_t *sp, int dirfd) {
  perf__owned_fd_release(&sp->lock_fd); /* closed only while it still names our LOCK */
  int fd = -1;
  int r = perf__spool_lock_file(dirfd, true, &fd);
  if (r == PERF__SPOOL_LOCK_TAKEN) {
    perf__owned_fd_hold(&sp->lock_fd, fd);
    sp->lock_warned = false;
    return;
  }
  if (!sp->lock_warned)
    perf__log(PERF__LOG_WARN, "spool: %s/LOCK could not be taken again (%s)", sp->dir,
              r == PERF__SPOOL_LOCK_HELD ? "another process holds it" : strerror(errno));
  sp->lock_warned = true;
}

static bool dir_holds_only_lock(int dirfd) {
  DIR *d = perf__spool_opendir(dirfd);
  if (!d) return false;
  bool only = true;
  struct dirent *de;
  while (only && (de = readdir(d)) != NULL)
    only = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
           strcmp(de->d_name, "LOCK") == 0;
  closedir(d);
  return only;
}

/* ---- batch files --------------------------------------------------------- */

/* temp file -> write -> fsync -> rename -> fsync(directory). On any failure
   nothing is left: the temporary file, or the renamed file whose directory
   entry could not be made durable, is unlinked. */
static int write_batch(perf__spool_t *sp, uint64_t seq, const uint8_t id[16], const void *payload,
                       size_t len, int64_t created_ns, int64_t boot_ns) {
  char tmp_name[PERF__SPOOL_NAME_BYTES], name[PERF__SPOOL_NAME_BYTES], tmp[PATH_MAX],
      path[PATH_MAX];
  perf__spool_batch_name(tmp_name, seq, id, ".tmp");
  perf__spool_join(tmp, sp->dir, tmp_name);
  perf__spool_batch_name(name, seq, id, ".batch");
  perf__spool_join(path, sp->dir, name);
  /* Checked here so that the kernel never raises SIGXFSZ (its default action
     kills the process); the SDK leaves that signal's disposition alone. */
  if (over_file_size_limit(HDR + (uint64_t)len))
    return perf__spool_io_failed("size limit", path, EFBIG);
  uint8_t h[HDR];
  perf__spool_header_encode(h, len, perf__crc32c(0, payload, len), created_ns, boot_ns,
                            sp->boot_tag, id);
  int dfd = perf__spool_dir_fd(sp);
  if (dfd < 0) return perf__spool_io_failed("open", sp->dir, errno);
  int fd = sp->io.open(sp->io.ctx, dfd, tmp_name, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return perf__spool_io_failed("create", tmp, errno);
  const char *step = NULL;
  if (write_all(sp, fd, h, HDR) != 0 || write_all(sp, fd, payload, len) != 0)
    step = "write";
  else if (sp->io.fsync(sp->io.ctx, fd) != 0)
    step = "fsync";
  int saved = errno;
  if (sp->io.close(sp->io.ctx, fd) != 0 && !step) {
    step = "close";
    saved = errno;
  }
  if (!step && sp->io.rename(sp->io.ctx, dfd, tmp_name, dfd, name) != 0) {
    step = "rename";
    saved = errno;
  }
  if (step) {
    discard(sp, dfd, tmp_name, tmp);
    return perf__spool_io_failed(step, tmp, saved);
  }
  if (sp->io.fsync(sp->io.ctx, dfd) != 0) {
    saved = errno;
    discard(sp, dfd, name, path); /* its name may not survive a crash: take it back */
    return perf__spool_io_failed("fsync", sp->dir, saved);
  }
  return PERF_OK;
}

static void discard(perf__spool_t *sp, int dirfd, const char *name, const char *path) {
  if (sp->io.unlink(sp->io.ctx, dirfd, name) != 0 && errno != ENOENT)
    perf__log(PERF__LOG_WARN, "spool: unlink %s: %s", path, strerror(errno));
}

static bool over_file_size_limit(uint64_t size) {
  struct rlimit rl;
  return getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && size > rl.rlim_cur;
}

static int write_all(perf__spool_t *sp, int fd, const void *data, size_t len) {
  const uint8_t *p = data;
  while (len > 0) {
    ssize_t n = sp->io.write(sp->io.ctx, fd, p, len);
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

/* This boot's tag: a CRC-32C of the kernel's boot id (never 0); 0 when it
   cannot be read (then every batch found at open is dated by the wall
   clock). */
static uint32_t read_boot_tag(void) {
  char id[64];
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, id, sizeof id);
  close(fd);
  if (n <= 0) return 0;
  uint32_t tag = perf__crc32c(0, id, (size_t)n);
  return tag ? tag : 1;
}

/* ---- quarantine and eviction --------------------------------------------- */

static int quarantine_rec(perf__spool_t *sp, uint64_t seq, const uint8_t id[16], const char *reason,
                          bool rejected) {
  size_t pos;
  pthread_mutex_lock(&sp->lock);
  if (!index_find(sp, seq, id, &pos)) {
    pthread_mutex_unlock(&sp->lock);
    return PERF__E_SPOOL_GONE;
  }
  perf__spool_rec_t r = index_take(sp, pos);
  pthread_mutex_unlock(&sp->lock);
  char name[PERF__SPOOL_NAME_BYTES];
  perf__spool_batch_name(name, r.seq, r.id, ".batch");
  perf__spool_quarantine_file(sp, perf__spool_dir_fd(sp), sp->dir, name, reason, r.size);
  pthread_mutex_lock(&sp->lock);
  settle_busy_locked(sp, r.size);
  if (rejected)
    sp->st.quarantined_rejected++;
  else
    sp->st.quarantined_corrupt++;
  pthread_mutex_unlock(&sp->lock);
  return PERF_OK;
}

static void evict_expired_locked(perf__spool_t *sp, int64_t boot_ns) {
  if (!sp->max_age_s) return;
  int64_t cutoff = boot_ns - (int64_t)sp->max_age_s * 1000000000;
  while (sp->count > 0 && rec_at(sp, 0)->boot_ns < cutoff)
    evict_oldest_locked(sp);
}

/* Drops the mutex around the unlink: the record is already out of the index,
   so no other thread touches the file. */
static void evict_oldest_locked(perf__spool_t *sp) {
  perf__spool_rec_t r = index_take(sp, 0);
  sp->st.evicted_quota++;
  pthread_mutex_unlock(&sp->lock);
  perf__spool_unlink_rec(sp, &r, "evict");
  pthread_mutex_lock(&sp->lock);
  settle_busy_locked(sp, r.size);
}

/* ---- the index (mutex held) ---------------------------------------------- */

static perf__spool_rec_t *rec_at(perf__spool_t *sp, size_t i) {
  return &sp->ring[(sp->head + i) % sp->max_files];
}

static bool index_find(perf__spool_t *sp, uint64_t seq, const uint8_t id[16], size_t *pos) {
  size_t lo = 0, hi = sp->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (rec_at(sp, mid)->seq < seq)
      lo = mid + 1;
    else
      hi = mid;
  }
  *pos = lo;
  return lo < sp->count && rec_at(sp, lo)->seq == seq && memcmp(rec_at(sp, lo)->id, id, 16) == 0;
}

/* Sorted by seq; a put's seq is nearly always the highest (an append). The
   caller made sure there is room (count < max_files). */
static void index_insert(perf__spool_t *sp, const perf__spool_rec_t *r) {
  size_t pos;
  index_find(sp, r->seq, r->id, &pos);
  for (size_t i = sp->count; i > pos; i--)
    *rec_at(sp, i) = *rec_at(sp, i - 1);
  *rec_at(sp, pos) = *r;
  sp->count++;
  sp->bytes += r->size;
}

/* Out of the index; its file counts as busy until settle_busy_locked. */
static perf__spool_rec_t index_take(perf__spool_t *sp, size_t pos) {
  perf__spool_rec_t r = *rec_at(sp, pos);
  if (pos == 0) {
    sp->head = (sp->head + 1) % sp->max_files;
  } else {
    for (size_t i = pos; i + 1 < sp->count; i++)
      *rec_at(sp, i) = *rec_at(sp, i + 1);
  }
  sp->count--;
  sp->bytes -= r.size;
  sp->busy_files++;
  sp->busy_bytes += r.size;
  return r;
}

static void settle_busy_locked(perf__spool_t *sp, uint64_t size) {
  sp->busy_files--;
  sp->busy_bytes -= size;
}
