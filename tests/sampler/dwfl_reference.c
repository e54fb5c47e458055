/*
 * dwfl_reference.c - libdwfl on a ptrace-stopped process (see
 * dwfl_reference.h). Runs in the validator's parent process.
 */
#include "dwfl_reference.h"

#include <elfutils/libdwfl.h>
#include <stdlib.h>

#include "check.h"

struct dwfl_reference_s {
  Dwfl *dwfl;
  pid_t pid;
};

typedef struct {
  uintptr_t *pcs;
  size_t max, n;
} walk_t;

static int frame_cb(Dwfl_Frame *state, void *arg);

static const Dwfl_Callbacks k_proc_callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
};

dwfl_reference_t *dwfl_reference_open(pid_t pid) {
  dwfl_reference_t *ref = calloc(1, sizeof *ref);
  CHECK(ref != NULL);
  ref->pid = pid;
  ref->dwfl = dwfl_begin(&k_proc_callbacks);
  CHECKF(ref->dwfl != NULL, "dwfl_begin: %s", dwfl_errmsg(-1));
  dwfl_report_begin(ref->dwfl);
  CHECKF(dwfl_linux_proc_report(ref->dwfl, pid) == 0, "dwfl_linux_proc_report: %s",
         dwfl_errmsg(-1));
  CHECK(dwfl_report_end(ref->dwfl, NULL, NULL) == 0);
  /* The validator holds the process in ptrace stops itself. */
  int err = dwfl_linux_proc_attach(ref->dwfl, pid, true);
  CHECKF(err == 0, "dwfl_linux_proc_attach: %d %s", err, dwfl_errmsg(-1));
  return ref;
}

size_t dwfl_reference_walk(dwfl_reference_t *ref, uintptr_t *pcs, size_t max) {
  walk_t w = {pcs, max, 0};
  /* 0: libdwfl reached a frame whose return address is undefined; -1: it
     could not unwind further. Both end the stack it reports. */
  dwfl_getthread_frames(ref->dwfl, ref->pid, frame_cb, &w);
  return w.n;
}

void dwfl_reference_close(dwfl_reference_t *ref) {
  if (!ref) return;
  dwfl_end(ref->dwfl);
  free(ref);
}

/* Raw pcs as libdwfl holds them: the interrupted pc (frame 0 and above a
   signal frame), else the return address (not minus one). */
static int frame_cb(Dwfl_Frame *state, void *arg) {
  walk_t *w = arg;
  Dwarf_Addr pc;
  if (!dwfl_frame_pc(state, &pc, NULL) || w->n == w->max) return DWARF_CB_ABORT;
  w->pcs[w->n++] = (uintptr_t)pc;
  return DWARF_CB_OK;
}
