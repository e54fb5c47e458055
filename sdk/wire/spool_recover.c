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
 * eviction, the index): this file only runs at open. The open batch's
 * journal is replayed by the batch sink after the open, not here.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "perf_sdk.h"
#include "sdk/base/log.h"
#include "sdk/wire/spool_internal.h"

static void apply_bounds_at_open(perf__spool_t *sp, perf__spool_rec_list_t *found);
static size_t count_quarantine(const char *path);
static const char *check_file(perf__spool_t *sp, const char *path, const uint8_t id[16],
                              perf__spool_rec_t *rec, int *io_errno);

int perf__spool_recover(perf__spool_t *sp) {
  sp->quarantine_files = count_quarantine(sp->quarantine);
  perf__spool_rec_list_t found = {0};
  uint64_t max_seq = 0;
  size_t others = 0;
  int err = perf__spool_scan_dir(sp, sp->dir, &found, &max_seq, &others);
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

int perf__spool_scan_dir(perf__spool_t *sp, const char *dir, perf__spool_rec_list_t *found,
                         uint64_t *max_seq, size_t *others) {
  DIR *d = opendir(dir);
  if (!d) PERF__FAIL(PERF_E_SYSTEM, "spool: cannot list %s: %s", dir, strerror(errno));
  struct dirent *de;
  int err = PERF_OK;
  for (size_t seen = 0; !err && (de = readdir(d)) != NULL; seen++) {
    if (seen >= PERF__SPOOL_SCAN_LIMIT) {
      perf__log(PERF__LOG_WARN, "spool: over %d entries in %s: the rest wait for a later open",
                PERF__SPOOL_SCAN_LIMIT, dir);
      break;
    }
    const char *name = de->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strcmp(name, "LOCK") == 0) continue;
    uint64_t seq;
    uint8_t id[16];
    bool batch = perf__spool_parse_batch_name(name, &seq, id);
    bool tmp = !batch && perf__spool_is_tmp_name(name);
    if ((!batch && !tmp) || !perf__spool_is_regular(dir, name)) {
      if (strcmp(name, "quarantine") != 0 && !perf__spool_is_pid_name(name)) (*others)++;
      continue;
    }
    if (tmp) {
      uint8_t tmp_id[16];
      char stem[PERF__SPOOL_NAME_BYTES];
      size_t stem_len = strlen(name) - 4;
      if (stem_len + sizeof ".batch" <= sizeof stem) {
        memcpy(stem, name, stem_len);
        memcpy(stem + stem_len, ".batch", 7);
        if (perf__spool_parse_batch_name(stem, &seq, tmp_id) && seq > *max_seq) *max_seq = seq;
      }
    } else if (seq > *max_seq) {
      *max_seq = seq;
    }
    char path[PATH_MAX];
    perf__spool_join(path, dir, name);
    perf__spool_rec_t rec;
    int io_errno = 0;
    const char *bad = tmp ? "torn" : check_file(sp, path, id, &rec, &io_errno);
    if (io_errno) { /* cannot tell: leave it */
      perf__log(PERF__LOG_WARN, "spool: %s: %s", path, strerror(io_errno));
      (*others)++;
    } else if (bad) {
      struct stat st;
      perf__log(PERF__LOG_WARN, "spool: %s is %s: quarantined", path, bad);
      perf__spool_quarantine_file(sp, path, name, bad,
                                  stat(path, &st) == 0 ? (uint64_t)st.st_size : 0);
      sp->st.quarantined_corrupt++;
    } else {
      rec.seq = seq;
      err = perf__spool_list_push(found, &rec);
    }
  }
  closedir(d);
  return err;
}

int perf__spool_list_push(perf__spool_rec_list_t *l, const perf__spool_rec_t *r) {
  if (l->n == l->cap) {
    if (l->cap >= PERF__SPOOL_SCAN_LIMIT) return PERF_E_NO_MEMORY;
    size_t cap = l->cap ? l->cap * 2 : 64;
    if (cap > PERF__SPOOL_SCAN_LIMIT) cap = PERF__SPOOL_SCAN_LIMIT;
    perf__spool_rec_t *v = realloc(l->v, cap * sizeof *v);
    if (!v) return PERF_E_NO_MEMORY;
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = *r;
  return PERF_OK;
}

int perf__spool_rec_cmp(const void *a, const void *b) {
  uint64_t x = ((const perf__spool_rec_t *)a)->seq, y = ((const perf__spool_rec_t *)b)->seq;
  return x < y ? -1 : x > y;
}

/* The oldest found batches beyond the bounds are evicted; the rest become
   the index. */
static void apply_bounds_at_open(perf__spool_t *sp, perf__spool_rec_list_t *found) {
  uint64_t bytes = 0;
  for (size_t i = 0; i < found->n; i++)
    bytes += found->v[i].size;
  int64_t wall = sp->io.wall_ns(sp->io.ctx), boot = sp->io.boot_ns(sp->io.ctx);
  for (size_t i = 0; i < found->n; i++) {
    /* Every record's birth on this boot's clock (see the top of the file). */
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

static size_t count_quarantine(const char *path) {
  DIR *d = opendir(path);
  if (!d) return 0;
  size_t n = 0;
  struct dirent *de;
  while (n < PERF__SPOOL_QUARANTINE_LIMIT && (de = readdir(d)) != NULL)
    if (de->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* Open-time check of the batch file at path, header only (the payload's CRC
   is checked when the batch is read): NULL and *rec filled (but for seq)
   when it looks whole, else what is wrong; *io_errno set when it could not
   be read at all. */
static const char *check_file(perf__spool_t *sp, const char *path, const uint8_t id[16],
                              perf__spool_rec_t *rec, int *io_errno) {
  int fd = sp->io.open(sp->io.ctx, path, O_RDONLY, 0);
  if (fd < 0) {
    *io_errno = errno;
    return NULL;
  }
  const char *bad = NULL;
  if (perf__spool_read_batch_fd(&sp->io, sp->max_bytes, fd, path, id, rec, NULL, &bad) != PERF_OK)
    *io_errno = errno ? errno : EIO;
  sp->io.close(sp->io.ctx, fd);
  return bad;
}
