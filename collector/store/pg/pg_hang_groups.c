/*
 * pg_hang_groups.c - hang groups in PostgreSQL: the same tables and
 * the same candidate search as the SQLite backend's sqlite_hang_groups.c
 * (its header says what they hold; what does not depend on the database
 * is in hang_group_cands.c, the pick itself is perf__group_pick,
 * signature.c), with libpq statements. Called inside put_batch's and
 * resymbolize's transactions, which hold PG_LOCK_HANG_GROUPS: a pick reads
 * the groups, then writes, and two collectors must not interleave.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/hang_group_cands.h"
#include "collector/store/pg/pg_store.h"

/* c's children from rows [from, to) of r, a child's name in column col
   and its samples in col + 1 (a NULL name: none; "": the group's own
   samples). 0, or -1 when out of memory. */
static int take_children(hgc_cand_t *c, const PGresult *r, int from, int to, int col) {
  size_t n = to > from ? (size_t)(to - from) : 0;
  c->child_names = calloc(n ? n : 1, sizeof *c->child_names);
  c->child_samples = calloc(n ? n : 1, sizeof *c->child_samples);
  int rc = c->child_names && c->child_samples ? 0 : -1;
  for (int i = from; rc == 0 && i < to; i++) {
    if (PQgetisnull(r, i, col)) continue;
    const char *name = PQgetvalue(r, i, col);
    uint64_t samples = (uint64_t)pg_i64(r, i, col + 1);
    if (!*name) {
      c->view.self += samples;
      continue;
    }
    size_t k = c->view.n_children;
    if (!(c->child_names[k] = strdup(name))) rc = -1;
    c->child_samples[k] = samples;
    if (rc == 0) c->view.n_children = k + 1;
  }
  c->view.child_names = (const char *const *)c->child_names;
  c->view.child_samples = c->child_samples;
  return rc;
}

static int read_children(store_t *st, hgc_cand_t *c) {
  pg_params_t p = {0};
  pg_text(&p, 1, c->sig);
  PGresult *r = pg_run(st,
                       "SELECT child, samples FROM hang_group_children WHERE group_sig = $1"
                       " ORDER BY child COLLATE \"C\"",
                       &p, "hang group children");
  if (!r) return -1;
  int rc = take_children(c, r, 0, PQntuples(r), 0);
  PQclear(r);
  return rc;
}

/* c's path samples from r's value at (row, col): a bytea, NULL for none. */
static int take_path(hgc_cand_t *c, const PGresult *r, int row, int col) {
  size_t bytes = 0;
  unsigned char *blob =
      PQgetisnull(r, row, col)
          ? NULL
          : PQunescapeBytea((const unsigned char *)PQgetvalue(r, row, col), &bytes);
  int rc = hgc_cand_path(c, blob, blob ? bytes : 0);
  PQfreemem(blob);
  return rc;
}

/* The rows of a range (hgc_range_t: from, to, skip_from, skip_to, limit,
   floor, ceiling as SQL): kind 0 a group of [from, skip_from) or
   [skip_to, to), each part by path up to the limit, with its path's
   samples; kind 1 and 2 the greatest path in [floor, from) and the least
   in [to, ceiling) (NULL for none), one row each. */
#define RANGE_ROWS(from, to, skip_from, skip_to, limit, floor, ceiling)                            \
  "SELECT 0 AS kind, g.signature, g.path, (SELECT samples FROM hang_group_path"                    \
  " WHERE group_sig = g.signature) FROM (SELECT signature, path FROM hang_groups"                  \
  " WHERE path >= " from " COLLATE \"C\" AND path < " skip_from " COLLATE \"C\""                   \
  " ORDER BY path COLLATE \"C\" LIMIT " limit ") g"                                                \
  " UNION ALL SELECT 0, g.signature, g.path, (SELECT samples FROM hang_group_path"                 \
  " WHERE group_sig = g.signature) FROM (SELECT signature, path FROM hang_groups"                  \
  " WHERE path >= " skip_to " COLLATE \"C\" AND path < " to " COLLATE \"C\""                       \
  " ORDER BY path COLLATE \"C\" LIMIT " limit ") g"                                                \
  " UNION ALL SELECT 1, NULL, (SELECT path FROM hang_groups WHERE path >= " floor                  \
  " COLLATE \"C\" AND path < " from                                                                \
  " COLLATE \"C\" ORDER BY path COLLATE \"C\" DESC LIMIT 1), NULL"                                 \
  " UNION ALL SELECT 2, NULL, (SELECT path FROM hang_groups WHERE path >= " to                     \
  " COLLATE \"C\" AND path < " ceiling " COLLATE \"C\" ORDER BY path COLLATE \"C\" LIMIT 1), NULL"

