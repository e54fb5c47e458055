/*
 * test_lines.c - the wire's names: frames with their inline chains
 * (Frame.lines), functions with their raw linkage names
 * (Function.system_name) and stacks with how they ended (Stack.end), as
 * the SDK encodes them from live pcs of this binary, as they decode, as a
 * fatal hang copies them, as the text forms print them, and as Google's
 * protoc --decode reads them.
 *
 * The pcs are in this file's functions: lines_outer (noinline) with
 * lines_inner inlined into it (always_inline: an inlined subroutine in
 * DWARF at any optimization level).
 */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "perf_sdk.h"
#include "protoc_text.h"
#include "sdk/base/strbuf.h"
#include "sdk/pipeline/event_encode.h"
#include "sdk/pipeline/event_text.h"
#include "sdk/wire/batch_decode.h"

#define DECODE_CAP (64u << 20)

volatile unsigned long g_sink;

/* The source lines the chains must point at. */
static const unsigned k_inner_line = __LINE__ + 2; /* lines_inner's loop, 2 lines */
static inline __attribute__((always_inline)) void lines_inner(unsigned long k) {
  for (int i = 0; i < 8; i++)
    g_sink = g_sink * 31 + k + (unsigned long)i;
}

static const unsigned k_call_line = __LINE__ + 3; /* lines_outer's call of lines_inner */
__attribute__((noinline, used)) static void lines_outer(unsigned long k) {
  g_sink ^= k;
  lines_inner(k + 1);
  g_sink += 7;
}

