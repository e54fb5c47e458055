/*
 * thread_state.c - a thread's state, signal mask and stack memory read
 * through /proc and process_vm_readv (see thread_state.h). The /proc files
 * of the last threads read stay open (task_files.h: checked before each
 * use, since the app may close descriptors it does not know).
 */
#include "sdk/sampler/thread_state.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/threads.h"
#include "sdk/sampler/task_files.h"

int perf__thread_state_read(pid_t tid, perf__thread_state_t *out) {
  memset(out, 0, sizeof *out);
  char buf[256];
  ssize_t n = perf__task_files_read(tid, PERF__TASK_SYSCALL, buf, sizeof buf);
  if (n < 0) return (int)n;
  if (strncmp(buf, "running", 7) == 0) {
    out->running = true;
    return PERF_OK;
  }
  /* "NR ARG1 .. ARG6 SP PC", or "-1 SP PC" when blocked outside a call. */
  char *p = buf, *end;
  out->nr = strtol(p, &end, 10);
  if (end == p) return PERF_E_SYSTEM;
  uintptr_t v[8];
  size_t want = out->nr == -1 ? 2 : 8;
  for (size_t i = 0; i < want; i++) {
    p = end;
    v[i] = (uintptr_t)strtoull(p, &end, 16);
    if (end == p) return PERF_E_SYSTEM;
  }
  if (out->nr != -1) memcpy(out->args, v, sizeof out->args);
  out->sp = v[want - 2];
  out->pc = v[want - 1];
  return PERF_OK;
}

bool perf__thread_state_same_block(const perf__thread_state_t *a, const perf__thread_state_t *b) {
  return !a->running && !b->running && a->nr == b->nr && a->sp == b->sp && a->pc == b->pc &&
         memcmp(a->args, b->args, sizeof a->args) == 0;
}

int perf__thread_signal_state(pid_t tid, int signo, bool *running) {
  char buf[4096];
  ssize_t n = perf__task_files_read(tid, PERF__TASK_STATUS, buf, sizeof buf);
  if (n < 0) return (int)n;
  const char *state = strstr(buf, "\nState:");
  *running = state && strncmp(state + 8 + strspn(state + 8, " \t"), "R", 1) == 0;
  const char *line = strstr(buf, "\nSigBlk:");
  uint64_t mask;
  if (!line || sscanf(line + 8, "%" SCNx64, &mask) != 1) return PERF_E_SYSTEM;
  return signo >= 1 && signo <= 64 && (mask >> (signo - 1) & 1) ? 1 : 0;
}

int64_t perf__thread_run_delay_ns(pid_t tid) {
  char buf[128];
  unsigned long long run_ns, delay_ns;
  if (perf__task_file_read(tid, "schedstat", buf, sizeof buf) <= 0 ||
      sscanf(buf, "%llu %llu", &run_ns, &delay_ns) != 2)
    return -1;
  return (int64_t)delay_ns;
}

size_t perf__memory_copy(void *dst, uintptr_t addr, size_t len) {
  struct iovec local = {dst, len}, remote = {(void *)addr, len};
  ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  return n > 0 ? (size_t)n : 0;
}
