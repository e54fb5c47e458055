/*
 * task_files.c - a few /proc/self/task/TID files kept open (see
 * task_files.h). Runs on requesting threads under the sampler's lock.
 */
#include "sdk/sampler/task_files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/clock.h"
#include "sdk/base/proc_files.h"

typedef struct {
  bool open;
  int fd;
  dev_t dev; /* what the descriptor was when we opened it */
  ino_t ino;
} kept_t;

typedef struct {
  pid_t tid; /* 0: unused */
  long long used_ns;
  kept_t file[PERF__TASK_FILE_KINDS];
} entry_t;

static const char *const k_names[PERF__TASK_FILE_KINDS] = {"status", "syscall"};
static entry_t g_entries[PERF__TASK_FILES_THREADS];
static long long g_idle_ns = PERF__TASK_FILES_IDLE_NS;

static entry_t *entry_for(pid_t tid, long long now);
static void close_entry(entry_t *e);
static void close_kept(kept_t *k);
static bool still_ours(const kept_t *k);
static ssize_t open_and_read(pid_t tid, perf__task_file_t which, kept_t *k, char *buf, size_t cap);
static ssize_t read_kept(const kept_t *k, char *buf, size_t cap);

ssize_t perf__task_files_read(pid_t tid, perf__task_file_t which, char *buf, size_t cap) {
  if (tid <= 0 || which < 0 || which >= PERF__TASK_FILE_KINDS || cap < 2) return PERF_E_SYSTEM;
  entry_t *e = entry_for(tid, perf__now_ns());
  kept_t *k = &e->file[which];
  if (k->open && !still_ours(k)) k->open = false; /* the app closed it: forget, never close */
  if (k->open) {
    ssize_t n = read_kept(k, buf, cap);
    if (n > 0) return n;
    /* The thread it was opened for is gone (ESRCH); tid may name a new
       one now: open the path again. */
    close_kept(k);
  }
  ssize_t n = open_and_read(tid, which, k, buf, cap);
  if (n == PERF_E_NO_THREAD) close_entry(e);
  return n;
}

void perf__task_files_close_all(void) {
  for (int i = 0; i < PERF__TASK_FILES_THREADS; i++)
    close_entry(&g_entries[i]);
}

int perf__task_files_open_count(void) {
  int n = 0;
  for (int i = 0; i < PERF__TASK_FILES_THREADS; i++)
    for (int f = 0; f < PERF__TASK_FILE_KINDS; f++)
      n += g_entries[i].file[f].open;
  return n;
}

void perf__task_files_set_idle_ns(long long ns) {
  g_idle_ns = ns;
}

/* tid's entry, else the least recently used one, emptied for tid; entries
   idle for too long are closed on the way. */
static entry_t *entry_for(pid_t tid, long long now) {
  entry_t *hit = NULL, *oldest = &g_entries[0];
  for (int i = 0; i < PERF__TASK_FILES_THREADS; i++) {
    entry_t *e = &g_entries[i];
    if (e->tid == tid) {
      hit = e;
      continue;
    }
    if (e->tid && now - e->used_ns > g_idle_ns) close_entry(e);
    if (e->used_ns < oldest->used_ns) oldest = e;
  }
  if (!hit) {
    hit = oldest;
    close_entry(hit);
    hit->tid = tid;
  }
  hit->used_ns = now;
  return hit;
}

static void close_entry(entry_t *e) {
  for (int f = 0; f < PERF__TASK_FILE_KINDS; f++)
    close_kept(&e->file[f]);
  e->tid = 0;
  e->used_ns = 0;
}

static void close_kept(kept_t *k) {
  if (k->open && still_ours(k)) close(k->fd);
  k->open = false;
}

static bool still_ours(const kept_t *k) {
  struct stat st;
  return fstat(k->fd, &st) == 0 && st.st_dev == k->dev && st.st_ino == k->ino;
}

static ssize_t open_and_read(pid_t tid, perf__task_file_t which, kept_t *k, char *buf, size_t cap) {
  char path[64];
  snprintf(path, sizeof path, "self/task/%d/%s", (int)tid, k_names[which]);
  int fd = perf__proc_openat(path, O_RDONLY);
  if (fd < 0) return errno == ENOENT && perf__proc_reachable() ? PERF_E_NO_THREAD : PERF_E_SYSTEM;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return PERF_E_SYSTEM;
  }
  *k = (kept_t){.open = true, .fd = fd, .dev = st.st_dev, .ino = st.st_ino};
  ssize_t n = read_kept(k, buf, cap);
  if (n <= 0) close_kept(k);
  return n;
}

/* Read the whole file from offset 0: its length, or PERF_E_NO_THREAD /
   PERF_E_SYSTEM. */
static ssize_t read_kept(const kept_t *k, char *buf, size_t cap) {
  ssize_t n;
  do
    n = pread(k->fd, buf, cap - 1, 0);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return n < 0 && errno == ESRCH ? PERF_E_NO_THREAD : PERF_E_SYSTEM;
  buf[n] = '\0';
  return n;
}
