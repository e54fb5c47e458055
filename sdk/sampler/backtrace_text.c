/*
 * backtrace_text.c - formats captured stacks as text (see backtrace_text.h).
 * Runs on the thread that asked for the text.
 */
#include "sdk/sampler/backtrace_text.h"

#include "sdk/base/frame_text.h"
#include "sdk/base/threads.h"

int perf__format_thread_header(perf__strbuf_t *b, pid_t tid) {
  char name[64];
  perf__thread_name(tid, name, sizeof name);
  return perf__strbuf_appendf(b, "thread %d \"%s\"\n", (int)tid, name);
}

int perf__format_frames(perf__strbuf_t *b, perf__modules_t *mods, const uintptr_t *pcs,
                        size_t count) {
  for (size_t i = 0; i < count; i++) {
    perf__frame_info_t fi;
    perf__modules_symbolize(mods, pcs[i], i > 0, &fi);
    int err = perf__format_frame_line(b, i, fi.module, pcs[i], fi.symbol,
                                      fi.symbol ? fi.offset : fi.module_rel);
    if (err) return err;
  }
  return 0;
}
