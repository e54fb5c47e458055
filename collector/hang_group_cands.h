/*
 * hang_group_cands.h - the backend-independent half of a hang-group pick,
 * shared by store_hang_groups.c (SQLite) and store_pg_hang_groups.c
 * (PostgreSQL), which run the queries: the stored groups read as
 * candidates for perf__group_pick (signature.c), their keys split out of
 * their stored paths, the path ranges a pick looks under, the pick over
 * them, the hang's samples at the chosen key, and the hang_group_path
 * blob's encoding (store_hang_groups.h says what the tables hold).
 */
#ifndef PERF_COLLECTOR_HANG_GROUP_CANDS_H
#define PERF_COLLECTOR_HANG_GROUP_CANDS_H

#include <stddef.h>
#include <stdint.h>

#include "signature.h"
#include "store.h"

#define HGC_SEP '\x1f'        /* ends each name of a stored path */
#define HGC_MAX_EXTENSIONS 64 /* groups looked at under one turn, shortest keys first */

/* A stored group read for a pick: its key split out of its path. */
typedef struct hgc_cand_s {
  char sig[STORE_SIG_CHARS + 1];
  char *path;         /* its names, HGC_SEP-separated, split in place */
  const char **key;   /* innermost first, into path */
  char **child_names; /* strdup'ed; filled by the backend */
  uint64_t *child_samples;
  uint64_t *through; /* per depth of the key; filled by the backend */
  perf__group_view_t view;
} hgc_cand_t;

typedef struct hgc_cands_s {
  hgc_cand_t *v;
  size_t n, cap;
} hgc_cands_t;

void hgc_cands_free(hgc_cands_t *cs);

/* Stored group sig (path: its stored path) as a new candidate, its key
   split out of its path: *out is it, for the backend to read its children
   and path into; NULL when sig is a candidate already (found under two
   prefixes: once). 0 or -1 (out of memory). */
int hgc_cands_add(hgc_cands_t *cs, const char *sig, const char *path, hgc_cand_t **out);

/* The signature of the stored group keyed by the first d root frames of
   h's key (1 <= d <= h->len), as text: a prefix's lookup key. */
void hgc_prefix_sig(const store_hang_t *h, size_t d, char sig[STORE_SIG_CHARS + 1]);

/* key (innermost first, len names) as a stored path: root first, each name
   ended by HGC_SEP. malloc'ed; NULL when out of memory. */
char *hgc_path_of(const char *const *key, size_t len);

/* The path ranges a pick looks under besides the key's prefixes: each turn
   of h's samples off its key (perf__hang_turns: where perf__group_pick's
   rule 3 looks) and each of the key's last branch points whatever the
   hang's share there (a group's history alone can make the two cross: a
   hang that went 90 % into now_ms meets the group keyed at the loop's
   other callee, whose samples went 45 % into now_ms). range(ctx, prefix,
   upper) is called per range until one returns nonzero: the stored paths
   that start with prefix (it ends in HGC_SEP) are those from prefix up to,
   not including, upper (prefix with its last HGC_SEP raised by one).
   Returns that, 0, or nomem when out of memory. */
int hgc_look_ranges(const store_hang_t *h,
                    int (*range)(void *ctx, const char *prefix, const char *upper), void *ctx,
                    int nomem);

/* perf__group_pick of h over cs: the candidate's index, -1 for none (h
   keeps its own key), -2 when out of memory. */
long hgc_pick(const store_hang_t *h, const hgc_cands_t *cs);

/* h's samples at the end of key (len names): per next frame (names[i],
   samples[i], i < n) and self. */
typedef struct hgc_children_s {
  const char **names;
  uint64_t *samples;
  size_t n;
  uint64_t self;
} hgc_children_t;

/* 0 or -1 (out of memory); free with hgc_children_free either way. */
int hgc_children(const store_hang_t *h, const char *const *key, size_t len, hgc_children_t *out);
void hgc_children_free(hgc_children_t *c);

/* h's samples through each root part of key (len names) plus old (what the
   group had, NULL for a new one): calloc'ed len counts, NULL when out of
   memory. */
uint64_t *hgc_through(const store_hang_t *h, const char *const *key, size_t len,
                      const uint64_t *old);

/* A group's samples through each root part of its key as stored: one blob
   of little-endian 64-bit counts, depth 0 first (one write per hang, not
   one per frame). hgc_encode_path: 8 * len bytes, malloc'ed (NULL when out
   of memory); hgc_decode_path: into through[0..len). */
unsigned char *hgc_encode_path(const uint64_t *through, size_t len);
void hgc_decode_path(const unsigned char *blob, size_t bytes, uint64_t *through, size_t len);

/* perf__group_majority_len of a group's hang_group_path blob (bytes
   long): how many root frames of its key the majority of its samples
   share; 0 when there is no blob (not a hang group). */
size_t hang_groups_majority_len(const void *blob, size_t bytes);

#endif
