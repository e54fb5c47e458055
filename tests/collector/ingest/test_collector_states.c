/*
 * test_collector_states.c - thread states in the real perf-collector:
 *  - sdk_hang: this process, with the real SDK (sink = http), hangs once in
 *    three phases: blocked in read() on a pipe, then in pthread_mutex_lock
 *    on a mutex another thread holds (a futex), then spinning; each phase
 *    ends once /proc shows the thread in it and the SDK has taken
 *    PHASE_SAMPLES more samples (tests/support/hang_phases.h). The event's
 *    states (GET /api/v1/events/<id>) hold exactly those three (read on a
 *    pipe, futex, running), each with at least PHASE_SAMPLES samples and no
 *    more than the samples taken up to its end, summing to the event's
 *    samples; GET /api/v1/states says the same.
 *  - sdk_batch: the same hang written by the SDK's file sink, its batch
 *    decoded here and posted: the event's states are exactly the batch's
 *    per-sample states counted per thread and state.
 *  - exact: hand-made batches (batch_post.c): an event's states per thread
 *    and the aggregate over events are exact, an event without states (an
 *    older SDK) has "states":[] and adds nothing, a group filter narrows
 *    it; a database made before the states table (dropped here) gains it
 *    at the next start and keeps its events; retention deletes an old
 *    batch's states with its events.
 */
#include <jansson.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch_post.h"
#include "check.h"
#include "collector/model/frame_json.h"
#include "collector/model/signature.h"
#include "collector_rig.h"
#include "hang_phases.h"
#include "perf/v1/perf.pb-c.h"
#include "perf_sdk.h"
#include "sdk/base/frame_text.h"
#include "sdk_util.h"
#include "tempdir.h"

#define PHASE_SAMPLES 8

/* ---- sdk_hang -------------------------------------------------------------- */

static void sdk_run(const collector_t *c, hang_phases_t *p) {
  perf_sdk_config_t cfg;
  sdk_config_short_hangs(&cfg);
  char data_dir[128];
  snprintf(data_dir, sizeof data_dir, "%s/sdk", tempdir_make("perf-states"));
  sdk_config_upload(&cfg, "states-test", c->url, GOOD_KEY, data_dir);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  hang_phases_run(p, PHASE_SAMPLES);
  CHECK_EQ_INT(perf_sdk_flush(30000), PERF_OK);
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  CHECK_EQ_INT(st.hangs_detected, 1);
  CHECK_EQ_INT(st.batches_sent, st.batches_written);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
}

static const char *str(json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "(none)";
}

static long long num(json_t *o, const char *key) {
  return (long long)json_integer_value(json_object_get(o, key));
}

static void case_sdk_hang(void) {
  collector_t c;
  collector_start(&c, NULL);
  hang_phases_t p;
  sdk_run(&c, &p);
  long status;
  json_t *list = get_json(&c, "/api/v1/events?kind=hang", &status);
  CHECK_EQ_INT(status, 200);
  json_t *events = json_object_get(list, "events");
  CHECK_EQ_INT(json_array_size(events), 1);
  char path[64];
  snprintf(path, sizeof path, "/api/v1/events/%lld", num(json_array_get(events, 0), "id"));
  json_t *d = get_json(&c, path, &status);
  CHECK_EQ_INT(status, 200);
  char *text = json_dumps(json_object_get(d, "states"), JSON_COMPACT);
  long long stacked = 0, io = 0, lock = 0, running = 0, unknown = 0;
  json_t *s;
  size_t i;
  json_array_foreach(json_object_get(d, "stacks"), i, s) stacked += num(s, "samples");
  json_array_foreach(json_object_get(d, "states"), i, s) {
    const char *state = str(s, "state"), *call = str(s, "syscall"), *fd = str(s, "fd");
    long long n = num(s, "samples");
    if (strcmp(state, "io") == 0 && strcmp(call, "read") == 0 && strcmp(fd, "pipe") == 0) {
      io += n;
    } else if (strcmp(state, "lock") == 0 && strcmp(call, "futex") == 0 && !fd[0]) {
      lock += n;
    } else if (strcmp(state, "running") == 0 && !call[0] && !fd[0]) {
      running += n;
    } else if (strcmp(state, "unknown") == 0 && !call[0] && !fd[0]) {
      unknown += n; /* failed captures (timeouts on a busy machine): no stack either */
    } else {
      CHECKF(false, "a state the hang never was in: %s/%s/%s in %s", state, call, fd, text);
    }
  }
  /* Samples before a phase's end are of that phase or an earlier one (the
     spin goes on a moment after its count was read: no upper bound). */
  CHECKF(io >= PHASE_SAMPLES && io <= (long long)p.ends[0], "read: %lld of %s", io, text);
  CHECKF(lock >= PHASE_SAMPLES && lock <= (long long)(p.ends[1] - PHASE_SAMPLES),
         "futex: %lld of %s", lock, text);
  CHECKF(running >= PHASE_SAMPLES, "running: %lld of %s", running, text);
  CHECKF(io + lock + running == stacked, "states %lld, stacks %lld: %s", io + lock + running,
         stacked, text);
  fprintf(stderr,
          "the hang's states: read (pipe) %lld, futex %lld, running %lld of %lld (%lld failed)\n",
          io, lock, running, stacked, unknown);
  /* The aggregate over hangs: the same breakdown. */
  json_t *agg = get_json(&c, "/api/v1/states?kind=hang", &status);
  CHECK_EQ_INT(status, 200);
  CHECK_EQ_INT(num(agg, "samples"), stacked + unknown);
  CHECK_EQ_INT(json_array_size(json_object_get(agg, "states")), unknown ? 4 : 3);
  json_decref(agg);
  free(text);
  json_decref(d);
  json_decref(list);
  collector_stop_healthy(&c);
}

