/*
 * test_frame_json.c - a stored frame named from a debug file
 * (collector/model/frame_json.c) whatever bytes the file holds:
 *  - latin1_names: a function, a linkage name and source paths in Latin-1
 *    (a program built in a directory named so) become frames with each
 *    bad byte as U+FFFD, their inline chain too, and their labels the
 *    same; nothing fails (a failed frame refused its whole batch);
 *  - utf8_names_unchanged: well-formed UTF-8 names and paths are stored
 *    byte for byte;
 *  - group_names_as_jansson: a group's names JSON (hang_key_group, which
 *    writes it without jansson) is byte for byte jansson's
 *    json_dumps(JSON_COMPACT) of the names: every ASCII byte, quotes,
 *    backslashes, slashes, UTF-8 of 2 to 4 bytes, no names; a name that
 *    is not UTF-8 (a lone byte 0xff, an overlong form, a surrogate) is
 *    refused by both.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "collector/model/frame_json.h"
#include "collector/model/hang_key.h"

#define FFFD "\xef\xbf\xbd"

static symbol_t two_lines(const char *inner, const char *inner_file, const char *outer,
                          const char *outer_system, const char *outer_file) {
  symbol_t s = {0};
  s.lines[0] = (symbol_line_t){inner, NULL, inner_file, 7};
  s.lines[1] = (symbol_line_t){outer, outer_system, outer_file, 12};
  s.count = 2;
  s.offset = 0x40;
  return s;
}

static const char *field(const json_t *o, const char *key) {
  const char *v = json_string_value(json_object_get(o, key));
  CHECKF(v, "no %s", key);
  return v;
}

static void case_latin1_names(void) {
  json_t *frame = json_pack("{s:s,s:s}", "module", "/usr/bin/app", "address", "0x1234");
  CHECK(frame);
  symbol_t s = two_lines("r\xe9sum\xe9_line", "/home/r\xe9mi/src/inl.h", "caf\xe9_init",
                         "_Z9caf\xe9_initv", "/home/r\xe9mi/src/app.c");
  CHECK_EQ_INT(frame_json_set_symbol(frame, &s, 0), 0);
  CHECK(strcmp(field(frame, "function"), "caf" FFFD "_init") == 0);
  CHECK(strcmp(field(frame, "system_name"), "_Z9caf" FFFD "_initv") == 0);
  CHECK(strcmp(field(frame, "file"), "/home/r" FFFD "mi/src/app.c") == 0);
  const json_t *inl = json_array_get(json_object_get(frame, "inlined"), 0);
  CHECK(inl);
  CHECK(strcmp(field(inl, "function"), "r" FFFD "sum" FFFD "_line") == 0);
  CHECK(strcmp(field(inl, "file"), "/home/r" FFFD "mi/src/inl.h") == 0);
  /* stored as text and read back: what the store and the API do */
  char *text = json_dumps(frame, JSON_COMPACT);
  CHECK(text);
  json_t *back = json_loads(text, 0, NULL);
  CHECKF(back, "not JSON: %s", text);
  json_t *frames = json_pack("[O]", back);
  json_t *labels = frame_json_labels(frames);
  CHECK(labels);
  CHECK_EQ_INT(json_array_size(labels), 2);
  CHECK(strcmp(json_string_value(json_array_get(labels, 0)),
               "r" FFFD "sum" FFFD "_line" FRAME_INLINE_SUFFIX) == 0);
  CHECK(strcmp(json_string_value(json_array_get(labels, 1)), "caf" FFFD "_init") == 0);
  json_decref(labels);
  json_decref(frames);
  json_decref(back);
  free(text);
  json_decref(frame);
}

static void case_utf8_names_unchanged(void) {
  json_t *frame = json_pack("{s:s,s:s}", "module", "/usr/bin/app", "address", "0x1234");
  CHECK(frame);
  symbol_t s = two_lines("r\xc3\xa9sum\xc3\xa9", "/src/\xc3\xa9t\xc3\xa9.h", "caf\xc3\xa9", NULL,
                         "/src/\xe6\x97\xa5\xe6\x9c\xac/app.c");
  CHECK_EQ_INT(frame_json_set_symbol(frame, &s, 0), 0);
  CHECK(strcmp(field(frame, "function"), "caf\xc3\xa9") == 0);
  CHECK(strcmp(field(frame, "file"), "/src/\xe6\x97\xa5\xe6\x9c\xac/app.c") == 0);
  CHECK(json_object_get(frame, "system_name") == NULL);
  const json_t *inl = json_array_get(json_object_get(frame, "inlined"), 0);
  CHECK(strcmp(field(inl, "function"), "r\xc3\xa9sum\xc3\xa9") == 0);
  CHECK(strcmp(field(inl, "file"), "/src/\xc3\xa9t\xc3\xa9.h") == 0);
  json_decref(frame);
}

/* An answer that cannot be stored (a line without a function) leaves the
   frame exactly as it was: the device's names stay, nothing half-set. */
static void case_failed_answer_keeps_frame(void) {
  json_t *frame = json_pack("{s:s,s:s,s:s,s:s,s:i}", "module", "/usr/bin/app", "address", "0x1234",
                            "function", "device_name", "file", "/src/a.c", "line", 3);
  CHECK(frame);
  json_t *before = json_deep_copy(frame);
  symbol_t s = two_lines(NULL, NULL, "outer", NULL, "/src/b.c");
  CHECK_EQ_INT(frame_json_set_symbol(frame, &s, 1), -1);
  CHECK(json_equal(frame, before));
  json_decref(before);
  json_decref(frame);
}

/* hang_key_group's names JSON of names against jansson's; ok: whether
   both accept them. */
static void check_as_jansson(const char *const *names, size_t n, bool ok) {
  json_t *a = json_array();
  CHECK(a);
  bool refused = false;
  for (size_t i = 0; i < n; i++)
    refused |= json_array_append_new(a, json_string(names[i])) != 0;
  char *want = refused ? NULL : json_dumps(a, JSON_COMPACT);
  json_decref(a);
  store_group_t g;
  int rc = hang_key_group(names, n, &g);
  CHECK_EQ_INT(rc == 0, ok);
  CHECK_EQ_INT(want != NULL, ok);
  if (ok) CHECKF(strcmp(g.names_json, want) == 0, "%s, jansson: %s", g.names_json, want);
  if (ok) free((char *)g.names_json);
  free(want);
}

static void case_group_names_as_jansson(void) {
  char ascii[128];
  for (int c = 1; c < 128; c++)
    ascii[c - 1] = (char)c;
  ascii[127] = '\0';
  const char *const names[] = {ascii, "f(char const*) [clone .isra.0]", "a/b\\c\"d",
                               "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", ""};
  check_as_jansson(names, ARRAY_LEN(names), true);
  check_as_jansson(names, 0, true);
  const char *const bad[][2] = {{"ok", "\xff"}, {"\xc0\x80", "ok"}, {"\xed\xa0\x80", "ok"}};
  for (size_t i = 0; i < ARRAY_LEN(bad); i++)
    check_as_jansson(bad[i], 2, false);
}

static const test_case_t CASES[] = {
    TEST_CASE(latin1_names),
    TEST_CASE(utf8_names_unchanged),
    TEST_CASE(failed_answer_keeps_frame),
    TEST_CASE(group_names_as_jansson),
};

int main(int argc, char **argv) {
  return test_main(CASES, ARRAY_LEN(CASES), argc, argv);
}
