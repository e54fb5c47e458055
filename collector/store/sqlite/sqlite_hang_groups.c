/*
 * sqlite_hang_groups.c - hang groups in SQLite (see sqlite_hang_groups.h).
 * A pick reads the candidates (the stored groups whose key is a prefix of
 * the hang's key, one lookup per prefix by its signature; unless those
 * decide the pick, the ranges hgc_look_ranges names: each place the
 * hang's own samples turned off its key with an eighth of them, and each
 * branch point of the key that holds stored groups whatever the hang's
 * share there, two index ranges each read by path, up to
 * HGC_MAX_EXTENSIONS per index range and HGC_MAX_READ in all, each group
 * with its path's samples, kept when the pick could take it), hands them
 * to perf__group_pick (hgc_pick; signature.c: the rule lives there, not
 * here), then writes the choice.
 * What does not depend on SQLite is in hang_group_cands.c, shared with
 * pg_hang_groups.c.
 *
 * A key of 20 to 30 frames has as many prefixes, and as a rule one or two
 * of them are stored groups: looking each one up costs 8% of a batch's CPU.
 * So the connection keeps the paths of every stored hang group (a set of
 * their texts' 64-bit hashes, read whole at the first pick after it was
 * forgotten, each group this connection inserts added) and looks up only
 * the prefixes in it. Paths, not signatures: a signature hashes its key
 * innermost first, so each prefix's is a hash of all its frames (a key's
 * prefixes cost as many frames hashed as the key squared over two, 4% of
 * the ingest thread), while a path's hash grows root first by one frame a
 * prefix, and only the prefixes in the set get their signature. A group's
 * row holds its key's signature and path (hang_groups_assign inserts
 * both from one key), so a stored prefix is in the set either way. A hash
 * that collides, or names a group deleted or rolled back, costs one
 * lookup that finds nothing; a group another connection stored is never
 * missed, because the set is forgotten whenever another connection
 * committed (sqlite_store.c's data_version check, as for the rows known
 * stored). Past HG_SET_MAX groups every prefix is looked up again.
 */
#include "collector/store/sqlite/sqlite_hang_groups.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/hang_group_cands.h"

#define HG_SET_MAX 65536 /* stored groups the set of signatures holds at most */

static const char SCHEMA[] =
    "CREATE TABLE IF NOT EXISTS hang_groups(signature TEXT PRIMARY KEY, path TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS hang_groups_path ON hang_groups(path);"
    "CREATE TABLE IF NOT EXISTS hang_group_children(group_sig TEXT NOT NULL, child TEXT NOT NULL,"
    " samples INTEGER NOT NULL, PRIMARY KEY(group_sig, child));"
    "CREATE TABLE IF NOT EXISTS hang_group_path(group_sig TEXT PRIMARY KEY, samples BLOB NOT "
    "NULL);";

enum hg_stmt {
  HG_FIND,
  HG_ALL,
  HG_EXTENSIONS,
  HG_NEXT,
  HG_CHILDREN,
  HG_PATH,
  HG_INSERT,
  HG_ADD_CHILD,
  HG_ADD_PATH,
  HG_UPSERT_GROUP,
  HG_PRUNE_GROUPS,
  HG_PRUNE_CHILDREN,
  HG_PRUNE_PATH,
  HG_COUNT
};

