/*
 * idle_memory.c - the writer's release of memory when idle (see
 * idle_memory.h).
 *
 * Naming frames from DWARF makes libdw and libelf allocate many blocks on
 * the writer thread, which glibc serves from the thread's own arena. Once
 * freed they stay resident (an arena returns memory only from its top):
 * ~2.7 MiB after naming libc from its debug file (bench/footprint_bench,
 * `file`). malloc_trim(0) gives the free pages of every arena back with
 * madvise; there is no call for one arena alone, so it also walks the app's
 * arenas under their locks, a cost that grows with the app's free blocks
 * (measured 0.08 ms for 5,000 free blocks, 4.4 ms for 50,000, 90 ms for
 * 500,000). So it runs only while the process is small (RSS under
 * TRIM_MAX_RSS_BYTES, where the SDK's megabytes matter and the walk is
 * short) and stops for good once a trim took longer than TRIM_MAX_NS.
 *
 * The libraries loaded to name frames and compress batches (libdw, libelf,
 * zlib, zstd: ~1.2 MiB of their pages resident after one event) are
 * unloaded once none of their objects is alive (sdk/base/lazy_lib.h).
 *
 * The sampler keeps the buffer a blocked thread's stack is copied into
 * (256 KiB): the pages the last copies touched are given back too.
 *
 * The writer's own stack keeps the pages its deepest call touched (naming
 * with libdw: ~124 KiB); those below the frames still in use are given
 * back too (madvise MADV_DONTNEED: they read as zeros when touched again,
 * and nothing below the stack pointer is live).
 */
#include "sdk/pipeline/idle_memory.h"

#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sdk/base/clock.h"
#include "sdk/base/lazy_lib.h"
#include "sdk/base/log.h"
#include "sdk/base/proc_files.h"
#include "sdk/sampler/sampler.h"
#include "sdk/symbols/symbols.h"

#define TRIM_MAX_RSS_BYTES (64ull << 20)
#define TRIM_MAX_NS (2 * 1000000LL)
/* Stack kept below this function's frame for the calls it still makes. */
#define STACK_KEEP_BYTES (32u << 10)

static atomic_bool g_trim_off;

/* The process's resident bytes (/proc/self/statm), or 0 when unknown. */
static unsigned long long resident_bytes(void) {
  int fd = perf__proc_openat("self/statm", O_RDONLY);
  if (fd < 0) return 0;
  char buf[128];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  char *p;
  strtoull(buf, &p, 10); /* size */
  unsigned long long pages = strtoull(p, NULL, 10);
  long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? pages * (unsigned long long)page : 0;
}

/* Give back the calling thread's stack pages more than STACK_KEEP_BYTES
   below this frame. */
static void release_stack_below(void) {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  void *lo = NULL;
  size_t size = 0;
  int err = pthread_attr_getstack(&attr, &lo, &size);
  pthread_attr_destroy(&attr);
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t here = (uintptr_t)__builtin_frame_address(0);
  if (err || !lo || page <= 0 || here < (uintptr_t)lo + STACK_KEEP_BYTES) return;
  uintptr_t mask = ~((uintptr_t)page - 1);
  uintptr_t bottom = ((uintptr_t)lo + (uintptr_t)page - 1) & mask;
  uintptr_t top = (here - STACK_KEEP_BYTES) & mask;
  if (top > bottom) madvise((void *)bottom, top - bottom, MADV_DONTNEED);
}

bool perf__release_idle_memory(void) {
  perf__symbols_drop_dwarf();
  /* libdw, libelf, zlib and zstd leave the address space when no object of
     theirs is alive (shared core only: sdk/base/lazy_lib.h). */
  perf__sampler_release_idle(); /* the pages of the last blocked stack copied */
  int unloaded = perf__lazy_libs_unload_idle();
  if (unloaded) perf__log(PERF__LOG_DEBUG, "idle: %d libraries unloaded", unloaded);
  release_stack_below();
  if (atomic_load(&g_trim_off)) return false;
  unsigned long long rss = resident_bytes();
  if (!rss || rss > TRIM_MAX_RSS_BYTES) return false;
  int64_t t0 = perf__now_ns();
  malloc_trim(0);
  int64_t took = perf__now_ns() - t0;
  if (took > TRIM_MAX_NS) {
    atomic_store(&g_trim_off, true);
    perf__log(PERF__LOG_INFO, "malloc_trim took %lld us: not called again",
              (long long)(took / 1000));
  }
  return true;
}