/* The first statement of a batch's picks (PICK_FIRST_READ), for each
   hang with a key (column 6, the hang's place in the statement's list,
   from 1): the stored groups keyed by a root prefix of its key ($1, the
   hangs $2) with their paths' samples and children (part 0, one row per
   child), and ahead of need the rows of the ranges its pick reads first
   when the prefixes do not decide it (hgc_look_ranges), which depend on
   the hang alone: under each of its turns off its key (hgc_turns; part k
   for its k-th range [$3, $4), the hangs $5, k in $6) and at its key's
   end (hgc_end_range, $7-$10, the hangs $11; part END_PART + a RANGE_ROWS
   kind), each the first HGC_MAX_EXTENSIONS by path. Each round trip saved
   is one less inside the hang groups lock, and one statement for all of
   a batch's hangs starts one plan, not one per hang. All read at once,
   as the picks would read them later in the same transaction; what an
   earlier pick writes makes a later hang's rows stale
   (first_read_touched), and that hang reads again alone. The children's
   subquery keeps its OFFSET 0 so it is not flattened: flattened, the
   generic plan made while the tables are small hashes a scan of every
   stored child (until an ANALYZE plans it again); kept, it probes the
   children's key once per prefix group found. */
#define END_PART 1000
#define EXTENSIONS PG_XSTR(HGC_MAX_EXTENSIONS)
#define PREFIX_ROWS                                                                                \
  "SELECT 0 AS part, g.signature AS sig, g.path AS path, (SELECT samples FROM hang_group_path"     \
  " WHERE group_sig = g.signature), c.child AS child, c.samples, q.h AS hang"                      \
  " FROM unnest($1::text[], $2::integer[]) AS q(s, h) JOIN hang_groups g ON g.signature = q.s"     \
  " LEFT JOIN LATERAL (SELECT child, samples FROM hang_group_children"                             \
  " WHERE group_sig = g.signature OFFSET 0) c ON true"
#define TURN_ROWS                                                                                  \
  "SELECT t.o, x.signature, x.path, (SELECT samples FROM hang_group_path"                          \
  " WHERE group_sig = x.signature), NULL, NULL, t.h"                                               \
  " FROM unnest($3::text[], $4::text[], $5::integer[], $6::integer[]) AS t(lo, hi, h, o)"          \
  " CROSS JOIN LATERAL (SELECT signature, path FROM hang_groups WHERE path >= t.lo COLLATE \"C\""  \
  " AND path < t.hi COLLATE \"C\" ORDER BY path COLLATE \"C\" LIMIT " EXTENSIONS ") x"
#define END_RANGE RANGE_ROWS("q.f", "q.t", "q.f", "q.f", EXTENSIONS, "q.fl", "q.ce")
#define END_ROWS                                                                                   \
  "SELECT " PG_XSTR(END_PART) " + e.kind, e.signature, e.path, e.samples, NULL, NULL, q.h"         \
                              " FROM unnest($7::text[], $8::text[], $9::text[], $10::text[],"      \
                              " $11::integer[]) AS q(f, t, fl, ce, h)"                             \
                              " CROSS JOIN LATERAL (" END_RANGE                                    \
                              ") e(kind, signature, path, samples)"
