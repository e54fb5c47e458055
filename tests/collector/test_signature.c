/*
 * test_signature.c - the collector's stack grouping (collector/signature.c):
 * a hang's signature is the root part all its samples share.
 */
#include <string.h>

#include "check.h"
#include "sdk/base/utf8.h"
#include "signature.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static void case_hang_common_root(void) {
  /* Stuck in load_profile; samples landed in different leaf calls. */
  const char *a[] = {"clock_gettime", "spin_until", "load_profile", "handle", "main"};
  const char *b[] = {"read", "spin_until", "load_profile", "handle", "main"};
  const char *c[] = {"load_profile", "handle", "main"};
  perf__named_stack_t s[] = {{a, 5}, {b, 5}, {c, 3}};
  CHECK_EQ_INT(perf__common_root_depth(s, 3), 3);
  const char *sig[8];
  size_t n;
  perf__hang_signature(s, 3, sig, 8, &n);
  CHECK_EQ_INT(n, 3);
  CHECK(strcmp(sig[0], "load_profile") == 0 && strcmp(sig[2], "main") == 0);
  /* Without the short sample the leaf calls still differ: spin_until wins. */
  perf__hang_signature(s, 2, sig, 8, &n);
  CHECK_EQ_INT(n, 4);
  CHECK(strcmp(sig[0], "spin_until") == 0);
  /* One sample: its whole stack. */
  perf__hang_signature(s, 1, sig, 8, &n);
  CHECK_EQ_INT(n, 5);
  /* A bound keeps the innermost shared frames. */
  perf__hang_signature(s, 3, sig, 2, &n);
  CHECK_EQ_INT(n, 2);
  CHECK(strcmp(sig[0], "load_profile") == 0 && strcmp(sig[1], "handle") == 0);
}

static void case_different_roots(void) {
  const char *a[] = {"f", "main"};
  const char *b[] = {"f", "start_thread"};
  perf__named_stack_t s[] = {{a, 2}, {b, 2}};
  CHECK_EQ_INT(perf__common_root_depth(s, 2), 0);
  CHECK_EQ_INT(perf__common_root_depth(s, 0), 0);
}

static void case_hash(void) {
  const char *x[] = {"ab", "c"}, *y[] = {"a", "bc"}, *z[] = {"ab", "c"};
  CHECK(perf__signature_hash(x, 2) != perf__signature_hash(y, 2));
  CHECK(perf__signature_hash(x, 2) == perf__signature_hash(z, 2));
  CHECK(perf__signature_hash(x, 1) != perf__signature_hash(x, 2));
}

/* Labels: the function, else module basename + address; one cut short
   ends on a whole UTF-8 character. */
static void case_frame_label(void) {
  char out[16];
  perf__frame_label(out, sizeof out, "parse", "/usr/lib/libx.so", "0x10");
  CHECK(strcmp(out, "parse") == 0);
  perf__frame_label(out, sizeof out, NULL, "/usr/lib/libx.so", "0x10");
  CHECK(strcmp(out, "libx.so+0x10") == 0);
  perf__frame_label(out, sizeof out, "", NULL, NULL);
  CHECK(strcmp(out, "??+0x0") == 0);
  /* "\xc3\xa9" (e acute) x 10 = 20 bytes into 16: 7 whole characters. */
  perf__frame_label(
      out, sizeof out,
      "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", NULL,
      NULL);
  CHECK_EQ_INT(strlen(out), 14);
  CHECK(perf__utf8_valid(out));
  perf__frame_label(out, sizeof out, "abcdefghijklmnopqrstuvwxyz", NULL, NULL);
  CHECK(strcmp(out, "abcdefghijklmno") == 0);
}

static const test_case_t g_cases[] = {
    TEST_CASE(hang_common_root),
    TEST_CASE(different_roots),
    TEST_CASE(hash),
    TEST_CASE(frame_label),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
