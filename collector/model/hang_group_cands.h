/*
 * hang_group_cands.h - the backend-independent half of a hang-group pick,
 * shared by sqlite_hang_groups.c (SQLite) and pg_hang_groups.c
 * (PostgreSQL), which run the queries: the stored groups read as
 * candidates for perf__group_pick (signature.c), their keys split out of
 * their stored paths, the path ranges a pick looks under (every branch
 * point of the hang's key that holds stored groups) and which groups read
 * there the pick could take, the pick over them, the hang's samples at
 * the chosen key, and the hang_group_path blob's encoding
 * (sqlite_hang_groups.h says what the tables hold).
 */
#ifndef PERF_COLLECTOR_HANG_GROUP_CANDS_H
#define PERF_COLLECTOR_HANG_GROUP_CANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/model/records.h"
#include "collector/model/signature.h"

#define HGC_SEP '\x1f'        /* ends each name of a stored path */
#define HGC_MAX_EXTENSIONS 64 /* groups read from one index range */
#define HGC_MAX_READ 256      /* groups read from ranges for one pick, all together */

/* A stored group read for a pick: its key split out of its path. */
typedef struct hgc_cand_s {
  char sig[STORE_SIG_CHARS + 1];
  char *path;         /* its names, HGC_SEP-separated, split in place */
  size_t path_bytes;  /* before the split */
  const char **key;   /* innermost first, into path */
  char **child_names; /* strdup'ed; filled by the backend */
  uint64_t *child_samples;
  uint64_t *through; /* per depth of the key; filled by the backend */
  perf__group_view_t view;
} hgc_cand_t;

typedef struct hgc_cands_s {
  hgc_cand_t *v;
  size_t n, cap;
  size_t read;   /* groups ranges offered (hgc_cands_add_row) */
  size_t parted; /* the most root frames a candidate that crosses shares with the key */
} hgc_cands_t;

void hgc_cands_free(hgc_cands_t *cs);

/* Stored group sig (path: its stored path) as a new candidate, its key
   split out of its path: *out is it, for the backend to read its children
   and path into; NULL when sig is a candidate already (found under two
   prefixes: once). 0 or -1 (out of memory). */
int hgc_cands_add(hgc_cands_t *cs, const char *sig, const char *path, hgc_cand_t **out);

/* A stored group a range read (sig, its path, its hang_group_path blob of
   bytes, NULL for none), counted in cs->read, as a candidate of h's pick
   when the pick could take it: its key a root prefix of h's (h's key
   itself included: rules 1 and 2 weigh its children, for the backend to
   read: hgc_cand_is_prefix), or parting from h's key after p >= 1 shared
   root frames and crossing it there (rule 3, perf__group_crosses on its
   path's samples; cs->parted keeps the largest such p); nothing when cs
   holds it already. *out: the new candidate, its path's samples read, or
   NULL. 0 or -1 (out of memory). */
int hgc_cands_add_row(hgc_cands_t *cs, const store_hang_t *h, const char *sig, const char *path,
                      const void *blob, size_t bytes, hgc_cand_t **out);

/* Whether c's key is a root prefix of h's key (h's key itself included):
   the pick weighs such a group's children (perf__group_pick's rules 1 and
   2), any other candidate's path alone (rule 3), so the backend reads its
   children only then. */
bool hgc_cand_is_prefix(const store_hang_t *h, const hgc_cand_t *c);

/* c's samples through each root part of its key (c->through, view.through)
   from its hang_group_path blob (bytes long; NULL: none stored, zeros).
   0 or -1 (out of memory). */
int hgc_cand_path(hgc_cand_t *c, const void *blob, size_t bytes);

/* The signature of the stored group keyed by the first d root frames of
   h's key (1 <= d <= h->len), as text: a prefix's lookup key. */
void hgc_prefix_sig(const store_hang_t *h, size_t d, char sig[STORE_SIG_CHARS + 1]);

/* key (innermost first, len names) as a stored path: root first, each name
   ended by HGC_SEP. malloc'ed; NULL when out of memory. */
