/*
 * symbols_http.c - the collector's symbols API over libcurl (see
 * symbols_http.h).
 */
#include "symbols_http.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CONNECT_TIMEOUT_S 10L
#define STALL_TIMEOUT_S 60L /* no byte moving for this long: give up */

struct symbols_client_s {
  CURL *curl;
  struct curl_slist *headers;
  char *base; /* without a trailing slash */
};

typedef struct reply_buf_s {
  char *text;
  size_t len;
} reply_buf_t;

static size_t keep_reply(char *data, size_t size, size_t n, void *ctx) {
  reply_buf_t *r = ctx;
  size_t bytes = size * n, room = SYMBOLS_REPLY_MAX - 1 - r->len;
  size_t take = bytes < room ? bytes : room;
  memcpy(r->text + r->len, data, take);
  r->len += take;
  r->text[r->len] = '\0';
  return bytes;
}

/* line appended to *list; false (the list kept as it was) when out of memory. */
static bool append_header(struct curl_slist **list, const char *line) {
  struct curl_slist *grown = curl_slist_append(*list, line);
  if (!grown) return false;
  *list = grown;
  return true;
}

symbols_client_t *symbols_client_new(const char *base_url, const char *key) {
  symbols_client_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->base = strdup(base_url);
  c->curl = curl_easy_init();
  if (!c->base || !c->curl) return symbols_client_free(c), NULL;
  size_t n = strlen(c->base);
  while (n && c->base[n - 1] == '/')
    c->base[--n] = '\0';
  if (key) {
    char *auth = malloc(strlen(key) + 32);
    if (!auth) return symbols_client_free(c), NULL;
    sprintf(auth, "Authorization: Bearer %s", key);
    c->headers = curl_slist_append(NULL, auth);
    free(auth);
    if (!c->headers) return symbols_client_free(c), NULL;
  }
  return c;
}

void symbols_client_free(symbols_client_t *c) {
  if (!c) return;
  curl_slist_free_all(c->headers);
  if (c->curl) curl_easy_cleanup(c->curl);
  free(c->base);
  free(c);
}

/* The request set up on c->curl so far, sent: the status or 0. */
static long perform(symbols_client_t *c, const char *id, const char *query,
                    struct curl_slist *headers, char reply[SYMBOLS_REPLY_MAX]) {
  char url[1024];
  snprintf(url, sizeof url, "%s/v1/symbols/%s%s", c->base, id, query);
  reply_buf_t r = {reply, 0};
  reply[0] = '\0';
  curl_easy_setopt(c->curl, CURLOPT_URL, url);
  curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, keep_reply);
  curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &r);
  curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
  curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_TIME, STALL_TIMEOUT_S);
  curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
  CURLcode rc = curl_easy_perform(c->curl);
  long status = 0;
  if (rc != CURLE_OK) {
    snprintf(reply, SYMBOLS_REPLY_MAX, "%.300s: %s", url, curl_easy_strerror(rc));
    return 0;
  }
  curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
  size_t n = strlen(reply);
  while (n && (reply[n - 1] == '\n' || reply[n - 1] == '\r'))
    reply[--n] = '\0';
  return status;
}

long symbols_client_lookup(symbols_client_t *c, const char *id, char reply[SYMBOLS_REPLY_MAX]) {
  curl_easy_reset(c->curl);
  curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
  return perform(c, id, "", c->headers, reply);
}

long symbols_client_upload(symbols_client_t *c, const char *id, const char *path, bool replace,
                           char reply[SYMBOLS_REPLY_MAX]) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  if (!f || fstat(fileno(f), &st) != 0) {
    snprintf(reply, SYMBOLS_REPLY_MAX, "%.300s: %s", path, strerror(errno));
    if (f) fclose(f);
    return 0;
  }
  /* The collector answers from the headers first (401, 403, 413, 507):
     Expect: 100-continue lets it do so before the body is sent. */
  struct curl_slist *headers = NULL;
  bool ok = true;
  for (const struct curl_slist *h = c->headers; h && ok; h = h->next)
    ok = append_header(&headers, h->data);
  ok = ok && append_header(&headers, "Content-Type: application/octet-stream") &&
       append_header(&headers, "Expect: 100-continue");
  long status = 0;
  if (!ok) {
    snprintf(reply, SYMBOLS_REPLY_MAX, "out of memory");
  } else {
    curl_easy_reset(c->curl);
    curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
    curl_easy_setopt(c->curl, CURLOPT_READDATA, f);
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)st.st_size);
    status = perform(c, id, replace ? "?replace=1" : "", headers, reply);
  }
  curl_slist_free_all(headers);
  fclose(f);
  return status;
}
