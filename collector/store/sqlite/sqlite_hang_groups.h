/*
 * sqlite_hang_groups.h - the SQLite store's hang groups: which stored group
 * a hang joins (perf__group_pick over the groups whose keys are prefixes
 * or extensions of the hang's key), and the samples each group's hangs had
 * at its key's end (self and per next frame), which the pick reads.
 * Tables: hang_groups(signature, path: the key's names root first, each
 * ended by 0x1f, indexed so a key's extensions are one range) and
 * hang_group_children(group_sig, child: "" for self, samples) and
 * hang_group_path(group_sig, samples: a blob of counts through the key's first
 * depth + 1 frames). Used by
 * sqlite_store.c for put_batch and re-symbolization alike, inside its
 * transaction and under its lock.
 */
#ifndef PERF_COLLECTOR_STORE_HANG_GROUPS_H
#define PERF_COLLECTOR_STORE_HANG_GROUPS_H

#include <sqlite3.h>

#include "collector/store/known_rows.h"
#include "collector/store/store.h"

typedef struct hang_groups_s hang_groups_t;

/* The tables (created when missing) and statements on db; SQLITE_OK or
   the error. */
int hang_groups_open(sqlite3 *db, hang_groups_t **out);
void hang_groups_close(hang_groups_t *hg);

/* The group of hang h seen at ns: a stored one perf__group_pick picks, or
   the hang's own key (h->len 0: h->group as it is). Its groups row is
   inserted or its last_seen moved, unless known (may be NULL) holds it
   stored (known_rows.h), and the hang's samples at the group's key end
   are added to its children. The signature goes to sig. SQLITE_OK or the
   error. */
int hang_groups_assign(hang_groups_t *hg, const store_hang_t *h, int64_t ns,
                       const store_known_t *known, char sig[STORE_SIG_CHARS + 1]);

/* Forget the signatures of the stored groups hg keeps (read again at the
   next pick): another connection may have changed the table. */
void hang_groups_forget(hang_groups_t *hg);

/* Forget the hang groups whose groups row is gone (retention, renames). */
int hang_groups_prune(hang_groups_t *hg);

#endif
