/*
 * helper_transport.c - the http sink's transport through the upload helper
 * (see transport.h): libcurl, its TLS library and the ~35 libraries they
 * need are loaded in a process of their own (perf-upload,
 * uploader/upload_helper_main.c), not in the app (unless no helper can
 * run here: below).
 *
 * The helper is started at the first post (helper_spawn.h: no SIGCHLD, no
 * descriptor of the app) and ended when the uploader goes idle (the spool
 * empty for TRANSPORT_LINGER_MS, uploader.c: transport->idle) or on any failure of the
 * exchange; the next post starts another. A request the helper did not
 * answer is answered here as a network error (status 0): the uploader
 * keeps the batch and retries it with the same batch id.
 *
 * Where no process can be started for good (a seccomp filter or a
 * sandbox denies clone or execve, the helper is not a program this
 * machine runs, an emulator runs the app), or SILENT_STARTS_MAX helpers in
 * a row ended before their first answer, the transport says so once in
 * the log and goes on with libcurl in this process (the lazy libcurl
 * transport): uploads go on, at the footprint of the in-process mode. A
 * shortage that passes (EAGAIN, ENOMEM: too many processes, no memory)
 * only fails that post; the uploader retries later.
 *
 * post and idle run on the uploader thread; interrupt from any thread (a
 * pipe the exchange polls beside the socket); destroy from the thread
 * stopping the uploader. A forked child never ends its parent's helper.
 *
 * The app may close descriptors it did not open (a daemon's closefrom(3)
 * after init) and open its own files at the same numbers. Every
 * descriptor here (the wake pipe, the helper's socket and pidfd) is held
 * in sdk/base/owned_fds.h with its identity, and checked before each use:
 * one that is no longer the SDK's is forgotten, never read, written,
 * polled or closed, and made again (a new pipe, a new helper), so the
 * batch in hand is sent all the same. The wake descriptor is a pipe, not
 * an eventfd: every eventfd shares one anonymous inode, so an app's
 * eventfd at the same number could not be told from ours.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/clock.h"
#include "sdk/base/le.h"
#include "sdk/base/log.h"
#include "sdk/base/owned_fds.h"
#include "uploader/helper_frame.h"
#include "uploader/helper_spawn.h"
#include "uploader/transport.h"

/* Beyond the request's own timeout, how long the helper may take to answer. */
#define ANSWER_MARGIN_MS 5000
/* Helpers in a row that may end before their first answer before this
   process gives up on them. */
#define SILENT_STARTS_MAX 3

typedef struct {
  perf__transport_t base;
  perf__curl_options_t opts;
  char *ca_bundle; /* opts.ca_bundle points here */
  char *path;
  pid_t owner; /* the process that may end the helper */
  perf__helper_proc_t proc;
  perf__owned_fd_t sock;    /* .fd -1: no helper */
  perf__owned_fd_t pidfd;   /* h->proc.pidfd, held */
  perf__owned_fd_t wake[2]; /* pipe: interrupt writes wake[1], the exchange polls wake[0] */
  pthread_mutex_t lock;     /* interrupted, wake */
  bool interrupted;
  bool in_process;             /* no helper can start: posts go to fallback */
  perf__transport_t *fallback; /* libcurl in this process, loaded at its first post */
  int silent_starts;           /* helpers in a row that ended before their first answer */
  uint64_t started;            /* helpers started (tests, logs) */
} helper_t;

static int post(perf__transport_t *t, const perf__http_request_t *req, perf__http_response_t *resp);
static void interrupt(perf__transport_t *t);
static void idle(perf__transport_t *t);
static void destroy(perf__transport_t *t);
static int start_helper(helper_t *h, char *why, size_t why_len);
static void end_helper(helper_t *h);
static int exchange(helper_t *h, const perf__http_request_t *req, perf__http_response_t *resp,
                    int *rc);
static bool spawn_failure_lasts(int e);
static int wake_open(helper_t *h);
static void wake_close(helper_t *h);
static int wake_fd_checked(helper_t *h);
static void forget_foreign_helper(helper_t *h);
static bool pidfd_is_its(const helper_t *h);

