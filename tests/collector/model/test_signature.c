/*
 * test_signature.c - the collector's stack grouping (collector/model/signature.c):
 * a hang's key is the root part the majority of its complete samples
 * share; which stored group a hang joins.
 */
#include <stdbool.h>
#include <string.h>

#include "check.h"
#include "collector/model/signature.h"
#include "sdk/base/utf8.h"

/* A hang's samples: its stacks (innermost first) and their counts. */
static perf__hang_samples_t hang_of(const perf__named_stack_t *s, const uint64_t *w, size_t n) {
  return (perf__hang_samples_t){s, w, n};
}

static bool key_is(const char **key, size_t len, const char *const *want, size_t n) {
  if (len != n) return false;
  for (size_t i = 0; i < n; i++)
    if (strcmp(key[i], want[i]) != 0) return false;
  return true;
}

#define CHECK_KEY(key, len, ...)                                                                   \
  do {                                                                                             \
    const char *const want_[] = {__VA_ARGS__};                                                     \
    CHECKF(key_is(key, len, want_, ARRAY_LEN(want_)), "key of %zu frames, innermost %s", len,      \
           len ? key[0] : "(none)");                                                               \
  } while (0)

/* Stuck in busy_loop, which calls now_ms (itself in clock_gettime): the
   key is the part more than half of the samples share, not all of them. */
static const char *g_self[] = {"busy_loop", "run", "main", "_start"};
static const char *g_now[] = {"now_ms", "busy_loop", "run", "main", "_start"};
static const char *g_clock[] = {"clock_gettime", "now_ms", "busy_loop", "run", "main", "_start"};
static const char *g_stray[] = {"write", "log_line", "run", "main", "_start"};
static const char *g_cut[] = {"busy_loop", "<truncated: bad read>"};
static const char *g_thread[] = {"poll", "start_thread", "clone"};

static void case_majority_key(void) {
  perf__named_stack_t s[] = {{g_self, 4}, {g_now, 5}, {g_clock, 6}, {g_stray, 5}};
  const char *key[8];
  size_t len;
  /* 45 in busy_loop itself, 35 through now_ms, 20 stray: busy_loop. */
  uint64_t w[] = {45, 15, 20, 20};
  perf__hang_samples_t h = hang_of(s, w, 4);
  perf__hang_key(&h, key, 8, &len);
  CHECK_KEY(key, len, "busy_loop", "run", "main", "_start");
  /* 60 % through now_ms, all of them in clock_gettime: one frame deeper
     each (perf__group_pick keeps them in one group). */
  uint64_t w2[] = {25, 0, 60, 15};
  h = hang_of(s, w2, 4);
  perf__hang_key(&h, key, 8, &len);
  CHECK_KEY(key, len, "clock_gettime", "now_ms", "busy_loop", "run", "main", "_start");
  /* Exactly half is no majority: the key stops above. */
  uint64_t w3[] = {50, 0, 0, 50};
  h = hang_of(s, w3, 4);
  perf__hang_key(&h, key, 8, &len);
  CHECK_KEY(key, len, "run", "main", "_start");
  /* The bound keeps the root part. */
  h = hang_of(s, w, 4);
  perf__hang_key(&h, key, 2, &len);
  CHECK_KEY(key, len, "main", "_start");
}

/* Stacks cut short never count while complete ones exist, however many
   samples they have (all epilogue samples share one return address);
   other threads' roots are strays too. */
