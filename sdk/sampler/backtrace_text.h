/*
 * backtrace_text.h - the human-readable form of a captured stack, shared by
 * perf_backtrace_*_text and the file sink:
 *   thread <tid> "<name>"
 *   <frame lines, sdk/base/frame_text.h: inline functions on lines of
 *    their own, source positions, a final `<truncated: reason>`>
 * Off the signal handler only: naming frames reads symbol tables and DWARF
 * (sdk/symbols), on the thread that asks for the text or the writer.
 */
#ifndef PERF_BACKTRACE_TEXT_H
#define PERF_BACKTRACE_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sdk/base/strbuf.h"
#include "sdk/sampler/modules.h"
#include "sdk/sampler/stack_end.h"

/* Append the header line naming thread `tid`. */
int perf__format_thread_header(perf__strbuf_t *b, pid_t tid);

/* Append the lines of frames pcs[0..count) (pcs[0] the interrupted pc, the
   rest return addresses), numbered from 0, then the `<truncated: ..>` line
   when `end` says frames are missing. A frame without a name prints as
   `<module basename>+0x<offset from the module's load base>`. */
int perf__format_frames(perf__strbuf_t *b, perf__modules_t *mods, const uintptr_t *pcs,
                        size_t count, perf__stack_end_t end);

/* Append one frame's lines (its inline functions, then its physical
   function) numbered from *index, which is advanced past them. */
int perf__format_frame(perf__strbuf_t *b, size_t *index, uintptr_t pc,
                       const perf__frame_info_t *fi);

#endif