int perf__helper_transport_new(const perf__curl_options_t *opts, const char *helper_path,
                               perf__transport_t **out) {
  *out = NULL;
  helper_t *h = calloc(1, sizeof *h);
  if (!h) return PERF_E_NO_MEMORY;
  h->opts = *opts;
  h->sock = h->pidfd = h->wake[0] = h->wake[1] = (perf__owned_fd_t)PERF__OWNED_FD_NONE;
  h->proc.pid = h->proc.pidfd = -1;
  h->owner = getpid();
  h->path = strdup(helper_path);
  h->ca_bundle = opts->ca_bundle ? strdup(opts->ca_bundle) : NULL;
  int wake_err = wake_open(h);
  if (perf__lazy_curl_transport_new(opts, &h->fallback) != PERF_OK) h->fallback = NULL;
  if (!h->path || (opts->ca_bundle && !h->ca_bundle) || wake_err || !h->fallback) {
    int err = wake_err ? wake_err : PERF_E_NO_MEMORY;
    if (h->fallback) h->fallback->destroy(h->fallback);
    wake_close(h);
    free(h->path);
    free(h->ca_bundle);
    free(h);
    return err;
  }
  h->opts.ca_bundle = h->ca_bundle;
  pthread_mutex_init(&h->lock, NULL);
  h->base.post = post;
  h->base.interrupt = interrupt;
  h->base.idle = idle;
  h->base.destroy = destroy;
  *out = &h->base;
  return PERF_OK;
}

static int post(perf__transport_t *t, const perf__http_request_t *req,
                perf__http_response_t *resp) {
  helper_t *h = (helper_t *)t;
  memset(resp, 0, sizeof *resp);
  pthread_mutex_lock(&h->lock);
  bool stop = h->interrupted;
  pthread_mutex_unlock(&h->lock);
  if (stop) {
    snprintf(resp->reason, sizeof resp->reason, "interrupted");
    return PERF_E_BUSY;
  }
  if (h->in_process) return h->fallback->post(h->fallback, req, resp);
  forget_foreign_helper(h);
  /* A helper that ended by itself since the last post (killed, crashed)
     shows up as a failed send: start a new one and send once more. */
  for (int attempt = 0; attempt < 2; attempt++) {
    bool fresh = h->sock.fd < 0;
    if (fresh) {
      int err = start_helper(h, resp->reason, sizeof resp->reason);
      if (err && h->in_process) return h->fallback->post(h->fallback, req, resp);
      if (err) return err;
    }
    int rc = PERF_OK;
    int err = exchange(h, req, resp, &rc);
    if (err == PERF_OK) {
      h->silent_starts = 0;
      return rc; /* the helper's answer: a response or its network error */
    }
    int e = errno;
    if (err == PERF_E_BUSY) {
      end_helper(h); /* it may be in the middle of the request */
      snprintf(resp->reason, sizeof resp->reason, "interrupted");
      return err;
    }
    end_helper(h);
    if (fresh && err == PERF_E_SYSTEM && ++h->silent_starts >= SILENT_STARTS_MAX) {
      /* It runs but cannot work here (its libraries missing, say). */
      h->in_process = true;
      perf__log(PERF__LOG_ERROR,
                "upload helper %s: %d in a row ended before their first answer (%s); libcurl "
                "loads in this process instead",
                h->path, SILENT_STARTS_MAX, strerror(e));
      return h->fallback->post(h->fallback, req, resp);
    }
    if (fresh || err != PERF_E_SYSTEM) { /* a new helper failed too, or it took too long */
      snprintf(resp->reason, sizeof resp->reason, "upload helper %s: %s", h->path,
               err == PERF_E_TIMEOUT ? "no answer in time" : strerror(e));
      memset(resp->retry_after, 0, sizeof resp->retry_after);
      resp->status = 0;
      return err;
    }
  }
  return PERF_E_SYSTEM;
}

static void interrupt(perf__transport_t *t) {
  helper_t *h = (helper_t *)t;
  pthread_mutex_lock(&h->lock);
  h->interrupted = true;
  h->fallback->interrupt(h->fallback);
  int fd = wake_fd_checked(h) >= 0 ? h->wake[1].fd : -1;
  if (fd >= 0 && write(fd, "!", 1) < 0) { /* the pipe is full: already signalled */
  }
  pthread_mutex_unlock(&h->lock);
}

