/*
 * threads.c - thread ids, names and stack mappings from /proc (see
 * threads.h). Runs on requesting threads, never in the signal handler,
 * except perf__gettid which is a bare system call.
 */
#include "sdk/base/threads.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/proc_files.h"

/* The kernel's CPU clock id encoding (include/linux/posix-timers_types.h,
   glibc's kernel-posix-cpu-timers.h): ~pid << 3 | per-thread bit | clock. */
#define CPUCLOCK_SCHED 2u
#define CPUCLOCK_PERTHREAD_MASK 4u
/* Tids above this do not survive the << 3 of the encoding (pid_max is at most
   2^22 on 64-bit kernels). */
#define MAX_ENCODABLE_TID 0x0fffffff

static int compare_tid(const void *a, const void *b);

pid_t perf__gettid(void) {
  return (pid_t)syscall(SYS_gettid);
}

ssize_t perf__task_file_read(pid_t tid, const char *name, char *buf, size_t cap) {
  char path[64];
  snprintf(path, sizeof path, "self/task/%d/%s", (int)tid, name);
  int fd = perf__proc_openat(path, O_RDONLY);
  if (fd < 0) return errno == ENOENT && perf__proc_reachable() ? PERF_E_NO_THREAD : PERF_E_SYSTEM;
  ssize_t n;
  do
    n = read(fd, buf, cap - 1);
  while (n < 0 && errno == EINTR);
  int e = errno;
  close(fd);
  if (n <= 0) return n < 0 && e == ESRCH ? PERF_E_NO_THREAD : PERF_E_SYSTEM;
  buf[n] = '\0';
  return n;
}

void perf__thread_name(pid_t tid, char *buf, size_t len) {
  if (perf__task_file_read(tid, "comm", buf, len) <= 0) {
    snprintf(buf, len, "?");
    return;
  }
  buf[strcspn(buf, "\n")] = '\0';
}

int perf__thread_list(pid_t **tids, size_t *count) {
  *tids = NULL;
  *count = 0;
  DIR *d = perf__proc_opendir("self/task");
  if (!d) return PERF_E_SYSTEM;
  size_t n = 0, cap = 0;
  pid_t *list = NULL;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    char *end;
    long tid = strtol(de->d_name, &end, 10);
    if (*end || tid <= 0) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      pid_t *grown = realloc(list, cap * sizeof *grown);
      if (!grown) {
        free(list);
        closedir(d);
        return PERF_E_NO_MEMORY;
      }
      list = grown;
    }
    list[n++] = (pid_t)tid;
  }
  closedir(d);
  if (n > 1) qsort(list, n, sizeof *list, compare_tid);
  *tids = list;
  *count = n;
  return PERF_OK;
}

int perf__stack_mapping(uintptr_t addr, uintptr_t *lo, uintptr_t *hi) {
  FILE *f = perf__proc_fopen("self/maps");
  if (!f) return PERF_E_SYSTEM;
  char line[512];
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) {
    uintptr_t s, e;
    char perms[8];
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s", &s, &e, perms) != 3) continue;
    if (addr >= s && addr < e && perms[0] == 'r') {
      *lo = s;
      *hi = e;
      found = 1;
    }
  }
  fclose(f);
  return found ? PERF_OK : PERF_E_NO_THREAD;
}

clockid_t perf__thread_cpu_clock(pid_t tid) {
  /* Unsigned arithmetic: shifting the negative ~tid is undefined in C. */
  return (clockid_t)((~(uint32_t)tid << 3) | CPUCLOCK_PERTHREAD_MASK | CPUCLOCK_SCHED);
}

int64_t perf__thread_cpu_ns(pid_t tid) {
  if (tid <= 0 || tid > MAX_ENCODABLE_TID) return -1;
  clockid_t clock = perf__thread_cpu_clock(tid);
  struct timespec ts;
  /* EINVAL when no thread of this process has that id. */
  if (clock_gettime(clock, &ts) != 0) return -1;
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int compare_tid(const void *a, const void *b) {
  pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
  return (x > y) - (x < y);
}
