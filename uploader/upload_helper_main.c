/*
 * upload_helper_main.c - perf-upload, the upload helper: the process of
 * its own in which the http sink's libcurl runs (uploader/
 * helper_transport.c starts it). Installed as perfsdk/perf-upload in the
 * library's directory; not a command for people.
 *
 * Descriptor 3 is its socket to the SDK; argv[1] the app's pid. It reads
 * the options (HELLO), then answers each REQUEST with the RESPONSE of one
 * POST through the libcurl transport (curl_transport.c, the one the SDK
 * would use in-process). It ends when the SDK's end of the socket closes
 * (the SDK ended it, or the app exited, exec'd or was killed: the socket is
 * close-on-exec), also in the middle of a request (a thread watches for
 * the hang-up), or on a frame it cannot read. It prints nothing.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/clock.h"
#include "sdk/base/le.h"
#include "uploader/helper_frame.h"
#include "uploader/transport.h"

#define SOCK 3
#define HELLO_WAIT_MS 10000

static int answer(int rc, const perf__http_response_t *resp);
static void *watch_hangup(void *arg);

int main(int argc, char **argv) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL); /* blocked by the spawn until the exec */
  signal(SIGPIPE, SIG_IGN);
  if (argc != 2) return 2; /* argv[1]: the app's pid, for people reading ps */
  (void)argv;
  pthread_t watcher;
  if (pthread_create(&watcher, NULL, watch_hangup, NULL) != 0) return 3;

  uint32_t type = 0;
  uint8_t *hello = NULL;
  perf__helper_field_t f[PERF__HELPER_FIELDS_MAX];
  size_t n = 0;
  if (perf__helper_recv(SOCK, &type, &hello, f, &n, -1,
                        perf__now_ns() + (int64_t)HELLO_WAIT_MS * 1000000) != PERF_OK ||
      type != PERF__HELPER_HELLO || n != 4)
    return 3;
  char ca[4096];
  perf__helper_text(&f[3], ca, sizeof ca);
  perf__curl_options_t opts = {(long)perf__helper_u64_get(&f[0]), (long)perf__helper_u64_get(&f[1]),
                               perf__helper_u64_get(&f[2]) != 0, ca[0] ? ca : NULL};
  free(hello);
  perf__transport_t *t = NULL;
  int made = perf__curl_transport_new(&opts, &t);

  for (;;) {
    uint8_t *payload = NULL;
    if (perf__helper_recv(SOCK, &type, &payload, f, &n, -1, -1) != PERF_OK) break; /* closed */
    if (type != PERF__HELPER_REQUEST || n != 5 || f[1].len != 1) {
      free(payload);
      break;
    }
    char url[4096], key[4096], id[64];
    perf__helper_text(&f[0], url, sizeof url);
    perf__helper_text(&f[2], key, sizeof key);
    perf__helper_text(&f[3], id, sizeof id);
    bool has_key = *(const uint8_t *)f[1].data != 0;
    perf__http_request_t req = {url, has_key ? key : NULL, id, f[4].data, f[4].len};
    perf__http_response_t resp;
    memset(&resp, 0, sizeof resp);
    int rc = made;
    if (made == PERF_OK)
      rc = t->post(t, &req, &resp);
    else
      snprintf(resp.reason, sizeof resp.reason, "no libcurl transport: %s", perf_strerror(made));
    free(payload);
    if (answer(rc, &resp) != PERF_OK) break;
  }
  if (t) t->destroy(t);
  return 0;
}

/* The SDK's end closed: stop now, whatever the main thread is doing. */
static void *watch_hangup(void *arg) {
  (void)arg;
  for (;;) {
    struct pollfd p = {SOCK, POLLRDHUP, 0};
    if (poll(&p, 1, -1) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) _exit(0);
  }
  return NULL;
}

static int answer(int rc, const perf__http_response_t *resp) {
  uint8_t code[8], status[8];
  perf__le_put(code, (uint64_t)(int64_t)rc, 8);
  perf__le_put(status, (uint64_t)resp->status, 8);
  perf__helper_field_t f[] = {{code, 8},
                              {status, 8},
                              {resp->retry_after, strlen(resp->retry_after)},
                              {resp->reason, strlen(resp->reason)}};
  return perf__helper_send(SOCK, PERF__HELPER_RESPONSE, f, 4, -1, -1);
}
