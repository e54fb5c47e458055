/*
 * store_pg_hang_groups.c - hang groups in PostgreSQL: the same tables and
 * the same candidate search as the SQLite backend's store_hang_groups.c
 * (its header says what they hold; the pick itself is perf__group_pick,
 * signature.c), with libpq statements. Called inside put_batch's and
 * resymbolize's transactions, which hold PG_LOCK_HANG_GROUPS: a pick reads
 * the groups, then writes, and two collectors must not interleave.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "signature.h"
#include "store_pg.h"

#define SEP '\x1f'
#define MAX_EXTENSIONS 64 /* groups looked at under one turn, shortest keys first */
#define MAX_TURNS 64      /* turns of a hang off its key looked under */
#define SIBLING_DEPTH 3   /* branch points at the key's end looked under for any group */

/* A stored group read for a pick: its key split out of its path. */
typedef struct cand_s {
  char sig[STORE_SIG_CHARS + 1];
  char *path;         /* its names, 0x1f-separated, split in place */
  const char **key;   /* innermost first, into path */
  char **child_names; /* strdup'ed */
  uint64_t *child_samples;
  uint64_t *through; /* per depth of the key */
  perf__group_view_t view;
} cand_t;

typedef struct cands_s {
  cand_t *v;
  size_t n, cap;
} cands_t;

/* key (innermost first, len names) as a path: root first, each name ended
   by SEP. malloc'ed. */
static char *path_of(const char *const *key, size_t len) {
  size_t n = 1;
  for (size_t i = 0; i < len; i++)
    n += strlen(key[i]) + 1;
  char *p = malloc(n), *at = p;
  for (size_t k = len; p && k-- > 0;) {
    size_t l = strlen(key[k]);
    memcpy(at, key[k], l);
    at += l;
    *at++ = SEP;
  }
  if (p) *at = '\0';
  return p;
}

static void cand_free(cand_t *c) {
  for (size_t i = 0; i < c->view.n_children; i++)
    free(c->child_names[i]);
  free(c->child_names);
  free(c->child_samples);
  free(c->through);
  free(c->key);
  free(c->path);
}

static void cands_free(cands_t *cs) {
  for (size_t i = 0; i < cs->n; i++)
    cand_free(&cs->v[i]);
  free(cs->v);
}

/* The key of a stored path, split in place. */
static int split_path(cand_t *c) {
  size_t len = 0;
  for (const char *p = c->path; *p; p++)
    len += *p == SEP;
  if (!(c->key = calloc(len ? len : 1, sizeof *c->key))) return -1;
  char *p = c->path;
  for (size_t k = 0; k < len; k++) { /* root first in the path, innermost first in key */
    char *end = strchr(p, SEP);
    *end = '\0';
    c->key[len - 1 - k] = p;
    p = end + 1;
  }
  c->view.key = c->key;
  c->view.len = len;
  return 0;
}

/* A group's samples through each root part of its key: one row, a blob
   of little-endian 64-bit counts, depth 0 first (one write per hang, not
   one per frame). Decoded into through[0..len). */
static void decode_path(const unsigned char *blob, size_t bytes, uint64_t *through, size_t len) {
  for (size_t d = 0; blob && d < bytes / 8 && d < len; d++)
    for (int b = 7; b >= 0; b--)
      through[d] = through[d] << 8 | blob[8 * d + (size_t)b];
}

static int read_children(store_t *st, cand_t *c) {
  pg_params_t p = {0};
  pg_text(&p, 1, c->sig);
  PGresult *r = pg_run(st,
                       "SELECT child, samples FROM hang_group_children WHERE group_sig = $1"
                       " ORDER BY child COLLATE \"C\"",
                       &p, "hang group children");
  if (!r) return -1;
  int n = PQntuples(r), rc = 0;
  c->child_names = calloc(n ? (size_t)n : 1, sizeof *c->child_names);
  c->child_samples = calloc(n ? (size_t)n : 1, sizeof *c->child_samples);
  if (!c->child_names || !c->child_samples) rc = -1;
  for (int i = 0; rc == 0 && i < n; i++) {
    const char *name = PQgetvalue(r, i, 0);
    uint64_t samples = (uint64_t)pg_i64(r, i, 1);
    if (!*name) {
      c->view.self += samples;
      continue;
    }
    size_t k = c->view.n_children;
    if (!(c->child_names[k] = strdup(name))) rc = -1;
    c->child_samples[k] = samples;
    if (rc == 0) c->view.n_children = k + 1;
  }
  PQclear(r);
  c->view.child_names = (const char *const *)c->child_names;
  c->view.child_samples = c->child_samples;
  return rc;
}

static int read_path(store_t *st, cand_t *c) {
  size_t len = c->view.len;
  if (!(c->through = calloc(len ? len : 1, sizeof *c->through))) return -1;
  c->view.through = c->through;
  pg_params_t p = {0};
  pg_text(&p, 1, c->sig);
  PGresult *r =
      pg_run(st, "SELECT samples FROM hang_group_path WHERE group_sig = $1", &p, "hang group path");
  if (!r) return -1;
  if (PQntuples(r) > 0) {
    size_t bytes = 0;
    unsigned char *blob = PQunescapeBytea((const unsigned char *)PQgetvalue(r, 0, 0), &bytes);
    decode_path(blob, bytes, c->through, len);
    PQfreemem(blob);
  }
  PQclear(r);
  return 0;
}

