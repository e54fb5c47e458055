/*
 * hang_marker.c - fatal-hang markers in the data directory (see
 * hang_marker.h). Writer thread only.
 *
 * File format (text):
 *   perf-sdk hang marker v1
 *   pid=<pid>
 *   thread=<tid>
 *   start_wall_ns=<ns since the epoch>
 *   duration_ns=<hang length when written>
 *   samples=<n>
 *   stacks:
 *   <the event's stacks in the file sink's text form>
 */
#include "sdk/pipeline/hang_marker.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sdk/base/fileio.h"
#include "sdk/base/log.h"
#include "sdk/pipeline/event_text.h"

#define MARKER_MAGIC "perf-sdk hang marker v1\n"
#define MARKER_MAX_BYTES (4u << 20)

static perf__event_t *parse_marker(char *text);
static int read_locked(int fd, char **out);

int perf__hang_marker_write(perf__hang_marker_t *m, const char *data_dir, const perf__event_t *ev) {
  perf__strbuf_t b;
  perf__strbuf_init(&b, MARKER_MAX_BYTES);
  int err = perf__strbuf_appendf(&b,
                                 MARKER_MAGIC "pid=%d\nthread=%d\nstart_wall_ns=%" PRId64
                                              "\nduration_ns=%" PRId64 "\nsamples=%zu\nstacks:\n",
                                 (int)getpid(), (int)ev->tid, ev->start_wall_ns, ev->duration_ns,
                                 perf__event_good_samples(ev));
  if (!err) err = perf__format_event_stacks(&b, ev);
  char tmp[PATH_MAX], path[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s/hang-%d.tmp", data_dir, (int)getpid());
  snprintf(path, sizeof path, "%s/hang-%d.marker", data_dir, (int)getpid());
  int fd = -1;
  if (!err) {
    /* Lock before the file has its final name: a reader never finds an
       unlocked marker of a live process. */
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) != 0 || perf__write_all(fd, b.data, b.len) != 0 ||
        rename(tmp, path) != 0) {
      perf__log(PERF__LOG_WARN, "hang marker %s: %s", path, strerror(errno));
      if (fd >= 0) {
        unlink(tmp);
        close(fd);
      }
      err = PERF_E_SYSTEM;
    }
  }
  perf__strbuf_free(&b);
  if (err) return err;
  if (m->fd >= 0) close(m->fd); /* the replaced file, already unlinked by rename */
  m->fd = fd;
  return PERF_OK;
}

void perf__hang_marker_clear(perf__hang_marker_t *m, const char *data_dir) {
  if (m->fd < 0) return;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/hang-%d.marker", data_dir, (int)getpid());
  unlink(path);
  close(m->fd);
  m->fd = -1;
}

int perf__hang_marker_collect(const char *data_dir, perf__event_t ***out, size_t *count) {
  *out = NULL;
  *count = 0;
  DIR *d = opendir(data_dir);
  if (!d) return errno == ENOENT ? PERF_OK : PERF_E_SYSTEM;
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
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) { /* its process is alive */
      close(fd);
      continue;
    }
    char *text = NULL;
    perf__event_t *ev = NULL;
    if (marker && read_locked(fd, &text) == 0) ev = parse_marker(text);
    if (marker && !ev) perf__log(PERF__LOG_WARN, "unreadable hang marker %s deleted", path);
    unlink(path); /* claimed: reported once, or left over from a dead writer */
    close(fd);
    free(text);
    if (!ev) continue;
    perf__event_t **grown = realloc(*out, (*count + 1) * sizeof *grown);
    if (!grown) {
      perf__event_free(ev);
      err = PERF_E_NO_MEMORY;
      break;
    }
    *out = grown;
    (*out)[(*count)++] = ev;
  }
  closedir(d);
  return err;
}

static int read_locked(int fd, char **out) {
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= 0 || (size_t)st.st_size > MARKER_MAX_BYTES) return -1;
  char *text = malloc((size_t)st.st_size + 1);
  if (!text) return -1;
  ssize_t n = pread(fd, text, (size_t)st.st_size, 0);
  if (n != st.st_size) {
    free(text);
    return -1;
  }
  text[n] = '\0';
  *out = text;
  return 0;
}

static perf__event_t *parse_marker(char *text) {
  if (strncmp(text, MARKER_MAGIC, strlen(MARKER_MAGIC)) != 0) return NULL;
  char *stacks = strstr(text, "\nstacks:\n");
  if (!stacks) return NULL;
  *stacks = '\0';
  stacks += strlen("\nstacks:\n");
  int pid = 0, tid = 0;
  int64_t start = 0, duration = 0;
  size_t samples = 0;
  const char *h = text + strlen(MARKER_MAGIC);
  if (sscanf(h,
             "pid=%d\nthread=%d\nstart_wall_ns=%" SCNd64 "\nduration_ns=%" SCNd64 "\nsamples=%zu",
             &pid, &tid, &start, &duration, &samples) != 5)
    return NULL;
  perf__event_t *ev = perf__event_new(PERF__EVENT_FATAL_HANG, NULL);
  if (!ev || !(ev->stacks_text = strdup(stacks))) {
    perf__event_free(ev);
    return NULL;
  }
  ev->tid = tid;
  ev->start_wall_ns = start;
  ev->duration_ns = duration;
  ev->text_samples = samples;
  snprintf(ev->reason, sizeof ev->reason, "process %d ended while its thread %d was hung", pid,
           tid);
  return ev;
}