static const char PICK_FIRST_READ[] =
    "SELECT * FROM (" PREFIX_ROWS " UNION ALL " TURN_ROWS " UNION ALL " END_ROWS ")"
    " u ORDER BY hang, part, CASE WHEN part = 0 THEN sig END, path, child";
enum { HANG_COL = 6 };

/* A hang's first read: what PICK_FIRST_READ asks for it (its key's
   prefixes' signatures, its turns' ranges, its key end's range) and where
   its answer is. */
typedef struct first_read_s {
  char (*sigs)[STORE_SIG_CHARS + 1]; /* one per root prefix, shortest first */
  size_t n_sigs;
  hgc_turn_t turns[HGC_MAX_TURNS];
  long n_turns;
  hgc_end_t end;
  const PGresult *r; /* the answer with its rows (not owned); NULL: to be read */
  int row0, row1;    /* its rows in r: [row0, row1) */
} first_read_t;

static void first_read_free(first_read_t *fr) {
  hgc_turns_free(fr->turns, fr->n_turns);
  free(fr->end.from);
  free(fr->sigs);
  *fr = (first_read_t){0};
}

/* What h's first read asks (fr zeroed before). 0, or -1 (fr to be freed
   all the same). */
static int first_read_make(const store_hang_t *h, first_read_t *fr) {
  fr->sigs = calloc(h->len ? h->len : 1, sizeof *fr->sigs);
  fr->n_sigs = h->len;
  fr->n_turns = fr->sigs ? hgc_turns(h, fr->turns, HGC_MAX_TURNS) : -1;
  if (fr->n_turns < 0) {
    fr->n_turns = 0;
    return -1;
  }
  for (size_t d = 1; d <= h->len; d++)
    hgc_prefix_sig(h, d, fr->sigs[d - 1]);
  return hgc_end_range(h, &fr->end);
}

enum { FR_SIGS, FR_SIG_HANGS, FR_LOS, FR_HIS, FR_TURN_HANGS, FR_TURN_AT, FR_ENDS };

/* PICK_FIRST_READ for reads[which[0..m)] (hangs 1..m of the statement),
   run (*out its answer) or queued in the caller's pipeline (pg_queue_read:
   *out filled by its next sync). 0, or -1. */
static int first_reads_send(store_t *st, const first_read_t *reads, const size_t *which, size_t m,
                            bool queue, PGresult **out) {
  pg_array_t a[FR_ENDS + 5] = {{0}}; /* the ends: from, to, floor, ceiling, hang */
  for (size_t j = 0; j < m; j++) {
    const first_read_t *fr = &reads[which[j]];
    int64_t hang = (int64_t)j + 1;
    for (size_t d = 0; d < fr->n_sigs; d++) {
      pg_array_text(&a[FR_SIGS], fr->sigs[d]);
      pg_array_int(&a[FR_SIG_HANGS], hang);
    }
    for (long t = 0; t < fr->n_turns; t++) {
      pg_array_text(&a[FR_LOS], fr->turns[t].from);
      pg_array_text(&a[FR_HIS], fr->turns[t].to);
      pg_array_int(&a[FR_TURN_HANGS], hang);
      pg_array_int(&a[FR_TURN_AT], t + 1);
    }
    pg_array_text(&a[FR_ENDS], fr->end.from);
    pg_array_text(&a[FR_ENDS + 1], fr->end.to);
    pg_array_text(&a[FR_ENDS + 2], fr->end.floor);
    pg_array_text(&a[FR_ENDS + 3], fr->end.ceiling);
    pg_array_int(&a[FR_ENDS + 4], hang);
  }
  pg_params_t p = {0};
  int rc = pg_own_arrays(&p, 1, a, FR_ENDS + 5);
  if (rc == 0 && queue)
    rc = pg_queue_read(st, PICK_FIRST_READ, &p, "hang groups", out);
  else if (rc == 0 && !(*out = pg_run(st, PICK_FIRST_READ, &p, "hang groups")))
    rc = -1;
  pg_params_free(&p);
  return rc;
}

/* Each of reads[which[0..m)] given its rows of r, PICK_FIRST_READ's
   answer for them (sorted by hang). 0, or -1 for an answer out of order. */
