/*
 * test_hang_group_cands.c - the stored hang groups a pick reads
 * (collector/model/hang_group_cands.c, shared by the SQLite and PostgreSQL
 * stores), against groups held in memory and read the way both backends'
 * range query reads them: [from, skip_from) and [skip_to, to), each by
 * path, at most limit each, each row offered to the pick with its path's
 * samples (hgc_cands_add_row), and the nearest paths outside. The hang is
 * the flaky run's: keyed 14 frames deep at the clock read (4 frames below
 * busy_loop under ASan), 2 of its 21 samples in spin (no turn).
 *  - every_branch_point: the first range read is hgc_end_range's (the
 *    PostgreSQL store reads it ahead with the prefixes); a group crossing the hang found wherever
 * it parts from the key (after 1 .. 13 frames, or past its end) when every deeper branch point
 * holds a group that does not cross: one range per branch point from the key's end down to it, each
 * group read once; the pick takes it. The flaky run's store: the group keyed busy_loop -> spin
 * found in 2 ranges (the 12 empty branch points between read by none).
 *  - rules_first: the key's own group among the prefixes' candidates: no
 *    range read; a prefix group that does not cross: the ranges read.
 *  - deepest_crossing: crossing groups parting after 12 and 10 frames: the
 *    walk stops above 12 (rule 3 takes the deepest parting).
 *  - read_cap: 50 groups that do not cross at each branch point: the reads
 *    stop at HGC_MAX_READ, deepest first, no index range asked for more
 *    than HGC_MAX_EXTENSIONS.
 *  - turns: 6 of the hang's 21 samples in spin (a turn off its key at
 *    busy_loop): hgc_turns gives the one range under it, the subtree of
 *    busy_loop -> spin, and the pick's first read is that range (what the
 *    PostgreSQL store reads ahead with the prefixes), which finds the spin
 *    group.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "collector/model/hang_group_cands.h"

/* The hang of the flaky run, innermost first: 19 of its 21 samples in the
   clock read, 2 in spin (under an eighth: no turn of its own). */
static const char *const g_clock[] = {"__vdso_clock_gettime",
                                      "clock_gettime",
                                      "__interceptor_clock_gettime",
                                      "now_ms",
                                      "busy_loop",
                                      "run_hangs",
                                      "sdk_run",
                                      "case_repeated_hang",
                                      "run_case",
                                      "collector_test_main",
                                      "main",
                                      "__libc_start_call_main",
                                      "__libc_start_main",
                                      "_start"};
static const char *const g_spin[] = {"spin",
                                     "busy_loop",
                                     "run_hangs",
                                     "sdk_run",
                                     "case_repeated_hang",
                                     "run_case",
                                     "collector_test_main",
                                     "main",
                                     "__libc_start_call_main",
                                     "__libc_start_main",
                                     "_start"};
#define KEY_LEN ARRAY_LEN(g_clock)

/* The stored groups: paths root first, each name ended by HGC_SEP, and
   their hang_group_path blobs. */
typedef struct mem_store_s {
  char **paths;
  unsigned char **blobs;
  size_t *bytes;
  size_t n;
  hgc_cands_t cs;
  const store_hang_t *hang; /* whose pick the ranges are read for */
  size_t ranges;            /* range calls */
  size_t rows;              /* rows they returned */
  size_t max_limit;         /* the largest limit asked for */
  size_t hits[KEY_LEN + 1]; /* rows per range call, by call */
  hgc_range_t first;        /* the first range read (its texts copied below) */
  char first_from[512], first_to[512], first_skip_from[512], first_skip_to[512];
  char first_floor[512], first_ceiling[512];
} mem_store_t;

/* A group keyed by key (innermost first, len frames) whose 100 samples
   all passed its first `parts` root frames and 40 of them went on below
   (60 went the other way where a hang keyed below the first `parts`
   frames parts from it: it crosses such a hang, as the flaky run's group
   crossed the hang keyed 4 frames below busy_loop); parts >= len: all 100
   all the way (a group that crosses no parting hang). */