static void case_partial_ignored(void) {
  perf__named_stack_t s[] = {{g_self, 4}, {g_now, 5}, {g_cut, 2}, {g_thread, 3}};
  uint64_t w[] = {30, 20, 400, 10};
  perf__hang_samples_t h = hang_of(s, w, 4);
  const char *key[8];
  size_t len;
  perf__hang_key(&h, key, 8, &len);
  CHECK_KEY(key, len, "busy_loop", "run", "main", "_start");
  CHECK(!perf__stack_complete(&s[2]) && perf__stack_complete(&s[0]));
  /* Only stacks cut short: they are all there is. */
  h = hang_of(&s[2], &w[2], 1);
  perf__hang_key(&h, key, 8, &len);
  CHECK_KEY(key, len, "busy_loop", "<truncated: bad read>");
  /* Where the samples went below a key: self and per child, partial ones
     left out. */
  h = hang_of(s, w, 4);
  const char *names[4];
  uint64_t counts[4], self, through;
  const char *at[] = {"busy_loop", "run", "main", "_start"};
  size_t m = perf__hang_children(&h, at, 4, names, counts, 4, &self, &through);
  CHECK_EQ_INT(m, 1);
  CHECK(strcmp(names[0], "now_ms") == 0 && counts[0] == 20);
  CHECK(self == 30 && through == 50);
}

/* Groups: the same hang whose majority reached one frame deeper or
   shallower joins the group already there; a child that carried under a
   quarter of the samples (the group's and the hang's together) is another
   place. */
static void case_group_pick(void) {
  const char *key_loop[] = {"busy_loop", "run", "main", "_start"};
  const char *key_clock[] = {"clock_gettime", "now_ms", "busy_loop", "run", "main", "_start"};
  const char *kids[] = {"now_ms"};
  uint64_t near_half[] = {40}, few[] = {100};
  perf__group_view_t loop = {key_loop, 4, kids, near_half, 1, 60, NULL};
  perf__group_view_t loop_rare = {key_loop, 4, kids, few, 1, 900, NULL};
  perf__named_stack_t s[] = {{g_self, 4}, {g_now, 5}, {g_clock, 6}};
  uint64_t deep[] = {25, 0, 75}, shallow[] = {60, 10, 30}, rare[] = {90, 0, 10};
  perf__hang_samples_t h_deep = hang_of(s, deep, 3), h_shallow = hang_of(s, shallow, 3),
                       h_rare = hang_of(s, rare, 3);
  /* Deeper than a group that sent 40 of 100 into now_ms, while this hang
     stayed out of it 25 of 100 (65 of 200 crossed): that group. */
  CHECK_EQ_INT(perf__group_pick(&h_deep, key_clock, 6, &loop, 1), 0);
  /* A long history with 100 of 1000 into now_ms: 125 of 1100, its own. */
  CHECK_EQ_INT(perf__group_pick(&h_deep, key_clock, 6, &loop_rare, 1), -1);
  /* Shallower than a group whose key goes on into now_ms, where 40 % of
     this hang's samples went: that group; 10 % and no history of the
     group's: its own; 10 % and the group's 45 of 100 staying in busy_loop:
     55 of 200, the group; 25 of 100: its own. */
  perf__group_view_t clock = {key_clock, 6, NULL, NULL, 0, 75, NULL};
  CHECK_EQ_INT(perf__group_pick(&h_shallow, key_loop, 4, &clock, 1), 0);
  CHECK_EQ_INT(perf__group_pick(&h_rare, key_loop, 4, &clock, 1), -1);
  clock.through = (const uint64_t[]){100, 100, 100, 100, 55, 55};
  CHECK_EQ_INT(perf__group_pick(&h_rare, key_loop, 4, &clock, 1), 0);
  clock.through = (const uint64_t[]){100, 100, 100, 100, 75, 75};
  CHECK_EQ_INT(perf__group_pick(&h_rare, key_loop, 4, &clock, 1), -1);
  /* Another hang that only touched the group's path: a group stuck in
     parse_config under main is no group for the busy_loop hang, and the
     busy_loop group none for a parse_config hang with a fifth of its
     samples in busy_loop. */
  const char *parse[] = {"parse_config", "main", "_start"};
  perf__group_view_t in_parse = {parse, 3, NULL, NULL, 0, 100, (const uint64_t[]){100, 100, 100}};
  CHECK_EQ_INT(perf__group_pick(&h_deep, key_clock, 6, &in_parse, 1), -1);
  perf__named_stack_t ps[] = {{parse, 3}, {g_self, 4}};
  uint64_t pw[] = {80, 20};
  perf__hang_samples_t h_parse = hang_of(ps, pw, 2);
  clock.through = (const uint64_t[]){100, 100, 100, 100, 55, 55};
  CHECK_EQ_INT(perf__group_pick(&h_parse, parse, 3, &clock, 1), -1);
  uint64_t through[6];
  perf__hang_through(&h_shallow, key_clock, 6, through);
  CHECK(through[0] == 100 && through[3] == 100 && through[4] == 40 && through[5] == 30);
  /* A group shows the part of its key the majority of all its samples
     share: here the key's first 4 root frames, down to busy_loop. */
  CHECK_EQ_INT(perf__group_majority_len(through, 6), 4);
  CHECK_EQ_INT(perf__group_majority_len((const uint64_t[]){100, 100, 51}, 3), 3);
  CHECK_EQ_INT(perf__group_majority_len((const uint64_t[]){100, 100, 50}, 3), 2);
  CHECK_EQ_INT(perf__group_majority_len((const uint64_t[]){0, 0}, 2), 2);
  /* The exact key first, then the deepest prefix, then the shortest
     extension. */
  perf__group_view_t both[] = {clock, loop, {key_loop + 1, 3, NULL, NULL, 0, 5, NULL}};
  CHECK_EQ_INT(perf__group_pick(&h_shallow, key_loop, 4, both, 3), 1);
  perf__group_view_t prefixes[] = {
      {key_loop + 1, 3, (const char *const[]){"busy_loop"}, (const uint64_t[]){9}, 1, 1, NULL},
      loop};
  CHECK_EQ_INT(perf__group_pick(&h_deep, key_clock, 6, prefixes, 2), 1);
  /* Unrelated keys never match. */
  perf__group_view_t other = {
      (const char *const[]){"poll", "start_thread"}, 2, NULL, NULL, 0, 1, NULL};
  CHECK_EQ_INT(perf__group_pick(&h_deep, key_clock, 6, &other, 1), -1);
}

