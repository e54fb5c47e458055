/*
 * spool_internal.h - the spool's state, shared by the spool's files only
 * (spool.c: options, directory and lock, batch files, quarantine, eviction,
 * the index; spool_recover.c: what an open finds in its own directory;
 * spool_adopt.c: what it takes over from dead processes; spool_files.c:
 * the files and directory they all work on). Calls go one way: spool.c ->
 * spool_recover.c -> spool_adopt.c, each -> spool_files.c. Not for use
 * outside sdk/wire.
 *
 * Recovery and adoption run inside perf__spool_open, before the spool is
 * shared: they touch the state without its mutex.
 */
#ifndef PERF_WIRE_SPOOL_INTERNAL_H
#define PERF_WIRE_SPOOL_INTERNAL_H

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sdk/base/dir_handle.h"
#include "sdk/wire/spool.h"
#include "sdk/wire/spool_io.h"

#define PERF__SPOOL_NAME_BYTES 64 /* "<20 digits>-<32 hex>.batch" is 59 */

/* The largest max_bytes, and the largest payload perf__spool_read_file
   reads. */
#define PERF__SPOOL_MAX_BYTES_LIMIT (1ull << 48)

/* One batch of ours: the index's record. */
typedef struct perf__spool_rec_s {
  uint64_t seq;
  uint64_t size; /* file bytes */
  int64_t created_ns;
  int64_t boot_ns;   /* CLOCK_BOOTTIME at creation (in the index: always this boot's) */
  uint32_t boot_tag; /* the boot it was written in; 0: unknown */
  uint8_t id[16];
} perf__spool_rec_t;

/* Batches found at open, before they become the index (at most
   PERF__SPOOL_SCAN_LIMIT records). */
typedef struct perf__spool_rec_list_s {
  perf__spool_rec_t *v;
  size_t n, cap;
} perf__spool_rec_list_t;

struct perf__spool_s {
  pthread_mutex_t lock;
  perf__spool_io_t io;
  uint64_t max_bytes;
  uint32_t max_files, max_age_s;
  char root[PATH_MAX];
  char dir[PATH_MAX]; /* ours: the root or <root>/<pid> */
  char quarantine[PATH_MAX];
  bool subdir;
  /* Our directory's LOCK, flocked (.fd -1: none), held with its identity:
     checked before use, and a forked child closes its copy, so that it
     never keeps the flock alive after we exit (sdk/base/owned_fds.h). */
  perf__owned_fd_t lock_fd;
  bool lock_warned; /* it could not be taken again: logged once */
  /* The directories, held open: every file is opened, renamed and
     unlinked relative to them (sdk/base/dir_handle.h), under the mutex
     when they are (re)opened. */
  perf__dir_t root_h, dir_h, quarantine_h;
  perf__spool_rec_t *ring;
  size_t head, count; /* the ring holds max_files records */
  uint64_t bytes;
  size_t busy_files;
  uint64_t busy_bytes;
  uint64_t next_seq;
  size_t quarantine_files;
  uint32_t boot_tag; /* this boot's (see the top of spool.c); 0 when unknown */
  perf__spool_stats_t st;
};

/* perf__spool_lock_file's answers. */
enum {
  PERF__SPOOL_LOCK_TAKEN,
  PERF__SPOOL_LOCK_HELD,
  PERF__SPOOL_LOCK_STALE,
  PERF__SPOOL_LOCK_ERROR
};

/* ---- spool_recover.c ---- */

/* The open's recovery: our directory's batches checked (bad ones to
   quarantine), dead processes' subdirectories adopted after them, the bounds
   applied; what is left becomes the index. PERF_E_SYSTEM (our directory
   cannot be listed) or PERF_E_NO_MEMORY. */
int perf__spool_recover(perf__spool_t *sp);

/* ---- spool_adopt.c ---- */

/* The subdirectories <root>/<pid> of dead processes (their lock is free):
   their batches move into our directory with fresh seqs (appended to
   *found, so still in order), their journals along with them. At most
   PERF__SPOOL_SUBDIR_LIMIT subdirectories. */
void perf__spool_adopt_subdirs(perf__spool_t *sp, perf__spool_rec_list_t *found);

/* ---- spool_files.c ---- */

/* `<seq in 20 digits>-<id in 32 hex><suffix>` into out
   (PERF__SPOOL_NAME_BYTES bytes). */
void perf__spool_batch_name(char *out, uint64_t seq, const uint8_t id[16], const char *suffix);