static void store_add(mem_store_t *s, const char *const *key, size_t len, size_t parts) {
  size_t n = s->n + 1;
  CHECK((s->paths = realloc(s->paths, n * sizeof *s->paths)) != NULL);
  CHECK((s->blobs = realloc(s->blobs, n * sizeof *s->blobs)) != NULL);
  CHECK((s->bytes = realloc(s->bytes, n * sizeof *s->bytes)) != NULL);
  uint64_t through[KEY_LEN + 2];
  CHECK(len <= ARRAY_LEN(through));
  for (size_t d = 0; d < len; d++)
    through[d] = d < parts ? 100 : 40;
  CHECK((s->paths[s->n] = hgc_path_of(key, len)) != NULL);
  CHECK((s->blobs[s->n] = hgc_encode_path(through, len)) != NULL);
  s->bytes[s->n] = 8 * len;
  s->n = n;
}

/* The key's first p root frames, then `other_<p>_<i>` (and `leaf` below
   it when deeper): a group parting from the key after p frames, crossing
   it there unless `crossing` is false. */
static void store_add_parting(mem_store_t *s, size_t p, int i, bool deeper, bool crossing) {
  char other[32];
  snprintf(other, sizeof other, "other_%zu_%d", p, i);
  const char *key[KEY_LEN + 2];
  size_t n = 0;
  if (deeper) key[n++] = "leaf";
  key[n++] = other;
  for (size_t k = 0; k < p; k++)
    key[n++] = g_clock[KEY_LEN - p + k];
  store_add(s, key, n, crossing ? p : n);
}

static void store_free(mem_store_t *s) {
  for (size_t i = 0; i < s->n; i++)
    free(s->paths[i]), free(s->blobs[i]);
  free(s->paths);
  free(s->blobs);
  free(s->bytes);
  hgc_cands_free(&s->cs);
}

/* Stored groups by path (bytes: the backends' order). */
static const mem_store_t *g_sorting;
static int by_path(const void *a, const void *b) {
  return strcmp(g_sorting->paths[*(const size_t *)a], g_sorting->paths[*(const size_t *)b]);
}

/* The stored groups in [from, to) by path, at most limit, into in; how
   many. */
static size_t in_range(const mem_store_t *s, const char *from, const char *to, size_t limit,
                       size_t *in) {
  size_t m = 0;
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->paths[i], from) >= 0 && strcmp(s->paths[i], to) < 0) in[m++] = i;
  g_sorting = s;
  qsort(in, m, sizeof *in, by_path);
  return m < limit ? m : limit;
}

/* hgc_look_ranges' range: the backends' query over the groups in memory,
   each row offered to the pick as the backends offer it, and the paths
   next to the range. */
static int range(void *ctx, const hgc_range_t *r, hgc_next_t *next) {
  mem_store_t *s = ctx;
  CHECK(r->limit >= 1 && r->limit <= HGC_MAX_EXTENSIONS);
  if (r->limit > s->max_limit) s->max_limit = r->limit;
  size_t *in = calloc(2 * s->n + 1, sizeof *in);
  CHECK(in != NULL);
  size_t m = in_range(s, r->from, r->skip_from, r->limit, in);
  m += in_range(s, r->skip_to, r->to, r->limit, in + m);
  for (size_t i = 0; i < m; i++) {
    char sig[STORE_SIG_CHARS + 1];
    snprintf(sig, sizeof sig, "g%zu", in[i]); /* its stored index names the group */
    hgc_cand_t *c;
    CHECK_EQ_INT(hgc_cands_add_row(&s->cs, s->hang, sig, s->paths[in[i]], s->blobs[in[i]],
                                   s->bytes[in[i]], &c),
                 0);
  }
  for (size_t i = 0; r->floor && i < s->n; i++) { /* the nearest paths outside */
    const char *p = s->paths[i];
    if (strcmp(p, r->floor) >= 0 && strcmp(p, r->from) < 0 &&
        (!next->below || strcmp(p, next->below) > 0))
      next->below = (char *)p;
    if (strcmp(p, r->to) >= 0 && strcmp(p, r->ceiling) < 0 &&
        (!next->above || strcmp(p, next->above) < 0))
      next->above = (char *)p;
  }
  if (next->below) CHECK((next->below = strdup(next->below)) != NULL);
  if (next->above) CHECK((next->above = strdup(next->above)) != NULL);
  if (s->ranges < ARRAY_LEN(s->hits)) s->hits[s->ranges] = m;
  if (s->ranges == 0) {
    s->first = *r;
    snprintf(s->first_from, sizeof s->first_from, "%s", r->from);
    snprintf(s->first_to, sizeof s->first_to, "%s", r->to);
    snprintf(s->first_skip_from, sizeof s->first_skip_from, "%s", r->skip_from);
    snprintf(s->first_skip_to, sizeof s->first_skip_to, "%s", r->skip_to);
    snprintf(s->first_floor, sizeof s->first_floor, "%s", r->floor ? r->floor : "(null)");
    snprintf(s->first_ceiling, sizeof s->first_ceiling, "%s", r->ceiling ? r->ceiling : "(null)");
  }
  s->ranges++;
  s->rows += m;
  free(in);
  return 0;
}

