/*
 * spool.h - the disk spool: a bounded on-disk queue of finished batches
 * between the writer thread (which produces batches) and the uploader thread
 * (which sends them and deletes them after delivery). Internal API.
 *
 * A spool root directory holds one file per batch, `<seq>-<id>.batch`
 * (seq: 20 decimal digits, monotonic; id: the batch id in 32 hex digits),
 * written as temporary file -> fsync -> rename -> fsync(directory), so a
 * batch is whole under its final name or absent. Each file starts with a
 * 64-byte header (magic "PSPL", version, lengths, CRC-32C of the payload,
 * creation time, batch id; docs/internals/spool.md).
 *
 * Ownership: one process at a time holds an exclusive flock on <root>/LOCK.
 * A second live process on the same root gets its own subdirectory
 * <root>/<pid>/ (locked by <root>/<pid>/LOCK). At open, batches nobody holds
 * a lock on (left by a dead process, in the root or in a dead process's
 * subdirectory) become the opener's; bad files go to <root>/quarantine/.
 * A third spool in the same process on the same root gets PERF_E_BUSY.
 * The batch sink keeps the open batch's journal (`<id>.journal`,
 * sdk/wire/journal.h) in the same directory; adopting a dead process's
 * subdirectory moves its journals along with its batches.
 *
 * Bounds (max_bytes, max_files, max_age_s) hold after every call: a put
 * evicts the oldest batches first (counted in evicted_quota), so the files on
 * disk, including the one being written, never exceed them.
 *
 * Threads: every function but open/close may be called from any thread at
 * any time (one mutex, held only for bookkeeping, never across a write,
 * fsync or read of batch data). open and close are called once each, by the
 * thread that owns the spool's lifetime, while no other call is running.
 */
#ifndef PERF_SPOOL_H
#define PERF_SPOOL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perf_sdk.h"
#include "sdk/base/dir_handle.h"
#include "sdk/wire/spool_io.h"

/* Spool-specific results besides the perf_error_t codes (internal, never
   returned by the public API). */
enum {
  PERF__E_SPOOL_EMPTY = -100,   /* peek: no batch waiting */
  PERF__E_SPOOL_CORRUPT = -101, /* read: the file was bad; it is quarantined and
                                   counted, move on to the next batch */
  PERF__E_SPOOL_GONE = -102,    /* the batch is no longer in the spool (evicted for
                                   quota, removed or quarantined meanwhile) */
};

/* Bounds of the spool itself. At open, at most SCAN_LIMIT entries are looked
   at per directory and SUBDIR_LIMIT dead subdirectories adopted (the rest
   wait for a later open); quarantine/ keeps at most QUARANTINE_LIMIT files
   (further bad files are deleted, still counted). */
#define PERF__SPOOL_HEADER_SIZE 64
#define PERF__SPOOL_MAX_FILES_LIMIT 65536
#define PERF__SPOOL_SCAN_LIMIT 65536
#define PERF__SPOOL_SUBDIR_LIMIT 64
#define PERF__SPOOL_QUARANTINE_LIMIT 32
#define PERF__SPOOL_REASON_MAX 32 /* longest quarantine reason */

typedef struct perf__spool_s perf__spool_t;

typedef struct perf__spool_options_s {
  const char *dir;            /* the spool root, e.g. <data_dir>/spool; created (0700) */
  uint64_t max_bytes;         /* sum of batch file sizes (header included);
                                 PERF__SPOOL_HEADER_SIZE+1 .. 2^48 */
  uint32_t max_files;         /* 1..PERF__SPOOL_MAX_FILES_LIMIT */
  uint32_t max_age_s;         /* older batches are evicted; 0 = no age limit; up to 10 years */
  const perf__spool_io_t *io; /* the I/O seam; NULL = perf__spool_io_posix() */
  /* dir already opened and checked by the caller (perf__dir_open with
     PERF__DIR_TRUST): taken over, its fd set to -1 here. NULL: the spool
     opens dir itself (made 0700, the trust rule applied). */
  perf__dir_t *root;
} perf__spool_options_t;

/* One batch waiting in the spool, as perf__spool_peek_oldest describes it.
   Owned by the caller (a plain value). */
typedef struct perf__spool_entry_s {
  uint64_t seq;            /* position in the queue: higher is newer */
  uint8_t id[16];          /* the batch id given to perf__spool_put */
  uint64_t size;           /* file bytes, header included */
  uint64_t payload_len;    /* size - PERF__SPOOL_HEADER_SIZE */
  int64_t created_unix_ns; /* when it was put (from its header) */
  char path[PATH_MAX];     /* the batch file */
} perf__spool_entry_t;

typedef struct perf__spool_stats_s {
  uint64_t files, bytes; /* batches in the spool now, and their file bytes */
  /* Counters since perf__spool_open: */
  uint64_t written;              /* puts that succeeded */
  uint64_t evicted_quota;        /* oldest batches deleted for max_bytes, max_files or
                                    max_age_s (at open too): dropped, reason quota */
  uint64_t quarantined_corrupt;  /* torn, empty or corrupt files set aside (open, read) */
  uint64_t quarantined_rejected; /* perf__spool_quarantine (the collector refused them) */
  uint64_t write_failed;         /* puts that failed: disk full, I/O error, file size
                                    limit; the batch is not in the spool */
  uint64_t refused_too_big;      /* puts of a batch larger than max_bytes */
  uint64_t adopted;              /* complete batches found at open: left in our directory
                                    by an earlier process, or moved in from a dead
                                    process's subdirectory */
} perf__spool_stats_t;

