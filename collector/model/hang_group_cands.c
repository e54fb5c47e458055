/*
 * hang_group_cands.c - the backend-independent half of a hang-group pick
 * (see hang_group_cands.h).
 */
#include "collector/model/hang_group_cands.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static bool has_cand(const hgc_cands_t *cs, const char *sig) {
  for (size_t i = 0; i < cs->n; i++)
    if (strcmp(cs->v[i].sig, sig) == 0) return true;
  return false;
}

int hgc_cands_add(hgc_cands_t *cs, const char *sig, const char *path, hgc_cand_t **out) {
  *out = NULL;
  if (has_cand(cs, sig)) return 0;
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
  c->path_bytes = strlen(path);
  if (!(c->path = strdup(path)) || split_path(c) != 0) return -1;
  *out = c;
  return 0;
}

/* through[d] of a hang_group_path blob (bytes long; 0 past its end). */
static uint64_t through_at(const unsigned char *blob, size_t bytes, size_t d) {
  uint64_t v = 0;
  for (int b = 7; blob && 8 * d + 8 <= bytes && b >= 0; b--)
    v = v << 8 | blob[8 * d + (size_t)b];
  return v;
}

/* How many root frames of h's key a stored path (NULL: none) starts with. */
static size_t shared_frames(const store_hang_t *h, const char *path) {
  size_t p = 0;
  for (const char *at = path, *end; at && p < h->len && (end = strchr(at, HGC_SEP));
       p++, at = end + 1) {
    const char *name = h->key[h->len - 1 - p];
    size_t n = (size_t)(end - at);
    if (strncmp(at, name, n) != 0 || name[n] != '\0') break;
  }
  return p;
}

/* Whether h's pick could take the stored group of path (blob: its path's
   samples): 1 (*parted: the root frames it shares with h's key when it
   parts from it there and crosses it, 0 when its key is a prefix of h's),
   0, or -1 (out of memory). */
static int may_join(const store_hang_t *h, const char *path, const unsigned char *blob,
                    size_t bytes, size_t *parted) {
  size_t p = shared_frames(h, path);
  const char *at = path;
  for (size_t k = 0; k < p; k++) /* past the shared frames */
    at = strchr(at, HGC_SEP) + 1;
  *parted = 0;
  if (p == 0) return 0;
  if (!*at) return 1; /* its key ends there: a prefix of h's key */
  const char *end = strchr(at, HGC_SEP);
  char *next = strndup(at, end ? (size_t)(end - at) : strlen(at));
  if (!next) return -1;
  uint64_t h_into;
  bool crosses =
      perf__group_crosses(&h->samples, h->key, h->len, p, next, through_at(blob, bytes, p - 1),
                          through_at(blob, bytes, p), &h_into);
  free(next);
  if (crosses) *parted = p;
  return crosses;
}

int hgc_cands_add_row(hgc_cands_t *cs, const store_hang_t *h, const char *sig, const char *path,
                      const void *blob, size_t bytes, hgc_cand_t **out) {
  *out = NULL;
  cs->read++;
  if (has_cand(cs, sig)) return 0;
  size_t parted;
  int may = may_join(h, path, blob, bytes, &parted);
  if (may <= 0) return may;
  if (hgc_cands_add(cs, sig, path, out) != 0) return -1;
  if (parted > cs->parted) cs->parted = parted;
  return *out ? hgc_cand_path(*out, blob, bytes) : 0;
}

bool hgc_cand_is_prefix(const store_hang_t *h, const hgc_cand_t *c) {
  size_t len = c->view.len;
  if (len > h->len) return false;
  for (size_t k = 0; k < len; k++) /* root first */
    if (strcmp(c->view.key[len - 1 - k], h->key[h->len - 1 - k]) != 0) return false;
  return true;
}

