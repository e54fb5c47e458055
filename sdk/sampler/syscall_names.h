/*
 * syscall_names.h - the name of every system call of the target: the
 * table is made at build time from the target's own <sys/syscall.h>
 * (syscall_names.cmake runs the compiler for the target with -dM -E and
 * writes syscall_names.c in the build tree; it is never committed), so a
 * number the kernel reports has its name on every architecture built.
 * Constant data; any thread.
 */
#ifndef PERF_SAMPLER_SYSCALL_NAMES_H
#define PERF_SAMPLER_SYSCALL_NAMES_H

#include <stddef.h>

typedef struct perf__syscall_entry_s {
  long nr;
  const char *name; /* "read", "restart_syscall" */
} perf__syscall_entry_t;

/* Every SYS_<name> of <sys/syscall.h>, by name. */
extern const perf__syscall_entry_t perf__syscall_table[];
extern const size_t perf__syscall_table_len;

#endif
