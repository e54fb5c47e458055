/*
 * stack_assert.h - helpers the sampler tests share: parse the sampler's text
 * report and check that an expected call chain is in it, frame after frame.
 */
#ifndef PERF_TEST_STACK_ASSERT_H
#define PERF_TEST_STACK_ASSERT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define STACK_MAX_FRAMES 1100

typedef struct {
  size_t count;
  /* names, clone suffixes (.constprop.0) cut; unnamed: "<module>+0x<offset>" */
  char symbols[STACK_MAX_FRAMES][96];
} stack_syms_t;

/* Parse the frame lines of the first thread section of `text` (stops at a
   blank line), leaving out sanitizer runtime frames and inline frames
   (`[inline] name`: whether a libc or test function shows one depends on
   the build and on installed debug info; the chains the tests expect are
   of real frames). */
void stack_parse(const char *text, stack_syms_t *out);

/* True when the chain appears as consecutive frames, innermost first. Each
   chain element may list alternatives separated by '|' ("read|__libc_read"). */
bool stack_has_chain(const stack_syms_t *s, const char *const *chain, size_t n);

/* Capture tid's text repeatedly until frame 0 matches `frame0` (alternatives
   with '|') or `timeout_ms` passes; returns the last text (free with
   perf_free) or NULL when capture kept failing. */
char *stack_wait_for_frame0(pid_t tid, const char *frame0, int timeout_ms);

/* Capture until the chain appears anywhere in tid's stack (or timeout). */
char *stack_wait_for_chain(pid_t tid, const char *const *chain, size_t n, int timeout_ms);

/* Print the text to stderr under a title (for failure diagnostics). */
void stack_dump(const char *title, const char *text);

#endif