/* The hang: its stacks and its key (14 frames, the clock read). */
static void make_hang(store_hang_t *h, perf__named_stack_t stacks[2], uint64_t samples[2]) {
  stacks[0] = (perf__named_stack_t){g_clock, KEY_LEN};
  stacks[1] = (perf__named_stack_t){g_spin, ARRAY_LEN(g_spin)};
  samples[0] = 19, samples[1] = 2;
  memset(h, 0, sizeof *h);
  h->samples = (perf__hang_samples_t){stacks, samples, 2};
  static const char *key[KEY_LEN];
  size_t len = 0;
  perf__hang_key(&h->samples, key, KEY_LEN, &len);
  CHECK_EQ_INT(len, KEY_LEN);
  h->key = key;
  h->len = len;
  perf__hang_turn_t turns[4];
  CHECK_EQ_INT(perf__hang_turns(&h->samples, key, len, turns, 4), 0); /* no turn */
}

/* A fresh store for the hang h. */
#define STORE(name, h) mem_store_t name = {.hang = (h)}

/* The candidate holding stored group k, or -1. */
static long cand_of(const mem_store_t *s, size_t k) {
  char sig[STORE_SIG_CHARS + 1];
  snprintf(sig, sizeof sig, "g%zu", k);
  for (size_t i = 0; i < s->cs.n; i++)
    if (strcmp(s->cs.v[i].sig, sig) == 0) return (long)i;
  return -1;
}

static void case_every_branch_point(void) {
  perf__named_stack_t stacks[2];
  uint64_t samples[2];
  store_hang_t h;
  make_hang(&h, stacks, samples);
  for (size_t p = 1; p <= KEY_LEN; p++) {
    /* g0 .. g13: a group that does not cross at each branch point (after
       1 .. 14 frames); g14 the one that crosses, after p frames; g15 one
       sharing no root frame. */
    STORE(s, &h);
    for (size_t q = 1; q <= KEY_LEN; q++)
      store_add_parting(&s, q, 1, q % 2 == 0, false);
    store_add_parting(&s, p, 0, p % 2 == 1, true);
    const char *elsewhere[] = {"poll", "start_thread", "clone"};
    store_add(&s, elsewhere, ARRAY_LEN(elsewhere), 0);
    CHECK_EQ_INT(hgc_look_ranges(&h, &s.cs, range, &s, -1), 0);
    CHECKF(s.ranges == KEY_LEN + 1 - p, "parting after %zu frames: %zu ranges", p, s.ranges);
    hgc_end_t end;
    CHECK_EQ_INT(hgc_end_range(&h, &end), 0);
    CHECK(strcmp(s.first_from, end.from) == 0 && strcmp(s.first_to, end.to) == 0);
    CHECK(strcmp(s.first_skip_from, end.from) == 0 && strcmp(s.first_skip_to, end.from) == 0);
    CHECK(strcmp(s.first_floor, end.floor) == 0 && strcmp(s.first_ceiling, end.ceiling) == 0);
    char *whole = hgc_path_of(h.key, h.len); /* the key's path, its root frame "_start" */
    CHECK(whole != NULL && strcmp(end.from, whole) == 0 && strncmp(end.floor, "_start", 6) == 0 &&
          strlen(end.floor) == 7 && strlen(end.ceiling) == 7);
    free(whole);
    free(end.from);
    CHECK_EQ_INT(s.rows, KEY_LEN + 2 - p); /* each group at p or deeper once */
    CHECK_EQ_INT(s.cs.read, s.rows);
    CHECK_EQ_INT(s.cs.n, 1);
    CHECK_EQ_INT(cand_of(&s, 14), 0);
    CHECK_EQ_INT(s.cs.parted, p);
    CHECK_EQ_INT(hgc_pick(&h, &s.cs), 0);
    store_free(&s);
  }

  /* The flaky run's store: the group keyed busy_loop -> spin (60 of its
     100 samples at busy_loop went the other way) and one parting there
     too that never crosses. Past the key's end nothing (the spin group
     next to it), then the branch point at busy_loop; none for the 12
     empty ones. The pick takes the spin group. */
  STORE(one, &h);
  store_add(&one, g_spin, ARRAY_LEN(g_spin), 10);
  store_add_parting(&one, 10, 1, false, false);
  CHECK_EQ_INT(hgc_look_ranges(&h, &one.cs, range, &one, -1), 0);
  CHECK_EQ_INT(one.ranges, 2);
  CHECK_EQ_INT(one.hits[0], 0);
  CHECK_EQ_INT(one.hits[1], 2);
  CHECK_EQ_INT(one.cs.n, 1);
  CHECK_EQ_INT(cand_of(&one, 0), 0);
  CHECK_EQ_INT(hgc_pick(&h, &one.cs), 0);
  store_free(&one);
}

