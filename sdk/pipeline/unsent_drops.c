/*
 * unsent_drops.c - drop counts kept across a restart (see unsent_drops.h).
 * Writer thread.
 */
#include "sdk/pipeline/unsent_drops.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/fileio.h"
#include "sdk/base/log.h"

#define FILE_NAME "drops"
#define MAGIC "perf-drops 1"

static bool is_zero(const perf__batch_drops_t *d);

bool perf__unsent_drops_load(int dirfd, const char *dir, perf__batch_drops_t *d) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/" FILE_NAME, dir);
  int fd = dirfd >= 0 ? perf__openat_file(dirfd, FILE_NAME, O_RDONLY, 0) : -1;
  FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
  if (!f) {
    if (fd >= 0) close(fd);
    return false;
  }
  char magic[32] = "";
  perf__batch_drops_t got = {0};
  bool ok = fgets(magic, sizeof magic, f) && strcmp(magic, MAGIC "\n") == 0 &&
            fscanf(f,
                   "rate_limited %" SCNu64 " queue_full %" SCNu64 " sink_failed %" SCNu64
                   " spool_quota %" SCNu64 " oversized %" SCNu64,
                   &got.rate_limited, &got.queue_full, &got.sink_failed, &got.spool_quota,
                   &got.oversized) == 5;
  fclose(f);
  if (!ok) {
    perf__log(PERF__LOG_WARN, "%s is not a drop count file: ignored", path);
    return true;
  }
  d->rate_limited += got.rate_limited;
  d->queue_full += got.queue_full;
  d->sink_failed += got.sink_failed;
  d->spool_quota += got.spool_quota;
  d->oversized += got.oversized;
  return true;
}

int perf__unsent_drops_save(int dirfd, const char *dir, const perf__batch_drops_t *d) {
  if (is_zero(d)) {
    perf__unsent_drops_clear(dirfd);
    return PERF_OK;
  }
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/" FILE_NAME, dir);
  /* A new file of our own: whatever has the temporary name (a link planted
     there) is removed, never opened. */
  int fd = -1;
  if (dirfd >= 0 && (unlinkat(dirfd, FILE_NAME ".new", 0) == 0 || errno == ENOENT))
    fd = perf__openat_file(dirfd, FILE_NAME ".new", O_WRONLY | O_CREAT | O_EXCL, PERF__FILE_MODE);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f && fd >= 0) close(fd);
  bool ok =
      f &&
      fprintf(f,
              MAGIC "\nrate_limited %" PRIu64 "\nqueue_full %" PRIu64 "\nsink_failed %" PRIu64
                    "\nspool_quota %" PRIu64 "\noversized %" PRIu64 "\n",
              d->rate_limited, d->queue_full, d->sink_failed, d->spool_quota, d->oversized) > 0;
  if (f && fclose(f) != 0) ok = false;
  if (ok && renameat(dirfd, FILE_NAME ".new", dirfd, FILE_NAME) != 0) ok = false;
  if (!ok) {
    perf__log(PERF__LOG_WARN, "drop counts not saved in %s: %s", path, strerror(errno));
    if (dirfd >= 0) unlinkat(dirfd, FILE_NAME ".new", 0);
    return PERF_E_SYSTEM;
  }
  return PERF_OK;
}

void perf__unsent_drops_clear(int dirfd) {
  if (dirfd >= 0) unlinkat(dirfd, FILE_NAME, 0);
}

static bool is_zero(const perf__batch_drops_t *d) {
  return !d->rate_limited && !d->queue_full && !d->sink_failed && !d->spool_quota && !d->oversized;
}