static const char *const HG_SQL[HG_COUNT] = {
    [HG_FIND] = "SELECT path FROM hang_groups WHERE signature = ?1",
    [HG_ALL] = "SELECT path FROM hang_groups",
    /* One index range of a range (hgc_range_t) by path, with each
       group's path samples; the paths next to the range. */
    [HG_EXTENSIONS] = "SELECT signature, path, (SELECT samples FROM hang_group_path"
                      " WHERE group_sig = signature) FROM hang_groups"
                      " WHERE path >= ?1 AND path < ?2 ORDER BY path LIMIT ?3",
    [HG_NEXT] = "SELECT (SELECT path FROM hang_groups WHERE path >= ?1 AND path < ?2"
                " ORDER BY path DESC LIMIT 1), (SELECT path FROM hang_groups"
                " WHERE path >= ?3 AND path < ?4 ORDER BY path LIMIT 1)",
    [HG_CHILDREN] = "SELECT child, samples FROM hang_group_children WHERE group_sig = ?1"
                    " ORDER BY child",
    [HG_PATH] = "SELECT samples FROM hang_group_path WHERE group_sig = ?1",
    [HG_ADD_PATH] = "INSERT INTO hang_group_path(group_sig, samples) VALUES(?1, ?2)"
                    " ON CONFLICT(group_sig) DO UPDATE SET samples = excluded.samples",
    [HG_PRUNE_PATH] = "DELETE FROM hang_group_path WHERE group_sig NOT IN"
                      " (SELECT signature FROM hang_groups)",
    [HG_INSERT] = "INSERT OR IGNORE INTO hang_groups(signature, path) VALUES(?1, ?2)",
    [HG_ADD_CHILD] = "INSERT INTO hang_group_children(group_sig, child, samples)"
                     " VALUES(?1, ?2, ?3) ON CONFLICT(group_sig, child) DO UPDATE SET"
                     " samples = samples + excluded.samples",
    [HG_UPSERT_GROUP] = "INSERT INTO groups(signature, frames, first_seen, last_seen)"
                        " VALUES(?1, ?2, ?3, ?3) ON CONFLICT(signature) DO UPDATE SET"
                        " first_seen = min(first_seen, excluded.first_seen),"
                        " last_seen = max(last_seen, excluded.last_seen)",
    [HG_PRUNE_GROUPS] = "DELETE FROM hang_groups WHERE signature NOT IN"
                        " (SELECT signature FROM groups)",
    [HG_PRUNE_CHILDREN] = "DELETE FROM hang_group_children WHERE group_sig NOT IN"
                          " (SELECT signature FROM hang_groups)",
};

/* The stored groups' paths (their texts' hashes, path_hash; 0 never used:
   open addressing), valid while loaded. */
typedef enum { SET_FORGOTTEN, SET_LOADED, SET_TOO_MANY } set_state_t;

struct hang_groups_s {
  sqlite3_stmt *stmt[HG_COUNT];
  uint64_t *set;
  size_t set_cap, set_n; /* cap a power of two, at most half full */
  set_state_t set_state;
};

int hang_groups_open(sqlite3 *db, hang_groups_t **out) {
  *out = NULL;
  int rc = sqlite3_exec(db, SCHEMA, NULL, NULL, NULL);
  hang_groups_t *hg = rc == SQLITE_OK ? calloc(1, sizeof *hg) : NULL;
  if (rc == SQLITE_OK && !hg) rc = SQLITE_NOMEM;
  for (int i = 0; rc == SQLITE_OK && i < HG_COUNT; i++)
    rc = sqlite3_prepare_v3(db, HG_SQL[i], -1, SQLITE_PREPARE_PERSISTENT, &hg->stmt[i], NULL);
  if (rc != SQLITE_OK) {
    hang_groups_close(hg);
    return rc;
  }
  *out = hg;
  return SQLITE_OK;
}

void hang_groups_close(hang_groups_t *hg) {
  if (!hg) return;
  for (int i = 0; i < HG_COUNT; i++)
    sqlite3_finalize(hg->stmt[i]);
  free(hg->set);
  free(hg);
}

void hang_groups_forget(hang_groups_t *hg) {
  free(hg->set);
  hg->set = NULL;
  hg->set_cap = hg->set_n = 0;
  hg->set_state = SET_FORGOTTEN;
}

/* A path's hash as the set keeps it (0 never: the empty slot). */
static uint64_t set_key(uint64_t h) {
  return h ? h : 1;
}

/* FNV-1a over a stored path's text: the same as perf__signature_add over
   its names root first from PERF__SIGNATURE_START (each name ended by
   HGC_SEP, 0x1f, as perf__signature_add ends it), so prefix_cands hashes a
   key's prefixes a frame at a time. */
static uint64_t path_hash(const char *path) {
  uint64_t h = PERF__SIGNATURE_START;
  for (const unsigned char *p = (const unsigned char *)path; *p; p++)
    h = (h ^ *p) * UINT64_C(1099511628211);
  return set_key(h);
}

static bool set_has(const hang_groups_t *hg, uint64_t h) {
  if (hg->set_cap == 0) return false; /* loaded empty */
  for (size_t i = h & (hg->set_cap - 1);; i = (i + 1) & (hg->set_cap - 1)) {
    if (hg->set[i] == h) return true;
    if (hg->set[i] == 0) return false;
  }
}

static void set_put(uint64_t *set, size_t cap, uint64_t h) {
  size_t i = h & (cap - 1);
  while (set[i] != 0 && set[i] != h)
    i = (i + 1) & (cap - 1);
  set[i] = h;
}

/* A stored path into the loaded set; a set that cannot grow is given up
   (every prefix looked up) until forgotten. */