char *hgc_path_of(const char *const *key, size_t len);

/* A range of stored paths a pick reads: the first `limit` (1 ..
   HGC_MAX_EXTENSIONS) in path order of those in [from, skip_from), and
   as many of those in [skip_to, to) (from <= skip_from <= skip_to <= to;
   skip_from == skip_to == from: one range, nothing skipped), two index
   ranges, each row with its hang_group_path blob, offered to
   hgc_cands_add_row. Unless floor is NULL, also the stored paths next to
   it: the greatest in [floor, from) and the least in [to, ceiling). */
typedef struct hgc_range_s {
  const char *from, *to;
  const char *skip_from, *skip_to;
  size_t limit;
  const char *floor, *ceiling;
} hgc_range_t;

/* The ranges a pick reads first when the key's prefixes do not decide it
   (hgc_look_ranges): under each turn of h's samples off its key, in the
   order read, at most cap; each one range [from, to) (skip_from ==
   skip_to == from, floor NULL), both malloc'ed. A backend may read them
   ahead with the prefixes (pg_hang_groups.c). The count, or -1 when
   out of memory (nothing left to free). */
#define HGC_MAX_TURNS 64
typedef struct hgc_turn_s {
  char *from, *to;
} hgc_turn_t;
long hgc_turns(const store_hang_t *h, hgc_turn_t *turns, size_t cap);
void hgc_turns_free(hgc_turn_t *turns, long n);

/* The first range of the walk over branch points (hgc_look_ranges): at
   the key's end, the groups under h's whole key (nothing skipped) and the
   stored paths next to it that share its root frame. It depends on h
   alone, as the turns do. The four texts are malloc'ed in one block at
   from (free(from) frees them); all NULL for a hang without a key. 0, or
   -1 when out of memory. */
typedef struct hgc_end_s {
  char *from, *to, *floor, *ceiling;
} hgc_end_t;
int hgc_end_range(const store_hang_t *h, hgc_end_t *out);

/* The paths next to a range (hgc_range_t's floor and ceiling): malloc'ed
   by the backend, NULL for none. */
typedef struct hgc_next_s {
  char *below, *above;
} hgc_next_t;

/* The stored groups a pick reads besides the key's prefixes (which the
   backend read into cs first). None when those give the pick a group
   (perf__group_pick's rules 1 and 2 come before rule 3, the only one
   another group could meet). Else, most likely first: under each turn of
   h's samples off its key (perf__hang_turns: where rule 3 looks first),
   then at each branch point of the key that holds a stored group, its end
   first, up to its first frame: the groups sharing exactly its first p
   root frames (parting from the key there into any frame but the key's
   own next one, or going on past its end), whatever the hang's share
   there. A group's history alone can make the two cross: a hang keyed 4
   frames below busy_loop, 2 of its 21 samples in spin, meets the group
   keyed busy_loop -> spin whose samples went 60 % the other way (under
   ASan the clock read below busy_loop is 4 frames deep). Stored paths are
   sorted: the groups parting from the key after p frames lie in the two
   runs beside the subtree of its first p + 1 frames inside that of its
   first p, and the nearest path outside a branch point's runs
   (hgc_next_t) names the next branch point holding any; one range per
   branch point that holds groups, none for the others. The walk stops
   above the deepest branch point where a group crossing the hang parts
   (rule 3 takes the deepest parting), and once ranges gave HGC_MAX_READ
   groups. range(ctx, r, next) reads one range (each row offered to
   hgc_cands_add_row) and, when asked, the paths next to it; the groups
   it added are then ordered shortest path first (then by path), the
   order in which the pick breaks a tie; its first nonzero answer is
   returned; 0 when all were read or the walk stopped, nomem when out of
   memory. */
int hgc_look_ranges(const store_hang_t *h, hgc_cands_t *cs,
                    int (*range)(void *ctx, const hgc_range_t *r, hgc_next_t *next), void *ctx,
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
