/*
 * frame_json.h - a stack's frames as the collector stores and shows them.
 *
 * Stored (stacks.frames, a JSON array innermost first), one object per
 * physical frame:
 *   {"function"?, "system_name"?, "module", "address", "offset",
 *    "build_id"?, "executable"?, "file"?, "line"?, "inlined"?: [line, ...]}
 * "function" is the demangled name of the function the machine code
 * belongs to, "system_name" its raw linkage name when it differs; "file"
 * and "line" the source line in it; "inlined" the functions inlined at the
 * address, innermost first, each {"function", "system_name"?, "file"?,
 * "line"?} (pprof's Location.line, the wire's Frame.lines); "executable":
 * true when the module is the process's executable (the wire's
 * Module.executable; absent otherwise, and in batches of SDKs that do not
 * say). A stack that ended early (the wire's Stack.end) has one more object last:
 *   {"function": "<truncated: depth>", "truncated": "depth"}.
 *
 * Shown (the API, flame graph, hang groups, signatures): expanded, each
 * inlined function a frame of its own before its physical frame, with
 * "inline": true and the physical frame's module, address, build-id and
 * executable mark.
 * A frame's label (its name in signatures, groups and the flame graph) is
 * its function, "<function> [inline]" for an inline frame, else
 * "<module basename>+<address>". Pure functions; any thread.
 */
#ifndef PERF_COLLECTOR_FRAME_JSON_H
#define PERF_COLLECTOR_FRAME_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/model/symbol.h"

#define FRAME_LABEL_MAX 512
#define FRAME_INLINE_SUFFIX " [inline]"

/* Set the collector's answer on a stored frame object: the physical
   function, its offset (+ ret: a return address looked up at address -
   1), file:line and the inlined functions, replacing what it had. 0, or
   -1 with the frame left as it was (out of memory, or a line without a
   function). */
int frame_json_set_symbol(json_t *frame, const symbol_t *sym, uint64_t ret);

/* The stored object closing a stack that ended early; NULL for end 0
   (unspecified) and 1 (complete). `end` is a perf.v1.StackEnd value. */
json_t *frame_json_end(int end);

/* The expanded frames of a stored array (a new array; NULL when out of
   memory or frames is not an array). */
json_t *frame_json_expand(const json_t *frames);

/* The label of an expanded frame into out. */
void frame_json_label(const json_t *frame, char out[FRAME_LABEL_MAX]);

/* The labels of a stored array, expanded, as a JSON array of strings; NULL
   on failure. */
json_t *frame_json_labels(const json_t *frames);

#endif