/* ---- exact ------------------------------------------------------------------ */

enum { S_UNKNOWN, S_RUNNING, S_LOCK, S_IO, S_POLL, S_SLEEP, S_OTHER };

/* One sample of the hand-made events: thread, state, call (a string
   index), descriptor kind. */
typedef struct sample_s {
  uint32_t tid;
  int state;
  uint32_t call;
  int fd;
} sample_t;

/* strings: "", "read", "futex" */
#define READ 1
#define FUTEX 2

/* A batch of app with one hang event of samples[0..n) (states when
   with_states), all on one stack of one frame `leaf` (its own module-less
   address). */
static void send_hang(const collector_t *c, const char *app, uint64_t leaf, const sample_t *smp,
                      size_t n, bool with_states, unsigned seed) {
  Perf__V1__Frame frame = PERF__V1__FRAME__INIT;
  frame.address = leaf;
  Perf__V1__Frame *frames[] = {&frame};
  uint32_t stack_frames[] = {1};
  Perf__V1__Stack stack = PERF__V1__STACK__INIT;
  stack.n_frames = 1, stack.frames = stack_frames;
  Perf__V1__Stack *stacks[] = {&stack};
  int64_t offsets[32];
  uint32_t tids[32], sstacks[32], calls[32];
  Perf__V1__SampleState states[32];
  Perf__V1__FdKind fds[32];
  CHECK(n <= 32);
  Perf__V1__StackCount counts[2] = {PERF__V1__STACK_COUNT__INIT, PERF__V1__STACK_COUNT__INIT};
  Perf__V1__StackCount *countp[] = {&counts[0], &counts[1]};
  size_t n_counts = 0;
  for (size_t i = 0; i < n; i++) {
    offsets[i] = 1000;
    tids[i] = smp[i].tid;
    sstacks[i] = 1;
    states[i] = (Perf__V1__SampleState)smp[i].state;
    calls[i] = smp[i].call;
    fds[i] = (Perf__V1__FdKind)smp[i].fd;
    size_t k = 0;
    while (k < n_counts && counts[k].tid != smp[i].tid)
      k++;
    if (k == n_counts) {
      CHECK(n_counts < 2);
      k = n_counts++;
      counts[k].stack = 1;
      counts[k].tid = smp[i].tid;
    }
    counts[k].samples++;
  }
  Perf__V1__Event ev = PERF__V1__EVENT__INIT;
  ev.kind = PERF__V1__EVENT_KIND__EVENT_KIND_HANG;
  ev.start_unix_nanos = 1700000000000000000LL + seed;
  ev.duration_nanos = 500000000;
  ev.tid = smp[0].tid;
  ev.n_stack_counts = n_counts, ev.stack_counts = countp;
  ev.dominant_stack = 1;
  ev.n_sample_offsets_micros = n, ev.sample_offsets_micros = offsets;
  ev.n_sample_tids = n, ev.sample_tids = tids;
  ev.n_sample_stacks = n, ev.sample_stacks = sstacks;
  if (with_states) {
    ev.n_sample_states = n, ev.sample_states = states;
    ev.n_sample_syscalls = n, ev.sample_syscalls = calls;
    ev.n_sample_fds = n, ev.sample_fds = fds;
  }
  Perf__V1__Event *evp[] = {&ev};
  char *strings[] = {"", "read", "futex"};
  Perf__V1__Resource res;
  Perf__V1__Batch b;
  batch_begin(&b, &res, app, "1.0", "prod", "h1");
  b.n_strings = 3, b.strings = strings;
  b.n_frames = 1, b.frames = frames;
  b.n_stacks = 1, b.stacks = stacks;
  b.n_events = 1, b.events = evp;
  batch_post(c, &b, seed);
}