static int first_reads_take(const PGresult *r, first_read_t *reads, const size_t *which, size_t m) {
  int row = 0, rows = PQntuples(r);
  for (size_t j = 0; j < m; j++) {
    first_read_t *fr = &reads[which[j]];
    fr->r = r;
    fr->row0 = row;
    while (row < rows && strtol(PQgetvalue(r, row, HANG_COL), NULL, 10) == (long)j + 1)
      row++;
    fr->row1 = row;
  }
  return row == rows ? 0 : -1;
}

static bool in_range(const char *path, const char *from, const char *to) {
  return from && to && strcmp(path, from) >= 0 && strcmp(path, to) < 0;
}

/* The path fr's answer gave next to its end's range (kind: 1 below, 2
   above), NULL for none. */
static const char *end_next(const first_read_t *fr, int kind) {
  for (int i = fr->row1 - 1; i >= fr->row0; i--)
    if (strtol(PQgetvalue(fr->r, i, 0), NULL, 10) == END_PART + kind)
      return PQgetisnull(fr->r, i, 2) ? NULL : PQgetvalue(fr->r, i, 2);
  return NULL;
}

/* Whether fr's answer may no longer be what it would read now that a pick
   wrote group sig (its hang_groups row, when new, children and path's
   samples) at path path: sig is one of its prefixes', path lies in one of
   the ranges whose groups it read, or path is nearer the end's range than
   the path it gave next to it (a new group's: a stored one's was read). */
static bool first_read_touched(const first_read_t *fr, const char *sig, const char *path) {
  for (size_t d = 0; d < fr->n_sigs; d++)
    if (strcmp(fr->sigs[d], sig) == 0) return true;
  for (long t = 0; t < fr->n_turns; t++)
    if (in_range(path, fr->turns[t].from, fr->turns[t].to)) return true;
  if (in_range(path, fr->end.from, fr->end.to)) return true;
  const char *below = end_next(fr, 1), *above = end_next(fr, 2);
  return (in_range(path, fr->end.floor, fr->end.from) && (!below || strcmp(path, below) > 0)) ||
         (in_range(path, fr->end.to, fr->end.ceiling) && (!above || strcmp(path, above) < 0));
}

typedef struct range_ctx_s {
  store_t *st;
  hgc_cands_t *cs;
  const store_hang_t *h;
  const first_read_t *fr; /* the ranges it read ahead */
} range_ctx_t;

/* The prefixes' groups (part 0 of rx->fr's answer), added in prefix order
   (shortest first) as the SQLite backend adds them. */
static int prefix_cands(range_ctx_t *rx) {
  const store_hang_t *h = rx->h;
  const PGresult *r = rx->fr->r;
  int rc = 0, n = rx->fr->row0;
  while (n < rx->fr->row1 && strcmp(PQgetvalue(r, n, 0), "0") == 0)
    n++;
  for (size_t d = 0; rc == 0 && d < h->len; d++) {
    const char *sig = rx->fr->sigs[d];
    int from = rx->fr->row0, to;
    while (from < n && strcmp(PQgetvalue(r, from, 1), sig) != 0)
      from++;
    for (to = from; to < n && strcmp(PQgetvalue(r, to, 1), sig) == 0;)
      to++;
    hgc_cand_t *c = NULL;
    if (from < n) rc = hgc_cands_add(rx->cs, sig, PQgetvalue(r, from, 2), &c);
    if (rc == 0 && c) rc = take_children(c, r, from, to, 4);
    if (rc == 0 && c) rc = take_path(c, r, from, 3);
  }
  return rc;
}

/* A group row of range_cands' answer offered to the pick, its children
   read when its key is a prefix of the hang's (a prefix lookup found it
   already, as a rule). */