/* Open (create) the spool at opt->dir: take the root's lock or a
   subdirectory's, adopt what dead processes left, quarantine bad files,
   apply the bounds. *out is freed with perf__spool_close. Returns
   PERF_E_INVALID_ARGUMENT (options out of range), PERF_E_BUSY (no lock to
   be had), PERF_E_SYSTEM (the directory cannot be created or locked),
   PERF_E_INVALID_CONFIG (the directory is another user's, or writable by
   group or others without the sticky bit: logged), PERF_E_NO_MEMORY. */
int perf__spool_open(const perf__spool_options_t *opt, perf__spool_t **out);

/* Release the lock and free the spool; the batches stay on disk for the next
   open. An empty subdirectory of ours is removed. NULL is fine. */
void perf__spool_close(perf__spool_t *sp);

/* The directory this process writes batches into: the root, or <root>/<pid>. */
const char *perf__spool_dir(const perf__spool_t *sp);

/* Its descriptor, for the files the batch sink keeps beside the batches
   (journals, drop counts): checked before each use and opened again when
   the app closed it (sdk/base/dir_handle.h), the directory's LOCK taken
   again then. -1 with errno set when there is none (logged once). Any
   thread. */
int perf__spool_dir_fd(perf__spool_t *sp);

/* Write one batch (payload[0..len), len may be 0) durably, evicting the
   oldest batches first so that every bound holds afterwards. *seq_out (may
   be NULL) gets its sequence number. Returns PERF_E_NO_MEMORY when the
   batch alone is larger than max_bytes (refused_too_big), PERF_E_SYSTEM
   when a write, fsync or rename failed or the file would cross
   RLIMIT_FSIZE (write_failed; logged with errno; no file is left behind),
   PERF_E_BUSY when other calls in flight hold all the room (write_failed).
   On error the batch is not in the spool: the caller keeps it or drops it. */
int perf__spool_put(perf__spool_t *sp, const uint8_t batch_id[16], const void *payload, size_t len,
                    uint64_t *seq_out);

/* Describe the oldest batch (after evicting those past max_age_s) in *e.
   PERF__E_SPOOL_EMPTY when there is none. The batch stays in the spool. */
int perf__spool_peek_oldest(perf__spool_t *sp, perf__spool_entry_t *e);

/* Read and verify the batch `e` (magic, version, header, length, id,
   CRC-32C). *payload gets a malloc'd copy (free with free(); not NULL even
   when *len is 0). PERF__E_SPOOL_CORRUPT: the file was bad and has been
   quarantined and counted; PERF__E_SPOOL_GONE: evicted or removed
   meanwhile; PERF_E_SYSTEM: an I/O error (the file stays, try later);
   PERF_E_NO_MEMORY. A batch evicted while it is being read may still be
   returned whole; perf__spool_remove then says PERF__E_SPOOL_GONE and it
   stays counted as evicted. */
int perf__spool_read(perf__spool_t *sp, const perf__spool_entry_t *e, uint8_t **payload,
                     size_t *len);

/* Delete the batch after delivery. PERF__E_SPOOL_GONE when it is no longer
   in the spool (evicted meanwhile: nothing to do). */
int perf__spool_remove(perf__spool_t *sp, const perf__spool_entry_t *e);

/* Set the batch aside in <root>/quarantine/ as `<file name>.<reason>`
   (reason: letters, digits and '_', at most PERF__SPOOL_REASON_MAX; other
   characters become '_'), counted in quarantined_rejected: for batches the
   collector refuses for good (4xx). PERF__E_SPOOL_GONE as above. */
int perf__spool_quarantine(perf__spool_t *sp, const perf__spool_entry_t *e, const char *reason);

/* Whether a batch of this id is in the spool now (the journal's replay
   asks: a batch whose journal outlived it is not made twice). */
bool perf__spool_has_batch(perf__spool_t *sp, const uint8_t batch_id[16]);

/* Copy the current sizes and the counters. */
void perf__spool_stats(perf__spool_t *sp, perf__spool_stats_t *out);

/* Read and verify ONE batch file by path, outside an open spool (tools such
   as perf-dump): the checks of perf__spool_read (magic, version, header size
   and CRC, length, CRC-32C of the payload) and, when the file's name is a
   spool name `<seq>-<id>.batch`, the id against it. No lock is taken and
   nothing is moved. On success *payload gets a malloc'd copy (free with
   free(); not NULL even when *len is 0), id and *created_unix_ns (either may
   be NULL) the header's. PERF__E_SPOOL_CORRUPT: the file is bad, *reason is
   its quarantine reason ("empty", "torn", "bad_magic", "bad_version",
   "bad_header", "bad_length", "bad_id", "bad_crc"); PERF_E_SYSTEM: it cannot
   be opened or read (errno kept); PERF_E_NO_MEMORY; PERF_E_INVALID_ARGUMENT. */
int perf__spool_read_file(const char *path, uint8_t id[16], int64_t *created_unix_ns,
                          uint8_t **payload, size_t *len, const char **reason);

#endif
