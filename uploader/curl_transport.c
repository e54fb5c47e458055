/*
 * curl_transport.c - the libcurl transport (see transport.h). One easy
 * handle, reused so the connection to the collector stays open between
 * batches. Uploader thread only.
 *
 * libcurl is not linked: the first transport made dlopens libcurl.so.4
 * (libcurl-gnutls.so.4 as a fallback) and resolves the few functions used
 * here into a table. An app with the file sink, the none sink or the SDK
 * disabled never maps libcurl nor the ~35 libraries it needs (TLS,
 * Kerberos, LDAP, ssh...): about 8 MiB of resident memory in a small
 * server. libcurl stays loaded once loaded (its global state).
 *
 * The sockets libcurl opens for us are held as the SDK's descriptors
 * (sdk/base/owned_fds.h), so that a forked child closes its copies of the
 * connection to the collector; so is the multi handle's wakeup socket
 * pair, found as the descriptors curl_multi_init opened (libcurl makes it
 * with socketpair, past any callback).
 *
 * The app may close descriptors it did not open (a daemon's closefrom(3)
 * after init) and open its own files at the same numbers, while libcurl
 * keeps those numbers in its connection cache and its wakeup pair. Before
 * each transfer, and at each turn of its loop, every descriptor libcurl
 * holds for this transport is checked: when one is no longer the SDK's,
 * the easy and multi handles are abandoned, not cleaned up (cleaning up
 * would close the app's descriptors, or write a TLS close_notify into
 * them), the SDK's own descriptors among them are closed here, and new
 * handles are made: the next connection is a new one. That costs the old
 * handles' memory (a few KiB), once per time the app closes them. The
 * close callback never closes a descriptor that is not the SDK's, and
 * interrupt wakes the multi handle only while its wakeup pair is the
 * SDK's.
 */
#define CURL_DISABLE_TYPECHECK /* calls go through the table below */
#include <ctype.h>
#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/log.h"
#include "sdk/base/owned_fds.h"
#include "sdk/base/proc_files.h"
#include "uploader/transport.h"

/* The libcurl functions this file uses, resolved at run time. */
typedef struct {
  CURLcode (*global_init)(long flags);
  CURL *(*easy_init)(void);
  void (*easy_reset)(CURL *c);
  CURLcode (*easy_setopt)(CURL *c, CURLoption opt, ...);
  CURLcode (*easy_getinfo)(CURL *c, CURLINFO info, ...);
  const char *(*easy_strerror)(CURLcode rc);
  void (*easy_cleanup)(CURL *c);
  CURLM *(*multi_init)(void);
  CURLMcode (*multi_add_handle)(CURLM *m, CURL *c);
  CURLMcode (*multi_remove_handle)(CURLM *m, CURL *c);
  CURLMcode (*multi_perform)(CURLM *m, int *running);
  CURLMcode (*multi_poll)(CURLM *m, struct curl_waitfd extra[], unsigned n, int ms, int *ret);
  CURLMsg *(*multi_info_read)(CURLM *m, int *left);
  CURLMcode (*multi_wakeup)(CURLM *m);
  CURLMcode (*multi_cleanup)(CURLM *m);
  struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
  void (*slist_free_all)(struct curl_slist *l);
} curl_api_t;

/* Where each function goes in the table, by its libcurl name. */
#define API_FN(field, name)                                                                        \
  { name, offsetof(curl_api_t, field) }
static const struct {
  const char *name;
  size_t offset;
} k_api_fns[] = {
    API_FN(global_init, "curl_global_init"),
    API_FN(easy_init, "curl_easy_init"),
    API_FN(easy_reset, "curl_easy_reset"),
    API_FN(easy_setopt, "curl_easy_setopt"),
    API_FN(easy_getinfo, "curl_easy_getinfo"),
    API_FN(easy_strerror, "curl_easy_strerror"),
    API_FN(easy_cleanup, "curl_easy_cleanup"),
    API_FN(multi_init, "curl_multi_init"),
    API_FN(multi_add_handle, "curl_multi_add_handle"),
    API_FN(multi_remove_handle, "curl_multi_remove_handle"),
    API_FN(multi_perform, "curl_multi_perform"),
    API_FN(multi_poll, "curl_multi_poll"),
    API_FN(multi_info_read, "curl_multi_info_read"),
    API_FN(multi_wakeup, "curl_multi_wakeup"),
    API_FN(multi_cleanup, "curl_multi_cleanup"),
    API_FN(slist_append, "curl_slist_append"),
    API_FN(slist_free_all, "curl_slist_free_all"),
};
#undef API_FN

