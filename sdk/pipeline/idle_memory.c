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
 */
#include "sdk/pipeline/idle_memory.h"

#include <fcntl.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "sdk/base/clock.h"
#include "sdk/base/log.h"
#include "sdk/symbols/symbols.h"

#define TRIM_MAX_RSS_BYTES (64ull << 20)
#define TRIM_MAX_NS (2 * 1000000LL)

static atomic_bool g_trim_off;

/* The process's resident bytes (/proc/self/statm), or 0 when unknown. */
static unsigned long long resident_bytes(void) {
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
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

bool perf__release_idle_memory(void) {
  perf__symbols_drop_dwarf();
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
