/*
 * test_rollup_batch.c - a batch's rollup rows (collector/model/rollup_batch.c)
 * against values worked out by hand: a hang counted once in its group
 * with all its samples; a cpu event once per stack however many threads
 * sampled it, with the stack's samples and CPU time; each count's wall
 * time its share of its event's duration by samples, rounded down to the
 * nanosecond (rollup_wall_share, the SQL's ROLLUP_WALL_SHARE); a hang
 * without a group only in the stack rows; keys merged across events, split
 * by bucket at the 10-minute level and merged at the day level; rows in
 * key order; a profile window's stacks each a group of kind profile.
 */
#include <string.h>

#include "check.h"
#include "collector/model/rollup.h"
#include "collector/model/rollup_batch.h"

/* A day's first nanosecond (day 20833 from the epoch). */
#define T INT64_C(1799971200000000000)
#define TEN_MIN ROLLUP_BUCKET_NS

static const store_stack_count_t C0[] = {{"S1", 1, 3, -1}, {"S2", 1, 2, -1}};
static const store_stack_count_t C1[] = {{"S1", 2, 4, -1}};
static const store_stack_count_t C2[] = {{"S3", 1, 1, -1}};
/* S1 on two threads: one stack of the event, weight 300 + 100. */
static const store_stack_count_t C3[] = {{"S1", 1, 2, 300}, {"S1", 2, 1, 100}, {"S2", 1, 1, 200}};
static const store_stack_count_t C4[] = {{"S1", 1, 5, 500}};
static const store_stack_count_t C5[] = {{"S2", 1, 1, -1}};
static const store_hang_t HANG = {0}; /* only its presence matters here */

static store_event_t g_events[] = {
    {.kind = "hang",
     .start_ns = T + 1000,
     .duration_ns = 1000,
     .label = "tick",
     .hang = &HANG,
     .counts = C0,
     .n_counts = 2},
    {.kind = "hang",
     .start_ns = T + 5000,
     .duration_ns = 1001,
     .label = "tick",
     .hang = &HANG,
     .counts = C1,
     .n_counts = 1},
    {.kind = "hang", .start_ns = T + 2000, .duration_ns = 500, .counts = C2, .n_counts = 1},
    {.kind = "cpu", .start_ns = T + 10, .duration_ns = 900, .counts = C3, .n_counts = 3},
    {.kind = "cpu", .start_ns = T + TEN_MIN + 7, .duration_ns = 900, .counts = C4, .n_counts = 1},
    {.kind = "manual",
     .start_ns = T + 20,
     .duration_ns = 100,
     .label = "",
     .counts = C5,
     .n_counts = 1},
};

static store_batch_t batch(void) {
  return (store_batch_t){.events = g_events, .n_events = ARRAY_LEN(g_events)};
}

/* The groups the store picked: G1 for both keyed hangs. */
static void pick(rollup_picks_t *p, const store_batch_t *b) {
  CHECK(rollup_picks_init(p, b) == 0);
  strcpy(p->picked[0], "G1");
  strcpy(p->picked[1], "G1");
  CHECK(p->group[0] == p->picked[0] && p->group[1] == p->picked[1]);
  for (size_t i = 2; i < b->n_events; i++)
    CHECK(p->group[i] == NULL);
}

static void check_group(const rollup_group_row_t *r, int64_t bucket, const char *kind,
                        const char *group, const char *label, int64_t events, int64_t samples,
                        int64_t cpu_us, int64_t total, int64_t first, int64_t last, int64_t max) {
  CHECKF(r->bucket_ns == bucket && !strcmp(r->kind, kind) && !strcmp(r->group_sig, group) &&
             !strcmp(r->label, label),
         "group row %lld %s %s %s", (long long)r->bucket_ns, r->kind, r->group_sig, r->label);
  CHECK_EQ_INT(r->dbin, rollup_dbin(max));
  CHECK_EQ_INT(r->events, events);
  CHECK_EQ_INT(r->samples, samples);
  CHECK_EQ_INT(r->cpu_us, cpu_us);
  CHECK_EQ_INT(r->total_ns, total);
  CHECK_EQ_INT(r->first_ns, first);
  CHECK_EQ_INT(r->last_ns, last);
  CHECK_EQ_INT(r->max_ns, max);
}

static void check_stack(const rollup_stack_row_t *r, int64_t bucket, const char *kind,
                        const char *group, const char *stack, const char *label, int64_t samples,
                        int64_t cpu_us, int64_t wall, int64_t first, int64_t last_end) {
  CHECKF(r->bucket_ns == bucket && !strcmp(r->kind, kind) && !strcmp(r->group_sig, group) &&
             !strcmp(r->stack_sig, stack) && !strcmp(r->label, label),
         "stack row %lld %s %s %s %s", (long long)r->bucket_ns, r->kind, r->group_sig, r->stack_sig,
         r->label);
  CHECK_EQ_INT(r->samples, samples);
  CHECK_EQ_INT(r->cpu_us, cpu_us);
  CHECK_EQ_INT(r->wall_ns, wall);
  CHECK_EQ_INT(r->first_ns, first);
  CHECK_EQ_INT(r->last_end_ns, last_end);
}

