/*
 * spool_adopt.c - taking over what dead processes left: a spool opened
 * while another live process held the root works in <root>/<pid>; when
 * that process dies, its subdirectory's lock is free, and the next open
 * moves its batches into its own directory (after its own, with fresh
 * seqs) and its open batch's journals with them, then removes the emptied
 * subdirectory (lock file first: spool.c, take_directory, has the race).
 * Runs once, inside perf__spool_open's recovery (spool_recover.c), before
 * the spool is shared: no locking.
 *
 * Split from the spool's recovery: recovery checks one directory's files;
 * adoption decides whose directory is dead and moves its files across.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/log.h"
#include "sdk/wire/journal.h"
#include "sdk/wire/spool_internal.h"

static void adopt_subdir(perf__spool_t *sp, const char *name, perf__spool_rec_list_t *found);
static void adopt_journal(void *ctx, const char *name, const uint8_t id[16]);

typedef struct adopt_s {
  perf__spool_t *sp;
  int from_fd, to_fd;
  const char *from;
} adopt_t;

void perf__spool_adopt_subdirs(perf__spool_t *sp, perf__spool_rec_list_t *found) {
  int root_fd = perf__spool_root_fd(sp);
  DIR *d = root_fd >= 0 ? perf__spool_opendir(root_fd) : NULL;
  if (!d) return;
  struct dirent *de;
  size_t seen = 0, adopted = 0;
  const char *own = sp->subdir ? strrchr(sp->dir, '/') + 1 : NULL;
  while ((de = readdir(d)) != NULL && seen++ < PERF__SPOOL_SCAN_LIMIT &&
         adopted < PERF__SPOOL_SUBDIR_LIMIT) {
    if (!perf__spool_is_pid_name(de->d_name) || (own && strcmp(de->d_name, own) == 0)) continue;
    adopt_subdir(sp, de->d_name, found);
    adopted++;
  }
  closedir(d);
}

static void adopt_subdir(perf__spool_t *sp, const char *name, perf__spool_rec_list_t *found) {
  char sub[PATH_MAX];
  perf__spool_join(sub, sp->root, name);
  int root_fd = perf__spool_root_fd(sp), dfd = perf__spool_dir_fd(sp);
  int sub_fd =
      root_fd >= 0 ? openat(root_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
  if (sub_fd < 0 || dfd < 0) {
    if (sub_fd >= 0) close(sub_fd);
    return;
  }
  int fd = -1;
  int r = perf__spool_lock_file(sub_fd, false, &fd);
  if (r == PERF__SPOOL_LOCK_ERROR && errno == ENOENT) {
    /* left empty by an adopter or a closer that died; fails if not empty */
    unlinkat(root_fd, name, AT_REMOVEDIR);
    close(sub_fd);
    return;
  }
  if (r != PERF__SPOOL_LOCK_TAKEN) { /* alive, or someone else is adopting it */
    close(sub_fd);
    return;
  }
  /* The journals of a dead process's open batch (sdk/wire/journal.h) move
     into our directory with its batches: the batch sink replays what it
     finds there after the open. Same name: the batch id. */
  adopt_t a = {sp, sub_fd, dfd, sub};
  perf__journal_scan(sub_fd, PERF__SPOOL_SCAN_LIMIT, adopt_journal, &a);
  perf__spool_rec_list_t theirs = {0};
  uint64_t max_seq = 0;
  size_t left = 0;
  if (perf__spool_scan_dir(sp, sub_fd, sub, &theirs, &max_seq, &left) != PERF_OK) left++;
  if (theirs.n > 1) qsort(theirs.v, theirs.n, sizeof *theirs.v, perf__spool_rec_cmp);
  size_t moved = 0;
  for (size_t i = 0; i < theirs.n; i++) {
    perf__spool_rec_t rec = theirs.v[i];
    char from_name[PERF__SPOOL_NAME_BYTES], to_name[PERF__SPOOL_NAME_BYTES];
    perf__spool_batch_name(from_name, rec.seq, rec.id, ".batch");
    rec.seq = sp->next_seq;
    perf__spool_batch_name(to_name, rec.seq, rec.id, ".batch");
    if (found->n >= PERF__SPOOL_SCAN_LIMIT ||
        sp->io.rename(sp->io.ctx, sub_fd, from_name, dfd, to_name) != 0) {
      left++; /* stays there for a later open */
      continue;
    }
    sp->next_seq++;
    moved++;
    /* Out of memory: the batch is in our directory but not in the index; the
       next open finds it. */
    if (perf__spool_list_push(found, &rec) != PERF_OK) continue;
  }
  free(theirs.v);
  if (moved) sp->io.fsync(sp->io.ctx, dfd);
  perf__log(PERF__LOG_INFO, "spool: adopted %zu batches of dead process %s", moved, name);
  /* lock file first: see take_subdir in spool.c */
  if (left == 0 && unlinkat(sub_fd, "LOCK", 0) == 0) unlinkat(root_fd, name, AT_REMOVEDIR);
  close(fd);
  close(sub_fd);
}

static void adopt_journal(void *ctx, const char *name, const uint8_t id[16]) {
  adopt_t *a = ctx;
  (void)id;
  if (a->sp->io.rename(a->sp->io.ctx, a->from_fd, name, a->to_fd, name) != 0)
    perf__log(PERF__LOG_WARN, "spool: journal %s/%s not adopted: %s", a->from, name,
              strerror(errno));
}
