/*
 * backtrace_text.c - formats captured stacks as text (see backtrace_text.h).
 * Runs on the thread that asked for the text, or the writer.
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
                        size_t count, perf__stack_end_t end) {
  size_t index = 0;
  for (size_t i = 0; i < count; i++) {
    perf__frame_info_t fi;
    perf__modules_symbolize(mods, pcs[i], i > 0, &fi);
    int err = perf__format_frame(b, &index, pcs[i], &fi);
    if (err) return err;
  }
  return perf__format_stack_end(b, index, (int)end);
}

int perf__format_frame(perf__strbuf_t *b, size_t *index, uintptr_t pc,
                       const perf__frame_info_t *fi) {
  const perf__sym_frame_t *s = &fi->sym;
  if (s->count == 0) {
    perf__frame_line_t line = {fi->module, pc, NULL, fi->module_rel, false, NULL, 0};
    return perf__format_frame_line(b, (*index)++, &line);
  }
  for (size_t k = 0; k < s->count; k++) {
    const perf__sym_line_t *l = &s->lines[k];
    bool physical = k + 1 == s->count;
    perf__frame_line_t line = {fi->module, pc,      l->function, physical ? s->offset : 0,
                               !physical,  l->file, l->line};
    int err = perf__format_frame_line(b, (*index)++, &line);
    if (err) return err;
  }
  return 0;
}
