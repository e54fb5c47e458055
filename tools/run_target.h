/*
 * run_target.h - perf-run's checks of the program it is asked to start:
 * found as execvp finds it, and one the dynamic loader runs with
 * LD_PRELOAD honoured (not statically linked, not setuid, setgid or with
 * file capabilities: the loader's secure mode ignores LD_PRELOAD there).
 */
#ifndef PERF_RUN_TARGET_H
#define PERF_RUN_TARGET_H

#include <stddef.h>

/* The file `program` names: itself when it holds a '/', else the first
   executable regular file of that name in $PATH (as execvp; the current
   directory only when $PATH says so). Written to out (out_size bytes).
   Returns 0, or -1 with why in `why` (why_size bytes). */
int perf__run_find(const char *program, char *out, size_t out_size, char *why, size_t why_size);

/* 0 when the file at `path` runs with LD_PRELOAD honoured: an ELF file
   with a program interpreter (the dynamic loader), or a script (#!, whose
   interpreter then loads the library). -1 otherwise, with the reason in
   `why`: statically linked, setuid, setgid, file capabilities, not a
   program. */
int perf__run_check(const char *path, char *why, size_t why_size);

#endif
