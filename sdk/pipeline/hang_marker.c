/*
 * hang_marker.c - fatal-hang markers in the data directory (see
 * hang_marker.h). Writer thread only.
 */
#include "sdk/pipeline/hang_marker.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sdk/base/dir_handle.h"
#include "sdk/base/fileio.h"
#include "sdk/base/log.h"
#include "sdk/base/owned_fds.h"
#include "sdk/wire/batch_decode.h"

static int encode_marker(perf__hang_marker_t *m, const perf__config_t *cfg, const perf__event_t *ev,
                         uint8_t **out, size_t *len);
static int replace_marker(perf__hang_marker_t *m, int dirfd, const char *data_dir,
                          const uint8_t *data, size_t len);
static Perf__V1__Batch *claim_marker(int dirfd, const char *name, const char *path, bool marker);
static int read_locked(int fd, uint8_t **out, size_t *len);

int perf__hang_marker_write(perf__hang_marker_t *m, const perf__config_t *cfg, int dirfd,
                            const perf__event_t *ev) {
  uint8_t *data = NULL;
  size_t len = 0;
  int err = encode_marker(m, cfg, ev, &data, &len);
  if (err) {
    if (!m->warned) perf__log(PERF__LOG_WARN, "hang marker not written: %s", perf_strerror(err));
    m->warned = true;
    return err;
  }
  err = replace_marker(m, dirfd, cfg->data_dir, data, len);
  free(data);
  return err;
}

void perf__hang_marker_clear(perf__hang_marker_t *m, int dirfd) {
  m->warned = false; /* a new hang logs its own failure */
  if (m->file.fd < 0) return;
  char name[64];
  snprintf(name, sizeof name, "hang-%d.marker", (int)getpid());
  if (dirfd >= 0) unlinkat(dirfd, name, 0);
  perf__owned_fd_release(&m->file); /* closed only while it still names our marker */
}

void perf__hang_marker_free(perf__hang_marker_t *m) {
  perf__owned_fd_release(&m->file);
  perf__batch_free(m->builder);
  perf__event_encoder_free(m->encoder);
  m->builder = NULL;
  m->encoder = NULL;
}

int perf__hang_marker_collect(int dirfd, const char *data_dir, Perf__V1__Batch ***out,
                              size_t *count) {
  *out = NULL;
  *count = 0;
  int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0) close(fd);
    return PERF_E_SYSTEM;
  }
  struct dirent *de;
  int err = PERF_OK;
  while (!err && (de = readdir(d)) != NULL) {
    size_t len = strlen(de->d_name);
    bool marker = len > 12 && strncmp(de->d_name, "hang-", 5) == 0 &&
                  strcmp(de->d_name + len - 7, ".marker") == 0;
    bool tmp = len > 9 && strncmp(de->d_name, "hang-", 5) == 0 &&
               strcmp(de->d_name + len - 4, ".tmp") == 0;
    if (!marker && !tmp) continue;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", data_dir, de->d_name);
    Perf__V1__Batch *bt = claim_marker(dirfd, de->d_name, path, marker);
    if (!bt) continue;
    Perf__V1__Batch **grown = realloc(*out, (*count + 1) * sizeof *grown);
    if (!grown) {
      perf__v1__batch__free_unpacked(bt, NULL);
      err = PERF_E_NO_MEMORY;
      break;
    }
    *out = grown;
    (*out)[(*count)++] = bt;
  }
  closedir(d);
  return err;
}

/* The hang as a one-event batch, made with the marker's own builder; not
   compressed (a marker is rewritten as the hang goes on, and read back on
   this machine only: zstd's compressor never runs for it). */