/* Whether name is a batch's (`<seq>-<id>.batch`), and its seq and id. */
bool perf__spool_parse_batch_name(const char *name, uint64_t *seq, uint8_t id[16]);

/* Whether name is a temporary file's (`*.tmp`: a put that did not finish). */
bool perf__spool_is_tmp_name(const char *name);

/* Whether name is a process id (a subdirectory <root>/<pid>). */
bool perf__spool_is_pid_name(const char *name);

/* dir/name into out (PATH_MAX bytes); -1 (ENAMETOOLONG) when it does not
   fit (never for the names the spool makes). */
int perf__spool_join(char *out, const char *dir, const char *name);

/* Whether name in the directory dirfd is a regular file (not followed
   when a link). */
bool perf__spool_is_regular(int dirfd, const char *name);

/* The descriptors of our directory, the root and quarantine/, checked
   before use (perf__dir_fd: opened again when the app closed them); our
   directory's LOCK is taken again when its descriptor was lost. -1 with
   errno when there is none. Take the mutex: not with it held. */
int perf__spool_root_fd(perf__spool_t *sp);
int perf__spool_quarantine_fd(perf__spool_t *sp);

/* Read the batch file open at fd (through io) and verify it: header, length
   (payload at most max_bytes), id (id NULL: whatever the header says), and,
   with payload != NULL, the payload's CRC into a malloc'd *payload. Returns
   0 with *bad NULL (good) or naming the problem, or PERF_E_SYSTEM /
   PERF_E_NO_MEMORY (logged; errno kept). */
int perf__spool_read_batch_fd(const perf__spool_io_t *io, uint64_t max_bytes, int fd,
                              const char *path, const uint8_t id[16], perf__spool_rec_t *rec,
                              uint8_t **payload, const char **bad);

/* The on-disk header (see the top of spool_files.c) for a payload of len
   bytes with CRC-32C crc, into h. */
void perf__spool_header_encode(uint8_t h[PERF__SPOOL_HEADER_SIZE], uint64_t len, uint32_t crc,
                               int64_t created_ns, int64_t boot_ns, uint32_t boot_tag,
                               const uint8_t id[16]);

/* Log "spool: <step> <path>: <err's text>", set errno to err; returns
   PERF_E_SYSTEM. */
int perf__spool_io_failed(const char *step, const char *path, int err);

/* flock(LOCK_EX | LOCK_NB) on `LOCK` in the directory dirfd (created
   0600 with `create`; never through a link) into *fd_out:
   PERF__SPOOL_LOCK_TAKEN; LOCK_HELD (another holder); LOCK_STALE (we got
   the lock, but the file was unlinked or replaced meanwhile, so it guards
   nothing); LOCK_ERROR (errno). */
int perf__spool_lock_file(int dirfd, bool create, int *fd_out);

/* Move `name` of the directory dirfd (its path `dir`, for the log) into
   quarantine/ as <name>.<reason>; delete it instead when quarantine/ is
   full or the file is larger than max_bytes. Takes the mutex for the
   quarantine's count. */
void perf__spool_quarantine_file(perf__spool_t *sp, int dirfd, const char *dir, const char *name,
                                 const char *reason, uint64_t size);

/* Unlink r's file in our directory; a failure other than ENOENT is logged
   with `why`. */
void perf__spool_unlink_rec(perf__spool_t *sp, const perf__spool_rec_t *r, const char *why);

/* Every batch file of the directory dirfd (its path `dir`, for the log) checked (header only: the
   CRC of the payload is checked when the batch is read) into *found; torn, empty and bad files go
   to quarantine. *max_seq: the highest seq named by a batch or temporary
   file; *others: entries that are neither (a subdirectory with such entries
   is not removed). At most PERF__SPOOL_SCAN_LIMIT entries. */
int perf__spool_scan_dir(perf__spool_t *sp, int dirfd, const char *dir,
                         perf__spool_rec_list_t *found, uint64_t *max_seq, size_t *others);

/* A DIR stream over the directory dirfd (its own descriptor: closedir
   leaves dirfd open), or NULL with errno. */
DIR *perf__spool_opendir(int dirfd);

/* Append *r to l (at most PERF__SPOOL_SCAN_LIMIT records): PERF_OK or
   PERF_E_NO_MEMORY. l->v is the caller's to free(). */
int perf__spool_list_push(perf__spool_rec_list_t *l, const perf__spool_rec_t *r);

/* qsort order of records: by seq. */
int perf__spool_rec_cmp(const void *a, const void *b);

#endif