/* Stored group k of s as a candidate read before the ranges, as the
   backends' prefix lookups add them (no children: none recorded). */
static void add_prefix_cand(mem_store_t *s, size_t k) {
  char sig[STORE_SIG_CHARS + 1];
  snprintf(sig, sizeof sig, "g%zu", k);
  hgc_cand_t *c;
  CHECK_EQ_INT(hgc_cands_add(&s->cs, sig, s->paths[k], &c), 0);
  CHECK(c != NULL);
  CHECK_EQ_INT(hgc_cand_path(c, s->blobs[k], s->bytes[k]), 0);
  CHECK(hgc_cand_is_prefix(s->hang, c));
}

static void case_rules_first(void) {
  perf__named_stack_t stacks[2];
  uint64_t samples[2];
  store_hang_t h;
  make_hang(&h, stacks, samples);
  /* The key's own group (rule 1) wins over the spin group: nothing read. */
  STORE(s, &h);
  store_add(&s, g_clock, KEY_LEN, KEY_LEN);
  store_add(&s, g_spin, ARRAY_LEN(g_spin), 10);
  add_prefix_cand(&s, 0);
  CHECK_EQ_INT(hgc_look_ranges(&h, &s.cs, range, &s, -1), 0);
  CHECK_EQ_INT(s.ranges, 0);
  CHECK_EQ_INT(hgc_pick(&h, &s.cs), 0);
  store_free(&s);
  /* A prefix group (busy_loop, its samples all at its end) the hang does
     not cross (rule 2: 19 of its 21 samples went on into now_ms): the
     ranges are read, the spin group found and picked. */
  STORE(t, &h);
  store_add(&t, g_clock + 4, KEY_LEN - 4, KEY_LEN);
  store_add(&t, g_spin, ARRAY_LEN(g_spin), 10);
  add_prefix_cand(&t, 0);
  CHECK_EQ_INT(hgc_look_ranges(&h, &t.cs, range, &t, -1), 0);
  CHECK_EQ_INT(t.ranges, 2);
  CHECK_EQ_INT(t.cs.n, 2);
  CHECK_EQ_INT(hgc_pick(&h, &t.cs), cand_of(&t, 1));
  store_free(&t);
}

static void case_deepest_crossing(void) {
  perf__named_stack_t stacks[2];
  uint64_t samples[2];
  store_hang_t h;
  make_hang(&h, stacks, samples);
  STORE(s, &h);
  store_add_parting(&s, 12, 0, false, true);
  store_add(&s, g_spin, ARRAY_LEN(g_spin), 10);
  CHECK_EQ_INT(hgc_look_ranges(&h, &s.cs, range, &s, -1), 0);
  /* The key's end (empty), then 12; not 10: the pick takes 12's. */
  CHECK_EQ_INT(s.ranges, 2);
  CHECK_EQ_INT(s.rows, 1);
  CHECK_EQ_INT(s.cs.n, 1);
  CHECK_EQ_INT(cand_of(&s, 0), 0);
  CHECK_EQ_INT(hgc_pick(&h, &s.cs), 0);
  store_free(&s);
}

