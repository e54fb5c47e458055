/*
 * alert_send.c - one webhook POST with libcurl (see alert_send.h).
 */
#include "collector/alerts/alert_send.h"

#include <curl/curl.h>

/* The answer's body is not kept. */
static size_t discard(char *data, size_t size, size_t n, void *user) {
  (void)data, (void)user;
  return size * n;
}

long alert_post(const char *url, const char *body, size_t len, unsigned timeout_s) {
  CURL *c = curl_easy_init();
  if (!c) return 0;
  struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
  long status = 0;
  if (headers && curl_easy_setopt(c, CURLOPT_URL, url) == CURLE_OK &&
      curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK) {
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout_s * 1000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "perf-collector-alerts");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  return status;
}

int alert_retryable(long status) {
  return status == 0 || status == 429 || status >= 500;
}
