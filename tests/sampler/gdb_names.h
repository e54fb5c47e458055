/*
 * gdb_names.h - what test_names and test_names_gaps share: gdb's frames of
 * a live process (gdb attached in batch mode, gdb_frames.py: every thread
 * as `bt` shows it, or the frames of chosen addresses), the comparison of
 * the SDK's frames with them through frame_names.h's one list of forgiven
 * differences, and reading a test app's output.
 */
#ifndef PERF_TEST_GDB_NAMES_H
#define PERF_TEST_GDB_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "frame_names.h"

#define MAX_FRAMES 128

/* One line of a stack: a function, inline or not, and its source line. */
typedef struct frame_s {
  char name[FRAME_NAME_MAX];
  char file[FRAME_FILE_MAX];
  unsigned line;
  bool is_inline;
} frame_t;

typedef struct stack_s {
  int tid;        /* a thread's stack (bt) */
  uint64_t pc;    /* or the frames of one address (GDB_FRAMES_PCS) */
  uint64_t start; /* there: where its last frame's function starts (0: unknown) */
  size_t n;
  frame_t frames[MAX_FRAMES];
} thread_stack_t;

/* gdb's frames of every thread of pid, its tail-call frames left out; or,
   pcs_file given (addresses in hex, one a line), the frames of each of
   those addresses (gdb_frames.py says how), one stack each. Returns how
   many stacks were written to stacks[0..max); *log is gdb's whole output
   (malloc'd). */
size_t gdb_stacks(pid_t pid, const char *pcs_file, thread_stack_t *stacks, size_t max, char **log);

/* Why the SDK's stack differs from gdb's (at frame *at), or NULL. */
const char *stack_differs(const thread_stack_t *sdk, const thread_stack_t *gdb, size_t *at);

/* A stack on stderr under a title. */
void stack_print(const char *title, const thread_stack_t *s);

/* A line from fd within timeout_ms (a test app's "ready"); false on EOF or
   timeout. */
bool read_line(int fd, char *buf, size_t cap, int timeout_ms);

/* The file's text (malloc'd; at most 4 MiB). */
char *read_all(const char *path);

#endif