static void set_add(hang_groups_t *hg, const char *path) {
  if (hg->set_state != SET_LOADED) return;
  uint64_t h = path_hash(path);
  if (2 * (hg->set_n + 1) > hg->set_cap) {
    size_t cap = hg->set_cap ? 2 * hg->set_cap : 256;
    uint64_t *grown = hg->set_n < HG_SET_MAX ? calloc(cap, sizeof *grown) : NULL;
    if (!grown) {
      hang_groups_forget(hg);
      hg->set_state = SET_TOO_MANY;
      return;
    }
    for (size_t i = 0; i < hg->set_cap; i++)
      if (hg->set[i]) set_put(grown, cap, hg->set[i]);
    free(hg->set);
    hg->set = grown;
    hg->set_cap = cap;
  }
  if (!set_has(hg, h)) {
    set_put(hg->set, hg->set_cap, h);
    hg->set_n++;
  }
}

/* The set read from the table when forgotten. */
static void set_load(hang_groups_t *hg) {
  sqlite3_stmt *s = hg->stmt[HG_ALL];
  hg->set_state = SET_LOADED;
  int rc;
  while (hg->set_state == SET_LOADED && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    const char *path = (const char *)sqlite3_column_text(s, 0);
    if (path) set_add(hg, path);
  }
  if (hg->set_state == SET_LOADED && rc != SQLITE_DONE) hang_groups_forget(hg);
  sqlite3_reset(s);
}

/* Whether the path of hash h (path_hash) may be a stored group's (false:
   it is not). */
static bool may_be_stored(hang_groups_t *hg, uint64_t h) {
  if (hg->set_state == SET_FORGOTTEN) set_load(hg);
  return hg->set_state != SET_LOADED || set_has(hg, h);
}

static int done(sqlite3_stmt *s, int rc) {
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

static int read_children(hang_groups_t *hg, hgc_cand_t *c) {
  sqlite3_stmt *s = hg->stmt[HG_CHILDREN];
  sqlite3_bind_text(s, 1, c->sig, -1, SQLITE_STATIC);
  size_t cap = 0;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(s, 0);
    uint64_t samples = (uint64_t)sqlite3_column_int64(s, 1);
    if (!name) continue;
    if (!*name) {
      c->view.self += samples;
      continue;
    }
    size_t n = c->view.n_children;
    if (n == cap) {
      cap = cap ? 2 * cap : 8;
      char **names = realloc(c->child_names, cap * sizeof *names);
      if (names) c->child_names = names;
      uint64_t *counts = realloc(c->child_samples, cap * sizeof *counts);
      if (counts) c->child_samples = counts;
      if (!names || !counts) return done(s, SQLITE_NOMEM);
    }
    if (!(c->child_names[n] = strdup(name))) return done(s, SQLITE_NOMEM);
    c->child_samples[n] = samples;
    c->view.n_children = n + 1;
  }
  c->view.child_names = (const char *const *)c->child_names;
  c->view.child_samples = c->child_samples;
  return done(s, rc);
}

static int read_path(hang_groups_t *hg, hgc_cand_t *c) {
  sqlite3_stmt *s = hg->stmt[HG_PATH];
  sqlite3_bind_text(s, 1, c->sig, -1, SQLITE_STATIC);
  int rc = sqlite3_step(s);
  const void *blob = rc == SQLITE_ROW ? sqlite3_column_blob(s, 0) : NULL;
  size_t bytes = blob ? (size_t)sqlite3_column_bytes(s, 0) : 0;
  if (hgc_cand_path(c, blob, bytes) != 0) rc = SQLITE_NOMEM;
  return done(s, rc);
}

static int write_path(hang_groups_t *hg, const char *sig, const uint64_t *through, size_t len) {
  unsigned char *blob = hgc_encode_path(through, len);
  if (!blob) return SQLITE_NOMEM;
  sqlite3_stmt *s = hg->stmt[HG_ADD_PATH];
  sqlite3_bind_text(s, 1, sig, -1, SQLITE_STATIC);
  sqlite3_bind_blob(s, 2, blob, (int)(8 * len), SQLITE_STATIC);
  int rc = done(s, sqlite3_step(s));
  free(blob);
  return rc;
}

static int add_cand(hang_groups_t *hg, hgc_cands_t *cs, const char *sig, const char *path) {
  hgc_cand_t *c;
  if (hgc_cands_add(cs, sig, path, &c) != 0) return SQLITE_NOMEM;
  int rc = c ? read_children(hg, c) : SQLITE_OK;
  return rc == SQLITE_OK && c ? read_path(hg, c) : rc;
}

