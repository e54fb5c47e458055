/*
 * symbols_upload.h - POST /v1/symbols/<build-id>: one debug file (or the
 * unstripped binary) streamed to a temporary file in the symbols directory
 * as it arrives (never held in memory), capped at --max-symbols-bytes,
 * then checked and renamed into place (symbol_files.h), and the stored
 * stacks it names renamed (resymbolize.h). server.c authenticates first;
 * an upload belongs to the MHD worker of its connection.
 */
#ifndef PERF_COLLECTOR_SYMBOLS_UPLOAD_H
#define PERF_COLLECTOR_SYMBOLS_UPLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/symbols/resymbolize.h"
#include "collector/symbols/symbol_files.h"

typedef struct symbols_upload_s symbols_upload_t;

typedef struct upload_reply_s {
  unsigned status; /* 200, 201, 400, 409, 413, 500, 507 */
  char text[400];  /* the response body's reason */
} upload_reply_t;

/* From the headers: id_text the URL's build-id, content_length the header
   (NULL: chunked), mode whether a different file stored for the build-id
   is replaced (?replace=1: SYMBOL_REPLACE) or kept (409), quota the
   symbols directory's (--max-symbols-dir-bytes:
   the files already there and the uploads in flight count; not applied
   when the build-id's file is stored already and mode is SYMBOL_KEEP, as
   such an upload is only compared with it: 200 or 409, nothing stays; a
   replacement counts what it adds over the stored file). NULL with
   *reply filled when refused (400 bad id, 413 declared too large, 507 the
   declared size does not fit the quota, 500 no temporary file). A body
   that passes the quota while it arrives is discarded and answered 507;
   nothing of it stays on disk. */
symbols_upload_t *symbols_upload_begin(const char *dir, const char *id_text,
                                       const char *content_length, size_t max_bytes, uint64_t quota,
                                       symbol_install_mode_t mode, upload_reply_t *reply);

/* A chunk of the body; false when the connection should be closed (far
   over the cap: twice it). */
bool symbols_upload_write(symbols_upload_t *u, const char *data, size_t n);

/* The whole body has arrived: check, install, rename stored stacks (resym
   may be NULL); fills *reply and frees u. */
void symbols_upload_finish(symbols_upload_t *u, resymbolizer_t *resym, upload_reply_t *reply);

/* The request ended without finishing: the temporary file is removed. NULL:
   no-op. */
void symbols_upload_abort(symbols_upload_t *u);

#endif