/* Seen in hang_grouping under load: a group keyed down to the vDSO whose
   135 samples in clock_gettime all went on into it, and a hang whose key
   stopped at clock_gettime (16 of its 28 samples there, 11 into the vDSO:
   39 % of all, under the majority). Pooled, 11 of 151 crossed; by its own
   samples 11 of 16 went the group's way: the same hang, that group. */
static void case_group_pick_pure_history(void) {
  const char *vdso[] = {
      "__vdso_clock_gettime", "clock_gettime", "now_ms", "busy_loop", "run", "main", "_start"};
  perf__named_stack_t s[] = {{g_self, 4}, {g_now, 5}, {g_clock, 6}, {vdso, 7}};
  uint64_t w[] = {10, 2, 5, 11};
  perf__hang_samples_t h = hang_of(s, w, 4);
  const char *key[8];
  size_t len;
  perf__hang_key(&h, key, 8, &len);
  CHECK_KEY(key, len, "clock_gettime", "now_ms", "busy_loop", "run", "main", "_start");
  perf__group_view_t deep = {
      vdso, 7, NULL, NULL, 0, 135, (const uint64_t[]){382, 382, 382, 382, 199, 135, 135}};
  CHECK_EQ_INT(perf__group_pick(&h, key, len, &deep, 1), 0);
  /* 3 of 16 into the vDSO (under a quarter) and the same history: its own. */
  uint64_t few[] = {10, 2, 13, 3};
  h = hang_of(s, few, 4);
  perf__hang_key(&h, key, 8, &len);
  CHECK_KEY(key, len, "clock_gettime", "now_ms", "busy_loop", "run", "main", "_start");
  CHECK_EQ_INT(perf__group_pick(&h, key, len, &deep, 1), -1);
}

/* The same loop calling two leaves in turn: one occurrence's majority went
   into one leaf, the next one's into the other. */
