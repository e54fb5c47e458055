/*
 * backtrace_text.h - the human-readable form of a captured stack, shared by
 * perf_backtrace_*_text and the file sink:
 *   thread <tid> "<name>"
 *   <index> <module basename> 0x<pc> <symbol> + <offset>
 * Off the signal handler only.
 */
#ifndef PERF_BACKTRACE_TEXT_H
#define PERF_BACKTRACE_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sdk/base/strbuf.h"
#include "sdk/sampler/modules.h"

/* Append the header line naming thread `tid`. */
int perf__format_thread_header(perf__strbuf_t *b, pid_t tid);

/* Append one line per frame; pcs[0] is the interrupted pc, the rest return
   addresses. Unknown symbols print as `??` with the offset from the
   module's load base. */
int perf__format_frames(perf__strbuf_t *b, perf__modules_t *mods, const uintptr_t *pcs,
                        size_t count);

#endif
