/*
 * owned_fds.c - the SDK's long-lived descriptors (see owned_fds.h). Any
 * thread adds and removes; the fork child handler closes them all.
 */
#include "sdk/base/owned_fds.h"

#include <stdatomic.h>
#include <unistd.h>

/* Slots hold fd + 1, so that the zeroed table is empty (0 is a valid
   descriptor). */
static atomic_int g_fds[PERF__OWNED_FDS_MAX];

void perf__owned_fd_add(int fd) {
  if (fd < 0) return;
  for (int i = 0; i < PERF__OWNED_FDS_MAX; i++) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&g_fds[i], &expected, fd + 1)) return;
  }
}

void perf__owned_fd_remove(int fd) {
  if (fd < 0) return;
  for (int i = 0; i < PERF__OWNED_FDS_MAX; i++) {
    int expected = fd + 1;
    if (atomic_compare_exchange_strong(&g_fds[i], &expected, 0)) return;
  }
}

void perf__owned_fds_close_all(void) {
  for (int i = 0; i < PERF__OWNED_FDS_MAX; i++) {
    int v = atomic_exchange(&g_fds[i], 0);
    if (v > 0) close(v - 1);
  }
}

int perf__owned_fds_count(void) {
  int n = 0;
  for (int i = 0; i < PERF__OWNED_FDS_MAX; i++)
    n += atomic_load(&g_fds[i]) > 0;
  return n;
}
