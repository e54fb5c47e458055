/*
 * thread_cpu.c - CPU time of the process and of each of its threads from the
 * kernel's CPU clocks, and the bounded thread set the CPU monitor reads every
 * period (see thread_cpu.h). Owns the set's entry array (malloc'd, grown by
 * realloc up to max_threads, freed by perf__thread_set_free).
 *
 * Runs on the CPU monitor thread only (and on test/bench threads); not
 * thread-safe, not async-signal-safe (it allocates and reads /proc).
 *
 * A read takes one stat("/proc/self/task"), one clock_gettime per known
 * thread and two of the process clock (before and after the threads). It
 * lists /proc/self/task again (perf__thread_list) only when:
 *  - the task directory's link count differs from the one seen just before
 *    the last listing (the kernel reports 2 + the number of threads: a thread
 *    was created or exited);
 *  - a known thread's clock read fails (it exited) or went backwards (its
 *    tid now belongs to a new thread);
 *  - between the end of the previous read and the start of this one the
 *    process used more CPU than the known threads' deltas account for, by
 *    more than max(5% of that process CPU, 2 ms): a thread came and went
 *    between two reads. Checked only on reads that did not list, and only
 *    while the set is below max_threads (when the bound is reached,
 *    untracked threads account for the difference by design).
 * The re-listing happens immediately, in the same read: every thread clock
 * and the process clock are then read again, so the read's deltas describe
 * the new set. A read never lists more than once.
 *
 * Why two process clock reads: the process clock adds up the threads'
 * accounted runtime and only the calling thread's pending runtime, so it
 * lags by up to a scheduler tick for each thread running on another CPU,
 * while reading a thread's own clock brings that thread's runtime up to
 * date. The value kept (process_cpu_ns) is read after the thread clocks, so
 * it is current; the gap check uses one read taken before them. Each
 * thread's delta then spans the whole window of the check, so a lagging
 * process clock, or this thread being preempted among the thread reads, can
 * only make the gap look smaller. What can still add to it is the runtime of
 * threads running on other CPUs between their read and the final process
 * read of the previous read (microseconds; up to a tick each if this thread
 * was preempted right there).
 *
 * Bound: the set keeps the max_threads lowest tids of the listing (usually
 * the oldest threads, the main thread first).
 *
 * On error the set is left exactly as it was (entries, deltas, counters): the
 * first pass over the known threads writes only to a scratch array of int64
 * values stored after the cap entries, in the same allocation.
 */
#include "sdk/monitors/thread_cpu.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "perf_sdk.h"
#include "sdk/base/proc_files.h"
#include "sdk/base/threads.h"

#define GAP_FLOOR_NS 2000000 /* 2 ms */
#define GAP_PERCENT 5
#define INITIAL_CAP 16
#define NEW_ENTRY (-1) /* cpu_ns of an entry listed in this read and not read yet */

static int64_t timespec_ns(const struct timespec *ts);
static long task_dir_nlink(void);
static int64_t *scratch_of(perf__thread_set_t *set);
static int enumerate(perf__thread_set_t *set, long nlink);
static int reserve(perf__thread_set_t *set, size_t need);
static void merge_tids(perf__thread_set_t *set, const pid_t *tids, size_t n);
static void read_after_enumeration(perf__thread_set_t *set, bool first);

int64_t perf__process_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return -1;
  return timespec_ns(&ts);
}

void perf__thread_set_init(perf__thread_set_t *set, size_t max_threads) {
  memset(set, 0, sizeof *set);
  set->max_threads = max_threads;
}

int perf__thread_set_read(perf__thread_set_t *set) {
  if (!set) return PERF_E_INVALID_ARGUMENT;
  bool first = set->enumerations == 0;
  long nlink = task_dir_nlink();
  bool changed = first || nlink < 0 || nlink != set->nlink;

  if (!changed) {
    bool check_gap = set->count < set->max_threads;
    int64_t process_before = check_gap ? perf__process_cpu_ns() : 0;
    /* First pass: the known threads, into scratch only. */
    int64_t *now = set->count ? scratch_of(set) : NULL;
    int64_t sum = 0;
    for (size_t i = 0; i < set->count && !changed; i++) {
      now[i] = perf__thread_cpu_ns(set->threads[i].tid);
      if (now[i] < set->threads[i].cpu_ns) changed = true; /* exited, or tid reused */
      sum += now[i] - set->threads[i].cpu_ns;
    }
    int64_t process_ns = perf__process_cpu_ns();
    if (process_ns < 0 || process_before < 0) return PERF_E_SYSTEM;
    if (!changed && check_gap) {
      /* Each thread's window [its previous read, its read now] holds the
         process window [the previous read's end, this read's start], so
         what the process used there beyond the threads' deltas was used by
         threads the set does not know. */
      int64_t window = process_before - set->process_cpu_ns;
      int64_t allowed = window / 100 * GAP_PERCENT;
      if (allowed < GAP_FLOOR_NS) allowed = GAP_FLOOR_NS;
      if (window - sum > allowed) changed = true;
    }
    if (!changed) {
      for (size_t i = 0; i < set->count; i++) {
        set->threads[i].delta_ns = now[i] - set->threads[i].cpu_ns;
        set->threads[i].cpu_ns = now[i];
      }
      set->process_delta_ns = process_ns - set->process_cpu_ns;
      set->process_cpu_ns = process_ns;
      return PERF_OK;
    }
  }

  int rc = enumerate(set, nlink);
  if (rc != PERF_OK) return rc;
  read_after_enumeration(set, first); /* the thread clocks again, after the listing */
  int64_t process_ns = perf__process_cpu_ns();
  set->process_delta_ns = first || process_ns < 0 ? 0 : process_ns - set->process_cpu_ns;
  if (process_ns >= 0) set->process_cpu_ns = process_ns;
  return PERF_OK;
}