int hgc_cand_path(hgc_cand_t *c, const void *blob, size_t bytes) {
  size_t len = c->view.len;
  if (!(c->through = calloc(len ? len : 1, sizeof *c->through))) return -1;
  hgc_decode_path(blob, bytes, c->through, len);
  c->view.through = c->through;
  return 0;
}

typedef int (*range_fn)(void *ctx, const hgc_range_t *r, hgc_next_t *next);

/* Candidates shortest path first, then by path (root first). */
static int by_path(const void *a, const void *b) {
  const hgc_cand_t *x = a, *y = b;
  if (x->path_bytes != y->path_bytes) return x->path_bytes < y->path_bytes ? -1 : 1;
  for (size_t k = 0; k < x->view.len && k < y->view.len; k++) {
    int d = strcmp(x->view.key[x->view.len - 1 - k], y->view.key[y->view.len - 1 - k]);
    if (d) return d;
  }
  return x->view.len < y->view.len ? -1 : x->view.len > y->view.len;
}

/* r read, its limit what HGC_MAX_READ leaves (nothing once it is met);
   the candidates it added shortest path first (the ranges are read by
   path, which bounds a read; a pick's ties go to the shorter path). */
static int read_range(hgc_cands_t *cs, range_fn range, void *ctx, hgc_range_t *r,
                      hgc_next_t *next) {
  if (cs->read >= HGC_MAX_READ) return 0;
  size_t left = HGC_MAX_READ - cs->read, before = cs->n;
  r->limit = left < HGC_MAX_EXTENSIONS ? left : HGC_MAX_EXTENSIONS;
  int rc = range(ctx, r, next);
  if (rc == 0 && cs->n > before + 1) qsort(cs->v + before, cs->n - before, sizeof *cs->v, by_path);
  return rc;
}

/* prefix: the first n bytes of path (they end in HGC_SEP); upper: the
   same with that HGC_SEP raised by one. The paths starting with prefix
   are those from it up to, not including, upper. */
static void prefix_bounds(const char *path, size_t n, char *prefix, char *upper) {
  memcpy(prefix, path, n);
  prefix[n] = '\0';
  memcpy(upper, path, n);
  upper[n - 1] = HGC_SEP + 1;
  upper[n] = '\0';
}

long hgc_turns(const store_hang_t *h, hgc_turn_t *out, size_t cap) {
  perf__hang_turn_t turns[HGC_MAX_TURNS];
  size_t n = perf__hang_turns(&h->samples, h->key, h->len, turns,
                              cap < HGC_MAX_TURNS ? cap : HGC_MAX_TURNS);
  for (size_t t = 0; t < n; t++) {
    const char *const *at = h->key + h->len - turns[t].depth; /* the shared root frames */
    char *shared = hgc_path_of(at, turns[t].depth);
    size_t a = shared ? strlen(shared) : 0, b = strlen(turns[t].child), len = a + b + 1;
    char *path = shared ? malloc(len + 1) : NULL;
    out[t].from = malloc(len + 1);
    out[t].to = malloc(len + 1);
    if (!path || !out[t].from || !out[t].to) {
      free(path);
      free(shared);
      hgc_turns_free(out, (long)t + 1);
      return -1;
    }
    memcpy(path, shared, a); /* the shared frames, then the child; its bounds */
    memcpy(path + a, turns[t].child, b);
    path[len - 1] = HGC_SEP;
    prefix_bounds(path, len, out[t].from, out[t].to);
    free(path);
    free(shared);
  }
  return (long)n;
}

void hgc_turns_free(hgc_turn_t *turns, long n) {
  for (long t = 0; t < n; t++) {
    free(turns[t].from);
    free(turns[t].to);
  }
}

