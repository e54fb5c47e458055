/*
 * stale_record.c - the frame-pointer code of test_sampler's stale_record_*
 * cases (see stale_record.h). Built -fno-omit-frame-pointer at -O0 and -O2
 * (tests/sampler/CMakeLists.txt); runs on the parked thread.
 *
 * stale_leave_outer has a large frame, so the records its callees push lie
 * deep below the loop's frame; stale_block_outer has a small one, so
 * stale_block_inner's frame (its scratch buffer written only at its
 * bottom) covers those records, untouched, when it blocks. Its real
 * record sits above them: [the loop's rbp ... ][return into
 * stale_block_outer]; the stale ones say stale_leave_inner was called by
 * stale_leave_outer, and chain up through the slot stale_block_outer's
 * record now holds.
 */
#include "stale_record.h"

#include <poll.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static volatile uintptr_t g_keep;

static CHAIN uintptr_t stale_leave_leaf(stale_thread_t *t) {
  const uintptr_t *record = __builtin_frame_address(0);
  t->stale_at = (uintptr_t)record;
  t->stale_words[0] = record[0];
  t->stale_words[1] = record[1];
  return g_keep + 1;
}

static CHAIN uintptr_t stale_leave_inner(stale_thread_t *t) {
  return stale_leave_leaf(t) + 1;
}

static CHAIN uintptr_t stale_leave_outer(stale_thread_t *t) {
  volatile unsigned char pad[256];
  pad[0] = 1;
  return stale_leave_inner(t) + pad[0];
}

static CHAIN long stale_block_inner(stale_thread_t *t) {
  union {
    unsigned char bytes[1024];
    struct timespec sleep[2]; /* the request, and what is left of it */
    struct pollfd pfd;
  } scratch;
  t->scratch_at = (uintptr_t)&scratch;
  t->record_at = (uintptr_t)__builtin_frame_address(0);
  atomic_fetch_add(&t->calls, 1);
  long r = -1;
  switch (t->call) {
  case STALE_NANOSLEEP:
    scratch.sleep[0] = (struct timespec){60, 0}; /* until the case's signal */
    r = nanosleep(&scratch.sleep[0], &scratch.sleep[1]);
    break;
  case STALE_READ: r = read(t->fd, scratch.bytes, 1); break;
  case STALE_POLL:
    scratch.pfd = (struct pollfd){.fd = t->fd, .events = POLLIN};
    r = poll(&scratch.pfd, 1, -1);
    if (r > 0) r += read(t->fd, scratch.bytes, 1);
    break;
  }
  g_keep += (uintptr_t)r;
  return r + 1;
}

static CHAIN long stale_block_outer(stale_thread_t *t) {
  return stale_block_inner(t) + 1;
}

CHAIN void stale_record_loop(stale_thread_t *t) {
  while (!atomic_load(&t->stop)) {
    g_keep += stale_leave_outer(t);
    g_keep += (uintptr_t)stale_block_outer(t);
  }
}