static int encode_marker(perf__hang_marker_t *m, const perf__config_t *cfg, const perf__event_t *ev,
                         uint8_t **out, size_t *len) {
  if (!m->builder) {
    perf__batch_resource_t res;
    perf__config_batch_resource(cfg, &res);
    perf__batch_options_t o;
    perf__batch_options_init(&o);
    o.symbolize = cfg->symbolize != 0;
    o.max_bytes = PERF__HANG_MARKER_MAX_BYTES;
    o.uncompressed = true;
    int err = perf__batch_builder_new(&res, &o, &m->builder);
    if (err) return err;
  }
  if (!m->encoder && !(m->encoder = perf__event_encoder_new())) return PERF_E_NO_MEMORY;
  int err = perf__event_encode(m->encoder, m->builder, ev);
  if (!err) err = perf__batch_finish(m->builder, NULL, out, len, NULL);
  if (err) perf__batch_reset(m->builder);
  return err;
}

/* Lock before the file has its final name: a reader never finds an
   unlocked marker of a live process. */
static int replace_marker(perf__hang_marker_t *m, int dirfd, const char *data_dir,
                          const uint8_t *data, size_t len) {
  char tmp[64], name[64];
  snprintf(tmp, sizeof tmp, "hang-%d.tmp", (int)getpid());
  snprintf(name, sizeof name, "hang-%d.marker", (int)getpid());
  /* A new file of our own: whatever has the temporary name (a link planted
     there, a leftover) is removed, never opened. */
  int fd = -1;
  if (dirfd >= 0 && (unlinkat(dirfd, tmp, 0) == 0 || errno == ENOENT))
    fd = perf__openat_file(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL, PERF__FILE_MODE);
  if (fd < 0 || flock(fd, LOCK_EX) != 0 || perf__write_all(fd, data, len) != 0 ||
      renameat(dirfd, tmp, dirfd, name) != 0) {
    if (!m->warned)
      perf__log(PERF__LOG_WARN, "hang marker %s/%s: %s", data_dir, name, strerror(errno));
    m->warned = true;
    if (fd >= 0) {
      unlinkat(dirfd, tmp, 0);
      close(fd);
    }
    return PERF_E_SYSTEM;
  }
  perf__owned_fd_release(&m->file); /* the replaced file, already unlinked by rename */
  /* A forked child closes its copy: its flock would keep a dead parent's
     marker looking alive. */
  perf__owned_fd_hold(&m->file, fd);
  return PERF_OK;
}

/* A file of a dead process (nobody holds its lock): decoded when it is a
   marker, deleted in any case. NULL when it is alive, not a marker, or
   unreadable. */
static Perf__V1__Batch *claim_marker(int dirfd, const char *name, const char *path, bool marker) {
  int fd = perf__openat_file(dirfd, name, O_RDONLY, 0);
  if (fd < 0) return NULL;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) { /* its process is alive */
    close(fd);
    return NULL;
  }
  uint8_t *data = NULL;
  size_t len = 0;
  Perf__V1__Batch *bt = NULL;
  if (marker && read_locked(fd, &data, &len) == 0 &&
      (perf__batch_decode_stored(data, len, PERF__HANG_MARKER_MAX_BYTES, &bt) != 0 ||
       bt->n_events != 1)) {
    if (bt) perf__v1__batch__free_unpacked(bt, NULL);
    bt = NULL;
  }
  if (marker && !bt) perf__log(PERF__LOG_WARN, "unreadable hang marker %s deleted", path);
  unlinkat(dirfd, name, 0); /* claimed: reported once, or left over from a dead writer */
  close(fd);
  free(data);
  return bt;
}

static int read_locked(int fd, uint8_t **out, size_t *len) {
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= 0 || (size_t)st.st_size > PERF__HANG_MARKER_MAX_BYTES)
    return -1;
  uint8_t *data = malloc((size_t)st.st_size);
  if (!data) return -1;
  ssize_t n = pread(fd, data, (size_t)st.st_size, 0);
  if (n != st.st_size) {
    free(data);
    return -1;
  }
  *out = data;
  *len = (size_t)n;
  return 0;
}
