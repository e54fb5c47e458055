/*
 * frame_text.c - the text shape of a frame (see frame_text.h). Any thread
 * but the signal handler.
 */
#include "sdk/base/frame_text.h"

#include <inttypes.h>

static int append_module(perf__strbuf_t *b, const char *module);

int perf__format_frame_line(perf__strbuf_t *b, size_t index, const perf__frame_line_t *f) {
  int err = perf__strbuf_appendf(b, "%-3zu ", index);
  if (!err) err = append_module(b, f->module);
  if (!err) err = perf__strbuf_appendf(b, " 0x%016" PRIx64 " ", f->pc);
  if (!err && f->is_inline) {
    err = perf__strbuf_appendf(b, "[inline] ");
    if (!err) err = perf__strbuf_append_escaped(b, f->function ? f->function : "??");
  } else if (!err && f->function) {
    err = perf__strbuf_append_escaped(b, f->function);
    if (!err) err = perf__strbuf_appendf(b, " + %" PRIu64, f->offset);
  } else if (!err) { /* unnamed: the notation of every report, perf-dump and the collector */
    err = perf__strbuf_append_escaped(b, f->module);
    if (!err) err = perf__strbuf_appendf(b, "+0x%" PRIx64, f->offset);
  }
  if (!err && f->file && f->line) {
    err = perf__strbuf_appendf(b, " ");
    if (!err) err = perf__strbuf_append_escaped(b, f->file);
    if (!err) err = perf__strbuf_appendf(b, ":%" PRIu32, f->line);
  }
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

/* The module's basename in a column of 24, escaped (report lines). */
static int append_module(perf__strbuf_t *b, const char *module) {
  if (!perf__text_needs_escape(module)) return perf__strbuf_appendf(b, "%-24s", module);
  size_t start = b->len;
  int err = perf__strbuf_append_escaped(b, module);
  size_t width = b->len - start;
  return err || width >= 24 ? err : perf__strbuf_appendf(b, "%*s", (int)(24 - width), "");
}