static void case_ten_minutes(void) {
  store_batch_t b = batch();
  rollup_picks_t p;
  pick(&p, &b);
  rollup_batch_t rb;
  CHECK(rollup_batch_build(&rb, &b, p.group, ROLLUP_BUCKET_NS) == 0);
  CHECK_EQ_INT(rb.n_groups, 4);
  /* The cpu event's S1: 3 samples on two threads, 300 + 100 us. */
  check_group(&rb.groups[0], T, "cpu", "S1", "", 1, 3, 400, 900, T + 10, T + 10, 900);
  check_group(&rb.groups[1], T, "cpu", "S2", "", 1, 1, 200, 900, T + 10, T + 10, 900);
  /* Two hangs of one bin (1000 and 1001 ns); the groupless hang is not here. */
  CHECK_EQ_INT(rollup_dbin(1000), rollup_dbin(1001));
  check_group(&rb.groups[2], T, "hang", "G1", "tick", 2, 9, 0, 2001, T + 1000, T + 5000, 1001);
  check_group(&rb.groups[3], T + TEN_MIN, "cpu", "S1", "", 1, 5, 500, 900, T + TEN_MIN + 7,
              T + TEN_MIN + 7, 900);
  CHECK_EQ_INT(rb.n_stacks, 7);
  /* Wall time by samples, each count's share rounded down: the cpu
     event's 900 ns over 4 samples, 2 + 1 of them S1's (450 + 225). */
  check_stack(&rb.stacks[0], T, "cpu", "", "S1", "", 3, 400, 675, T + 10, T + 910);
  check_stack(&rb.stacks[1], T, "cpu", "", "S2", "", 1, 200, 225, T + 10, T + 910);
  check_stack(&rb.stacks[2], T, "hang", "", "S3", "", 1, 0, 500, T + 2000, T + 2500);
  /* 3 of the first hang's 5 samples (600 of 1000 ns), all of the second's. */
  check_stack(&rb.stacks[3], T, "hang", "G1", "S1", "tick", 7, 0, 600 + 1001, T + 1000, T + 6001);
  check_stack(&rb.stacks[4], T, "hang", "G1", "S2", "tick", 2, 0, 400, T + 1000, T + 2000);
  check_stack(&rb.stacks[5], T, "manual", "", "S2", "", 1, 0, 100, T + 20, T + 120);
  check_stack(&rb.stacks[6], T + TEN_MIN, "cpu", "", "S1", "", 5, 500, 900, T + TEN_MIN + 7,
              T + TEN_MIN + 907);
  rollup_batch_free(&rb);
  CHECK(rb.groups == NULL && rb.n_groups == 0);
  rollup_picks_free(&p);
}

static void case_day(void) {
  store_batch_t b = batch();
  rollup_picks_t p;
  pick(&p, &b);
  rollup_batch_t rb;
  CHECK(rollup_batch_build(&rb, &b, p.group, ROLLUP_DAY_NS) == 0);
  CHECK_EQ_INT(rb.n_groups, 3);
  check_group(&rb.groups[0], T, "cpu", "S1", "", 2, 8, 900, 1800, T + 10, T + TEN_MIN + 7, 900);
  check_group(&rb.groups[1], T, "cpu", "S2", "", 1, 1, 200, 900, T + 10, T + 10, 900);
  check_group(&rb.groups[2], T, "hang", "G1", "tick", 2, 9, 0, 2001, T + 1000, T + 5000, 1001);
  CHECK_EQ_INT(rb.n_stacks, 6);
  check_stack(&rb.stacks[0], T, "cpu", "", "S1", "", 8, 900, 675 + 900, T + 10, T + TEN_MIN + 907);
  check_stack(&rb.stacks[5], T, "manual", "", "S2", "", 1, 0, 100, T + 20, T + 120);
  rollup_batch_free(&rb);
  rollup_picks_free(&p);
}

