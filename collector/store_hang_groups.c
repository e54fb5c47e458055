/*
 * store_hang_groups.c - hang groups in SQLite (see store_hang_groups.h).
 * A pick reads the candidates (the stored groups whose key is a prefix of
 * the hang's key, one lookup per prefix by its signature, and up to
 * HGC_MAX_EXTENSIONS under each range hgc_look_ranges names: each place
 * the hang's own samples turned off its key with an eighth of them, and
 * each of the key's last branch points whatever the hang's share there,
 * one index range each), hands them to perf__group_pick (hgc_pick;
 * signature.c: the rule lives there, not here), then writes the choice.
 * What does not depend on SQLite is in hang_group_cands.c, shared with
 * store_pg_hang_groups.c.
 */
#include "store_hang_groups.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hang_group_cands.h"

static const char SCHEMA[] =
    "CREATE TABLE IF NOT EXISTS hang_groups(signature TEXT PRIMARY KEY, path TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS hang_groups_path ON hang_groups(path);"
    "CREATE TABLE IF NOT EXISTS hang_group_children(group_sig TEXT NOT NULL, child TEXT NOT NULL,"
    " samples INTEGER NOT NULL, PRIMARY KEY(group_sig, child));"
    "CREATE TABLE IF NOT EXISTS hang_group_path(group_sig TEXT PRIMARY KEY, samples BLOB NOT "
    "NULL);";

enum hg_stmt {
  HG_FIND,
  HG_EXTENSIONS,
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
    [HG_EXTENSIONS] = "SELECT signature, path FROM hang_groups WHERE path >= ?1 AND path < ?2"
                      " ORDER BY length(path), path LIMIT ?3",
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

struct hang_groups_s {
  sqlite3_stmt *stmt[HG_COUNT];
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
  free(hg);
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
  size_t len = c->view.len;
  if (!(c->through = calloc(len ? len : 1, sizeof *c->through))) return SQLITE_NOMEM;
  sqlite3_stmt *s = hg->stmt[HG_PATH];
  sqlite3_bind_text(s, 1, c->sig, -1, SQLITE_STATIC);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW)
    hgc_decode_path(sqlite3_column_blob(s, 0), (size_t)sqlite3_column_bytes(s, 0), c->through, len);
  c->view.through = c->through;
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
  for (size_t d = 1; rc == SQLITE_OK && d <= h->len; d++) {
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
} range_ctx_t;

/* The stored groups whose path lies in [prefix, upper) (hgc_look_ranges'
   range; ctx a range_ctx_t). */
static int range_cands(void *ctx, const char *prefix, const char *upper) {
  hang_groups_t *hg = ((range_ctx_t *)ctx)->hg;
  hgc_cands_t *cs = ((range_ctx_t *)ctx)->cs;
  sqlite3_stmt *s = hg->stmt[HG_EXTENSIONS];
  sqlite3_bind_text(s, 1, prefix, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, upper, -1, SQLITE_STATIC);
  sqlite3_bind_int(s, 3, HGC_MAX_EXTENSIONS);
  typedef struct {
    char sig[STORE_SIG_CHARS + 1];
    char *path;
  } row_t;
  row_t rows[HGC_MAX_EXTENSIONS];
  size_t got = 0;
  int rc = SQLITE_DONE;
  while (got < HGC_MAX_EXTENSIONS && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    const char *sig = (const char *)sqlite3_column_text(s, 0);
    const char *p = (const char *)sqlite3_column_text(s, 1);
    if (!sig || !p) continue;
    snprintf(rows[got].sig, sizeof rows[got].sig, "%s", sig);
    if (!(rows[got].path = strdup(p))) break;
    got++;
  }
  rc = done(s, got < HGC_MAX_EXTENSIONS && rc != SQLITE_DONE ? SQLITE_NOMEM : SQLITE_DONE);
  for (size_t i = 0; i < got; i++) { /* HG_CHILDREN runs after HG_EXTENSIONS is reset */
    if (rc == SQLITE_OK) rc = add_cand(hg, cs, rows[i].sig, rows[i].path);
    free(rows[i].path);
  }
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
                       char sig[STORE_SIG_CHARS + 1]) {
  snprintf(sig, STORE_SIG_CHARS + 1, "%s", h->group.signature);
  if (h->len == 0) return upsert_group(hg, sig, h->group.names_json, ns);
  char *path = hgc_path_of(h->key, h->len);
  hgc_cands_t cs = {0};
  range_ctx_t ctx = {hg, &cs};
  int rc = path ? prefix_cands(hg, h, &cs) : SQLITE_NOMEM;
  if (rc == SQLITE_OK) rc = hgc_look_ranges(h, range_cands, &ctx, SQLITE_NOMEM);
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
  }
  /* A picked group's row exists: only its last_seen moves. */
  if (rc == SQLITE_OK) rc = upsert_group(hg, sig, h->group.names_json, ns);
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