/* GET path's JSON (200), its key member compacted. */
static char *member_text(const collector_t *c, const char *path, const char *key) {
  long status;
  json_t *o = get_json(c, path, &status);
  CHECKF(status == 200, "GET %s -> %ld", path, status);
  char *text =
      json_dumps(key ? json_object_get(o, key) : o,
                 JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6) | JSON_ENCODE_ANY);
  CHECK(text != NULL);
  json_decref(o);
  return text;
}

#define CHECK_TEXT(got, want)                                                                      \
  do {                                                                                             \
    char *got_ = (got);                                                                            \
    CHECKF(strcmp(got_, (want)) == 0, "got  %s\nwant %s", got_, (want));                           \
    free(got_);                                                                                    \
  } while (0)

/* The ids of the hang events, oldest first, into ids[0..2). */
static void hang_ids(const collector_t *c, long long ids[2]) {
  long status;
  json_t *o = get_json(c, "/api/v1/events?kind=hang", &status);
  CHECK_EQ_INT(status, 200);
  json_t *events = json_object_get(o, "events");
  CHECK_EQ_INT(json_array_size(events), 2);
  ids[0] = num(json_array_get(events, 1), "id");
  ids[1] = num(json_array_get(events, 0), "id");
  json_decref(o);
}

static const char EVENT_STATES[] =
    "[{\"state\":\"io\",\"syscall\":\"read\",\"fd\":\"pipe\",\"samples\":5,\"tid\":7},"
    "{\"state\":\"lock\",\"syscall\":\"futex\",\"fd\":\"\",\"samples\":2,\"tid\":7},"
    "{\"state\":\"running\",\"syscall\":\"\",\"fd\":\"\",\"samples\":2,\"tid\":8},"
    "{\"state\":\"running\",\"syscall\":\"\",\"fd\":\"\",\"samples\":1,\"tid\":7}]";

