/*
 * apikeys.c - loading and matching the API keys file (see apikeys.h).
 */
#include "apikeys.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *trim(char *s) {
  while (isspace((unsigned char)*s))
    s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1]))
    s[--n] = '\0';
  return s;
}

static int add_key(apikeys_t *k, const char *key) {
  char **grown = realloc(k->keys, (k->n + 1) * sizeof *grown);
  if (!grown) return -1;
  k->keys = grown;
  if (!(k->keys[k->n] = strdup(key))) return -1;
  k->n++;
  return 0;
}

int apikeys_load(const char *path, apikeys_t *out) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "perf-collector: --api-keys-file %s: %s\n", path, strerror(errno));
    return -1;
  }
  char *line = NULL;
  size_t cap = 0;
  int rc = 0;
  while (rc == 0 && getline(&line, &cap, f) >= 0) {
    char *key = trim(line);
    if (*key && *key != '#') rc = add_key(out, key);
  }
  free(line);
  fclose(f);
  if (rc == 0 && out->n == 0) {
    fprintf(stderr, "perf-collector: --api-keys-file %s: no key in it\n", path);
    rc = -1;
  }
  if (rc != 0) apikeys_free(out);
  return rc;
}

void apikeys_free(apikeys_t *k) {
  for (size_t i = 0; i < k->n; i++)
    free(k->keys[i]);
  free(k->keys);
  memset(k, 0, sizeof *k);
}

static bool same_key(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  unsigned char diff = (unsigned char)(la != lb);
  for (size_t i = 0; i < la; i++)
    diff |= (unsigned char)(a[i] ^ b[i < lb ? i : 0]);
  return diff == 0;
}

bool apikeys_match(const apikeys_t *k, const char *key) {
  bool found = false;
  for (size_t i = 0; i < k->n; i++)
    found |= same_key(k->keys[i], key);
  return found;
}
