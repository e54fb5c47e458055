/*
 * backtrace.c - the public sampler API: perf_backtrace_thread and its text
 * forms. Runs on the calling thread; the capture itself happens in the
 * target thread's signal handler (sampler.h). Each public call runs inside
 * the thread's call guard (sdk/base/call_guard.h): from a signal handler
 * that interrupted an SDK call on the same thread it returns PERF_E_BUSY.
 */
#include <stdlib.h>

#include "perf_sdk.h"
#include "sdk/base/call_guard.h"
#include "sdk/base/threads.h"
#include "sdk/sampler/backtrace_text.h"
#include "sdk/sampler/sampler.h"
#include "sdk/sampler/stack_end.h"

/* Bound on one text report: deep stacks of many threads still fit. */
#define TEXT_MAX_BYTES (64u << 20)

static int thread_pcs(pid_t tid, uintptr_t *pcs, size_t max, size_t *count);
static int thread_text(pid_t tid, char **out_text);
static int all_threads_text(char **out_text);
static int append_thread(perf__strbuf_t *b, perf__modules_t *mods, pid_t tid, uintptr_t *pcs);
static int append_shot(perf__strbuf_t *b, perf__modules_t *mods, const perf__sampler_shot_t *shot);

int perf_backtrace_thread(pid_t tid, uintptr_t *pcs, size_t max, size_t *count) {
  if (!perf__call_enter()) return PERF_E_BUSY;
  int err = thread_pcs(tid, pcs, max, count);
  perf__call_leave();
  return err;
}

int perf_backtrace_thread_text(pid_t tid, char **out_text) {
  if (!perf__call_enter()) return PERF_E_BUSY;
  int err = thread_text(tid, out_text);
  perf__call_leave();
  return err;
}

int perf_backtrace_all_threads_text(char **out_text) {
  if (!perf__call_enter()) return PERF_E_BUSY;
  int err = all_threads_text(out_text);
  perf__call_leave();
  return err;
}

static int thread_pcs(pid_t tid, uintptr_t *pcs, size_t max, size_t *count) {
  if (!pcs || !count || max == 0 || tid < 0) return PERF_E_INVALID_ARGUMENT;
  *count = 0;
  perf__modules_t *mods = perf__modules_acquire();
  if (!mods) return PERF_E_NO_MEMORY;
  int err = perf__sampler_capture(mods, tid, pcs, max, count);
  perf__modules_release(mods);
  return err;
}

static int thread_text(pid_t tid, char **out_text) {
  if (!out_text || tid < 0) return PERF_E_INVALID_ARGUMENT;
  *out_text = NULL;
  uintptr_t *pcs = malloc(PERF__MAX_FRAMES * sizeof *pcs);
  perf__modules_t *mods = perf__modules_acquire();
  perf__strbuf_t b;
  perf__strbuf_init(&b, TEXT_MAX_BYTES);
  int err = (!pcs || !mods) ? PERF_E_NO_MEMORY : append_thread(&b, mods, tid, pcs);
  if (err == PERF_OK || err == PERF_E_TRUNCATED) {
    int take = perf__strbuf_take(&b, out_text);
    if (take) err = take;
  }
  perf__strbuf_free(&b);
  perf__modules_release(mods);
  free(pcs);
  return err == PERF_E_TRUNCATED ? PERF_OK : err;
}

/* Every thread, PERF__SAMPLER_IN_FLIGHT_MAX at a time as one snapshot each
   (sampler.h): a chunk's stacks are taken about one round trip apart. */
static int all_threads_text(char **out_text) {
  if (!out_text) return PERF_E_INVALID_ARGUMENT;
  *out_text = NULL;
  pid_t *tids = NULL;
  size_t n = 0;
  int err = perf__thread_list(&tids, &n);
  if (err) return err;
  enum { CHUNK = PERF__SAMPLER_IN_FLIGHT_MAX };
  uintptr_t *pcs = malloc((size_t)CHUNK * PERF__MAX_FRAMES * sizeof *pcs);
  perf__modules_t *mods = perf__modules_acquire();
  perf__strbuf_t b;
  perf__strbuf_init(&b, TEXT_MAX_BYTES);
  if (!pcs || !mods) err = PERF_E_NO_MEMORY;
  perf__sampler_shot_t shots[CHUNK];
  for (size_t first = 0; first < n && !err; first += CHUNK) {
    size_t m = n - first < CHUNK ? n - first : CHUNK;
    for (size_t j = 0; j < m; j++)
      shots[j] = (perf__sampler_shot_t){
          .tid = tids[first + j], .pcs = pcs + j * PERF__MAX_FRAMES, .max = PERF__MAX_FRAMES};
    err = perf__sampler_capture_threads(mods, shots, m, CHUNK);
    for (size_t j = 0; j < m && !err; j++) {
      if (first + j > 0) err = perf__strbuf_appendf(&b, "\n");
      int cap = err ? err : append_shot(&b, mods, &shots[j]);
      /* One thread that cannot answer does not spoil the report. */
      if (cap == PERF_OK || cap == PERF_E_TRUNCATED)
        continue;
      else if (cap == PERF_E_NO_MEMORY)
        err = cap;
      else
        err = perf__strbuf_appendf(&b, "error: %s\n", perf_strerror(cap));
    }
  }
  if (!err) err = perf__strbuf_take(&b, out_text);
  perf__strbuf_free(&b);
  perf__modules_release(mods);
  free(pcs);
  free(tids);
  return err;
}

/* A snapshot's shot as text: header, then the frames; on a failed capture
   only the header, and its error returned. */
static int append_shot(perf__strbuf_t *b, perf__modules_t *mods, const perf__sampler_shot_t *shot) {
  int err = perf__format_thread_header(b, shot->tid);
  if (err) return err;
  if (shot->err != PERF_OK && shot->err != PERF_E_TRUNCATED) return shot->err;
  err = perf__format_frames(b, mods, shot->pcs, shot->count,
                            perf__stack_end_of(shot->err, shot->status));
  return err ? err : shot->err;
}

/* Header, then the frames; on a capture error only the header is written
   and the error returned. */
static int append_thread(perf__strbuf_t *b, perf__modules_t *mods, pid_t tid, uintptr_t *pcs) {
  if (tid == 0) tid = perf__gettid();
  int err = perf__format_thread_header(b, tid);
  if (err) return err;
  size_t count = 0;
  perf__stack_end_t end;
  int cap = perf__sampler_capture_with_end(mods, tid, pcs, PERF__MAX_FRAMES, &count, &end);
  if (cap != PERF_OK && cap != PERF_E_TRUNCATED) return cap;
  err = perf__format_frames(b, mods, pcs, count, end);
  return err ? err : cap;
}