static void case_exact(void) {
  collector_t c;
  collector_start(&c, NULL);
  const sample_t smp[] = {
      {7, S_IO, READ, 2},    {7, S_IO, READ, 2},   {8, S_RUNNING, 0, 0}, {7, S_LOCK, FUTEX, 0},
      {7, S_IO, READ, 2},    {7, S_RUNNING, 0, 0}, {7, S_IO, READ, 2},   {8, S_RUNNING, 0, 0},
      {7, S_LOCK, FUTEX, 0}, {7, S_IO, READ, 2},
  };
  send_hang(&c, "shop", 0x1000, smp, ARRAY_LEN(smp), true, 1);
  const sample_t old[] = {{7, 0, 0, 0}, {7, 0, 0, 0}, {7, 0, 0, 0}, {7, 0, 0, 0}};
  send_hang(&c, "shop", 0x2000, old, ARRAY_LEN(old), false, 2); /* an older SDK */
  long long ids[2];
  hang_ids(&c, ids);
  char path[128];
  snprintf(path, sizeof path, "/api/v1/events/%lld", ids[0]);
  CHECK_TEXT(member_text(&c, path, "states"), EVENT_STATES);
  snprintf(path, sizeof path, "/api/v1/events/%lld", ids[1]);
  CHECK_TEXT(member_text(&c, path, "states"), "[]");
  CHECK_TEXT(member_text(&c, "/api/v1/states?kind=hang", NULL),
             "{\"samples\":10,\"states\":["
             "{\"state\":\"io\",\"syscall\":\"read\",\"fd\":\"pipe\",\"samples\":5,\"share\":0.5},"
             "{\"state\":\"running\",\"syscall\":\"\",\"fd\":\"\",\"samples\":3,\"share\":0.3},"
             "{\"state\":\"lock\",\"syscall\":\"futex\",\"fd\":\"\",\"samples\":2,\"share\":0.2}"
             "]}");
  CHECK_TEXT(member_text(&c, "/api/v1/states?kind=cpu", NULL), "{\"samples\":0,\"states\":[]}");
  CHECK_TEXT(member_text(&c, "/api/v1/states?kind=hang&app=other", NULL),
             "{\"samples\":0,\"states\":[]}");
  /* The group of the first hang (its own stack) has its states; the
     second's has none. */
  long status;
  json_t *top = get_json(&c, "/api/v1/top-stacks?kind=hang", &status);
  CHECK_EQ_INT(status, 200);
  json_t *rows = json_object_get(top, "stacks");
  CHECK_EQ_INT(json_array_size(rows), 2);
  for (size_t i = 0; i < 2; i++) {
    json_t *row = json_array_get(rows, i);
    snprintf(path, sizeof path, "/api/v1/states?kind=hang&group=%s", str(row, "signature"));
    char *text = member_text(&c, path, "samples");
    const char *want = num(row, "samples") == 10 ? "10" : "0";
    CHECKF(strcmp(text, want) == 0, "%s: %s samples, want %s", path, text, want);
    free(text);
  }
  json_decref(top);
  long bad = 0;
  json_decref(get_json(&c, "/api/v1/states", &bad));
  CHECK_EQ_INT(bad, 400); /* kind is required */
  collector_stop_healthy(&c);

  /* A database from before the table: it comes back at start, empty. */
  /* (PostgreSQL: its versioned schema has the table; its rows go.) */
  if (rig_pg())
    db_exec(c.db, "DELETE FROM event_states");
  else
    db_exec(c.db, "DROP TABLE event_states");
  collector_restart(&c, NULL);
  snprintf(path, sizeof path, "/api/v1/events/%lld", ids[0]);
  CHECK_TEXT(member_text(&c, path, "states"), "[]");
  send_hang(&c, "shop", 0x1000, smp, ARRAY_LEN(smp), true, 3);
  CHECK_TEXT(member_text(&c, "/api/v1/states?kind=hang", "samples"), "10");
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM event_states"), 4);

  /* Retention: the newest batch made old goes with its states. */
  if (rig_pg())
    db_exec(c.db, "UPDATE batches SET received_ns = 1 WHERE id = (SELECT batch_id FROM events"
                  " ORDER BY id DESC LIMIT 1)");
  else
    db_exec(c.db, "UPDATE batches SET received_ns = 1 WHERE rowid = (SELECT max(rowid) FROM"
                  " batches)");
  collector_restart(&c,
                    (const char *[]){"--retention-days", "1", "--retention-interval", "1", NULL});
  double end = now_s() + 30;
  while (db_count(c.db, "SELECT count(*) FROM batches") != 2 && now_s() < end)
    usleep(50000);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 2);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM event_states"), 0);
  collector_stop_healthy(&c);
}

/* ---- sdk_batch: a batch the real SDK built, exactly ---------------------- */