/* The sonames tried, in order: Debian's OpenSSL build, then its GnuTLS one. */
static const char *const k_sonames[] = {"libcurl.so.4", "libcurl-gnutls.so.4"};

/* The connections one transport may hold at once (libcurl's cache keeps a
   few per host; there is one host). Beyond it a socket is still noted in
   the registry, but not checked before a transfer. */
#define SOCKETS_MAX 16
/* The descriptor numbers that were free before curl_multi_init, among
   which its wakeup pair lands (the lowest free ones). */
#define WAKEUP_CANDIDATES 4

typedef struct {
  perf__transport_t base;
  CURL *curl;
  CURLM *multi;
  pthread_mutex_t lock;       /* multi and wakeup, for interrupt from another thread */
  perf__owned_fd_t wakeup[2]; /* the multi handle's wakeup pair, .fd -1: not found */
  perf__owned_fd_t socks[SOCKETS_MAX];
  size_t n_socks;
  atomic_bool interrupted;
  perf__curl_options_t opts;
  char *ca_bundle;
  char error[CURL_ERROR_SIZE];
} curl_transport_t;

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static curl_api_t g_api;
static int g_api_err = PERF_E_UNSUPPORTED; /* PERF_OK once loaded and initialized */

static void load_libcurl(void);
static bool resolve_api(void *lib);
static curl_socket_t open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *addr);
static int close_socket(void *arg, curl_socket_t fd);
static int post(perf__transport_t *t, const perf__http_request_t *req, perf__http_response_t *resp);
static void destroy(perf__transport_t *t);
static void interrupt(perf__transport_t *t);
static CURLcode perform(curl_transport_t *t);
static bool handles_mine(curl_transport_t *t);
static int handles_new(curl_transport_t *t);
static void handles_abandon(curl_transport_t *t);
static CURLM *multi_new(perf__owned_fd_t wakeup[2]);
static size_t on_header(char *line, size_t size, size_t n, void *arg);
static size_t on_body(char *data, size_t size, size_t n, void *arg);

int perf__curl_transport_new(const perf__curl_options_t *opts, perf__transport_t **out) {
  pthread_once(&g_curl_once, load_libcurl);
  if (g_api_err != PERF_OK) return g_api_err;
  curl_transport_t *t = calloc(1, sizeof *t);
  if (!t) return PERF_E_NO_MEMORY;
  t->base.post = post;
  t->base.interrupt = interrupt;
  t->base.destroy = destroy;
  t->opts = *opts;
  if (opts->ca_bundle && !(t->ca_bundle = strdup(opts->ca_bundle))) {
    free(t);
    return PERF_E_NO_MEMORY;
  }
  pthread_mutex_init(&t->lock, NULL);
  t->wakeup[0] = t->wakeup[1] = (perf__owned_fd_t)PERF__OWNED_FD_NONE;
  if (handles_new(t) != PERF_OK) {
    destroy(&t->base);
    return PERF_E_NO_MEMORY;
  }
  *out = &t->base;
  return PERF_OK;
}

