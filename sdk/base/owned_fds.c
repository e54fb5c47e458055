/*
 * owned_fds.c - the SDK's long-lived descriptors and their identities
 * (see owned_fds.h). Any thread holds, checks and releases its own; the
 * fork child handler closes them all.
 */
#include "sdk/base/owned_fds.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

/* A slot holds fd + 1 (so that the zeroed table is empty: 0 is a valid
   descriptor), or SLOT_FILLING while its identity is written. The
   identity is written before the descriptor is published, and a slot is
   only reused after it was emptied: a reader that finds the value reads
   the identity that belongs to it. */
#define SLOT_FILLING (-1)

typedef struct {
  atomic_int fd1;
  atomic_uint_least64_t dev;
  atomic_uint_least64_t ino;
} slot_t;

static slot_t g_slots[PERF__OWNED_FDS_MAX];

/* fd and its identity in a free slot; none left: unnoted. */
static void note(int fd, uint64_t dev, uint64_t ino) {
  for (int i = 0; i < PERF__OWNED_FDS_MAX; i++) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&g_slots[i].fd1, &expected, SLOT_FILLING)) continue;
    atomic_store(&g_slots[i].dev, dev);
    atomic_store(&g_slots[i].ino, ino);
    atomic_store(&g_slots[i].fd1, fd + 1);
    return;
  }
}

/* The descriptor a slot's value names, -1 for an empty or filling slot. */
static int slot_fd(int value) {
  return value > 0 ? value - 1 : -1;
}

static bool same_file(const slot_t *s, const struct stat *st) {
  return atomic_load(&s->dev) == (uint64_t)st->st_dev &&
         atomic_load(&s->ino) == (uint64_t)st->st_ino;
}

void perf__owned_fd_hold(perf__owned_fd_t *o, int fd) {
  struct stat st;
  *o = (perf__owned_fd_t){fd, 0, 0};
  if (fd < 0 || fstat(fd, &st) != 0) return;
  o->dev = (uint64_t)st.st_dev;
  o->ino = (uint64_t)st.st_ino;
  note(fd, o->dev, o->ino);
}

bool perf__owned_fd_held(const perf__owned_fd_t *o) {
  struct stat st;
  return o->fd >= 0 && (o->dev || o->ino) && fstat(o->fd, &st) == 0 &&
         (uint64_t)st.st_dev == o->dev && (uint64_t)st.st_ino == o->ino;
}

void perf__owned_fd_forget(perf__owned_fd_t *o) {
  if (o->fd < 0) return;
  for (int i = 0; i < PERF__OWNED_FDS_MAX; i++) {
    slot_t *s = &g_slots[i];
    if (atomic_load(&s->fd1) != o->fd + 1 || atomic_load(&s->dev) != o->dev ||
        atomic_load(&s->ino) != o->ino)
      continue;
    int expected = o->fd + 1;
    if (atomic_compare_exchange_strong(&s->fd1, &expected, 0)) break;
  }
  *o = (perf__owned_fd_t)PERF__OWNED_FD_NONE;
}

void perf__owned_fd_release(perf__owned_fd_t *o) {
  int fd = o->fd;
  bool held = perf__owned_fd_held(o);
  perf__owned_fd_forget(o);
  if (held) close(fd);
}

void perf__owned_fds_close_all(void) {
  for (int i = 0; i < PERF__OWNED_FDS_MAX; i++) {
    int fd = slot_fd(atomic_exchange(&g_slots[i].fd1, 0));
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && same_file(&g_slots[i], &st)) close(fd);
  }
}

int perf__owned_fds_count(void) {
  int n = 0;
  for (int i = 0; i < PERF__OWNED_FDS_MAX; i++)
    n += slot_fd(atomic_load(&g_slots[i].fd1)) >= 0;
  return n;
}