static void idle(perf__transport_t *t) {
  end_helper((helper_t *)t);
}

static void destroy(perf__transport_t *t) {
  helper_t *h = (helper_t *)t;
  end_helper(h);
  h->fallback->destroy(h->fallback);
  wake_close(h);
  pthread_mutex_destroy(&h->lock);
  free(h->path);
  free(h->ca_bundle);
  free(h);
}

uint64_t perf__helper_transport_started(perf__transport_t *t) {
  return ((helper_t *)t)->started;
}

/* A socket pair, the helper on one end, the options sent. */
static int start_helper(helper_t *h, char *why, size_t why_len) {
  if (getpid() != h->owner) { /* a forked child: never the parent's helper */
    h->owner = getpid();
    h->sock = h->pidfd = (perf__owned_fd_t)PERF__OWNED_FD_NONE;
    h->proc.pid = h->proc.pidfd = -1;
  }
  pthread_mutex_lock(&h->lock);
  int wake_fd = wake_fd_checked(h);
  pthread_mutex_unlock(&h->lock);
  if (wake_fd < 0) {
    snprintf(why, why_len, "upload helper: no wake pipe: %s", strerror(errno));
    return PERF_E_SYSTEM;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    snprintf(why, why_len, "upload helper: socketpair: %s", strerror(errno));
    return PERF_E_SYSTEM;
  }
  int err = perf__helper_spawn(h->path, sv[1], &h->proc);
  int e = errno;
  close(sv[1]);
  if (err) {
    close(sv[0]);
    h->in_process = spawn_failure_lasts(e);
    snprintf(why, why_len, "upload helper %s could not start: %s%s", h->path, strerror(e),
             h->in_process ? "; libcurl loads in this process instead" : "");
    perf__log(PERF__LOG_ERROR, "%s", why);
    return err;
  }
  perf__owned_fd_hold(&h->sock, sv[0]);
  perf__owned_fd_hold(&h->pidfd, h->proc.pidfd);
  h->started++;
  uint8_t nums[3][8];
  perf__le_put(nums[0], (uint64_t)h->opts.connect_timeout_ms, 8);
  perf__le_put(nums[1], (uint64_t)h->opts.timeout_ms, 8);
  perf__le_put(nums[2], h->opts.verify_tls ? 1 : 0, 8);
  const char *ca = h->opts.ca_bundle ? h->opts.ca_bundle : "";
  perf__helper_field_t hello[] = {{nums[0], 8}, {nums[1], 8}, {nums[2], 8}, {ca, strlen(ca)}};
  err = perf__helper_send(h->sock.fd, PERF__HELPER_HELLO, hello, 4, wake_fd,
                          perf__now_ns() + (int64_t)ANSWER_MARGIN_MS * 1000000);
  if (err) {
    e = errno;
    end_helper(h);
    snprintf(why, why_len, "upload helper %s: %s", h->path,
             err == PERF_E_BUSY ? "interrupted" : strerror(e));
    return err;
  }
  return PERF_OK;
}

/* Close the helper's socket and end the helper, each descriptor only when
   it is still the SDK's (the rest is forgotten: the helper ends by itself
   once its end of the socket reads end of file). */
static void end_helper(helper_t *h) {
  if (h->sock.fd < 0) return;
  perf__owned_fd_release(&h->sock);
  if (getpid() == h->owner && h->pidfd.fd >= 0) {
    bool its = pidfd_is_its(h);
    perf__owned_fd_forget(&h->pidfd);
    if (its) perf__helper_end(&h->proc); /* SIGKILL through it, then closes it */
  }
  h->pidfd = (perf__owned_fd_t)PERF__OWNED_FD_NONE;
  h->proc.pid = h->proc.pidfd = -1;
}

/* The helper's pidfd is still held, and names the helper (see
   perf__helper_pidfd_is_its). */
static bool pidfd_is_its(const helper_t *h) {
  return perf__owned_fd_held(&h->pidfd) && perf__helper_pidfd_is_its(&h->proc);
}

