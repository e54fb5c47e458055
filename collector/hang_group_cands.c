/*
 * hang_group_cands.c - the backend-independent half of a hang-group pick
 * (see hang_group_cands.h).
 */
#include "hang_group_cands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TURNS 64    /* turns of a hang off its key looked under */
#define SIBLING_DEPTH 3 /* branch points at the key's end looked under for any group */

char *hgc_path_of(const char *const *key, size_t len) {
  size_t n = 1;
  for (size_t i = 0; i < len; i++)
    n += strlen(key[i]) + 1;
  char *p = malloc(n), *at = p;
  for (size_t k = len; p && k-- > 0;) {
    size_t l = strlen(key[k]);
    memcpy(at, key[k], l);
    at += l;
    *at++ = HGC_SEP;
  }
  if (p) *at = '\0';
  return p;
}

void hgc_prefix_sig(const store_hang_t *h, size_t d, char sig[STORE_SIG_CHARS + 1]) {
  snprintf(sig, STORE_SIG_CHARS + 1, "%016llx",
           (unsigned long long)perf__signature_hash(h->key + h->len - d, d));
}

static void cand_free(hgc_cand_t *c) {
  for (size_t i = 0; i < c->view.n_children; i++)
    free(c->child_names[i]);
  free(c->child_names);
  free(c->child_samples);
  free(c->through);
  free(c->key);
  free(c->path);
}

void hgc_cands_free(hgc_cands_t *cs) {
  for (size_t i = 0; i < cs->n; i++)
    cand_free(&cs->v[i]);
  free(cs->v);
}

/* The key of a stored path, split in place. */
static int split_path(hgc_cand_t *c) {
  size_t len = 0;
  for (const char *p = c->path; *p; p++)
    len += *p == HGC_SEP;
  if (!(c->key = calloc(len ? len : 1, sizeof *c->key))) return -1;
  char *p = c->path;
  for (size_t k = 0; k < len; k++) { /* root first in the path, innermost first in key */
    char *end = strchr(p, HGC_SEP);
    *end = '\0';
    c->key[len - 1 - k] = p;
    p = end + 1;
  }
  c->view.key = c->key;
  c->view.len = len;
  return 0;
}

int hgc_cands_add(hgc_cands_t *cs, const char *sig, const char *path, hgc_cand_t **out) {
  *out = NULL;
  for (size_t i = 0; i < cs->n; i++)
    if (strcmp(cs->v[i].sig, sig) == 0) return 0;
  if (cs->n == cs->cap) {
    size_t cap = cs->cap ? 2 * cs->cap : 16;
    hgc_cand_t *grown = realloc(cs->v, cap * sizeof *grown);
    if (!grown) return -1;
    cs->v = grown;
    cs->cap = cap;
  }
  hgc_cand_t *c = &cs->v[cs->n++]; /* counted now: hgc_cands_free frees what it got */
  memset(c, 0, sizeof *c);
  snprintf(c->sig, sizeof c->sig, "%s", sig);
  if (!(c->path = strdup(path)) || split_path(c) != 0) return -1;
  *out = c;
  return 0;
}

/* range over the paths starting with prefix (ending in HGC_SEP). */
static int look_range(int (*range)(void *ctx, const char *prefix, const char *upper), void *ctx,
                      const char *prefix, int nomem) {
  char *upper = strdup(prefix);
  if (!upper) return nomem;
  upper[strlen(upper) - 1] = HGC_SEP + 1;
  int rc = range(ctx, prefix, upper);
  free(upper);
  return rc;
}

int hgc_look_ranges(const store_hang_t *h,
                    int (*range)(void *ctx, const char *prefix, const char *upper), void *ctx,
                    int nomem) {
  perf__hang_turn_t turns[MAX_TURNS];
  size_t n = perf__hang_turns(&h->samples, h->key, h->len, turns, MAX_TURNS);
  int rc = 0;
  for (size_t t = 0; rc == 0 && t < n; t++) {
    const char *child = turns[t].child;
    const char *const *at = h->key + h->len - turns[t].depth; /* the shared root frames */
    char *shared = hgc_path_of(at, turns[t].depth);
    size_t a = shared ? strlen(shared) : 0, b = strlen(child);
    char *prefix = shared ? malloc(a + b + 2) : NULL;
    if (prefix) {
      memcpy(prefix, shared, a);
      memcpy(prefix + a, child, b);
      prefix[a + b] = HGC_SEP;
      prefix[a + b + 1] = '\0';
    }
    rc = prefix ? look_range(range, ctx, prefix, nomem) : nomem;
    free(prefix);
    free(shared);
  }
  size_t from = h->len > SIBLING_DEPTH ? h->len - SIBLING_DEPTH : 1;
  for (size_t p = from; rc == 0 && p < h->len; p++) {
    char *shared = hgc_path_of(h->key + h->len - p, p);
    rc = shared ? look_range(range, ctx, shared, nomem) : nomem;
    free(shared);
  }
  return rc;
}

long hgc_pick(const store_hang_t *h, const hgc_cands_t *cs) {
  perf__group_view_t *views = calloc(cs->n ? cs->n : 1, sizeof *views);
  if (!views) return -2;
  for (size_t i = 0; i < cs->n; i++)
    views[i] = cs->v[i].view;
  long pick = perf__group_pick(&h->samples, h->key, h->len, views, cs->n);
  free(views);
  return pick;
}

int hgc_children(const store_hang_t *h, const char *const *key, size_t len, hgc_children_t *out) {
  size_t cap = h->samples.n;
  memset(out, 0, sizeof *out);
  out->names = calloc(cap ? cap : 1, sizeof *out->names);
  out->samples = calloc(cap ? cap : 1, sizeof *out->samples);
  if (!out->names || !out->samples) return -1;
  out->n =
      perf__hang_children(&h->samples, key, len, out->names, out->samples, cap, &out->self, NULL);
  return 0;
}

void hgc_children_free(hgc_children_t *c) {
  free(c->names);
  free(c->samples);
}

uint64_t *hgc_through(const store_hang_t *h, const char *const *key, size_t len,
                      const uint64_t *old) {
  uint64_t *through = calloc(len ? len : 1, sizeof *through);
  if (!through) return NULL;
  perf__hang_through(&h->samples, key, len, through);
  for (size_t d = 0; old && d < len; d++)
    through[d] += old[d];
  return through;
}

unsigned char *hgc_encode_path(const uint64_t *through, size_t len) {
  unsigned char *blob = malloc(len ? 8 * len : 1);
  for (size_t d = 0; blob && d < len; d++)
    for (int b = 0; b < 8; b++)
      blob[8 * d + (size_t)b] = (unsigned char)(through[d] >> (8 * b));
  return blob;
}

void hgc_decode_path(const unsigned char *blob, size_t bytes, uint64_t *through, size_t len) {
  for (size_t d = 0; blob && d < bytes / 8 && d < len; d++)
    for (int b = 7; b >= 0; b--)
      through[d] = through[d] << 8 | blob[8 * d + (size_t)b];
}

size_t hang_groups_majority_len(const void *blob, size_t bytes) {
  size_t len = bytes / 8;
  uint64_t *through = blob && len ? calloc(len, sizeof *through) : NULL;
  if (!through) return 0;
  hgc_decode_path(blob, bytes, through, len);
  size_t shown = perf__group_majority_len(through, len);
  free(through);
  return shown;
}
