/*
 * request_checks.c - the raw request target and open mode's origin checks
 * (see request_checks.h).
 */
#include "collector/http/request_checks.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int hex_digit(char c) {
  return isxdigit((unsigned char)c) ? 1 : 0;
}

const char *request_target_problem(const char *target, size_t *args_count) {
  static _Thread_local char why[96];
  *args_count = 0;
  for (const char *p = target; *p; p++) {
    if (*p != '%') continue;
    if (!hex_digit(p[1]) || !hex_digit(p[2])) return "invalid percent-encoding in the URL";
    if (p[1] == '0' && p[2] == '0') return "%00 (a NUL byte) in the URL";
  }
  const char *query = strchr(target, '?');
  if (!query || !query[1]) return NULL;
  size_t n = 1;
  for (const char *p = query + 1; *p; p++)
    n += *p == '&';
  *args_count = n;
  if (n <= REQUEST_MAX_ARGS) return NULL;
  snprintf(why, sizeof why, "too many query arguments: %zu (at most %d)", n, REQUEST_MAX_ARGS);
  return why;
}

/* The port after a host ("" or ":<digits>") is the listen port. */
static bool port_ok(const char *rest, const struct sockaddr_in *listen) {
  if (!*rest) return true;
  if (*rest != ':' || !rest[1]) return false;
  for (const char *p = rest + 1; *p; p++)
    if (!isdigit((unsigned char)*p)) return false;
  errno = 0;
  unsigned long port = strtoul(rest + 1, NULL, 10);
  return errno == 0 && port == ntohs(listen->sin_port);
}

/* host (no port) is the listen address, or a loopback name when the
   listen address is loopback. */
static bool name_ok(const char *host, size_t len, const struct sockaddr_in *listen) {
  char ip[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &listen->sin_addr, ip, sizeof ip);
  if (len == strlen(ip) && strncmp(host, ip, len) == 0) return true;
  bool loopback = (ntohl(listen->sin_addr.s_addr) >> 24) == 127;
  static const char *const LOCAL[] = {"localhost", "127.0.0.1", "[::1]"};
  for (size_t i = 0; loopback && i < sizeof LOCAL / sizeof LOCAL[0]; i++)
    if (len == strlen(LOCAL[i]) && strncasecmp(host, LOCAL[i], len) == 0) return true;
  return false;
}

bool request_host_ok(const char *host, const struct sockaddr_in *listen) {
  if (!host) return true;
  const char *end = host[0] == '[' ? strchr(host, ']') : strchr(host, ':');
  if (host[0] == '[') end = end ? end + 1 : NULL;
  if (!end) end = host + strlen(host);
  return name_ok(host, (size_t)(end - host), listen) && port_ok(end, listen);
}

const char *request_origin_problem(const char *origin, const char *sec_fetch_site,
                                   const struct sockaddr_in *listen) {
  if (sec_fetch_site && strcasecmp(sec_fetch_site, "cross-site") == 0)
    return "cross-site request refused (Sec-Fetch-Site: cross-site)";
  if (!origin) return NULL;
  static const char HTTP[] = "http://";
  if (strncasecmp(origin, HTTP, sizeof HTTP - 1) != 0 ||
      !request_host_ok(origin + sizeof HTTP - 1, listen))
    return "cross-site request refused: the Origin is not this collector";
  return NULL;
}

bool request_write_type_ok(const char *content_type) {
  static const char *const TYPES[] = {"application/octet-stream", "application/x-protobuf"};
  if (!content_type) return false;
  for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++) {
    size_t n = strlen(TYPES[i]);
    if (strncasecmp(content_type, TYPES[i], n) == 0 &&
        (content_type[n] == '\0' || content_type[n] == ';' || content_type[n] == ' '))
      return true;
  }
  return false;
}