static int write_path(store_t *st, const char *sig, const uint64_t *through, size_t len) {
  unsigned char *blob = malloc(len ? 8 * len : 1);
  if (!blob) return -1;
  for (size_t d = 0; d < len; d++)
    for (int b = 0; b < 8; b++)
      blob[8 * d + (size_t)b] = (unsigned char)(through[d] >> (8 * b));
  pg_params_t p = {0};
  pg_text(&p, 1, sig);
  pg_bytes(&p, 2, blob, 8 * len);
  int rc = pg_do(st,
                 "INSERT INTO hang_group_path(group_sig, samples) VALUES($1, $2)"
                 " ON CONFLICT(group_sig) DO UPDATE SET samples = excluded.samples",
                 &p, "hang group path");
  free(blob);
  return rc;
}

static int add_cand(store_t *st, cands_t *cs, const char *sig, const char *path) {
  for (size_t i = 0; i < cs->n; i++) /* found under two prefixes: once */
    if (strcmp(cs->v[i].sig, sig) == 0) return 0;
  if (cs->n == cs->cap) {
    size_t cap = cs->cap ? 2 * cs->cap : 16;
    cand_t *grown = realloc(cs->v, cap * sizeof *grown);
    if (!grown) return -1;
    cs->v = grown;
    cs->cap = cap;
  }
  cand_t *c = &cs->v[cs->n++];
  memset(c, 0, sizeof *c);
  snprintf(c->sig, sizeof c->sig, "%s", sig);
  if (!(c->path = strdup(path))) return -1;
  int rc = split_path(c);
  if (rc == 0) rc = read_children(st, c);
  return rc == 0 ? read_path(st, c) : rc;
}

/* The stored groups keyed by a root prefix of h's key: one query for all
   the prefixes' signatures, added in prefix order (shortest first) as the
   SQLite backend adds them. */
static int prefix_cands(store_t *st, const store_hang_t *h, cands_t *cs) {
  char(*sigs)[STORE_SIG_CHARS + 1] = calloc(h->len ? h->len : 1, sizeof *sigs);
  if (!sigs) return -1;
  pg_array_t a = {0};
  for (size_t d = 1; d <= h->len; d++) {
    snprintf(sigs[d - 1], sizeof sigs[d - 1], "%016llx",
             (unsigned long long)perf__signature_hash(h->key + h->len - d, d));
    pg_array_text(&a, sigs[d - 1]);
  }
  pg_params_t p = {0};
  pg_own(&p, 1, pg_array_end(&a));
  PGresult *r = p.v[0] ? pg_run(st,
                                "SELECT signature, path FROM hang_groups"
                                " WHERE signature = ANY($1::text[])",
                                &p, "hang groups")
                       : NULL;
  pg_params_free(&p);
  int rc = r ? 0 : -1;
  for (size_t d = 0; rc == 0 && d < h->len; d++)
    for (int i = 0; rc == 0 && i < PQntuples(r); i++)
      if (strcmp(PQgetvalue(r, i, 0), sigs[d]) == 0)
        rc = add_cand(st, cs, sigs[d], PQgetvalue(r, i, 1));
  PQclear(r);
  free(sigs);
  return rc;
}