static void load_libcurl(void) {
  void *lib = NULL;
  for (size_t i = 0; i < sizeof k_sonames / sizeof k_sonames[0] && !lib; i++)
    lib = dlopen(k_sonames[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    if (perf__root_changed())
      perf__log(PERF__LOG_ERROR,
                "http sink: libcurl cannot be loaded (%s): the app changed its root directory "
                "(chroot) after init; batches stay in the spool, sent by the next run with this "
                "data_dir",
                dlerror());
    else
      perf__log(PERF__LOG_ERROR, "http sink: libcurl not found (%s); install libcurl4", dlerror());
    return;
  }
  if (!resolve_api(lib)) return; /* logged; the library stays loaded, unused */
  if (g_api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    perf__log(PERF__LOG_ERROR, "http sink: curl_global_init failed");
    g_api_err = PERF_E_SYSTEM;
    return;
  }
  g_api_err = PERF_OK;
}

/* Every function of k_api_fns into g_api; false (logged) when one is
   missing (a libcurl older than 7.68). */
static bool resolve_api(void *lib) {
  for (size_t i = 0; i < sizeof k_api_fns / sizeof k_api_fns[0]; i++) {
    void *fn = dlsym(lib, k_api_fns[i].name);
    if (!fn) {
      perf__log(PERF__LOG_ERROR, "http sink: libcurl lacks %s (7.68 or later needed)",
                k_api_fns[i].name);
      return false;
    }
    /* POSIX makes dlsym's object pointer convertible to a function pointer. */
    memcpy((char *)&g_api + k_api_fns[i].offset, &fn, sizeof fn);
  }
  return true;
}

typedef struct {
  perf__http_response_t *resp;
  size_t reason_len;
} reply_t;

static int post(perf__transport_t *base, const perf__http_request_t *req,
                perf__http_response_t *resp) {
  curl_transport_t *t = (curl_transport_t *)base;
  memset(resp, 0, sizeof *resp);
  if (!t->curl || !handles_mine(t)) { /* none (a failed renewal), or one the app closed */
    if (t->curl) handles_abandon(t);
    if (handles_new(t) != PERF_OK) {
      snprintf(resp->reason, sizeof resp->reason, "libcurl: no memory for new handles");
      return PERF_E_NO_MEMORY;
    }
  }
  CURL *c = t->curl;
  char auth[600], id[64];
  struct curl_slist *headers = NULL, *h;
  headers = g_api.slist_append(headers, "Content-Type: application/x-protobuf");
  if ((h = g_api.slist_append(headers, "Content-Encoding: zstd")) != NULL) headers = h;
  snprintf(id, sizeof id, "X-Perf-Batch-Id: %s", req->batch_id);
  if ((h = g_api.slist_append(headers, id)) != NULL) headers = h;
  if (req->api_key) {
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", req->api_key);
    if ((h = g_api.slist_append(headers, auth)) != NULL) headers = h;
  }
  if ((h = g_api.slist_append(headers, "Expect:")) != NULL) headers = h; /* no 100-continue wait */
  reply_t reply = {resp, 0};
  g_api.easy_reset(c); /* keeps the connection cache: the connection is reused */
  g_api.easy_setopt(c, CURLOPT_URL, req->url);
  g_api.easy_setopt(c, CURLOPT_POST, 1L);
  g_api.easy_setopt(c, CURLOPT_POSTFIELDS, req->body);
  g_api.easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
  g_api.easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  g_api.easy_setopt(c, CURLOPT_USERAGENT, PERF_SDK_NAME "/" PERF_SDK_VERSION);
  g_api.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, t->opts.connect_timeout_ms);
  g_api.easy_setopt(c, CURLOPT_TIMEOUT_MS, t->opts.timeout_ms);
  g_api.easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* no SIGALRM for DNS timeouts in a library */
  g_api.easy_setopt(c, CURLOPT_SSL_VERIFYPEER, t->opts.verify_tls ? 1L : 0L);
  g_api.easy_setopt(c, CURLOPT_SSL_VERIFYHOST, t->opts.verify_tls ? 2L : 0L);
  if (t->ca_bundle) g_api.easy_setopt(c, CURLOPT_CAINFO, t->ca_bundle);
  g_api.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  g_api.easy_setopt(c, CURLOPT_ERRORBUFFER, t->error);
  g_api.easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  g_api.easy_setopt(c, CURLOPT_HEADERDATA, &reply);
  g_api.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  g_api.easy_setopt(c, CURLOPT_WRITEDATA, &reply);
  g_api.easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket);
  g_api.easy_setopt(c, CURLOPT_OPENSOCKETDATA, t);
  g_api.easy_setopt(c, CURLOPT_CLOSESOCKETFUNCTION, close_socket);
  g_api.easy_setopt(c, CURLOPT_CLOSESOCKETDATA, t);
  t->error[0] = '\0';
  CURLcode rc = perform(t);
  g_api.slist_free_all(headers);
  if (rc == CURLE_ABORTED_BY_CALLBACK) {
    snprintf(resp->reason, sizeof resp->reason, "interrupted (shutting down)");
    return PERF_E_BUSY;
  }
  if (rc != CURLE_OK) {
    resp->status = 0;
    snprintf(resp->reason, sizeof resp->reason, "%s",
             t->error[0] ? t->error : g_api.easy_strerror(rc));
    return rc == CURLE_OPERATION_TIMEDOUT ? PERF_E_TIMEOUT : PERF_E_SYSTEM;
  }
  g_api.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
  /* A body's own line end ("...\n") is no part of the reason. */
  size_t n = strlen(resp->reason);
  while (n > 0 && (unsigned char)resp->reason[n - 1] <= ' ')
    resp->reason[--n] = '\0';
  return PERF_OK;
}

