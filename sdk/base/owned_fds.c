/*
 * owned_fds.c - the SDK's long-lived descriptors and their identities
 * (see owned_fds.h). Any thread adds, checks and removes; the fork child
 * handler closes them all.
 */
#include "sdk/base/owned_fds.h"

#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

/* A slot holds fd + 1 (so that the zeroed table is empty: 0 is a valid
   descriptor), or SLOT_FILLING while its identity is written. The
   identity is written before the descriptor is published, and a slot is
   only reused after it was emptied: a reader that finds fd + 1 reads the
   identity that belongs to it. */
#define SLOT_FILLING (-1)

typedef struct {
  atomic_int fd1;
  atomic_uint_least64_t dev;
  atomic_uint_least64_t ino;
} slot_t;

static slot_t g_slots[PERF__OWNED_FDS_MAX];

static bool same_file(const slot_t *s, const struct stat *st) {
  return atomic_load(&s->dev) == (uint64_t)st->st_dev &&
         atomic_load(&s->ino) == (uint64_t)st->st_ino;
}

void perf__owned_fd_add(int fd) {
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return;
  for (int i = 0; i < PERF__OWNED_FDS_MAX; i++) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&g_slots[i].fd1, &expected, SLOT_FILLING)) continue;
    atomic_store(&g_slots[i].dev, (uint64_t)st.st_dev);
    atomic_store(&g_slots[i].ino, (uint64_t)st.st_ino);
    atomic_store(&g_slots[i].fd1, fd + 1);
    return;
  }
}

void perf__owned_fd_remove(int fd) {
  if (fd < 0) return;
  for (int i = 0; i < PERF__OWNED_FDS_MAX; i++) {
    int expected = fd + 1;
    if (atomic_compare_exchange_strong(&g_slots[i].fd1, &expected, 0)) return;
  }
}

bool perf__owned_fd_is_mine(int fd) {
  if (fd < 0) return false;
  for (int i = 0; i < PERF__OWNED_FDS_MAX; i++) {
    if (atomic_load(&g_slots[i].fd1) != fd + 1) continue;
    struct stat st;
    return fstat(fd, &st) == 0 && same_file(&g_slots[i], &st);
  }
  return false;
}

void perf__owned_fds_close_all(void) {
  for (int i = 0; i < PERF__OWNED_FDS_MAX; i++) {
    int v = atomic_exchange(&g_slots[i].fd1, 0);
    struct stat st;
    if (v > 0 && fstat(v - 1, &st) == 0 && same_file(&g_slots[i], &st)) close(v - 1);
  }
}

int perf__owned_fds_count(void) {
  int n = 0;
  for (int i = 0; i < PERF__OWNED_FDS_MAX; i++)
    n += atomic_load(&g_slots[i].fd1) > 0;
  return n;
}
