/*
 * helper_frame.h - the frames the SDK and its upload helper process
 * (perf-upload, uploader/upload_helper_main.c) exchange over their socket.
 * Private to this SDK version: the helper is installed with the library
 * it serves.
 *
 * A frame: a 16-byte header (magic "PUP1", type, payload length, all
 * little-endian: u32, u32, u64), then its fields, each a u32 length and
 * its bytes. Numbers travel as 8-byte little-endian fields.
 *
 * Both ends read and write with deadlines and never raise SIGPIPE
 * (MSG_NOSIGNAL); a read or write also gives up when `wake_fd` (an
 * eventfd, or -1) becomes readable.
 */
#ifndef PERF_HELPER_FRAME_H
#define PERF_HELPER_FRAME_H

#include <stddef.h>
#include <stdint.h>

enum {
  PERF__HELPER_HELLO = 1,    /* SDK -> helper, once: the transport's options */
  PERF__HELPER_REQUEST = 2,  /* SDK -> helper: one batch to POST */
  PERF__HELPER_RESPONSE = 3, /* helper -> SDK: what the POST got */
};

/* The most a frame may carry: the largest batch (16 MiB) and its request. */
#define PERF__HELPER_FRAME_MAX ((size_t)17 << 20)
#define PERF__HELPER_FIELDS_MAX 8

typedef struct {
  const void *data;
  size_t len;
} perf__helper_field_t;

/* Send one frame before deadline_ns (monotonic; < 0: no deadline). Returns
   0, PERF_E_TIMEOUT, PERF_E_BUSY (wake_fd became readable) or
   PERF_E_SYSTEM (the peer is gone or the socket failed; errno says why). */
int perf__helper_send(int fd, uint32_t type, const perf__helper_field_t *fields, size_t n,
                      int wake_fd, int64_t deadline_ns);

/* Receive one frame: *type, and its fields pointing into *payload (malloc'd,
   the caller frees it; NULL when there was no payload). Returns 0 or the
   errors of perf__helper_send; PERF_E_SYSTEM also when the peer closed the
   socket (errno EPIPE) or sent a frame that breaks the format (EPROTO). */
int perf__helper_recv(int fd, uint32_t *type, uint8_t **payload, perf__helper_field_t *fields,
                      size_t *n, int wake_fd, int64_t deadline_ns);

/* A number field's value (its 8 bytes written with perf__le_put, sdk/base/le.h),
   0 for a field of another size. */
uint64_t perf__helper_u64_get(const perf__helper_field_t *f);

/* A text field into buf as a C string, cut to cap - 1 bytes. */
void perf__helper_text(const perf__helper_field_t *f, char *buf, size_t cap);

#endif