/* The easy handle driven by the multi handle, so that another thread can
   cut a transfer short (interrupt -> curl_multi_wakeup) without waiting for
   a timeout. */
static CURLcode perform(curl_transport_t *t) {
  if (atomic_load(&t->interrupted)) return CURLE_ABORTED_BY_CALLBACK;
  if (g_api.multi_add_handle(t->multi, t->curl) != CURLM_OK) return CURLE_FAILED_INIT;
  CURLcode result = CURLE_OK;
  int running = 1;
  while (running) {
    if (g_api.multi_perform(t->multi, &running) != CURLM_OK) {
      result = CURLE_FAILED_INIT;
      break;
    }
    if (!running) break;
    if (atomic_load(&t->interrupted)) {
      result = CURLE_ABORTED_BY_CALLBACK;
      break;
    }
    if (!handles_mine(t)) { /* the app closed them mid-transfer: never poll its files */
      result = CURLE_SEND_ERROR;
      snprintf(t->error, sizeof t->error, "the connection's descriptor was closed by the app");
      break;
    }
    g_api.multi_poll(t->multi, NULL, 0, 1000, NULL);
  }
  int left;
  CURLMsg *msg;
  while ((msg = g_api.multi_info_read(t->multi, &left)) != NULL)
    if (msg->msg == CURLMSG_DONE && result == CURLE_OK) result = msg->data.result;
  if (result == CURLE_SEND_ERROR && !handles_mine(t)) return result; /* abandoned next post */
  g_api.multi_remove_handle(t->multi, t->curl);
  return result;
}

static void interrupt(perf__transport_t *base) {
  curl_transport_t *t = (curl_transport_t *)base;
  atomic_store(&t->interrupted, true);
  pthread_mutex_lock(&t->lock);
  /* The wakeup writes into the pair: never into an app's file at its number. */
  bool mine = t->wakeup[1].fd < 0 || perf__owned_fd_held(&t->wakeup[1]);
  if (t->multi && mine) g_api.multi_wakeup(t->multi);
  pthread_mutex_unlock(&t->lock);
}

static void destroy(perf__transport_t *base) {
  curl_transport_t *t = (curl_transport_t *)base;
  if (!t) return;
  if (t->curl && !handles_mine(t)) handles_abandon(t);
  for (int i = 0; i < 2; i++)
    perf__owned_fd_forget(&t->wakeup[i]); /* the cleanup closes them */
  if (t->multi) g_api.multi_cleanup(t->multi);
  if (t->curl) g_api.easy_cleanup(t->curl);
  pthread_mutex_destroy(&t->lock);
  free(t->ca_bundle);
  free(t);
}

/* Keep Retry-After; a new status line (after a redirect or 100) resets it. */
static size_t on_header(char *line, size_t size, size_t n, void *arg) {
  reply_t *reply = arg;
  size_t len = size * n;
  if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) reply->resp->retry_after[0] = '\0';
  static const char name[] = "retry-after:";
  if (len > sizeof name - 1 && strncasecmp(line, name, sizeof name - 1) == 0) {
    const char *v = line + sizeof name - 1;
    size_t vlen = len - (sizeof name - 1);
    while (vlen && isspace((unsigned char)*v))
      v++, vlen--;
    while (vlen && isspace((unsigned char)v[vlen - 1]))
      vlen--;
    if (vlen >= sizeof reply->resp->retry_after) vlen = sizeof reply->resp->retry_after - 1;
    memcpy(reply->resp->retry_after, v, vlen);
    reply->resp->retry_after[vlen] = '\0';
  }
  return len;
}