/* The stored groups keyed by a root prefix of h's key. */
static int prefix_cands(hang_groups_t *hg, const store_hang_t *h, hgc_cands_t *cs) {
  sqlite3_stmt *s = hg->stmt[HG_FIND];
  int rc = SQLITE_OK;
  uint64_t prefix = PERF__SIGNATURE_START; /* the first d frames' path_hash */
  for (size_t d = 1; rc == SQLITE_OK && d <= h->len; d++) {
    prefix = perf__signature_add(prefix, h->key[h->len - d]);
    if (!may_be_stored(hg, set_key(prefix))) continue;
    char sig[STORE_SIG_CHARS + 1];
    hgc_prefix_sig(h, d, sig);
    sqlite3_bind_text(s, 1, sig, -1, SQLITE_TRANSIENT);
    int step = sqlite3_step(s);
    char *path = step == SQLITE_ROW && sqlite3_column_text(s, 0)
                     ? strdup((const char *)sqlite3_column_text(s, 0))
                     : NULL;
    rc = done(s, step);
    if (rc == SQLITE_OK && step == SQLITE_ROW)
      rc = path ? add_cand(hg, cs, sig, path) : SQLITE_NOMEM;
    free(path);
  }
  return rc;
}

typedef struct range_ctx_s {
  hang_groups_t *hg;
  hgc_cands_t *cs;
  const store_hang_t *h;
} range_ctx_t;

/* The stored groups in [from, to), at most limit, by path, offered to the
   pick (hgc_cands_add_row); the index in rx->cs of each one whose key is a
   prefix of the hang's into prefixes (rows are at most limit). */
static int index_range(const range_ctx_t *rx, const char *from, const char *to, size_t limit,
                       size_t *prefixes, size_t *n_prefixes) {
  sqlite3_stmt *s = rx->hg->stmt[HG_EXTENSIONS];
  sqlite3_bind_text(s, 1, from, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, to, -1, SQLITE_STATIC);
  sqlite3_bind_int(s, 3, (int)limit);
  int rc, err = SQLITE_OK;
  while (err == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    const char *sig = (const char *)sqlite3_column_text(s, 0);
    const char *path = (const char *)sqlite3_column_text(s, 1);
    const void *blob = sqlite3_column_blob(s, 2);
    size_t bytes = blob ? (size_t)sqlite3_column_bytes(s, 2) : 0;
    hgc_cand_t *c = NULL;
    if (sig && path && hgc_cands_add_row(rx->cs, rx->h, sig, path, blob, bytes, &c) != 0)
      err = SQLITE_NOMEM;
    if (c && hgc_cand_is_prefix(rx->h, c)) prefixes[(*n_prefixes)++] = (size_t)(c - rx->cs->v);
  }
  return done(s, err != SQLITE_OK ? err : rc);
}

/* The paths next to range r (hgc_next_t). */
static int next_paths(hang_groups_t *hg, const hgc_range_t *r, hgc_next_t *next) {
  sqlite3_stmt *s = hg->stmt[HG_NEXT];
  sqlite3_bind_text(s, 1, r->floor, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, r->from, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 3, r->to, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 4, r->ceiling, -1, SQLITE_STATIC);
  int rc = sqlite3_step(s);
  for (int i = 0; rc == SQLITE_ROW && i < 2; i++) {
    const char *path = (const char *)sqlite3_column_text(s, i);
    char **to = i == 0 ? &next->below : &next->above;
    if (path && !(*to = strdup(path))) rc = SQLITE_NOMEM;
  }
  return done(s, rc);
}

/* The stored groups of range r the pick could take (hgc_cands_add_row;
   hgc_look_ranges' range, ctx a range_ctx_t): its two index ranges, then
   the paths next to it when asked; the children of a group whose key is a
   prefix of the hang's (a prefix lookup found it already, as a rule) read
   after. */
static int range_cands(void *ctx, const hgc_range_t *r, hgc_next_t *next) {
  const range_ctx_t *rx = ctx;
  size_t prefixes[HGC_MAX_EXTENSIONS * 2], n_prefixes = 0; /* into rx->cs */
  int rc = strcmp(r->from, r->skip_from) < 0               /* empty: nothing skipped */
               ? index_range(rx, r->from, r->skip_from, r->limit, prefixes, &n_prefixes)
               : SQLITE_OK;
  if (rc == SQLITE_OK) rc = index_range(rx, r->skip_to, r->to, r->limit, prefixes, &n_prefixes);
  if (rc == SQLITE_OK && r->floor) rc = next_paths(rx->hg, r, next);
  for (size_t i = 0; rc == SQLITE_OK && i < n_prefixes; i++)
    rc = read_children(rx->hg, &rx->cs->v[prefixes[i]]);
  return rc;
}