/* Before a post: a helper socket or pidfd that is no longer the SDK's
   (the app closed it and may have opened a file at its number) ends that
   helper without touching either; the post starts a new one. */
static void forget_foreign_helper(helper_t *h) {
  if (h->sock.fd < 0 || getpid() != h->owner) return;
  if (perf__owned_fd_held(&h->sock) && (h->pidfd.fd < 0 || pidfd_is_its(h))) return;
  perf__log(PERF__LOG_WARN,
            "upload helper: its socket or process descriptor was closed by the app; starting "
            "another helper");
  end_helper(h);
}

/* One request and the helper's answer: 0 with *rc the post's result, or
   the error that broke the exchange (errno says why). */
static int exchange(helper_t *h, const perf__http_request_t *req, perf__http_response_t *resp,
                    int *rc) {
  int64_t deadline = perf__now_ns() + ((int64_t)h->opts.timeout_ms + ANSWER_MARGIN_MS) * 1000000;
  const char *key = req->api_key ? req->api_key : "";
  uint8_t has_key = req->api_key != NULL;
  perf__helper_field_t fields[] = {{req->url, strlen(req->url)},
                                   {&has_key, 1},
                                   {key, strlen(key)},
                                   {req->batch_id, strlen(req->batch_id)},
                                   {req->body, req->body_len}};
  pthread_mutex_lock(&h->lock);
  int wake_fd = wake_fd_checked(h);
  pthread_mutex_unlock(&h->lock);
  if (wake_fd < 0) return PERF_E_SYSTEM;
  int err = perf__helper_send(h->sock.fd, PERF__HELPER_REQUEST, fields, 5, wake_fd, deadline);
  if (err) return err;
  uint32_t type = 0;
  uint8_t *payload = NULL;
  perf__helper_field_t got[PERF__HELPER_FIELDS_MAX];
  size_t n = 0;
  err = perf__helper_recv(h->sock.fd, &type, &payload, got, &n, wake_fd, deadline);
  if (!err && (type != PERF__HELPER_RESPONSE || n != 4)) {
    errno = EPROTO;
    err = PERF_E_SYSTEM;
  }
  if (!err) {
    *rc = (int)(int64_t)perf__helper_u64_get(&got[0]);
    resp->status = (long)perf__helper_u64_get(&got[1]);
    perf__helper_text(&got[2], resp->retry_after, sizeof resp->retry_after);
    perf__helper_text(&got[3], resp->reason, sizeof resp->reason);
  }
  int e = errno;
  free(payload);
  errno = e;
  return err;
}

/* Whether a helper that could not start (errno e) never will in this
   process: anything but a passing shortage of processes or memory. */
static bool spawn_failure_lasts(int e) {
  return e != EAGAIN && e != ENOMEM && e != EINTR;
}

/* The wake pipe, both ends noted as the SDK's. Returns 0 or PERF_E_SYSTEM
   (errno set). */
static int wake_open(helper_t *h) {
  int p[2];
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return PERF_E_SYSTEM;
  perf__owned_fd_hold(&h->wake[0], p[0]);
  perf__owned_fd_hold(&h->wake[1], p[1]);
  return PERF_OK;
}

/* Close each end of the wake pipe that is still the SDK's; forget the
   others. */
static void wake_close(helper_t *h) {
  perf__owned_fd_release(&h->wake[0]);
  perf__owned_fd_release(&h->wake[1]);
}

/* The wake pipe's read end, after checking that both ends are still the
   SDK's; a pipe the app closed is forgotten and a new one made (already
   signalled when an interrupt came). -1 (errno set) when none can be made.
   Under h->lock. */
static int wake_fd_checked(helper_t *h) {
  if (perf__owned_fd_held(&h->wake[0]) && perf__owned_fd_held(&h->wake[1])) return h->wake[0].fd;
  wake_close(h);
  if (wake_open(h) != PERF_OK) return -1;
  if (h->interrupted && write(h->wake[1].fd, "!", 1) < 0) { /* a new pipe has room */
  }
  return h->wake[0].fd;
}