static int compare_text(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "tid/state/syscall/fd=samples" lines, sorted, joined by spaces (list
   and its strings malloc'd, freed here). */
static char *joined(char **list, size_t n) {
  qsort(list, n, sizeof *list, compare_text);
  size_t len = 1;
  for (size_t i = 0; i < n; i++)
    len += strlen(list[i]) + 1;
  char *out = calloc(1, len);
  CHECK(out != NULL);
  for (size_t i = 0; i < n; i++) {
    if (i) strcat(out, " ");
    strcat(out, list[i]);
    free(list[i]);
  }
  free(list);
  return out;
}

/* The hang's states counted from the decoded batch itself, per thread and
   state, as the collector must store them. */
static char *expected_states(const Perf__V1__Batch *b, const Perf__V1__Event *e, long long *total) {
  char **list = calloc(e->n_sample_states + 1, sizeof *list);
  size_t n = 0;
  CHECK(list && e->n_sample_states == e->n_sample_stacks);
  *total = 0;
  for (size_t i = 0; i < e->n_sample_states; i++) {
    uint32_t tid = e->n_sample_tids ? e->sample_tids[i] : e->tid;
    int state = e->sample_states[i], fd = e->sample_fds[i];
    const char *call = state > 1 ? b->strings[e->sample_syscalls[i]] : "";
    static const char *const STATES[] = {"unknown", "running", "lock", "io",
                                         "poll",    "sleep",   "other"};
    static const char *const FDS[] = {"", "file", "pipe", "socket", "other"};
    char key[128];
    snprintf(key, sizeof key, "%u/%s/%s/%s=", tid, STATES[state], call, state > 1 ? FDS[fd] : "");
    size_t k = 0, key_len = strlen(key);
    while (k < n && strncmp(list[k], key, key_len) != 0)
      k++;
    long long count = k < n ? atoll(list[k] + key_len) + 1 : 1;
    if (k == n) n++;
    free(list[k]);
    CHECK(asprintf(&list[k], "%s%lld", key, count) > 0);
    (*total)++;
  }
  return joined(list, n);
}

static char *stored_states(json_t *states) {
  char **list = calloc(json_array_size(states) + 1, sizeof *list);
  CHECK(list != NULL);
  size_t i;
  json_t *s;
  json_array_foreach(states, i, s) {
    CHECK(asprintf(&list[i], "%lld/%s/%s/%s=%lld", num(s, "tid"), str(s, "state"),
                   str(s, "syscall"), str(s, "fd"), num(s, "samples")) > 0);
  }
  return joined(list, json_array_size(states));
}

static void case_sdk_batch(void) {
  /* The SDK writes the hang's batch with the file sink... */
  char sink[256];
  hang_phases_t p;
  hang_phases_run_to_file(&p, PHASE_SAMPLES, "states-test", tempdir_make("perf-states"), sink,
                          sizeof sink);
  Perf__V1__Batch *b = NULL;
  const Perf__V1__Event *e = hang_phases_read_event(sink, &b);
  long long total = 0;
  char *want = expected_states(b, e, &total);

  /* ... the collector stores exactly its per-sample states, counted. */
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r && b->batch_id.len == 16);
  CHECK_EQ_INT(batch_send(&c, b, b->batch_id.data, r), 200); /* its own id, unchanged */
  free(r);
  long status;
  json_t *list = get_json(&c, "/api/v1/events?kind=hang", &status);
  CHECK_EQ_INT(status, 200);
  CHECK_EQ_INT(json_array_size(json_object_get(list, "events")), 1);
  char path[64];
  snprintf(path, sizeof path, "/api/v1/events/%lld",
           num(json_array_get(json_object_get(list, "events"), 0), "id"));
  json_t *d = get_json(&c, path, &status);
  CHECK_EQ_INT(status, 200);
  char *got = stored_states(json_object_get(d, "states"));
  CHECKF(strcmp(got, want) == 0, "stored %s\nsent   %s", got, want);
  fprintf(stderr, "the SDK's batch: %s\n", want);
  json_t *agg = get_json(&c, "/api/v1/states?kind=hang&app=states-test", &status);
  CHECK_EQ_INT(status, 200);
  CHECK_EQ_INT(num(agg, "samples"), total);
  json_decref(agg);
  json_decref(d);
  json_decref(list);
  free(got);
  free(want);
  perf__v1__batch__free_unpacked(b, NULL);
  collector_stop_healthy(&c);
}

/* ---- sdk_batch_stacks: one stack per signature and thread ---------------- */

/* *text with a line added: head, tail and a newline. */
static void add_line(char **text, const char *head, const char *tail) {
  char *more;
  CHECK(asprintf(&more, "%s%s%s\n", *text, head, tail) > 0);
  free(*text);
  *text = more;
}

/* A stack of the batch as the collector names it (docs/internals/collector.md,
   "Stored and shown frames"): per frame its inline functions ("f [inline]")
   and then its function (or module+address), then the end marker of a
   stack cut short; one name a line. */
static char *batch_stack_names(const Perf__V1__Batch *b, const Perf__V1__Stack *s) {
  char *out = strdup(""), label[FRAME_LABEL_MAX];
  CHECK(out != NULL);
  for (size_t i = 0; i <= s->n_frames; i++) {
    if (i == s->n_frames) {
      if (s->end <= 1) break; /* complete or unspecified: no marker */
      snprintf(label, sizeof label, "<truncated: %s>", perf__stack_end_text((int)s->end));
      add_line(&out, label, "");
      break;
    }
    const Perf__V1__Frame *f = b->frames[s->frames[i] - 1];
    for (size_t l = 0; l + 1 < f->n_lines; l++) {
      uint32_t fn = f->lines[l]->function;
      perf__group_label(label, sizeof label, fn ? b->strings[b->functions[fn - 1]->name] : "??",
                        NULL, NULL);
      add_line(&out, label, FRAME_INLINE_SUFFIX);
    }
    const char *fn = f->function ? b->strings[b->functions[f->function - 1]->name] : NULL;
    char address[24];
    snprintf(address, sizeof address, "0x%llx", (unsigned long long)f->address);
    perf__group_label(label, sizeof label, fn && *fn ? fn : NULL,
                      f->module ? b->modules[f->module - 1]->path : NULL, address);
    add_line(&out, label, "");
  }
  return out;
}

/* The detail's stack's names, one a line. */
static char *detail_stack_names(json_t *stack) {
  char *out = strdup("");
  size_t i;
  json_t *name;
  json_array_foreach(json_object_get(stack, "names"), i, name) {
    add_line(&out, json_string_value(name), "");
  }
  return out;
}

typedef struct named_count_s {
  uint32_t tid;
  char *names;
  long long samples;              /* the batch's, summed */
  long long shown, shown_samples; /* the detail's entries of these names, their samples */
} named_count_t;

/* The event's detail (GET /api/v1/events/<id>) against the batch's stack
   counts: one stack per thread and distinct names, its samples the sum of
   the batch's stacks that have those names; returns how many stacks of the
   batch share their names with another. */
static size_t check_detail_stacks(const collector_t *c, long long id, const Perf__V1__Batch *b,
                                  const Perf__V1__Event *e) {
  named_count_t *want = calloc(e->n_stack_counts + 1, sizeof *want);
  CHECK(want != NULL);
  size_t n = 0, shared = 0;
  for (size_t i = 0; i < e->n_stack_counts; i++) {
    const Perf__V1__StackCount *sc = e->stack_counts[i];
    char *names = batch_stack_names(b, b->stacks[sc->stack - 1]);
    size_t k = 0;
    while (k < n && !(want[k].tid == sc->tid && strcmp(want[k].names, names) == 0))
      k++;
    if (k == n) {
      want[n++] = (named_count_t){sc->tid, names, 0, 0, 0};
    } else {
      shared++;
      free(names);
    }
    want[k].samples += sc->samples;
  }
  char path[64];
  snprintf(path, sizeof path, "/api/v1/events/%lld", id);
  long status;
  json_t *d = get_json(c, path, &status);
  CHECK_EQ_INT(status, 200);
  json_t *stacks = json_object_get(d, "stacks"), *st;
  size_t i;
  json_array_foreach(stacks, i, st) {
    char *names = detail_stack_names(st);
    size_t k = 0;
    while (k < n && !(want[k].tid == (uint32_t)num(st, "tid") && strcmp(want[k].names, names) == 0))
      k++;
    CHECKF(k < n, "the detail's stack %zu (thread %lld) is none of the batch's:\n%s", i,
           num(st, "tid"), names);
    want[k].shown++;
    want[k].shown_samples += num(st, "samples");
    free(names);
  }
  for (size_t k = 0; k < n; k++) {
    CHECKF(want[k].shown == 1, "thread %u's stack is listed %lld times (%lld samples):\n%s",
           want[k].tid, want[k].shown, want[k].shown_samples, want[k].names);
    CHECKF(want[k].shown_samples == want[k].samples, "%lld samples, the batch's %lld:\n%s",
           want[k].shown_samples, want[k].samples, want[k].names);
  }
  CHECK_EQ_INT(json_array_size(stacks), n);
  for (size_t k = 0; k < n; k++)
    free(want[k].names);
  free(want);
  json_decref(d);
  return shared;
}

#define SITE_SAMPLES 30 /* samples of the two call sites' hang */

static volatile unsigned long g_spin_sink;

static CHAIN void spin_a_while(void) {
  for (unsigned i = 0; i < 20000; i++)
    g_spin_sink = g_spin_sink * 31 + i;
}

/* The hang: one function calling the same leaf from two places, so its
   samples have two return addresses in it (two stacks to the SDK, one to
   the collector), until the SDK has taken SITE_SAMPLES samples. */
static CHAIN void two_call_sites(void) {
  uint64_t from = sdk_stats().samples_taken;
  double end = now_s() + 20;
  while (sdk_stats().samples_taken < from + SITE_SAMPLES) {
    spin_a_while();
    g_spin_sink ^= 1;
    spin_a_while();
    CHECKF(now_s() < end, "%d samples in 20 s", SITE_SAMPLES);
  }
}

/* The SDK's own batch: samples at different addresses in the same
   functions are different stacks to the SDK (their pcs) and one to the
   collector (the same names, one signature); the event's detail lists
   each once with their samples added, on both stores, and a database
   where such stacks were stored a row each shows them added too. */
static void case_sdk_batch_stacks(void) {
  char sink[256], data[256];
  const char *dir = tempdir_make("perf-states");
  snprintf(sink, sizeof sink, "%s/report.txt", dir);
  snprintf(data, sizeof data, "%s/data", dir);
  perf_sdk_config_t cfg;
  sdk_config_short_hangs(&cfg);
  cfg.app_name = "stacks-test";
  cfg.data_dir = data;
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = sink;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  two_call_sites();
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(10000), PERF_OK);
  Perf__V1__Batch *b = NULL;
  const Perf__V1__Event *e = hang_phases_read_event(sink, &b);

  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(batch_send(&c, b, b->batch_id.data, r), 200);
  free(r);
  long status;
  json_t *list = get_json(&c, "/api/v1/events?kind=hang", &status);
  CHECK_EQ_INT(status, 200);
  CHECK_EQ_INT(json_array_size(json_object_get(list, "events")), 1);
  long long id = num(json_array_get(json_object_get(list, "events"), 0), "id");
  json_decref(list);
  size_t shared = check_detail_stacks(&c, id, b, e);
  fprintf(stderr, "the SDK's batch: %zu stacks, %zu of them named as another\n", e->n_stack_counts,
          shared);
  CHECKF(shared >= 1, "no two of the batch's %zu stacks have the same names: nothing was shown",
         e->n_stack_counts);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM (SELECT DISTINCT stack_sig, tid FROM"
                              " stack_counts) x"),
               db_count(c.db, "SELECT count(*) FROM stack_counts"));
  collector_stop_healthy(&c);

  /* A row per device stack, as an older collector stored them: added up. */
  db_exec(c.db, "INSERT INTO stack_counts(event_id, stack_sig, tid, samples)"
                " SELECT event_id, stack_sig, tid, 1000 FROM stack_counts");
  collector_restart(&c, NULL);
  char path[64];
  snprintf(path, sizeof path, "/api/v1/events/%lld", id);
  json_t *d = get_json(&c, path, &status);
  CHECK_EQ_INT(status, 200);
  CHECK_EQ_INT(json_array_size(json_object_get(d, "stacks")),
               db_count(c.db, "SELECT count(*) FROM stack_counts") / 2);
  json_t *st;
  size_t i;
  json_array_foreach(json_object_get(d, "stacks"), i, st)
      CHECKF(num(st, "samples") > 1000, "stack %zu: %lld samples, not its rows' sum", i,
             num(st, "samples"));
  json_decref(d);
  perf__v1__batch__free_unpacked(b, NULL);
  collector_stop_healthy(&c);
}

static const test_case_t g_cases[] = {
    TEST_CASE(sdk_hang),
    TEST_CASE(exact),
    TEST_CASE(sdk_batch),
    TEST_CASE(sdk_batch_stacks),
};

int main(int argc, char **argv) {
  return collector_test_main(argc, argv, g_cases, ARRAY_LEN(g_cases));
}