static int range_group(const range_ctx_t *rx, const PGresult *res, int i) {
  bool none = PQgetisnull(res, i, 3);
  size_t bytes = 0;
  unsigned char *blob =
      none ? NULL : PQunescapeBytea((const unsigned char *)PQgetvalue(res, i, 3), &bytes);
  hgc_cand_t *c = NULL;
  int rc = none || blob ? hgc_cands_add_row(rx->cs, rx->h, PQgetvalue(res, i, 1),
                                            PQgetvalue(res, i, 2), blob, blob ? bytes : 0, &c)
                        : -1;
  PQfreemem(blob);
  return rc == 0 && c && hgc_cand_is_prefix(rx->h, c) ? read_children(rx->st, c) : rc;
}

static bool same(const char *a, const char *b) {
  return a && b ? strcmp(a, b) == 0 : a == b;
}

/* The part of rx->fr's answer that read r (nothing skipped in it), or -1. */
static long ahead_part(const range_ctx_t *rx, const hgc_range_t *r) {
  const first_read_t *fr = rx->fr;
  if (!same(r->skip_from, r->from) || !same(r->skip_to, r->from)) return -1;
  if (r->floor)
    return same(r->from, fr->end.from) && same(r->to, fr->end.to) &&
                   same(r->floor, fr->end.floor) && same(r->ceiling, fr->end.ceiling)
               ? END_PART
               : -1;
  for (long k = 0; k < fr->n_turns; k++)
    if (same(fr->turns[k].from, r->from) && same(fr->turns[k].to, r->to)) return k + 1;
  return -1;
}

/* r, when PICK_FIRST_READ read it ahead: its first r->limit groups
   offered and the paths next to it given as range_cands would (*rc its
   answer). */
static bool from_ahead(const range_ctx_t *rx, const hgc_range_t *r, hgc_next_t *next, int *rc) {
  long part = ahead_part(rx, r);
  if (part < 0) return false;
  const PGresult *ahead = rx->fr->r;
  size_t taken = 0;
  *rc = 0;
  for (int i = rx->fr->row0; *rc == 0 && i < rx->fr->row1; i++) {
    long at = strtol(PQgetvalue(ahead, i, 0), NULL, 10);
    if (at == part && taken < r->limit) {
      taken++;
      *rc = range_group(rx, ahead, i);
    } else if (part == END_PART && (at == END_PART + 1 || at == END_PART + 2) &&
               !PQgetisnull(ahead, i, 2)) {
      char **to = at == END_PART + 1 ? &next->below : &next->above;
      if (!(*to = strdup(PQgetvalue(ahead, i, 2)))) *rc = -1;
    }
  }
  return true;
}

/* The stored groups of range r the pick could take (hgc_cands_add_row;
   hgc_look_ranges' range, ctx a range_ctx_t) and the paths next to it:
   one statement (or the rows read ahead), as the SQLite backend's HG_EXTENSIONS. */
static int range_cands(void *ctx, const hgc_range_t *r, hgc_next_t *next) {
  const range_ctx_t *rx = ctx;
  int rc = 0;
  if (from_ahead(rx, r, next, &rc)) return rc;
  pg_params_t p = {0};
  pg_text(&p, 1, r->from);
  pg_text(&p, 2, r->to);
  pg_text(&p, 3, r->skip_from);
  pg_text(&p, 4, r->skip_to);
  pg_int(&p, 5, (int64_t)r->limit);
  pg_text(&p, 6, r->floor); /* NULL: no next paths */
  pg_text(&p, 7, r->ceiling);
  PGresult *res = pg_run(rx->st,
                         "SELECT * FROM (" RANGE_ROWS("$1", "$2", "$3", "$4", "$5::bigint", "$6",
                                                      "$7") ") u ORDER BY kind, path COLLATE \"C\"",
                         &p, "hang group extensions");
  if (!res) return -1;
  for (int i = 0; rc == 0 && i < PQntuples(res); i++) {
    if (PQgetisnull(res, i, 2)) continue;
    const char *kind = PQgetvalue(res, i, 0);
    if (strcmp(kind, "0") == 0) {
      rc = range_group(rx, res, i);
    } else {
      char **to = strcmp(kind, "1") == 0 ? &next->below : &next->above;
      if (!(*to = strdup(PQgetvalue(res, i, 2)))) rc = -1;
    }
  }
  PQclear(res);
  return rc;
}