/* The stored groups whose path starts with prefix (ending in SEP). */
static int range_cands(store_t *st, const char *prefix, cands_t *cs) {
  size_t n = strlen(prefix);
  char *upper = strdup(prefix);
  if (!upper) return -1;
  upper[n - 1] = SEP + 1;
  pg_params_t p = {0};
  pg_text(&p, 1, prefix);
  pg_text(&p, 2, upper);
  pg_int(&p, 3, MAX_EXTENSIONS);
  PGresult *r = pg_run(st,
                       "SELECT signature, path FROM hang_groups WHERE path >= $1 COLLATE \"C\""
                       " AND path < $2 COLLATE \"C\" ORDER BY length(path), path COLLATE \"C\""
                       " LIMIT $3::bigint",
                       &p, "hang group extensions");
  free(upper);
  if (!r) return -1;
  int rc = 0;
  for (int i = 0; rc == 0 && i < PQntuples(r); i++)
    rc = add_cand(st, cs, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
  PQclear(r);
  return rc;
}

/* The stored groups under the turns of h off its key, and branching off
   the key's last SIBLING_DEPTH frames (store_hang_groups.c says why). */
static int turn_cands(store_t *st, const store_hang_t *h, cands_t *cs) {
  perf__hang_turn_t turns[MAX_TURNS];
  size_t n = perf__hang_turns(&h->samples, h->key, h->len, turns, MAX_TURNS);
  int rc = 0;
  for (size_t t = 0; rc == 0 && t < n; t++) {
    const char *child = turns[t].child;
    const char *const *at = h->key + h->len - turns[t].depth;
    char *shared = path_of(at, turns[t].depth);
    size_t a = shared ? strlen(shared) : 0, b = strlen(child);
    char *prefix = shared ? malloc(a + b + 2) : NULL;
    if (prefix) {
      memcpy(prefix, shared, a);
      memcpy(prefix + a, child, b);
      prefix[a + b] = SEP;
      prefix[a + b + 1] = '\0';
    }
    rc = prefix ? range_cands(st, prefix, cs) : -1;
    free(prefix);
    free(shared);
  }
  size_t from = h->len > SIBLING_DEPTH ? h->len - SIBLING_DEPTH : 1;
  for (size_t p = from; rc == 0 && p < h->len; p++) {
    char *shared = path_of(h->key + h->len - p, p);
    rc = shared ? range_cands(st, shared, cs) : -1;
    free(shared);
  }
  return rc;
}

static int add_children(store_t *st, const store_hang_t *h, const char *sig, const char *const *key,
                        size_t len, const uint64_t *old) {
  size_t cap = h->samples.n;
  const char **names = calloc(cap ? cap : 1, sizeof *names);
  uint64_t *samples = calloc(cap ? cap : 1, sizeof *samples);
  uint64_t self = 0;
  int rc = names && samples ? 0 : -1;
  size_t m =
      rc == 0 ? perf__hang_children(&h->samples, key, len, names, samples, cap, &self, NULL) : 0;
  for (size_t i = 0; rc == 0 && i <= m; i++) {
    uint64_t count = i < m ? samples[i] : self;
    if (count == 0) continue;
    pg_params_t p = {0};
    pg_text(&p, 1, sig);
    pg_text(&p, 2, i < m ? names[i] : "");
    pg_int(&p, 3, (int64_t)count);
    rc = pg_do(st,
               "INSERT INTO hang_group_children(group_sig, child, samples)"
               " VALUES($1, $2, $3::bigint) ON CONFLICT(group_sig, child) DO UPDATE SET"
               " samples = hang_group_children.samples + excluded.samples",
               &p, "hang group child");
  }
  free(names);
  free(samples);
  uint64_t *through = rc == 0 ? calloc(len ? len : 1, sizeof *through) : NULL;
  if (rc == 0 && !through) rc = -1;
  if (through) perf__hang_through(&h->samples, key, len, through);
  for (size_t d = 0; through && old && d < len; d++)
    through[d] += old[d];
  if (rc == 0) rc = write_path(st, sig, through, len);
  free(through);
  return rc;
}

static int upsert_group(store_t *st, const char *sig, const char *names_json, int64_t ns) {
  pg_params_t p = {0};
  pg_text(&p, 1, sig);
  pg_text(&p, 2, names_json ? names_json : "[]");
  pg_int(&p, 3, ns);
  return pg_do(st,
               "INSERT INTO groups(signature, frames, first_seen, last_seen)"
               " VALUES($1, $2, $3::bigint, $3::bigint) ON CONFLICT(signature) DO UPDATE SET"
               " first_seen = least(groups.first_seen, excluded.first_seen),"
               " last_seen = greatest(groups.last_seen, excluded.last_seen)",
               &p, "hang group row");
}

int pg_hang_groups_assign(store_t *st, const store_hang_t *h, int64_t ns,
                          char sig[STORE_SIG_CHARS + 1]) {
  snprintf(sig, STORE_SIG_CHARS + 1, "%s", h->group.signature);
  if (h->len == 0) return upsert_group(st, sig, h->group.names_json, ns);
  char *path = path_of(h->key, h->len);
  cands_t cs = {0};
  int rc = path ? prefix_cands(st, h, &cs) : -1;
  if (rc == 0) rc = turn_cands(st, h, &cs);
  perf__group_view_t *views = rc == 0 ? calloc(cs.n ? cs.n : 1, sizeof *views) : NULL;
  if (rc == 0 && !views) rc = -1;
  long pick = -1;
  if (rc == 0) {
    for (size_t i = 0; i < cs.n; i++)
      views[i] = cs.v[i].view;
    pick = perf__group_pick(&h->samples, h->key, h->len, views, cs.n);
  }
  const char *const *key = h->key;
  const uint64_t *old = NULL;
  size_t len = h->len;
  if (rc == 0 && pick >= 0) {
    snprintf(sig, STORE_SIG_CHARS + 1, "%s", cs.v[pick].sig);
    key = cs.v[pick].view.key;
    len = cs.v[pick].view.len;
    old = cs.v[pick].view.through;
  } else if (rc == 0) {
    pg_params_t p = {0};
    pg_text(&p, 1, sig);
    pg_text(&p, 2, path);
    rc = pg_do(st, "INSERT INTO hang_groups(signature, path) VALUES($1, $2) ON CONFLICT DO NOTHING",
               &p, "hang group");
  }
  if (rc == 0) rc = upsert_group(st, sig, h->group.names_json, ns);
  if (rc == 0) rc = add_children(st, h, sig, key, len, old);
  free(views);
  cands_free(&cs);
  free(path);
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