/* The groups under each turn of h's samples off its key. */
static int look_turns(const store_hang_t *h, hgc_cands_t *cs, range_fn range, void *ctx,
                      int nomem) {
  hgc_turn_t turns[HGC_MAX_TURNS];
  long n = hgc_turns(h, turns, HGC_MAX_TURNS);
  if (n < 0) return nomem;
  int rc = 0;
  for (long t = 0; rc == 0 && t < n; t++) {
    hgc_range_t r = {turns[t].from, turns[t].to, turns[t].from, turns[t].from, 0, NULL, NULL};
    hgc_next_t next = {0};
    rc = read_range(cs, range, ctx, &r, &next);
  }
  hgc_turns_free(turns, n);
  return rc;
}

int hgc_end_range(const store_hang_t *h, hgc_end_t *out) {
  memset(out, 0, sizeof *out);
  if (h->len == 0) return 0;
  char *path = hgc_path_of(h->key, h->len);
  size_t n = path ? strlen(path) : 0, root = strlen(h->key[h->len - 1]) + 1;
  char *buf = path ? malloc(4 * (n + 1)) : NULL;
  if (!buf) {
    free(path);
    return -1;
  }
  out->from = buf, out->to = buf + n + 1, out->floor = out->to + n + 1;
  out->ceiling = out->floor + n + 1;
  prefix_bounds(path, n, out->from, out->to);
  prefix_bounds(path, root, out->floor, out->ceiling);
  free(path);
  return 0;
}

/* The groups sharing exactly q root frames with h's key, for each q from
   its length down to 1 that holds any: under the key's first q frames,
   not under its first q + 1 (read already, or holding none). */
static int look_branch_points(const store_hang_t *h, hgc_cands_t *cs, range_fn range, void *ctx,
                              int nomem) {
  const size_t len = h->len;
  if (len == 0) return 0; /* no key: no branch point */
  char *path = hgc_path_of(h->key, len);
  size_t n = path ? strlen(path) : 0;
  size_t *ends = malloc((len + 1) * sizeof *ends); /* bytes of the key's first p frames */
  char *buf = malloc(6 * (n + 1));
  if (!path || !ends || !buf) {
    free(buf);
    free(ends);
    free(path);
    return nomem;
  }
  char *from = buf, *to = from + n + 1, *skip_from = to + n + 1, *skip_to = skip_from + n + 1;
  char *floor = skip_to + n + 1, *ceiling = floor + n + 1;
  ends[0] = 0;
  for (size_t p = 1; p <= len; p++)
    ends[p] = ends[p - 1] + strlen(h->key[len - p]) + 1;
  prefix_bounds(path, ends[1], floor, ceiling); /* every group sharing a root frame */
  int rc = 0;
  /* Rule 3 takes the deepest parting: none above a crossing group's. */
  for (size_t q = len; rc == 0 && q > 0 && q >= cs->parted && cs->read < HGC_MAX_READ;) {
    bool end = q == len; /* the key's end: nothing deeper to skip */
    prefix_bounds(path, ends[q], from, to);
    if (!end) prefix_bounds(path, ends[q + 1], skip_from, skip_to);
    hgc_range_t r = {from, to, end ? from : skip_from, end ? from : skip_to, 0, floor, ceiling};
    hgc_next_t next = {0};
    rc = read_range(cs, range, ctx, &r, &next);
    /* Outside [from, to) the next paths share fewer than q frames: the
       deeper of the two is the next branch point holding groups. */
    size_t below = shared_frames(h, next.below), above = shared_frames(h, next.above);
    size_t d = below > above ? below : above;
    q = d < q ? d : 0;
    free(next.below);
    free(next.above);
  }
  free(buf);
  free(ends);
  free(path);
  return rc;
}

int hgc_look_ranges(const store_hang_t *h, hgc_cands_t *cs, range_fn range, void *ctx, int nomem) {
  long pick = hgc_pick(h, cs); /* the key's prefixes' groups alone */
  if (pick != -1) return pick == -2 ? nomem : 0;
  int rc = look_turns(h, cs, range, ctx, nomem);
  return rc == 0 ? look_branch_points(h, cs, range, ctx, nomem) : rc;
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
