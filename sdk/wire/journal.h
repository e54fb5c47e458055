/*
 * journal.h - the journal of the open batch: every event the writer adds
 * to the batch it is building in memory is also appended to
 * <spool dir>/<batch id in 32 hex>.journal, so that a process killed before
 * the batch is closed loses nothing it recorded. When the batch is in the
 * spool (renamed, durable) the journal is removed; at the next open of the
 * spool a journal left behind becomes a batch with the same id
 * (sdk/pipeline/batch_sink.c), unless a batch of that id is in the spool
 * already (the process died between the rename and the unlink).
 *
 * Record (little endian): u32 length, u32 CRC-32C of the payload, payload
 * (the event as a one-event serialized perf.v1.Batch). One write() per
 * record on an O_APPEND descriptor; no fsync per record: a kill -9 keeps
 * what the kernel holds in its page cache, only a power loss or kernel
 * crash can lose the last records (docs/internals/spool.md "Journal of the open batch").
 * A torn tail (short or bad CRC: the process died inside the write, or the
 * disk filled) is dropped and counted by the reader.
 *
 * Files are opened relative to the spool directory's descriptor, never
 * through a link, created 0600 whatever the umask. The journal's
 * descriptor is held (perf__owned_fd_t, sdk/base/owned_fds.h) and checked
 * to name the journal it opened before each write: one the app closed and
 * reused is forgotten, never written to or closed, and the journal is
 * opened again.
 *
 * Writer thread only (the open at SDK start runs there too).
 */
#ifndef PERF_WIRE_JOURNAL_H
#define PERF_WIRE_JOURNAL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "sdk/base/owned_fds.h"

#define PERF__JOURNAL_RECORD_HEADER 8
#define PERF__JOURNAL_SUFFIX ".journal"

/* One open journal (a plain value; PERF__JOURNAL_INIT before first use). */
typedef struct perf__journal_s {
  perf__owned_fd_t file; /* .fd -1: none open */
  uint64_t bytes;        /* file size: records written whole */
  uint8_t id[16];        /* the batch id */
  char name[48];         /* <hex id>.journal */
  char path[PATH_MAX];   /* <dir>/<hex id>.journal, for the log */
} perf__journal_t;

#define PERF__JOURNAL_INIT                                                                         \
  { .file = PERF__OWNED_FD_NONE }

/* Create the journal of batch `id` in the directory dirfd (its path `dir`,
   for the log). 0 or PERF_E_SYSTEM (logged with the path and errno). */
int perf__journal_begin(perf__journal_t *j, int dirfd, const char *dir, const uint8_t id[16]);

/* Append one record in one write(). On failure (PERF_E_SYSTEM, logged) the
   file is cut back to its last whole record. PERF_E_INVALID_ARGUMENT when
   no journal is open or len is 0 or over 2^31. When the journal's
   descriptor is no longer the SDK's (the app closed it), it is forgotten
   and the journal opened again in dirfd (appending, as it was). */
int perf__journal_append(perf__journal_t *j, int dirfd, const void *payload, size_t len);

/* Close and delete the journal, in dirfd (its batch is in the spool now,
   or dropped). */
void perf__journal_end(perf__journal_t *j, int dirfd);

/* Close it and keep the file (for the next start). */
void perf__journal_close(perf__journal_t *j);

/* A journal found on disk: each whole record goes to `record` in order.
   Returns 0 (record's non-zero answer stops the reading and is returned),
   PERF_E_SYSTEM (unreadable), PERF_E_TRUNCATED (larger than max_bytes; not
   read). *torn is 1 when the tail was a torn record, dropped. */
typedef int (*perf__journal_record_fn)(void *ctx, const uint8_t *payload, size_t len);
int perf__journal_read(int dirfd, const char *name, uint64_t max_bytes,
                       perf__journal_record_fn record, void *ctx, uint64_t *torn);

/* The journals in the directory dirfd: `found` gets each one's name and
   batch id (at most `limit` of them). Other files are ignored. 0, or
   PERF_E_SYSTEM when the directory cannot be listed. */
typedef void (*perf__journal_found_fn)(void *ctx, const char *name, const uint8_t id[16]);
int perf__journal_scan(int dirfd, size_t limit, perf__journal_found_fn found, void *ctx);

#endif
