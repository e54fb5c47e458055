/*
 * frame_text.h - the one text shape of a stack frame, shared by every
 * report the SDK writes (perf_backtrace_*_text, the file sink, fatal hangs
 * recovered from a marker). A frame is one line per function, innermost
 * first: the functions inlined at the pc, each on a line of its own marked
 * `[inline]`, then the function the machine code belongs to; every line
 * carries the frame's pc, and its source position when known:
 *   <index> <module basename> 0x<pc> [inline] <function> [<file>:<line>]
 *   <index> <module basename> 0x<pc> <function> + <offset> [<file>:<line>]
 *   <index> <module basename> 0x<pc> <module basename>+0x<module-relative address>
 * A stack whose walk stopped before its outermost frame ends with
 *   <index> <truncated: <reason>>
 * Any thread but the signal handler.
 */
#ifndef PERF_BASE_FRAME_TEXT_H
#define PERF_BASE_FRAME_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sdk/base/strbuf.h"

/* What one line says. */
typedef struct perf__frame_line_s {
  const char *module;   /* basename, "??" when in no known module */
  uint64_t pc;          /* the frame's pc (an inline line: the pc of the frame it is in) */
  const char *function; /* NULL: unknown, printed `<module>+0x<offset in hex>` */
  uint64_t offset;      /* physical line: from the function's start; unknown function:
                           the module-relative address (in no module: the pc);
                           inline line: not printed */
  bool is_inline;
  const char *file; /* NULL, or line 0: no source position printed */
  uint32_t line;
} perf__frame_line_t;

/* Append one line. */
int perf__format_frame_line(perf__strbuf_t *b, size_t index, const perf__frame_line_t *f);

/* How a stack ended, by its perf.v1 StackEnd value (the SDK's
   perf__stack_end_t has the same): "complete" (1), "depth" (2), "no rule"
   (3), "bad read" (4), "not ascending" (5); "unspecified" for 0 and any
   value this SDK does not know. */
const char *perf__stack_end_text(int end);

/* Append `<index> <truncated: reason>` when `end` (a StackEnd value) says
   frames are missing: anything but 0 (unspecified) and 1 (complete). */
int perf__format_stack_end(perf__strbuf_t *b, size_t index, int end);

#endif