/* The hang's samples at the end of the chosen key, added to its children,
   and through each root part of the key, added to its path (old: what the
   group had, NULL for a new one). */
static int add_children(hang_groups_t *hg, const store_hang_t *h, const char *sig,
                        const char *const *key, size_t len, const uint64_t *old) {
  hgc_children_t ch;
  int rc = hgc_children(h, key, len, &ch) == 0 ? SQLITE_OK : SQLITE_NOMEM;
  sqlite3_stmt *s = hg->stmt[HG_ADD_CHILD];
  for (size_t i = 0; rc == SQLITE_OK && i <= ch.n; i++) {
    uint64_t count = i < ch.n ? ch.samples[i] : ch.self;
    if (count == 0) continue;
    sqlite3_bind_text(s, 1, sig, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, i < ch.n ? ch.names[i] : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)count);
    rc = done(s, sqlite3_step(s));
  }
  hgc_children_free(&ch);
  uint64_t *through = rc == SQLITE_OK ? hgc_through(h, key, len, old) : NULL;
  if (rc == SQLITE_OK && !through) rc = SQLITE_NOMEM;
  if (rc == SQLITE_OK) rc = write_path(hg, sig, through, len);
  free(through);
  return rc;
}

static int upsert_group(hang_groups_t *hg, const char *sig, const char *names_json, int64_t ns) {
  sqlite3_stmt *s = hg->stmt[HG_UPSERT_GROUP];
  sqlite3_bind_text(s, 1, sig, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, names_json ? names_json : "[]", -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 3, ns);
  return done(s, sqlite3_step(s));
}

int hang_groups_assign(hang_groups_t *hg, const store_hang_t *h, int64_t ns,
                       const store_known_t *known, char sig[STORE_SIG_CHARS + 1]) {
  snprintf(sig, STORE_SIG_CHARS + 1, "%s", h->group.signature);
  if (h->len == 0)
    return known && store_known_fresh(known, sig, ns)
               ? SQLITE_OK
               : upsert_group(hg, sig, h->group.names_json, ns);
  char *path = hgc_path_of(h->key, h->len);
  hgc_cands_t cs = {0};
  range_ctx_t ctx = {hg, &cs, h};
  int rc = path ? prefix_cands(hg, h, &cs) : SQLITE_NOMEM;
  if (rc == SQLITE_OK) rc = hgc_look_ranges(h, &cs, range_cands, &ctx, SQLITE_NOMEM);
  long pick = rc == SQLITE_OK ? hgc_pick(h, &cs) : -1;
  if (pick == -2) rc = SQLITE_NOMEM;
  const char *const *key = h->key;
  const uint64_t *old = NULL;
  size_t len = h->len;
  if (rc == SQLITE_OK && pick >= 0) {
    snprintf(sig, STORE_SIG_CHARS + 1, "%s", cs.v[pick].sig);
    key = cs.v[pick].view.key;
    len = cs.v[pick].view.len;
    old = cs.v[pick].view.through;
  } else if (rc == SQLITE_OK) {
    sqlite3_stmt *s = hg->stmt[HG_INSERT];
    sqlite3_bind_text(s, 1, sig, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, path, -1, SQLITE_STATIC);
    rc = done(s, sqlite3_step(s));
    if (rc == SQLITE_OK) set_add(hg, path);
  }
  /* A picked group's row exists: only its last_seen moves. */
  if (rc == SQLITE_OK && !(known && store_known_fresh(known, sig, ns)))
    rc = upsert_group(hg, sig, h->group.names_json, ns);
  if (rc == SQLITE_OK) rc = add_children(hg, h, sig, key, len, old);
  hgc_cands_free(&cs);
  free(path);
  return rc;
}

int hang_groups_prune(hang_groups_t *hg) {
  int rc = done(hg->stmt[HG_PRUNE_GROUPS], sqlite3_step(hg->stmt[HG_PRUNE_GROUPS]));
  if (rc == SQLITE_OK)
    rc = done(hg->stmt[HG_PRUNE_CHILDREN], sqlite3_step(hg->stmt[HG_PRUNE_CHILDREN]));
  if (rc == SQLITE_OK) rc = done(hg->stmt[HG_PRUNE_PATH], sqlite3_step(hg->stmt[HG_PRUNE_PATH]));
  return rc;
}
