/*
 * frame_text.h - the one text shape of a stack frame, shared by every
 * report the SDK writes (perf_backtrace_*_text, the file sink, fatal hangs
 * recovered from a marker):
 *   <index> <module basename> 0x<pc> <symbol> + <offset>
 *   <index> <module basename> 0x<pc> ?? + <module-relative address>
 * Any thread but the signal handler.
 */
#ifndef PERF_BASE_FRAME_TEXT_H
#define PERF_BASE_FRAME_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "sdk/base/strbuf.h"

/* Append one frame line. symbol NULL: unknown, printed as `??` followed by
   `offset`, which is then the module-relative address. */
int perf__format_frame_line(perf__strbuf_t *b, size_t index, const char *module, uint64_t pc,
                            const char *symbol, uint64_t offset);

#endif
