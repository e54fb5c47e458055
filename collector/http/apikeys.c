/*
 * apikeys.c - loading and matching the API keys file and its scopes (see
 * apikeys.h).
 */
#include "collector/http/apikeys.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/base/log.h"

static char *trim(char *s) {
  while (isspace((unsigned char)*s))
    s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1]))
    s[--n] = '\0';
  return s;
}

static const char *const SCOPE_NAMES[] = {"ingest", "read", "symbols", "admin"};

const char *apikeys_scope_name(unsigned scope) {
  for (unsigned i = 0; i < 4; i++)
    if (scope == 1u << i) return SCOPE_NAMES[i];
  return "?";
}

/* "ingest,read" into scope bits; 0 with the bad name in *bad. */
static unsigned parse_scopes(char *list, const char **bad) {
  unsigned scopes = 0;
  for (char *save = NULL, *name = strtok_r(list, ",", &save); name;
       name = strtok_r(NULL, ",", &save)) {
    name = trim(name);
    unsigned bit = 0;
    for (unsigned i = 0; i < 4; i++)
      if (strcmp(name, SCOPE_NAMES[i]) == 0) bit = 1u << i;
    if (!bit) return *bad = name, 0;
    scopes |= bit == SCOPE_ADMIN ? SCOPE_ALL : bit;
  }
  if (!scopes) *bad = "";
  return scopes;
}

static int add_key(apikeys_t *k, const char *key, unsigned scopes) {
  char **grown = realloc(k->keys, (k->n + 1) * sizeof *grown);
  if (!grown) return -1;
  k->keys = grown;
  unsigned *more = realloc(k->scopes, (k->n + 1) * sizeof *more);
  if (!more) return -1;
  k->scopes = more;
  if (!(k->keys[k->n] = strdup(key))) return -1;
  k->scopes[k->n++] = scopes;
  return 0;
}

/* One non-comment line: KEY, or KEY SCOPE[,SCOPE...]. */
static int add_line(apikeys_t *k, char *line, const char *path, unsigned number) {
  char *space = line + strcspn(line, " \t");
  unsigned scopes = SCOPE_ALL;
  if (*space) {
    *space = '\0';
    const char *bad = NULL;
    if (!(scopes = parse_scopes(trim(space + 1), &bad))) {
      collector_log("--api-keys-file %s: line %u: unknown scope '%s' (ingest, read, "
                    "symbols, admin)\n",
                    path, number, bad);
      return -1;
    }
  }
  return add_key(k, line, scopes);
}

int apikeys_load(const char *path, apikeys_t *out) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "r");
  if (!f) {
    collector_log("--api-keys-file %s: %s\n", path, strerror(errno));
    return -1;
  }
  char *line = NULL;
  size_t cap = 0;
  int rc = 0;
  unsigned number = 0;
  while (rc == 0 && getline(&line, &cap, f) >= 0) {
    char *key = trim(line);
    number++;
    if (*key && *key != '#') rc = add_line(out, key, path, number);
  }
  free(line);
  fclose(f);
  if (rc == 0 && out->n == 0) {
    collector_log("--api-keys-file %s: no key in it\n", path);
    rc = -1;
  }
  if (rc != 0) apikeys_free(out);
  return rc;
}

void apikeys_free(apikeys_t *k) {
  for (size_t i = 0; i < k->n; i++)
    free(k->keys[i]);
  free(k->keys);
  free(k->scopes);
  memset(k, 0, sizeof *k);
}

static bool same_key(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  unsigned char diff = (unsigned char)(la != lb);
  for (size_t i = 0; i < la; i++)
    diff |= (unsigned char)(a[i] ^ b[i < lb ? i : 0]);
  return diff == 0;
}

unsigned apikeys_scopes(const apikeys_t *k, const char *key) {
  unsigned scopes = 0;
  for (size_t i = 0; i < k->n; i++) /* every key compared: no early exit */
    scopes |= same_key(k->keys[i], key) ? k->scopes[i] : 0;
  return scopes;
}

bool apikeys_match(const apikeys_t *k, const char *key) {
  return apikeys_scopes(k, key) != 0;
}
