/*
 * frame_text.c - the text shape of a frame (see frame_text.h). Any thread
 * but the signal handler.
 */
#include "sdk/base/frame_text.h"

#include <inttypes.h>

int perf__format_frame_line(perf__strbuf_t *b, size_t index, const perf__frame_line_t *f) {
  int err = perf__strbuf_appendf(b, "%-3zu %-24s 0x%016" PRIx64 " ", index, f->module, f->pc);
  if (!err && f->is_inline)
    err = perf__strbuf_appendf(b, "[inline] %s", f->function ? f->function : "??");
  else if (!err && f->function)
    err = perf__strbuf_appendf(b, "%s + %" PRIu64, f->function, f->offset);
  else if (!err) /* unnamed: the notation of every report, perf-dump and the collector */
    err = perf__strbuf_appendf(b, "%s+0x%" PRIx64, f->module, f->offset);
  if (!err && f->file && f->line) err = perf__strbuf_appendf(b, " %s:%" PRIu32, f->file, f->line);
  return err ? err : perf__strbuf_appendf(b, "\n");
}

const char *perf__stack_end_text(int end) {
  static const char *const names[] = {"unspecified", "complete", "depth",
                                      "no rule",     "bad read", "not ascending"};
  return end > 0 && (size_t)end < sizeof names / sizeof names[0] ? names[end] : names[0];
}

int perf__format_stack_end(perf__strbuf_t *b, size_t index, int end) {
  if (end == 0 || end == 1) return 0;
  return perf__strbuf_appendf(b, "%-3zu <truncated: %s>\n", index, perf__stack_end_text(end));
}
