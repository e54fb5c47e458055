/*
 * frame_text.c - the text shape of a frame (see frame_text.h).
 */
#include "sdk/base/frame_text.h"

#include <inttypes.h>

int perf__format_frame_line(perf__strbuf_t *b, size_t index, const char *module, uint64_t pc,
                            const char *symbol, uint64_t offset) {
  return perf__strbuf_appendf(b, "%-3zu %-24s 0x%016" PRIx64 " %s + %" PRIu64 "\n", index, module,
                              pc, symbol ? symbol : "??", offset);
}