bool perf__thread_set_moved(const perf__thread_set_t *set) {
  if (!set) return false;
  long nlink = task_dir_nlink();
  return nlink < 0 || nlink != set->nlink;
}

const perf__thread_cpu_t *perf__thread_set_find(const perf__thread_set_t *set, pid_t tid) {
  if (!set) return NULL;
  size_t lo = 0, hi = set->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    pid_t t = set->threads[mid].tid;
    if (t == tid) return &set->threads[mid];
    if (t < tid)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

void perf__thread_set_free(perf__thread_set_t *set) {
  if (!set) return;
  free(set->threads);
  perf__thread_set_init(set, set->max_threads);
}

static int64_t timespec_ns(const struct timespec *ts) {
  return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* 2 + the number of threads (proc_task_getattr), or -1. */
static long task_dir_nlink(void) {
  struct stat st;
  if (perf__proc_stat("self/task", &st) != 0) return -1;
  return (long)st.st_nlink;
}

/* cap int64 values after the cap entries (see reserve). */
static int64_t *scratch_of(perf__thread_set_t *set) {
  return (int64_t *)(void *)(set->threads + set->cap);
}

/* List the threads and merge them into the set; entries new to the set get
   cpu_ns NEW_ENTRY. nlink was taken before the listing, so a thread created
   during it moves the link count again and is listed at the next read. The
   set is unchanged unless this returns PERF_OK. */
static int enumerate(perf__thread_set_t *set, long nlink) {
  pid_t *tids = NULL;
  size_t n = 0;
  int rc = perf__thread_list(&tids, &n);
  if (rc != PERF_OK) return rc;
  if (n > set->max_threads) n = set->max_threads; /* ascending: the lowest tids stay */
  rc = reserve(set, n);
  if (rc == PERF_OK) {
    merge_tids(set, tids, n);
    set->nlink = nlink;
    set->enumerations++;
  }
  free(tids);
  return rc;
}

/* Room for need entries (and as many scratch values), growing the array
   geometrically but never beyond max_threads. On failure nothing changes. */
static int reserve(perf__thread_set_t *set, size_t need) {
  if (need <= set->cap) return PERF_OK;
  size_t cap = set->cap ? set->cap * 2 : INITIAL_CAP;
  if (cap < need) cap = need;
  if (cap > set->max_threads) cap = set->max_threads;
  const size_t per_entry = sizeof(perf__thread_cpu_t) + sizeof(int64_t);
  if (cap > SIZE_MAX / per_entry) return PERF_E_NO_MEMORY;
  perf__thread_cpu_t *grown = realloc(set->threads, cap * per_entry);
  if (!grown) return PERF_E_NO_MEMORY;
  set->threads = grown;
  set->cap = cap;
  return PERF_OK;
}

/* Make the entries exactly tids[0..n) (ascending, n <= cap), keeping the
   entries of threads already known. In place, in two passes: drop the
   entries whose tid is gone (moving left), then insert the new tids from the
   end (moving right). */
static void merge_tids(perf__thread_set_t *set, const pid_t *tids, size_t n) {
  perf__thread_cpu_t *e = set->threads;
  size_t kept = 0, j = 0;
  for (size_t i = 0; i < set->count; i++) {
    while (j < n && tids[j] < e[i].tid)
      j++;
    if (j < n && tids[j] == e[i].tid) e[kept++] = e[i];
  }
  size_t k = kept;
  for (size_t out = n; out-- > 0;) {
    if (k > 0 && e[k - 1].tid == tids[out]) {
      e[out] = e[--k];
    } else {
      e[out].tid = tids[out];
      e[out].cpu_ns = NEW_ENTRY;
      e[out].delta_ns = 0;
    }
  }
  set->count = n;
}

/* Read every entry after a listing; drop those that exited since. */
static void read_after_enumeration(perf__thread_set_t *set, bool first) {
  size_t out = 0;
  for (size_t i = 0; i < set->count; i++) {
    perf__thread_cpu_t t = set->threads[i];
    int64_t now = perf__thread_cpu_ns(t.tid);
    if (now < 0) continue;
    if (first)
      t.delta_ns = 0;
    else if (t.cpu_ns == NEW_ENTRY || now < t.cpu_ns) /* new, or a new thread reusing the tid */
      t.delta_ns = now;
    else
      t.delta_ns = now - t.cpu_ns;
    t.cpu_ns = now;
    set->threads[out++] = t;
  }
  set->count = out;
}