static const unsigned k_caller_line = __LINE__ + 1; /* lines_caller, 4 lines */
__attribute__((noinline, used)) static void lines_caller(void) {
  lines_outer(3);
  g_sink++;
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

/* A pc inside lines_inner's code in lines_outer, and its names. */
static uintptr_t inlined_pc(perf__modules_t *mods, perf__frame_info_t *fi) {
  for (uintptr_t pc = (uintptr_t)lines_outer; pc < (uintptr_t)lines_outer + 256; pc++) {
    perf__modules_symbolize(mods, pc, false, fi);
    if (fi->sym.count == 2 && strcmp(fi->sym.lines[0].function, "lines_inner") == 0) return pc;
  }
  CHECKF(0, "no pc of lines_outer is in the inlined lines_inner");
  return 0;
}

static perf__batch_builder_t *new_builder(bool symbolize, bool uncompressed) {
  perf__batch_resource_t res;
  memset(&res, 0, sizeof res);
  res.app_name = "lines-test";
  res.app_version = "1";
  res.environment = "ci";
  perf__batch_options_t o;
  perf__batch_options_init(&o);
  o.symbolize = symbolize;
  o.uncompressed = uncompressed;
  perf__batch_builder_t *b = NULL;
  CHECK_EQ_INT(perf__batch_builder_new(&res, &o, &b), PERF_OK);
  return b;
}

static Perf__V1__Batch *finish_and_decode(perf__batch_builder_t *b) {
  uint8_t *out = NULL;
  size_t len = 0, estimate = perf__batch_encoded_size(b);
  CHECK_EQ_INT(perf__batch_finish(b, NULL, &out, &len, NULL), PERF_OK);
  Perf__V1__Batch *bt = NULL;
  CHECK_EQ_INT(perf__batch_decode(out, len, DECODE_CAP, &bt), PERF_OK);
  CHECK(perf__v1__batch__get_packed_size(bt) <= estimate);
  free(out);
  return bt;
}

/* An event of this thread: `n` samples of stack pcs[0..depth), ended
   `ends[i]` for sample i. */
static perf__event_t *event_of(perf__modules_t *mods, const uintptr_t *pcs, size_t depth,
                               const perf__stack_end_t *ends, size_t n) {
  perf__event_t *ev = perf__event_new(PERF__EVENT_HANG, mods);
  CHECK(ev);
  ev->tid = gettid();
  ev->start_wall_ns = 1795000000000000000LL;
  ev->start_mono_ns = 1000000000LL;
  ev->duration_ns = 300000000;
  CHECK_EQ_INT(perf__event_set_thread(ev, ev->tid, "lines-main", -1), PERF_OK);
  for (size_t i = 0; i < n; i++)
    CHECK_EQ_INT(perf__event_add_sample(ev, ev->tid, ev->start_mono_ns + (int64_t)(i + 1) * 1000000,
                                        pcs, depth, ends[i]),
                 PERF_OK);
  perf__event_finish(ev);
  return ev;
}

/* ev alone in a batch of b, decoded; b is freed. */
static Perf__V1__Batch *encode(perf__batch_builder_t *b, const perf__event_t *ev) {
  perf__event_encoder_t *enc = perf__event_encoder_new();
  CHECK(enc);
  CHECK_EQ_INT(perf__event_encode(enc, b, ev), PERF_OK);
  perf__event_encoder_free(enc);
  Perf__V1__Batch *bt = finish_and_decode(b);
  perf__batch_free(b);
  return bt;
}

static const char *fn_name(const Perf__V1__Batch *bt, uint32_t function) {
  CHECK(function >= 1 && function <= bt->n_functions);
  return bt->strings[bt->functions[function - 1]->name];
}

static const Perf__V1__Frame *frame_of(const Perf__V1__Batch *bt, const Perf__V1__Stack *s,
                                       size_t i) {
  CHECK(i < s->n_frames);
  return bt->frames[s->frames[i] - 1];
}

static bool ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* ------------------------------------------------------------------------ */
/* Cases                                                                     */
/* ------------------------------------------------------------------------ */

/* A frame in inlined code carries the chain the device's symbolizer gave:
   lines_inner then lines_outer (the frame's own function), this file, the
   same lines and columns; a frame outside inlined code carries its one
   line. With symbolize off, frames carry neither. */
static void case_inline_frames(void) {
  perf__modules_t *mods = perf__modules_acquire();
  perf__frame_info_t fi, caller;
  uintptr_t pcs[2] = {inlined_pc(mods, &fi), (uintptr_t)lines_caller + 9};
  perf__modules_symbolize(mods, pcs[1], true, &caller);
  CHECK(caller.sym.count == 1 && caller.sym.from_dwarf);
  perf__stack_end_t end = PERF__STACK_END_COMPLETE;
  perf__event_t *ev = event_of(mods, pcs, 2, &end, 1);
  Perf__V1__Batch *bt = encode(new_builder(true, false), ev);
  CHECK_EQ_INT(bt->n_stacks, 1);
  const Perf__V1__Stack *s = bt->stacks[0];
  CHECK_EQ_INT(s->end, PERF__V1__STACK_END__STACK_END_COMPLETE);
  const Perf__V1__Frame *f0 = frame_of(bt, s, 0), *f1 = frame_of(bt, s, 1);
  CHECK_EQ_INT(f0->n_lines, 2);
  CHECK(strcmp(fn_name(bt, f0->lines[0]->function), "lines_inner") == 0);
  CHECK(strcmp(fn_name(bt, f0->lines[1]->function), "lines_outer") == 0);
  CHECK_EQ_INT(f0->lines[1]->function, f0->function); /* the physical function is the frame's */
  CHECK_EQ_INT(f0->function_offset, pcs[0] - (uintptr_t)lines_outer);
  for (size_t k = 0; k < 2; k++) {
    CHECK(ends_with(bt->strings[f0->lines[k]->file], "tests/wire/test_lines.c"));
    CHECK_EQ_INT(f0->lines[k]->line, fi.sym.lines[k].line);
    CHECK_EQ_INT(f0->lines[k]->column, fi.sym.lines[k].column);
  }
  CHECK(f0->lines[0]->line >= k_inner_line && f0->lines[0]->line <= k_inner_line + 1);
  CHECK_EQ_INT(f0->lines[1]->line, k_call_line);
  CHECK_EQ_INT(f1->n_lines, 1);
  CHECK(f1->lines[0]->function == f1->function &&
        strcmp(fn_name(bt, f1->function), "lines_caller") == 0);
  CHECK(f1->lines[0]->line >= k_caller_line && f1->lines[0]->line < k_caller_line + 4);
  CHECK_EQ_INT(f1->lines[0]->line, caller.sym.lines[0].line);
  /* C names are shown as they are: no system name. */
  for (size_t i = 0; i < bt->n_functions; i++)
    CHECK_EQ_INT(bt->functions[i]->system_name, 0);
  perf__v1__batch__free_unpacked(bt, NULL);

  bt = encode(new_builder(false, false), ev);
  CHECK(bt->n_functions == 0 && frame_of(bt, bt->stacks[0], 0)->n_lines == 0);
  perf__v1__batch__free_unpacked(bt, NULL);
  perf__event_free(ev);
  perf__modules_release(mods);
}

/* Functions are one entry per (name, system name): C1 and C2 constructors
   demangle alike and stay two functions; a system name equal to the name
   is not sent; frames differing only in their lines are two frames. */
static void case_function_names(void) {
  perf__batch_builder_t *b = new_builder(true, false);
  perf__batch_begin_event(b);
  static const char name[] = "shop::Cart::Cart()", c1[] = "_ZN4shop4CartC1Ev",
                    c2[] = "_ZN4shop4CartC2Ev";
  perf__batch_function_t f1 = {name, strlen(name), c1, strlen(c1)};
  perf__batch_function_t f2 = {name, strlen(name), c2, strlen(c2)};
  perf__batch_function_t plain = {"main", 4, "main", 4};
  uint32_t a = 0, a2 = 0, c = 0, p = 0;
  CHECK_EQ_INT(perf__batch_intern_function(b, &f1, &a), PERF_OK);
  CHECK_EQ_INT(perf__batch_intern_function(b, &f1, &a2), PERF_OK);
  CHECK_EQ_INT(perf__batch_intern_function(b, &f2, &c), PERF_OK);
  CHECK_EQ_INT(perf__batch_intern_function(b, &plain, &p), PERF_OK);
  CHECK(a == a2 && a != c && p != a && p != c);
  uint32_t file = 0;
  CHECK_EQ_INT(perf__batch_intern_string(b, "cart.cc", 7, &file), PERF_OK);
  perf__batch_line_t l1[2] = {{c, file, 10, 3}, {a, file, 20, 5}};
  perf__batch_line_t l2[2] = {{c, file, 11, 3}, {a, file, 20, 5}};
  perf__batch_frame_t k1 = {0, a, 0x1000, 16, 0, l1, 2}, k2 = k1;
  k2.lines = l2;
  uint32_t fr1 = 0, fr1b = 0, fr2 = 0, st = 0;
  CHECK_EQ_INT(perf__batch_intern_frame(b, &k1, &fr1), PERF_OK);
  CHECK_EQ_INT(perf__batch_intern_frame(b, &k1, &fr1b), PERF_OK);
  CHECK_EQ_INT(perf__batch_intern_frame(b, &k2, &fr2), PERF_OK);
  CHECK(fr1 == fr1b && fr1 != fr2);
  perf__batch_frame_t too_deep = k1;
  too_deep.line_count = PERF__BATCH_MAX_LINES + 1;
  CHECK_EQ_INT(perf__batch_intern_frame(b, &too_deep, &fr1b), PERF_E_INVALID_ARGUMENT);
  uint32_t frames[2] = {fr1, fr2};
  CHECK_EQ_INT(perf__batch_intern_stack(b, frames, 2, PERF__V1__STACK_END__STACK_END_COMPLETE, &st),
               PERF_OK);
  perf__batch_count_t count = {st, 1, 1};
  perf__batch_event_t ev = {.kind = PERF__V1__EVENT_KIND__EVENT_KIND_MANUAL,
                            .start_unix_ns = 1,
                            .start_mono_ns = 1,
                            .duration_ns = 1,
                            .tid = 1,
                            .cpu_percent = -1,
                            .counts = &count,
                            .count_count = 1};
  CHECK_EQ_INT(perf__batch_add_event(b, &ev), PERF_OK);
  Perf__V1__Batch *bt = finish_and_decode(b);
  CHECK_EQ_INT(bt->n_functions, 3);
  const Perf__V1__Function *fa = bt->functions[a - 1], *fc = bt->functions[c - 1],
                           *fp = bt->functions[p - 1];
  CHECK(strcmp(bt->strings[fa->name], name) == 0 && strcmp(bt->strings[fa->system_name], c1) == 0);
  CHECK(strcmp(bt->strings[fc->name], name) == 0 && strcmp(bt->strings[fc->system_name], c2) == 0);
  CHECK(strcmp(bt->strings[fp->name], "main") == 0 && fp->system_name == 0);
  CHECK_EQ_INT(bt->n_frames, 2);
  const Perf__V1__Frame *f = bt->frames[fr2 - 1];
  CHECK(f->n_lines == 2 && f->lines[0]->function == c && f->lines[0]->line == 11 &&
        f->lines[0]->column == 3 && strcmp(bt->strings[f->lines[1]->file], "cart.cc") == 0);
  perf__v1__batch__free_unpacked(bt, NULL);
  perf__batch_free(b);
}

/* The same pcs ended three ways are three stacks; each decodes with its
   end; the text form ends the cut ones with `<truncated: reason>`. */
static void case_stack_end(void) {
  perf__modules_t *mods = perf__modules_acquire();
  perf__frame_info_t fi;
  uintptr_t pcs[2] = {inlined_pc(mods, &fi), (uintptr_t)lines_caller + 9};
  perf__stack_end_t ends[6] = {PERF__STACK_END_COMPLETE, PERF__STACK_END_DEPTH,
                               PERF__STACK_END_DEPTH,    PERF__STACK_END_DEPTH,
                               PERF__STACK_END_NO_RULE,  PERF__STACK_END_NO_RULE};
  perf__event_t *ev = event_of(mods, pcs, 2, ends, 6);
  CHECK_EQ_INT(ev->stack_count, 3);
  perf__strbuf_t sb;
  perf__strbuf_init(&sb, 1u << 20);
  CHECK_EQ_INT(perf__format_event_stacks(&sb, ev), PERF_OK);
  /* DEPTH (3 samples) first; each stack is 3 lines (2 for the inlined frame). */
  CHECKF(strstr(sb.data, "stack samples=3 thread=") == sb.data &&
             strstr(sb.data, "\n3   <truncated: depth>\nstack samples=2 ") &&
             strstr(sb.data, "\n3   <truncated: no rule>\nstack samples=1 ") &&
             strstr(sb.data, " [inline] lines_inner ") && strstr(sb.data, " lines_caller + 9 "),
         "%s", sb.data);
  const char *complete = strstr(sb.data, "stack samples=1 ");
  CHECKF(complete && !strstr(complete, "<truncated"), "%s", sb.data);
  perf__strbuf_free(&sb);

  Perf__V1__Batch *bt = encode(new_builder(true, false), ev);
  CHECK_EQ_INT(bt->n_stacks, 3);
  CHECK_EQ_INT(bt->n_frames, 2); /* the frames are shared */
  int seen[6] = {0};
  for (size_t i = 0; i < bt->n_stacks; i++)
    seen[bt->stacks[i]->end]++;
  CHECK(seen[PERF__V1__STACK_END__STACK_END_COMPLETE] == 1 &&
        seen[PERF__V1__STACK_END__STACK_END_DEPTH] == 1 &&
        seen[PERF__V1__STACK_END__STACK_END_NO_RULE] == 1);
  perf__v1__batch__free_unpacked(bt, NULL);
  perf__event_free(ev);
  perf__modules_release(mods);
}

/* A hang marker (a one-event batch) copied as a fatal hang keeps its
   frames' lines and its stacks' ends, and its text shows both. */
static void case_copy_keeps_lines(void) {
  perf__modules_t *mods = perf__modules_acquire();
  perf__frame_info_t fi;
  uintptr_t pcs[2] = {inlined_pc(mods, &fi), (uintptr_t)lines_caller + 9};
  perf__stack_end_t ends[2] = {PERF__STACK_END_DEPTH, PERF__STACK_END_DEPTH};
  perf__event_t *ev = event_of(mods, pcs, 2, ends, 2);
  Perf__V1__Batch *marker = encode(new_builder(true, false), ev);
  perf__batch_builder_t *b = new_builder(true, false);
  CHECK_EQ_INT(
      perf__batch_copy_event(b, marker, 0, PERF__V1__EVENT_KIND__EVENT_KIND_FATAL_HANG, "died"),
      PERF_OK);
  Perf__V1__Batch *bt = finish_and_decode(b);
  CHECK(bt->n_stacks == 1 && bt->stacks[0]->end == PERF__V1__STACK_END__STACK_END_DEPTH);
  const Perf__V1__Frame *src = frame_of(marker, marker->stacks[0], 0),
                        *f = frame_of(bt, bt->stacks[0], 0);
  CHECK(f->n_lines == 2 && src->n_lines == 2);
  for (size_t k = 0; k < 2; k++) {
    CHECK(strcmp(fn_name(bt, f->lines[k]->function), fn_name(marker, src->lines[k]->function)) ==
          0);
    CHECK(strcmp(bt->strings[f->lines[k]->file], marker->strings[src->lines[k]->file]) == 0);
    CHECK(f->lines[k]->line == src->lines[k]->line && f->lines[k]->column == src->lines[k]->column);
  }
  perf__config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.app_name = cfg.app_version = cfg.environment = (char *)"x";
  perf__strbuf_t sb;
  perf__strbuf_init(&sb, 1u << 20);
  CHECK_EQ_INT(perf__format_fatal_hang(&sb, marker, "died", &cfg), PERF_OK);
  char want[128];
  snprintf(want, sizeof want, "test_lines.c:%u\n", f->lines[0]->line);
  CHECKF(strstr(sb.data, "0   test_lines ") && strstr(sb.data, " [inline] lines_inner ") &&
             strstr(sb.data, want) && strstr(sb.data, "\n1   test_lines ") &&
             strstr(sb.data, " lines_outer + ") && strstr(sb.data, "\n3   <truncated: depth>\n"),
         "%s", sb.data);
  perf__strbuf_free(&sb);
  perf__v1__batch__free_unpacked(bt, NULL);
  perf__v1__batch__free_unpacked(marker, NULL);
  perf__batch_free(b);
  perf__event_free(ev);
  perf__modules_release(mods);
}

/* Google's protoc reads the lines and the end as the schema says. */
static void case_protoc_decode(void) {
  CHECKF(PERF_PROTOC[0] && !strstr(PERF_PROTOC, "NOTFOUND"), "protoc not found");
  perf__modules_t *mods = perf__modules_acquire();
  perf__frame_info_t fi;
  uintptr_t pcs[2] = {inlined_pc(mods, &fi), (uintptr_t)lines_caller + 9};
  perf__stack_end_t end = PERF__STACK_END_DEPTH;
  perf__event_t *ev = event_of(mods, pcs, 2, &end, 1);
  perf__batch_builder_t *b = new_builder(true, true);
  perf__event_encoder_t *enc = perf__event_encoder_new();
  CHECK_EQ_INT(perf__event_encode(enc, b, ev), PERF_OK);
  uint8_t *out = NULL;
  size_t len = 0;
  CHECK_EQ_INT(perf__batch_finish(b, NULL, &out, &len, NULL), PERF_OK);
  FILE *f = protoc_decode_batch(out, len);
  char line[4096];
  int lines = 0, with_file = 0, depth = 0;
  while (fgets(line, sizeof line, f)) {
    lines += strcmp(line, "  lines {\n") == 0;
    with_file += strncmp(line, "    file: ", 10) == 0;
    depth += strcmp(line, "  end: STACK_END_DEPTH\n") == 0;
  }
  fclose(f);
  CHECKF(lines == 3 && with_file == 3 && depth == 1, "lines %d, files %d, depth ends %d", lines,
         with_file, depth);
  free(out);
  perf__event_encoder_free(enc);
  perf__batch_free(b);
  perf__event_free(ev);
  perf__modules_release(mods);
}

static const test_case_t g_cases[] = {
    TEST_CASE(inline_frames),    TEST_CASE(function_names), TEST_CASE(stack_end),
    TEST_CASE(copy_keeps_lines), TEST_CASE(protoc_decode),
};

int main(int argc, char **argv) {
  return test_main(g_cases, sizeof g_cases / sizeof g_cases[0], argc, argv);
}
