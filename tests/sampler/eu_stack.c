/*
 * eu_stack.c - eu-stack on our own process (see eu_stack.h). Runs on the
 * calling test thread.
 */
#include "eu_stack.h"

#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "check.h"

const char *eu_stack_report(void) {
  static char out[1 << 16];
  /* Let eu-stack (our child) attach even under Yama ptrace_scope=1. */
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "eu-stack -p %d 2>&1", (int)getpid());
  FILE *f = popen(cmd, "r");
  CHECK(f != NULL);
  size_t len = fread(out, 1, sizeof out - 1, f);
  out[len] = '\0';
  pclose(f);
  return out;
}

size_t eu_stack_pcs(const char *report, pid_t tid, uintptr_t *pcs, size_t max) {
  char header[32];
  snprintf(header, sizeof header, "TID %d:\n", (int)tid);
  const char *p = strstr(report, header);
  if (!p) return 0;
  p += strlen(header);
  size_t n = 0;
  unsigned idx;
  unsigned long pc;
  while (n < max && sscanf(p, "#%u 0x%lx", &idx, &pc) == 2) {
    pcs[n++] = (uintptr_t)pc;
    p = strchr(p, '\n');
    if (!p) break;
    p++;
  }
  return n;
}