#define UPSERT_GROUP                                                                               \
  "INSERT INTO groups(signature, frames, first_seen, last_seen)"                                   \
  " VALUES($1, $2, $3::bigint, $3::bigint) ON CONFLICT(signature) DO UPDATE SET"                   \
  " first_seen = least(groups.first_seen, excluded.first_seen),"                                   \
  " last_seen = greatest(groups.last_seen, excluded.last_seen)"                                    \
  " WHERE groups.first_seen > excluded.first_seen"                                                 \
  " OR groups.last_seen < excluded.last_seen - " PG_XSTR(PG_LAST_SEEN_MOVE)

/* What a pick writes, in one statement: the group's hang_groups row when
   it is new ($4, its path; NULL: not new), its groups row ($1-$3), the
   hang's samples at the end of the chosen key added to its children
   ($5, $6: the child, "" for the key's end itself), and its path's
   samples through each root part of the key ($7). */
static const char PICK_WRITES[] =
    "WITH hg AS (INSERT INTO hang_groups(signature, path) SELECT $1, $4 WHERE $4 IS NOT NULL"
    " ON CONFLICT DO NOTHING), gr AS (" UPSERT_GROUP "),"
    " ch AS (INSERT INTO hang_group_children(group_sig, child, samples) SELECT $1, c, n"
    " FROM unnest($5::text[], $6::bigint[]) AS u(c, n) ON CONFLICT(group_sig, child) DO UPDATE"
    " SET samples = hang_group_children.samples + excluded.samples)"
    " INSERT INTO hang_group_path(group_sig, samples) VALUES($1, $7)"
    " ON CONFLICT(group_sig) DO UPDATE SET samples = excluded.samples";

/* The pick's writes (new_path: the new group's path, NULL when it joins a
   stored one; key, len: the chosen key; old: what the group's path had,
   NULL for a new one). */
static int write_pick(store_t *st, const store_hang_t *h, const char *sig, const char *new_path,
                      int64_t ns, const char *const *key, size_t len, const uint64_t *old) {
  hgc_children_t ch;
  int rc = hgc_children(h, key, len, &ch);
  pg_array_t a[2] = {{0}}; /* the children's names, their samples */
  for (size_t i = 0; rc == 0 && i <= ch.n; i++) {
    uint64_t count = i < ch.n ? ch.samples[i] : ch.self;
    if (count == 0) continue;
    pg_array_text(&a[0], i < ch.n ? ch.names[i] : "");
    pg_array_int(&a[1], (int64_t)count);
  }
  uint64_t *through = rc == 0 ? hgc_through(h, key, len, old) : NULL;
  unsigned char *blob = through ? hgc_encode_path(through, len) : NULL;
  pg_params_t p = {0};
  pg_text(&p, 1, sig);
  pg_text(&p, 2, h->group.names_json ? h->group.names_json : "[]");
  pg_int(&p, 3, ns);
  pg_text(&p, 4, new_path);
  if (pg_own_arrays(&p, 5, a, 2) != 0 || !blob) rc = -1;
  if (blob) pg_bytes(&p, 7, blob, 8 * len);
  if (rc == 0) rc = pg_do(st, PICK_WRITES, &p, "hang group");
  pg_params_free(&p);
  free(blob);
  free(through);
  hgc_children_free(&ch);
  return rc;
}

/* Hang h's pick from its first read fr: its group's signature in sig,
   and where that group is stored in *path (malloc'ed; NULL for a hang
   without a key). 0, or -1. */