/* The body is only the server's reason: keep its start, drop the rest. */
static size_t on_body(char *data, size_t size, size_t n, void *arg) {
  reply_t *reply = arg;
  size_t len = size * n, room = sizeof reply->resp->reason - 1 - reply->reason_len;
  size_t take = len < room ? len : room;
  memcpy(reply->resp->reason + reply->reason_len, data, take);
  reply->reason_len += take;
  reply->resp->reason[reply->reason_len] = '\0';
  return len;
}

/* libcurl's sockets, made here so that they are noted as the SDK's and
   checked before each transfer. */
static curl_socket_t open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *addr) {
  curl_transport_t *t = arg;
  (void)purpose;
  int fd = socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
  if (fd < 0) return CURL_SOCKET_BAD;
  if (t->n_socks == SOCKETS_MAX) { /* not one libcurl could have asked for: refused */
    close(fd);
    return CURL_SOCKET_BAD;
  }
  perf__owned_fd_hold(&t->socks[t->n_socks++], fd);
  return fd;
}

/* A socket libcurl is done with: closed only while it is the SDK's; one
   the app closed (and perhaps reopened as its own file) is forgotten. */
static int close_socket(void *arg, curl_socket_t fd) {
  curl_transport_t *t = arg;
  for (size_t i = 0; i < t->n_socks; i++)
    if (t->socks[i].fd == fd) {
      perf__owned_fd_release(&t->socks[i]);
      t->socks[i] = t->socks[--t->n_socks];
      break;
    }
  return 0;
}

/* Whether every descriptor libcurl holds for t is still the SDK's. */
static bool handles_mine(curl_transport_t *t) {
  for (size_t i = 0; i < t->n_socks; i++)
    if (!perf__owned_fd_held(&t->socks[i])) return false;
  for (int i = 0; i < 2; i++)
    if (t->wakeup[i].fd >= 0 && !perf__owned_fd_held(&t->wakeup[i])) return false;
  return true;
}

/* Drop t's handles without cleaning them up (see the top of this file):
   the descriptors among theirs still the SDK's are closed here, the
   others forgotten. */
static void handles_abandon(curl_transport_t *t) {
  perf__log(PERF__LOG_WARN,
            "http sink: a descriptor of libcurl's connection was closed by the app; new "
            "connection");
  for (size_t i = 0; i < t->n_socks; i++)
    perf__owned_fd_release(&t->socks[i]);
  t->n_socks = 0;
  pthread_mutex_lock(&t->lock);
  for (int i = 0; i < 2; i++)
    perf__owned_fd_release(&t->wakeup[i]);
  t->multi = NULL;
  pthread_mutex_unlock(&t->lock);
  t->curl = NULL;
}

/* A new easy and multi handle for t. Returns 0, or PERF_E_NO_MEMORY with
   neither made. */
static int handles_new(curl_transport_t *t) {
  perf__owned_fd_t wakeup[2];
  CURLM *multi = multi_new(wakeup);
  CURL *curl = g_api.easy_init();
  if (!multi || !curl) {
    for (int i = 0; i < 2; i++)
      perf__owned_fd_forget(&wakeup[i]);
    if (multi) g_api.multi_cleanup(multi); /* closes its wakeup pair, just made */
    if (curl) g_api.easy_cleanup(curl);
    return PERF_E_NO_MEMORY;
  }
  pthread_mutex_lock(&t->lock);
  t->multi = multi;
  t->wakeup[0] = wakeup[0];
  t->wakeup[1] = wakeup[1];
  pthread_mutex_unlock(&t->lock);
  t->curl = curl;
  return PERF_OK;
}

/* curl_multi_init, and the wakeup pair it opened: the sockets now at the
   lowest numbers that were free before (another thread opening a socket
   in that instant could be taken for it: it would then only be checked,
   and closed by a forked child). */
static CURLM *multi_new(perf__owned_fd_t wakeup[2]) {
  int free_fds[WAKEUP_CANDIDATES], n = 0;
  for (int fd = 0; n < WAKEUP_CANDIDATES && fd < 1 << 20; fd++)
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) free_fds[n++] = fd;
  CURLM *multi = g_api.multi_init();
  wakeup[0] = wakeup[1] = (perf__owned_fd_t)PERF__OWNED_FD_NONE;
  for (int i = 0, k = 0; multi && i < n && k < 2; i++) {
    struct stat st;
    if (fstat(free_fds[i], &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    perf__owned_fd_hold(&wakeup[k++], free_fds[i]);
  }
  return multi;
}