static void case_read_cap(void) {
  perf__named_stack_t stacks[2];
  uint64_t samples[2];
  store_hang_t h;
  make_hang(&h, stacks, samples);
  STORE(s, &h);
  enum { PER_DEPTH = 50 };
  for (size_t p = 1; p <= KEY_LEN; p++)
    for (int i = 0; i < PER_DEPTH; i++)
      store_add_parting(&s, p, i, i % 2 == 1, false);
  store_add_parting(&s, 1, PER_DEPTH, false, true); /* crossing, past the budget */
  CHECK_EQ_INT(hgc_look_ranges(&h, &s.cs, range, &s, -1), 0);
  /* 256 = 5 branch points of 50 (after 14 .. 10 frames) and 6 after 9
     frames; none shallower: the group crossing after 1 frame not read. */
  CHECK_EQ_INT(HGC_MAX_READ, 5 * PER_DEPTH + 6);
  CHECK_EQ_INT(s.cs.read, HGC_MAX_READ);
  CHECK_EQ_INT(s.rows, HGC_MAX_READ);
  CHECK_EQ_INT(s.ranges, 6);
  CHECK_EQ_INT(s.max_limit, HGC_MAX_EXTENSIONS);
  CHECK_EQ_INT(s.hits[5], 6);
  CHECK_EQ_INT(s.cs.n, 0);
  CHECK_EQ_INT(hgc_pick(&h, &s.cs), -1);
  store_free(&s);
}

static void case_turns(void) {
  perf__named_stack_t stacks[2] = {{g_clock, KEY_LEN}, {g_spin, ARRAY_LEN(g_spin)}};
  uint64_t samples[2] = {15, 6};
  store_hang_t h;
  memset(&h, 0, sizeof h);
  h.samples = (perf__hang_samples_t){stacks, samples, 2};
  const char *key[KEY_LEN];
  size_t len = 0;
  perf__hang_key(&h.samples, key, KEY_LEN, &len);
  CHECK_EQ_INT(len, KEY_LEN); /* still the clock read */
  h.key = key, h.len = len;
  hgc_turn_t turns[HGC_MAX_TURNS];
  long n = hgc_turns(&h, turns, HGC_MAX_TURNS);
  CHECK_EQ_INT(n, 1);
  char *spin = hgc_path_of(g_spin, ARRAY_LEN(g_spin)); /* root first, ends in HGC_SEP */
  CHECK(spin != NULL);
  CHECKF(strcmp(turns[0].from, spin) == 0, "from %s", turns[0].from);
  size_t k = strlen(spin);
  CHECK(strncmp(turns[0].to, spin, k - 1) == 0 && turns[0].to[k - 1] == HGC_SEP + 1 &&
        turns[0].to[k] == '\0');
  STORE(s, &h);
  store_add(&s, g_spin, ARRAY_LEN(g_spin), 10);
  store_add_parting(&s, 10, 1, false, false); /* parts at busy_loop too, not under spin */
  CHECK_EQ_INT(hgc_look_ranges(&h, &s.cs, range, &s, -1), 0);
  CHECK(s.ranges >= 1);
  CHECK(strcmp(s.first_from, turns[0].from) == 0 && strcmp(s.first_to, turns[0].to) == 0);
  CHECK(strcmp(s.first_skip_from, turns[0].from) == 0 &&
        strcmp(s.first_skip_to, turns[0].from) == 0 && s.first.floor == NULL);
  CHECK_EQ_INT(s.hits[0], 1);
  CHECK_EQ_INT(cand_of(&s, 0), 0);
  store_free(&s);
  free(spin);
  hgc_turns_free(turns, n);
  /* No room for any: none made. */
  CHECK_EQ_INT(hgc_turns(&h, turns, 0), 0);
}

static const test_case_t g_cases[] = {
    TEST_CASE(every_branch_point), TEST_CASE(rules_first), TEST_CASE(deepest_crossing),
    TEST_CASE(read_cap),           TEST_CASE(turns),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
