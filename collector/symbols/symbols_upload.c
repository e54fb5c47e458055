/*
 * symbols_upload.c - POST /v1/symbols/<build-id> (see symbols_upload.h).
 */
#include "collector/symbols/symbols_upload.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/base/log.h"
#include "collector/model/metrics.h"
#include "collector/symbols/symbol_files.h"

struct symbols_upload_s {
  const char *dir;
  char id[SYMBOL_ID_MAX_HEX + 1];
  char tmp[4096];
  int fd;
  size_t max, written, discarded;
  uint64_t room, quota; /* the quota, and what was left of it when the upload began */
  symbol_install_mode_t mode;
  bool over_limit, over_quota, io_error;
};

/* Bytes being written by the uploads in flight (all connections): each
   one's own bytes count against the others' room too. */
static atomic_uint_fast64_t g_in_flight;

static void set_reply(upload_reply_t *r, unsigned status, const char *text) {
  r->status = status;
  snprintf(r->text, sizeof r->text, "%s", text);
}

static void quota_full(upload_reply_t *r, uint64_t quota) {
  r->status = 507;
  snprintf(r->text, sizeof r->text,
           "the symbols directory is full (--max-symbols-dir-bytes %llu); nothing was stored",
           (unsigned long long)quota);
}

symbols_upload_t *symbols_upload_begin(const char *dir, const char *id_text,
                                       const char *content_length, size_t max_bytes, uint64_t quota,
                                       symbol_install_mode_t mode, upload_reply_t *reply) {
  char id[SYMBOL_ID_MAX_HEX + 1];
  if (!symbol_id_parse(id_text, strlen(id_text), id)) {
    set_reply(reply, 400, SYMBOL_ID_BAD_TEXT);
    return NULL;
  }
  uint64_t used = symbol_files_bytes(dir) + atomic_load(&g_in_flight);
  uint64_t room = used < quota ? quota - used : 0;
  /* A build-id already stored: the upload is only compared with it (200
     or 409) and never stays, so a full directory does not refuse a CI's
     idempotent re-upload (--max-symbols-bytes still caps it). */
  char stored[4096];
  struct stat st;
  bool is_stored = symbol_file_path(dir, id, stored, sizeof stored) && stat(stored, &st) == 0;
  if (is_stored && mode == SYMBOL_KEEP) room = UINT64_MAX;
  /* A replacement frees the stored file's bytes as it takes its place. */
  if (is_stored && mode == SYMBOL_REPLACE) {
    uint64_t others = used > (uint64_t)st.st_size ? used - (uint64_t)st.st_size : 0;
    room = others < quota ? quota - others : 0;
  }
  if (content_length) {
    char *end;
    errno = 0;
    unsigned long long n = strtoull(content_length, &end, 10);
    if (end == content_length || *end || errno || n > max_bytes) {
      snprintf(reply->text, sizeof reply->text, "body over the limit (%zu bytes)", max_bytes);
      reply->status = 413;
      return NULL;
    }
    if (n > room) return quota_full(reply, quota), NULL;
  }
  symbols_upload_t *u = calloc(1, sizeof *u);
  if (!u) return set_reply(reply, 500, "out of memory"), NULL;
  u->dir = dir;
  u->max = max_bytes;
  u->room = room;
  u->quota = quota;
  u->mode = mode;
  memcpy(u->id, id, sizeof id);
  if ((u->fd = symbol_file_temp(dir, u->tmp, sizeof u->tmp)) < 0) {
    snprintf(reply->text, sizeof reply->text, "cannot create a file in %s: %s", dir,
             strerror(errno));
    reply->status = 500;
    free(u);
    return NULL;
  }
  return u;
}

/* Stop writing: the file is emptied now (its bytes no longer in flight). */
static void discard(symbols_upload_t *u) {
  atomic_fetch_sub(&g_in_flight, u->written);
  u->written = 0;
  if (ftruncate(u->fd, 0) != 0) u->io_error = true; /* give the disk space back now */
}

bool symbols_upload_write(symbols_upload_t *u, const char *data, size_t n) {
  bool discarding = u->over_limit || u->over_quota;
  if (!discarding && n > u->max - u->written) u->over_limit = true;
  if (!discarding && !u->over_limit && n > u->room - u->written) u->over_quota = true;
  if (!discarding && (u->over_limit || u->over_quota)) discard(u);
  if (u->over_limit || u->over_quota) {
    u->discarded += n;
    return u->discarded <= u->max;
  }
  while (n && !u->io_error) {
    ssize_t k = write(u->fd, data, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0)
      u->io_error = true;
    else
      data += k, n -= (size_t)k, u->written += (size_t)k,
          atomic_fetch_add(&g_in_flight, (uint64_t)k);
  }
  return true;
}

void symbols_upload_abort(symbols_upload_t *u) {
  if (!u) return;
  atomic_fetch_sub(&g_in_flight, u->written);
  close(u->fd);
  unlink(u->tmp);
  free(u);
}

void symbols_upload_finish(symbols_upload_t *u, resymbolizer_t *resym, upload_reply_t *reply) {
  if (u->over_limit || u->over_quota || u->io_error) {
    if (u->over_limit)
      snprintf(reply->text, sizeof reply->text, "body over the limit (%zu bytes)", u->max);
    else if (u->over_quota)
      quota_full(reply, u->quota);
    else
      snprintf(reply->text, sizeof reply->text, "cannot write the file: %s", strerror(errno));
    if (!u->over_limit && !u->over_quota) reply->status = 500;
    if (u->over_limit) reply->status = 413;
    symbols_upload_abort(u);
    return;
  }
  atomic_fetch_sub(&g_in_flight, u->written);
  char reason[300] = "";
  bool replaced;
  reply->status =
      symbol_file_install(u->dir, u->id, u->fd, u->tmp, u->mode, &replaced, reason, sizeof reason);
  close(u->fd);
  if (reply->status >= 400) {
    snprintf(reply->text, sizeof reply->text, "%s", reason);
  } else {
    if (reply->status == 201) metrics_symbols_uploaded();
    uint64_t renamed = 0;
    int rc = resym ? resymbolizer_apply(resym, u->id, &renamed) : STORE_OK;
    if (rc != STORE_OK) resymbolizer_want(resym, u->id); /* the background thread retries */
    if (replaced) collector_log("symbols %s: debug file replaced\n", u->id);
    snprintf(reply->text, sizeof reply->text, "%s %s; %llu stored stacks renamed%s",
             reply->status == 201 ? "stored"
             : replaced           ? "replaced"
                                  : "already stored",
             u->id, (unsigned long long)renamed,
             rc == STORE_OK ? "" : " (store failed: retried later)");
  }
  free(u);
}