static int pick(store_t *st, const store_hang_t *h, const first_read_t *fr, int64_t ns,
                char sig[STORE_SIG_CHARS + 1], char **path) {
  snprintf(sig, STORE_SIG_CHARS + 1, "%s", h->group.signature);
  *path = NULL;
  if (h->len == 0) {
    pg_params_t p = {0};
    pg_text(&p, 1, sig);
    pg_text(&p, 2, h->group.names_json ? h->group.names_json : "[]");
    pg_int(&p, 3, ns);
    return pg_do(st, UPSERT_GROUP, &p, "hang group row");
  }
  char *own = hgc_path_of(h->key, h->len);
  hgc_cands_t cs = {0};
  range_ctx_t ctx = {st, &cs, h, fr};
  int rc = own && fr->r ? prefix_cands(&ctx) : -1;
  if (rc == 0) rc = hgc_look_ranges(h, &cs, range_cands, &ctx, -1);
  long chosen = rc == 0 ? hgc_pick(h, &cs) : -1;
  if (chosen == -2) rc = -1;
  if (rc == 0 && chosen >= 0) {
    const hgc_cand_t *c = &cs.v[chosen];
    snprintf(sig, STORE_SIG_CHARS + 1, "%s", c->sig);
    rc = write_pick(st, h, sig, NULL, ns, c->view.key, c->view.len, c->view.through);
    *path = hgc_path_of(c->view.key, c->view.len);
    if (!*path) rc = -1;
  } else if (rc == 0) {
    rc = write_pick(st, h, sig, own, ns, h->key, h->len, NULL);
    *path = own, own = NULL;
  }
  hgc_cands_free(&cs);
  free(own);
  return rc;
}

int pg_hang_groups_assign(store_t *st, const store_hang_t *h, int64_t ns,
                          char sig[STORE_SIG_CHARS + 1]) {
  char *one[1] = {sig};
  return pg_hang_groups_pick_all(st, &h, 1, ns, one);
}

int pg_hang_groups_pick_all(store_t *st, const store_hang_t *const *hangs, size_t n, int64_t ns,
                            char *const *sigs) {
  first_read_t *reads = calloc(n ? n : 1, sizeof *reads);
  size_t *keyed = calloc(n ? n : 1, sizeof *keyed), m = 0; /* the hangs with a key */
  PGresult *first = NULL;
  int rc = reads && keyed ? 0 : -1;
  for (size_t i = 0; rc == 0 && i < n; i++)
    if (hangs[i]->len) rc = first_read_make(hangs[i], &reads[keyed[m++] = i]);
  if (rc == 0 && m) rc = first_reads_send(st, reads, keyed, m, st->pipelined, &first);
  if (rc == 0 && m && st->pipelined) rc = pg_pipeline_sync(st);
  if (rc == 0 && m) rc = first_reads_take(first, reads, keyed, m);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    PGresult *again = NULL;
    if (hangs[i]->len && !reads[i].r) { /* read again: an earlier pick wrote what it read */
      rc = first_reads_send(st, reads, &i, 1, false, &again);
      if (rc == 0) rc = first_reads_take(again, reads, &i, 1);
    }
    char *path = NULL;
    if (rc == 0) rc = pick(st, hangs[i], &reads[i], ns, sigs[i], &path);
    PQclear(again);
    reads[i].r = NULL;
    for (size_t k = i + 1; rc == 0 && path && k < n; k++)
      if (reads[k].r && first_read_touched(&reads[k], sigs[i], path)) reads[k].r = NULL;
    free(path);
  }
  for (size_t i = 0; reads && i < n; i++)
    first_read_free(&reads[i]);
  PQclear(first);
  free(reads);
  free(keyed);
  return rc;
}

int pg_hang_groups_prune(store_t *st) {
  if (pg_do(st,
            "DELETE FROM hang_groups h WHERE NOT EXISTS (SELECT 1 FROM groups g"
            " WHERE g.signature = h.signature)",
            NULL, "prune hang groups") != 0)
    return -1;
  if (pg_do(st,
            "DELETE FROM hang_group_children c WHERE NOT EXISTS (SELECT 1 FROM hang_groups h"
            " WHERE h.signature = c.group_sig)",
            NULL, "prune hang groups") != 0)
    return -1;
  return pg_do(st,
               "DELETE FROM hang_group_path c WHERE NOT EXISTS (SELECT 1 FROM hang_groups h"
               " WHERE h.signature = c.group_sig)",
               NULL, "prune hang groups");
}