static void case_sibling_leaves(void) {
  const char *hash[] = {"leaf_hash", "stuck", "main"};
  const char *mix[] = {"leaf_mix", "stuck", "main"};
  const char *log[] = {"log", "main"};
  perf__named_stack_t s[] = {{hash, 3}, {mix, 3}, {log, 2}};
  uint64_t w[] = {55, 40, 5};
  perf__hang_samples_t h = hang_of(s, w, 3);
  const char *key[4];
  size_t len;
  perf__hang_key(&h, key, 4, &len);
  CHECK_KEY(key, len, "leaf_hash", "stuck", "main");
  /* Its samples turned into leaf_mix with 40 of 95 at stuck; log (5 of
     100 at main, under an eighth) is no turn. */
  perf__hang_turn_t turns[4];
  CHECK_EQ_INT(perf__hang_turns(&h, key, len, turns, 4), 1);
  CHECK(turns[0].depth == 2 && strcmp(turns[0].child, "leaf_mix") == 0);
  perf__group_view_t g = {mix, 3, NULL, NULL, 0, 40, NULL};
  CHECK_EQ_INT(perf__group_pick(&h, key, len, &g, 1), 0);
  uint64_t rare[] = {90, 5, 5};
  h = hang_of(s, rare, 3);
  CHECK_EQ_INT(perf__group_pick(&h, key, len, &g, 1), -1);
  CHECK_EQ_INT(perf__hang_turns(&h, key, len, turns, 4), 0);
}

/* Clones and mangled names: one label per function. */
static void case_group_label(void) {
  char out[128];
  perf__group_label(out, sizeof out, "now_ms.constprop.0", "/app", "0x10");
  CHECK(strcmp(out, "now_ms") == 0);
  perf__group_label(out, sizeof out, "now_ms.isra.0.cold", "/app", "0x10");
  CHECK(strcmp(out, "now_ms") == 0);
  perf__group_label(out, sizeof out, "f(int) [clone .isra.0]", "/app", "0x10");
  CHECKF(strcmp(out, "f(int)") == 0, "%s", out);
  perf__group_label(out, sizeof out, "_ZN4shop7pricing6EngineIlE5totalEv.isra.0", "/app", "0x10");
  CHECKF(strcmp(out, "shop::pricing::Engine<long>::total()") == 0, "%s", out);
  perf__group_label(out, sizeof out, NULL, "/usr/lib/libx.so", "0x10");
  CHECK(strcmp(out, "libx.so+0x10") == 0);
  perf__truncated_label(out, sizeof out, "no rule");
  CHECK(strcmp(out, "<truncated: no rule>") == 0);
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

/* A label is UTF-8 text whatever bytes its name holds (a hostile debug
   file's symbol, a module path): U+FFFD for each bad byte, so it always
   goes into JSON. */
static void case_label_not_utf8(void) {
  char out[64];
  perf__group_label(out, sizeof out, "caf\xe9_spin", "/app", "0x10");
  CHECK(strcmp(out, "caf\xef\xbf\xbd_spin") == 0);
  perf__frame_label(out, sizeof out, "r\xe9sum\xff", NULL, NULL);
  CHECK(strcmp(out, "r\xef\xbf\xbdsum\xef\xbf\xbd") == 0);
  perf__group_label(out, sizeof out, NULL, "/opt/caf\xe9/app\xe9", "0x10");
  CHECK(strcmp(out, "app\xef\xbf\xbd+0x10") == 0);
  perf__group_label(out, 8, "abcdef\xe9\xe9", NULL, NULL); /* cut: whole characters only */
  CHECK(perf__utf8_valid(out) && strncmp(out, "abcdef", 6) == 0);
}

static const test_case_t g_cases[] = {
    TEST_CASE(majority_key),   TEST_CASE(partial_ignored),
    TEST_CASE(group_pick),     TEST_CASE(group_pick_pure_history),
    TEST_CASE(sibling_leaves), TEST_CASE(group_label),
    TEST_CASE(hash),           TEST_CASE(frame_label),
    TEST_CASE(label_not_utf8),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
