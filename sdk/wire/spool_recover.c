/*
 * spool_recover.c - what an opening spool finds in its own directory after
 * a crash or a clean exit: every batch file read back and checked (header:
 * magic, version, header CRC, length, id; the payload's CRC waits for the
 * read), torn, empty and bad files and leftover temporary files set aside
 * in quarantine/, the sequence continued after the highest seq found, the
 * bounds applied (oldest first), the rest made the index. Dead processes'
 * subdirectories are adopted in between (spool_adopt.c). Runs once, in
 * perf__spool_open, on the thread that opens the spool, before the spool
 * is shared: no locking.
 *
 * Split from spool.c, which keeps the running spool (puts, reads, removals,
 * eviction, the index): this file only runs at open. The scan of one
 * directory's files, which adoption shares, and the file helpers are
 * spool_files.c's. Called by spool.c; calls spool_adopt.c and
 * spool_files.c. The open batch's journal is replayed by the batch sink
 * after the open, not here.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdlib.h>

#include "perf_sdk.h"
#include "sdk/wire/spool_internal.h"

static void apply_bounds_at_open(perf__spool_t *sp, perf__spool_rec_list_t *found);
static size_t count_quarantine(int dirfd);

int perf__spool_recover(perf__spool_t *sp) {
  sp->quarantine_files = count_quarantine(perf__spool_quarantine_fd(sp));
  perf__spool_rec_list_t found = {0};
  uint64_t max_seq = 0;
  size_t others = 0;
  int err = perf__spool_scan_dir(sp, perf__spool_dir_fd(sp), sp->dir, &found, &max_seq, &others);
  if (err) {
    free(found.v);
    return err;
  }
  sp->next_seq = max_seq + 1;
  if (found.n > 1) qsort(found.v, found.n, sizeof *found.v, perf__spool_rec_cmp);
  perf__spool_adopt_subdirs(sp, &found); /* appended with fresh seqs: already in order */
  sp->st.adopted = found.n;
  apply_bounds_at_open(sp, &found);
  free(found.v);
  return PERF_OK;
}

/* The oldest found batches beyond the bounds are evicted; the rest become
   the index. */
static void apply_bounds_at_open(perf__spool_t *sp, perf__spool_rec_list_t *found) {
  uint64_t bytes = 0;
  for (size_t i = 0; i < found->n; i++)
    bytes += found->v[i].size;
  int64_t wall = sp->io.wall_ns(sp->io.ctx), boot = sp->io.boot_ns(sp->io.ctx);
  for (size_t i = 0; i < found->n; i++) {
    /* Every record's birth on this boot's clock (see the top of spool.c). */
    perf__spool_rec_t *r = &found->v[i];
    bool this_boot = sp->boot_tag && r->boot_tag == sp->boot_tag && r->boot_ns <= boot;
    if (!this_boot) {
      int64_t age = wall > r->created_ns ? wall - r->created_ns : 0; /* the future: age 0 */
      r->boot_ns = boot - age;
      r->boot_tag = sp->boot_tag;
    }
  }
  /* Written in seq order: a batch is at least as old as any written after
     it, whatever the clocks said (and the index evicts from its head). */
  for (size_t i = found->n; i-- > 1;)
    if (found->v[i - 1].boot_ns > found->v[i].boot_ns)
      found->v[i - 1].boot_ns = found->v[i].boot_ns;
  int64_t cutoff = boot - (int64_t)sp->max_age_s * 1000000000;
  size_t first = 0;
  while (first < found->n && (found->n - first > sp->max_files || bytes > sp->max_bytes ||
                              (sp->max_age_s && found->v[first].boot_ns < cutoff))) {
    perf__spool_unlink_rec(sp, &found->v[first], "evict");
    bytes -= found->v[first].size;
    sp->st.evicted_quota++;
    first++;
  }
  for (size_t i = first; i < found->n; i++)
    sp->ring[i - first] = found->v[i];
  sp->head = 0;
  sp->count = found->n - first;
  sp->bytes = bytes;
}

static size_t count_quarantine(int dirfd) {
  DIR *d = dirfd >= 0 ? perf__spool_opendir(dirfd) : NULL;
  if (!d) return 0;
  size_t n = 0;
  struct dirent *de;
  while (n < PERF__SPOOL_QUARANTINE_LIMIT && (de = readdir(d)) != NULL)
    if (de->d_name[0] != '.') n++;
  closedir(d);
  return n;
}
