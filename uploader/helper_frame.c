/*
 * helper_frame.c - frames between the SDK and its upload helper (see
 * helper_frame.h).
 */
#include "uploader/helper_frame.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "perf_sdk.h"
#include "sdk/base/clock.h"
#include "sdk/base/le.h"

#define MAGIC 0x31505550u /* "PUP1" */
#define HEADER_BYTES 16

static int wait_ready(int fd, short events, int wake_fd, int64_t deadline_ns);
static int send_all(int fd, const void *data, size_t len, int wake_fd, int64_t deadline_ns);
static int recv_all(int fd, void *data, size_t len, int wake_fd, int64_t deadline_ns);

int perf__helper_send(int fd, uint32_t type, const perf__helper_field_t *fields, size_t n,
                      int wake_fd, int64_t deadline_ns) {
  uint64_t payload = 0;
  for (size_t i = 0; i < n; i++)
    payload += 4 + fields[i].len;
  if (n > PERF__HELPER_FIELDS_MAX || payload > PERF__HELPER_FRAME_MAX) {
    errno = EMSGSIZE;
    return PERF_E_SYSTEM;
  }
  uint8_t header[HEADER_BYTES];
  perf__le_put(header, MAGIC, 4);
  perf__le_put(header + 4, type, 4);
  perf__le_put(header + 8, payload, 8);
  int err = send_all(fd, header, sizeof header, wake_fd, deadline_ns);
  for (size_t i = 0; !err && i < n; i++) {
    uint8_t len[4];
    perf__le_put(len, (uint32_t)fields[i].len, 4);
    err = send_all(fd, len, sizeof len, wake_fd, deadline_ns);
    if (!err) err = send_all(fd, fields[i].data, fields[i].len, wake_fd, deadline_ns);
  }
  return err;
}

int perf__helper_recv(int fd, uint32_t *type, uint8_t **payload, perf__helper_field_t *fields,
                      size_t *n, int wake_fd, int64_t deadline_ns) {
  *payload = NULL;
  *n = 0;
  uint8_t header[HEADER_BYTES];
  int err = recv_all(fd, header, sizeof header, wake_fd, deadline_ns);
  if (err) return err;
  uint64_t len = perf__le_get(header + 8, 8);
  if ((uint32_t)perf__le_get(header, 4) != MAGIC || len > PERF__HELPER_FRAME_MAX) {
    errno = EPROTO;
    return PERF_E_SYSTEM;
  }
  *type = (uint32_t)perf__le_get(header + 4, 4);
  if (len == 0) return PERF_OK;
  uint8_t *buf = malloc((size_t)len);
  if (!buf) return PERF_E_NO_MEMORY;
  err = recv_all(fd, buf, (size_t)len, wake_fd, deadline_ns);
  /* The fields must fill the payload exactly. */
  size_t at = 0;
  while (!err && at < len) {
    uint32_t flen = len - at >= 4 ? (uint32_t)perf__le_get(buf + at, 4) : UINT32_MAX;
    if (*n == PERF__HELPER_FIELDS_MAX || flen > len - at - 4) {
      errno = EPROTO;
      err = PERF_E_SYSTEM;
      break;
    }
    fields[(*n)++] = (perf__helper_field_t){buf + at + 4, flen};
    at += 4 + (size_t)flen;
  }
  if (err) {
    free(buf);
    *n = 0;
    return err;
  }
  *payload = buf;
  return PERF_OK;
}

uint64_t perf__helper_u64_get(const perf__helper_field_t *f) {
  return f->len == 8 ? perf__le_get(f->data, 8) : 0;
}

void perf__helper_text(const perf__helper_field_t *f, char *buf, size_t cap) {
  size_t n = f->len < cap - 1 ? f->len : cap - 1;
  memcpy(buf, f->data, n);
  buf[n] = '\0';
}

/* Until fd is ready for `events`: 0, PERF_E_TIMEOUT, PERF_E_BUSY (woken)
   or PERF_E_SYSTEM. */
static int wait_ready(int fd, short events, int wake_fd, int64_t deadline_ns) {
  for (;;) {
    struct pollfd p[2] = {{fd, events, 0}, {wake_fd, POLLIN, 0}};
    int ms = -1;
    if (deadline_ns >= 0) {
      int64_t left = deadline_ns - perf__now_ns();
      if (left <= 0) return PERF_E_TIMEOUT;
      ms = (int)((left + 999999) / 1000000);
    }
    int r = poll(p, wake_fd >= 0 ? 2 : 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return PERF_E_SYSTEM;
    if (wake_fd >= 0 && (p[1].revents & POLLIN)) return PERF_E_BUSY;
    if (p[0].revents) return PERF_OK; /* ready, or an error the call will name */
  }
}

static int send_all(int fd, const void *data, size_t len, int wake_fd, int64_t deadline_ns) {
  const uint8_t *at = data;
  while (len > 0) {
    int err = wait_ready(fd, POLLOUT, wake_fd, deadline_ns);
    if (err) return err;
    ssize_t w = send(fd, at, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w < 0) return PERF_E_SYSTEM;
    at += w;
    len -= (size_t)w;
  }
  return PERF_OK;
}

static int recv_all(int fd, void *data, size_t len, int wake_fd, int64_t deadline_ns) {
  uint8_t *at = data;
  while (len > 0) {
    int err = wait_ready(fd, POLLIN, wake_fd, deadline_ns);
    if (err) return err;
    ssize_t r = recv(fd, at, len, MSG_DONTWAIT);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r < 0) return PERF_E_SYSTEM;
    if (r == 0) {
      errno = EPIPE; /* the peer closed its end */
      return PERF_E_SYSTEM;
    }
    at += r;
    len -= (size_t)r;
  }
  return PERF_OK;
}
