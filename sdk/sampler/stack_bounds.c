/*
 * stack_bounds.c - per-thread stack bounds, a sorted array of thread ids,
 * and a snapshot of /proc/self/maps for misses (see stack_bounds.h).
 */
#include "sdk/sampler/stack_bounds.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "perf_sdk.h"
#include "sdk/base/log.h"
#include "sdk/base/proc_files.h"

typedef struct {
  uintptr_t lo, hi;
} range_t;

static perf__stack_bounds_t *g_entries; /* ascending tid */
static size_t g_count, g_cap;
static range_t *g_maps; /* readable mappings, ascending */
static size_t g_maps_count;

static size_t lower_bound(pid_t tid);
static const range_t *maps_find(uintptr_t addr);
static int maps_read(void);

perf__stack_bounds_t *perf__stack_bounds_find(pid_t tid) {
  size_t i = lower_bound(tid);
  if (i == g_count || g_entries[i].tid != tid) return NULL;
  perf__stack_bounds_t *b = &g_entries[i];
  /* msync fails with ENOMEM on any unmapped page of the range. */
  if (msync((void *)b->lo, b->hi - b->lo, MS_ASYNC) != 0) {
    perf__stack_bounds_forget(tid);
    return NULL;
  }
  return b;
}

int perf__stack_bounds_learn(pid_t tid, uintptr_t sp, perf__stack_bounds_t **out) {
  const range_t *r = maps_find(sp);
  /* Not in the snapshot, or no longer mapped as it says: read it again. */
  if (!r || msync((void *)r->lo, r->hi - r->lo, MS_ASYNC) != 0) {
    int err = maps_read();
    if (err) return err;
    if (!(r = maps_find(sp))) return PERF_E_SYSTEM;
  }
  size_t i = lower_bound(tid);
  if (i == g_count || g_entries[i].tid != tid) {
    if (g_count == g_cap) {
      if (g_cap >= PERF__STACK_BOUNDS_MAX) { /* full: the highest tid makes room */
        g_count--;
        if (i > g_count) i = g_count;
      } else {
        size_t cap = g_cap ? g_cap * 2 : 64;
        perf__stack_bounds_t *grown = realloc(g_entries, cap * sizeof *grown);
        if (!grown) return PERF_E_NO_MEMORY;
        g_entries = grown;
        g_cap = cap;
      }
    }
    memmove(&g_entries[i + 1], &g_entries[i], (g_count - i) * sizeof *g_entries);
    g_count++;
  }
  g_entries[i] = (perf__stack_bounds_t){.tid = tid, .lo = r->lo, .hi = r->hi};
  *out = &g_entries[i];
  return PERF_OK;
}

void perf__stack_bounds_forget(pid_t tid) {
  size_t i = lower_bound(tid);
  if (i == g_count || g_entries[i].tid != tid) return;
  memmove(&g_entries[i], &g_entries[i + 1], (g_count - i - 1) * sizeof *g_entries);
  g_count--;
}

void perf__stack_bounds_reset(void) {
  g_count = 0;
  g_maps_count = 0;
}

static size_t lower_bound(pid_t tid) {
  size_t lo = 0, hi = g_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g_entries[mid].tid < tid)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static const range_t *maps_find(uintptr_t addr) {
  size_t lo = 0, hi = g_maps_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g_maps[mid].hi <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < g_maps_count && g_maps[lo].lo <= addr ? &g_maps[lo] : NULL;
}

/* Said once: without /proc/self/maps no thread's stack can be found, so
   no sample can be taken; the reason is the read's (not memory). */
static void maps_unreadable(int e) {
  static atomic_bool said;
  if (atomic_exchange(&said, true)) return;
  perf__log(PERF__LOG_ERROR,
            "sampler: /proc/self/maps cannot be read (%s): no thread can be sampled until it "
            "can%s",
            strerror(e),
            e == ENOENT ? " (/proc is not in this root, and the SDK's /proc descriptor was "
                          "closed or never opened before the chroot)"
                        : "");
}

/* The readable mappings of /proc/self/maps (already in ascending order);
   PERF_E_UNSUPPORTED (logged once) when it cannot be read. */
static int maps_read(void) {
  FILE *f = perf__proc_fopen("self/maps");
  if (!f) {
    maps_unreadable(errno);
    return PERF_E_UNSUPPORTED;
  }
  size_t n = 0, cap = g_maps_count + 64;
  range_t *list = malloc(cap * sizeof *list);
  char line[512];
  while (list && fgets(line, sizeof line, f)) {
    uintptr_t s, e;
    char perms[8];
    size_t len = strlen(line);
    if (len && line[len - 1] != '\n') { /* a long path: skip the rest of the line */
      int c;
      while ((c = fgetc(f)) != EOF && c != '\n') {
      }
    }
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s", &s, &e, perms) != 3 || perms[0] != 'r')
      continue;
    if (n == cap) {
      range_t *grown = realloc(list, (cap *= 2) * sizeof *grown);
      if (!grown) break;
      list = grown;
    }
    list[n++] = (range_t){s, e};
  }
  bool complete = list && feof(f);
  int e = errno;
  fclose(f);
  if (!complete) { /* no memory for the list, or the read itself failed */
    free(list);
    if (!list) return PERF_E_NO_MEMORY;
    maps_unreadable(e);
    return PERF_E_UNSUPPORTED;
  }
  free(g_maps);
  g_maps = list;
  g_maps_count = n;
  return PERF_OK;
}