/* Bucket starts before the epoch too, and a batch with nothing to roll. */
static void case_edges(void) {
  CHECK_EQ_INT(rollup_bucket_at(-1, ROLLUP_BUCKET_NS), -ROLLUP_BUCKET_NS);
  CHECK_EQ_INT(rollup_bucket_at(ROLLUP_DAY_NS + 5, ROLLUP_DAY_NS), ROLLUP_DAY_NS);
  CHECK_EQ_INT(rollup_bucket_at(T + 5, ROLLUP_BUCKET_NS), rollup_bucket(T + 5));
  store_batch_t empty = {0};
  rollup_picks_t p;
  CHECK(rollup_picks_init(&p, &empty) == 0);
  rollup_batch_t rb;
  CHECK(rollup_batch_build(&rb, &empty, p.group, ROLLUP_BUCKET_NS) == 0);
  CHECK(rb.n_groups == 0 && rb.n_stacks == 0);
  rollup_batch_free(&rb);
  rollup_picks_free(&p);
  /* A cpu event of no samples shares no wall time (no division by zero)
     and the end saturates. */
  static const store_stack_count_t zero[] = {{"S9", 1, 0, 0}};
  store_event_t e = {
      .kind = "cpu", .start_ns = INT64_MAX - 10, .duration_ns = 100, .counts = zero, .n_counts = 1};
  store_batch_t one = {.events = &e, .n_events = 1};
  CHECK(rollup_picks_init(&p, &one) == 0);
  CHECK(rollup_batch_build(&rb, &one, p.group, ROLLUP_BUCKET_NS) == 0);
  CHECK_EQ_INT(rb.n_stacks, 1);
  CHECK_EQ_INT(rb.stacks[0].wall_ns, 0);
  CHECK_EQ_INT(rb.stacks[0].last_end_ns, INT64_MAX);
  rollup_batch_free(&rb);
  rollup_picks_free(&p);
}

/* A count's share of its event's duration: rounded down to the
   nanosecond (a third of 100 ms is 33333333 ns, two thirds 66666666), the
   duration taken within 0..2^53 ns, nothing from an event of no samples. */
/* A profile window (a minute) beside a cpu event that sampled S1 too:
   each stack of the window a group of kind profile with its samples and
   CPU time, the window counted once per stack; never a cpu group. */
static void case_profile(void) {
  static const store_stack_count_t W[] = {{"S1", 1, 2, 300}, {"S1", 2, 1, 100}, {"S2", 1, 1, 200}};
  store_event_t ev[] = {
      {.kind = "profile",
       .start_ns = T + 30,
       .duration_ns = 60000000000,
       .counts = W,
       .n_counts = 3},
      {.kind = "cpu", .start_ns = T + 10, .duration_ns = 900, .counts = C4, .n_counts = 1},
  };
  store_batch_t b = {.events = ev, .n_events = ARRAY_LEN(ev)};
  rollup_picks_t p;
  CHECK(rollup_picks_init(&p, &b) == 0);
  rollup_batch_t rb;
  CHECK(rollup_batch_build(&rb, &b, p.group, ROLLUP_BUCKET_NS) == 0);
  CHECK_EQ_INT(rb.n_groups, 3);
  check_group(&rb.groups[0], T, "cpu", "S1", "", 1, 5, 500, 900, T + 10, T + 10, 900);
  check_group(&rb.groups[1], T, "profile", "S1", "", 1, 3, 400, 60000000000, T + 30, T + 30,
              60000000000);
  check_group(&rb.groups[2], T, "profile", "S2", "", 1, 1, 200, 60000000000, T + 30, T + 30,
              60000000000);
  CHECK_EQ_INT(rb.n_stacks, 3);
  check_stack(&rb.stacks[1], T, "profile", "", "S1", "", 3, 400, 45000000000, T + 30,
              T + 30 + 60000000000);
  check_stack(&rb.stacks[2], T, "profile", "", "S2", "", 1, 200, 15000000000, T + 30,
              T + 30 + 60000000000);
  rollup_batch_free(&rb);
  rollup_picks_free(&p);
}

static void case_wall_share(void) {
  CHECK_EQ_INT(rollup_wall_share(100000000, 1, 3), 33333333);
  CHECK_EQ_INT(rollup_wall_share(100000000, 2, 3), 66666666);
  CHECK_EQ_INT(rollup_wall_share(100000000, 3, 3), 100000000);
  CHECK_EQ_INT(rollup_wall_share(1001, 4, 4), 1001);
  CHECK_EQ_INT(rollup_wall_share(7, 0, 3), 0);
  CHECK_EQ_INT(rollup_wall_share(7, 1, 0), 0);
  CHECK_EQ_INT(rollup_wall_share(-5, 1, 1), 0);
  CHECK_EQ_INT(rollup_wall_share(INT64_MAX, 1, 1), ROLLUP_WALL_MAX_NS);
  CHECK_EQ_INT(rollup_wall_share(INT64_MAX, UINT32_MAX, UINT64_C(1) << 40),
               (int64_t)((double)UINT32_MAX * (double)ROLLUP_WALL_MAX_NS / 1099511627776.0));
}

static const test_case_t g_cases[] = {
    TEST_CASE(ten_minutes), TEST_CASE(day),     TEST_CASE(edges),
    TEST_CASE(wall_share),  TEST_CASE(profile),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
