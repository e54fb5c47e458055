/*
 * upload_stall.c - the warning that batches stopped reaching the collector
 * (see upload_stall.h). Uploader thread only.
 */
#include "uploader/upload_stall.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "perf_sdk.h"

#define BATCHES_PATH "/v1/batches"

static bool ends_with(const char *s, const char *tail);
static bool contains(const char *s, const char *part);

void perf__upload_stall_init(perf__upload_stall_t *s, unsigned warn_after_ms) {
  memset(s, 0, sizeof *s);
  s->warn_after_ns = (int64_t)warn_after_ms * 1000000;
}

void perf__upload_stall_arrived(perf__upload_stall_t *s) {
  s->since_ns = 0;
  s->warned = false;
}

void perf__upload_stall_failed(perf__upload_stall_t *s, int64_t now_ns, int rc,
                               const perf__http_response_t *resp) {
  if (!s->since_ns) s->since_ns = now_ns;
  s->status = resp->status;
  s->rc = rc;
  snprintf(s->reason, sizeof s->reason, "%.*s", (int)sizeof s->reason - 1, resp->reason);
  /* One line: a body's line ends become spaces, trailing ones go. */
  size_t end = 0;
  for (size_t i = 0; s->reason[i]; i++) {
    if ((unsigned char)s->reason[i] < 0x20) s->reason[i] = ' ';
    if (s->reason[i] != ' ') end = i + 1;
  }
  s->reason[end] = '\0';
}

int64_t perf__upload_stall_deadline(const perf__upload_stall_t *s) {
  if (!s->warn_after_ns || !s->since_ns || s->warned) return 0;
  return s->since_ns + s->warn_after_ns;
}

bool perf__upload_stall_due(perf__upload_stall_t *s, int64_t now_ns, const char *url, char *msg,
                            size_t len) {
  int64_t deadline = perf__upload_stall_deadline(s);
  if (!deadline || now_ns < deadline) return false;
  s->warned = true;
  char why[384];
  perf__upload_stall_why(s->status, s->rc, s->reason, url, why, sizeof why);
  snprintf(msg, len, "no batch has reached the collector for %lld s (they wait in the spool): %s",
           (long long)(s->warn_after_ns / 1000000000), why);
  return true;
}

void perf__upload_stall_why(long status, int rc, const char *reason, const char *url, char *out,
                            size_t len) {
  if (status == 0 && contains(reason, "resolv"))
    snprintf(out, len, "the host name of %s does not resolve; check endpoint (%s)", url, reason);
  else if (status == 0 && (rc == PERF_E_TIMEOUT || contains(reason, "timed out")))
    snprintf(out, len,
             "%s did not answer in time; check that the collector runs and is reachable, or raise "
             "connect_timeout_ms / request_timeout_ms (%s)",
             url, reason);
  else if (status == 0)
    snprintf(out, len,
             "the collector at %s is down or refuses connections; check that it runs and listens "
             "at that host and port (%s)",
             url, reason);
  else if (status == 401 || status == 403)
    snprintf(out, len,
             "the collector answers %ld to the API key; check api_key (PERF_SDK_API_KEY) against "
             "the collector's keys (%s)",
             status, reason);
  else if (status == 404 && ends_with(url, BATCHES_PATH BATCHES_PATH))
    snprintf(out, len,
             "the collector answers 404 for %s; give the base URL, without /v1/batches, as "
             "endpoint (%s)",
             url, reason);
  else if (status == 404)
    snprintf(out, len,
             "the collector answers 404 for %s; check the path of endpoint: batches go to "
             "{endpoint}/v1/batches (%s)",
             url, reason);
  else if (status == 413)
    snprintf(out, len,
             "the collector answers 413: batches are larger than it takes; lower batch_max_bytes "
             "or raise the collector's limit (%s)",
             reason);
  else if (status == 429)
    snprintf(out, len,
             "the collector answers 429: it limits this key's rate; batches are sent again as it "
             "asks (%s)",
             reason);
  else if (status >= 500)
    snprintf(out, len, "the collector answers %ld: it fails; see its log (%s)", status, reason);
  else
    snprintf(out, len, "the collector answers %ld (%s)", status, reason);
}

static bool ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && strcmp(s + n - m, tail) == 0;
}

static bool contains(const char *s, const char *part) {
  size_t m = strlen(part);
  for (; *s; s++)
    if (strncasecmp(s, part, m) == 0) return true;
  return false;
}
