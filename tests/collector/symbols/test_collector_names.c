/*
 * test_collector_names.c - stack truth in the collector: names_app (the
 * C++ -O2 -g program of tests/sampler: namespaces, templates, lambdas,
 * inline chains of the standard library, an inlined hot loop), stripped,
 * sends real batches (a CPU event of its hot thread, a manual event of
 * every parked thread) to the real perf-collector, which has its debug
 * file (objcopy --only-keep-debug), uploaded:
 *  - names_off: on-device names off, the debug file uploaded first (the
 *    ingest path): every frame of names_app in the API has the inline
 *    chain, demangled names, linkage names and file:line llvm-addr2line
 *    -i -f -C gives for its pc (frame_names.c forgives the documented
 *    differences); the pprof export has one Location per physical frame
 *    with those Lines, innermost first;
 *  - names_on: on-device names on (the stripped binary keeps .symtab, so
 *    the device names physical frames without DWARF), the debug file
 *    uploaded after the events (the resymbolize path): the collector's
 *    answer replaces the device's, inline frames included;
 *  - names_on_first: the same with the debug file uploaded first (the
 *    ingest path);
 *  - truncated: stacks that ended early (the wire's Stack.end) show a
 *    final "<truncated: depth>" frame and never merge with the complete
 *    stack of the same frames;
 *  - old_db: a database of the schema before stack ends opens, takes
 *    batches and shows them.
 */
#include <jansson.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "frame_names.h"
#include "perf/v1/perf.pb-c.h"
#include "pprof_check.h"
#include "tempdir.h"

/* ---- files and the app ----------------------------------------------------- */

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  CHECKF(f != NULL, "%s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *data = malloc((size_t)n + 1);
  CHECK(data != NULL);
  CHECK(fread(data, 1, (size_t)n, f) == (size_t)n);
  fclose(f);
  data[n] = '\0';
  *len = (size_t)n;
  return data;
}

/* The GNU build-id of the ELF file at path (readelf -n), lowercase hex. */
static void build_id_of(const char *path, char hex[81]) {
  char cmd[512], line[256];
  snprintf(cmd, sizeof cmd, "readelf -n '%s'", path);
  FILE *p = popen(cmd, "r");
  CHECK(p != NULL);
  hex[0] = '\0';
  while (fgets(line, sizeof line, p))
    if (sscanf(line, " Build ID: %80s", hex) == 1) break;
  pclose(p);
  CHECKF(strlen(hex) >= 2, "%s: no build-id", path);
}

static void upload_debug_file(const collector_t *c, const char *id) {
  size_t len;
  char *body = read_file(NAMES_DEBUG_PATH, &len);
  char path[160];
  snprintf(path, sizeof path, "/v1/symbols/%s", id);
  const char *headers[] = {"Content-Type: application/octet-stream",
                           "Authorization: Bearer " GOOD_KEY, NULL};
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  long status = request(c, "POST", path, headers, body, len, false, r);
  CHECKF(status == 201 || status == 200, "upload -> %ld %.300s", status, r->body);
  free(r);
  free(body);
}

/* names_app sending to c with on-device names on or off; exits 0. */
static void run_names_app(const collector_t *c, bool names) {
  const char *dir = tempdir_make("perf-names");
  char key[] = GOOD_KEY, sym[2] = {names ? '1' : '0', 0}, err[512];
  snprintf(err, sizeof err, "%s/stderr.txt", dir);
  char *argv[] = {
      (char *)NAMES_STRIPPED_PATH, (char *)dir, "--http", (char *)c->url, key, sym, NULL};
  pid_t pid = spawn(argv, err);
  int status = spawn_wait(pid, 240);
  if (status != 0) {
    size_t len;
    char *text = read_file(err, &len);
    fprintf(stderr, "names_app stderr: %s\n", text);
    free(text);
  }
  CHECK_EQ_INT(status, 0);
}

/* The id of the newest event of kind; 0 when there is none. */
static json_int_t event_of_kind(const collector_t *c, const char *kind) {
  json_t *list = get_ok(c, "/api/v1/events?limit=100");
  json_int_t id = 0;
  size_t i;
  json_t *e;
  json_array_foreach(json_object_get(list, "events"), i, e) {
    if (strcmp(json_string_value(json_object_get(e, "kind")), kind) == 0) {
      id = json_integer_value(json_object_get(e, "id"));
      break;
    }
  }
  json_decref(list);
  return id;
}

static json_int_t wait_event(const collector_t *c, const char *kind) {
  double end = now_s() + 60;
  json_int_t id;
  while (!(id = event_of_kind(c, kind)) && now_s() < end)
    usleep(50 * 1000);
  CHECKF(id, "no %s event stored", kind);
  return id;
}

/* ---- addr2line ------------------------------------------------------------- */

typedef struct a2l_line_s {
  char function[FRAME_NAME_MAX];
  char file[FRAME_FILE_MAX];
  unsigned line;
} a2l_line_t;

/* llvm-addr2line -i -f -C for address: the inline chain, innermost first.
   LLVM's DWARF reader, independent of elfutils (which sdk/symbols uses);
   GNU addr2line names the innermost function after its caller at the last
   byte of an inlined range (a call's return address - 1), where gdb,
   eu-addr2line and llvm-addr2line name the inlined function. */
static size_t addr2line(uint64_t address, a2l_line_t *out, size_t max) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "'%s' -i -f -C -e '%s' 0x%llx", PERF_ADDR2LINE, NAMES_DEBUG_PATH,
           (unsigned long long)address);
  FILE *p = popen(cmd, "r");
  CHECK(p != NULL);
  size_t n = 0;
  char fn[FRAME_NAME_MAX], where[FRAME_FILE_MAX + 32];
  while (n < max && fgets(fn, sizeof fn, p) && fgets(where, sizeof where, p)) {
    fn[strcspn(fn, "\n")] = '\0';
    where[strcspn(where, "\n")] = '\0';
    char *disc = strstr(where, " (discriminator");
    if (disc) *disc = '\0';
    char *colon = strrchr(where, ':');
    CHECK(colon != NULL);
    *colon = '\0';
    snprintf(out[n].function, sizeof out[n].function, "%s", fn);
    snprintf(out[n].file, sizeof out[n].file, "%.*s", (int)sizeof out[n].file - 1, where);
    out[n].line = (unsigned)strtoul(colon + 1, NULL, 10);
    n++;
  }
  pclose(p);
  return n;
}

/* Ours (a) and llvm-addr2line's (b) agree: what frame_names.c forgives,
   and llvm-addr2line names an inlined function without its namespaces
   and classes when DWARF gives it no linkage name (DW_AT_name alone:
   "__invoke_impl<...>" where gdb and we say "std::__invoke_impl<...>"). */
static bool same_name(const char *a, const char *b) {
  char na[FRAME_NAME_MAX], nb[FRAME_NAME_MAX];
  frame_name_norm(b, nb, sizeof nb);
  for (const char *p = a; p; p = strstr(p, "::") ? strstr(p, "::") + 2 : NULL) {
    frame_name_norm(p, na, sizeof na);
    if (strcmp(na, nb) == 0) return true;
  }
  return false;
}

typedef struct tally_s {
  size_t physical, inline_frames, mangled, lines;
} tally_t;

static bool of_names_app(const json_t *f) {
  const char *module = json_string_value(json_object_get(f, "module"));
  return module && strcmp(frame_basename(module), frame_basename(NAMES_STRIPPED_PATH)) == 0;
}

/* One stack of the API (expanded frames): every physical frame of
   names_app with its inline frames before it is what addr2line says at
   its pc (a return address at pc - 1). */
static void check_stack(const json_t *frames, tally_t *t) {
  size_t n = json_array_size(frames), physical = 0, start = 0;
  for (size_t i = 0; i < n; i++) {
    const json_t *f = json_array_get(frames, i);
    if (json_is_true(json_object_get(f, "inline"))) continue;
    if (json_object_get(f, "truncated")) break;
    size_t depth = physical++, first = start;
    start = i + 1;
    if (!of_names_app(f)) continue;
    uint64_t pc = strtoull(json_string_value(json_object_get(f, "address")), NULL, 16);
    a2l_line_t want[64];
    size_t k = addr2line(depth ? pc - 1 : pc, want, ARRAY_LEN(want));
    CHECKF(k >= 1 && strcmp(want[0].function, "??") != 0, "addr2line knows nothing at 0x%llx",
           (unsigned long long)pc);
    CHECKF(i + 1 - first == k, "frame at 0x%llx: %zu functions, addr2line -i says %zu",
           (unsigned long long)pc, i + 1 - first, k);
    for (size_t j = 0; j < k; j++) {
      const json_t *g = json_array_get(frames, first + j);
      const char *fn = json_string_value(json_object_get(g, "function"));
      const char *sys = json_string_value(json_object_get(g, "system_name"));
      const char *file = json_string_value(json_object_get(g, "file"));
      json_int_t line = json_integer_value(json_object_get(g, "line"));
      CHECKF(fn && same_name(fn, want[j].function), "0x%llx line %zu: %s, addr2line %s",
             (unsigned long long)pc, j, fn ? fn : "(none)", want[j].function);
      CHECKF(strncmp(fn, "_Z", 2) != 0, "%s: not demangled", fn);
      CHECKF(json_is_true(json_object_get(g, "inline")) == (j + 1 < k), "0x%llx: %s inline?",
             (unsigned long long)pc, fn);
      if (sys) t->mangled += strncmp(sys, "_Z", 2) == 0;
      if (want[j].line) {
        CHECKF(file && strcmp(frame_basename(file), frame_basename(want[j].file)) == 0 &&
                   line == (json_int_t)want[j].line,
               "0x%llx %s: %s:%lld, addr2line %s:%u", (unsigned long long)pc, fn,
               file ? file : "(none)", (long long)line, want[j].file, want[j].line);
        t->lines++;
      }
    }
    t->physical++;
    t->inline_frames += k - 1;
  }
}

/* Every stack of event id checked against addr2line. */
static tally_t check_event(const collector_t *c, json_int_t id) {
  char path[64];
  snprintf(path, sizeof path, "/api/v1/events/%lld", (long long)id);
  json_t *ev = get_ok(c, path);
  tally_t t = {0};
  size_t i;
  json_t *s;
  json_array_foreach(json_object_get(ev, "stacks"), i, s) {
    json_t *frames = json_object_get(s, "frames"), *names = json_object_get(s, "names");
    CHECK_EQ_INT(json_array_size(frames), json_array_size(names));
    check_stack(frames, &t);
    /* A name of an inline frame says so. */
    for (size_t k = 0; k < json_array_size(frames); k++)
      if (json_is_true(json_object_get(json_array_get(frames, k), "inline")))
        CHECK(strstr(json_string_value(json_array_get(names, k)), " [inline]") != NULL);
  }
  json_decref(ev);
  return t;
}

/* The manual event: the parked threads' names, inline chains among them
   (Queue::pop inlined into consume_orders, std::mutex::lock...). Every
   frame of names_app is checked exactly; how many there are depends on
   the walks (a thread's walk may end early on a loaded machine, its stack
   then closed by "<truncated: reason>"), so only the main thread's, which
   asks for the capture, are counted on: main and _start, send_with_sdk
   inlined into main. */
static void check_manual(const collector_t *c) {
  tally_t t = check_event(c, wait_event(c, "manual"));
  fprintf(stderr, "manual: %zu physical frames of names_app, %zu inline, %zu lines, %zu mangled\n",
          t.physical, t.inline_frames, t.lines, t.mangled);
  CHECK(t.physical >= 2);
  CHECK(t.inline_frames >= 1);
  CHECK(t.lines >= t.physical);
  CHECK(t.mangled >= 1);
}

/* The pprof export of the CPU event: a Location of names_app with an
   inline chain has the same Lines as addr2line, innermost first, and its
   functions' system names are the linkage names. */
static void check_pprof(const collector_t *c) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(get_key(c, GOOD_KEY, "/api/v1/export/pprof?kind=cpu", r), 200);
  CHECK(r->body_len == r->total_len);
  pprof_profile_t *p = pprof_decode_checked(r->body, r->body_len);
  size_t chains = 0, checked = 0, linkage = 0;
  for (size_t i = 0; i < p->n_location; i++) {
    const Perftools__Profiles__Location *loc = p->location[i];
    if (!loc->mapping_id) continue;
    const char *file = pprof_string(p, p->mapping[loc->mapping_id - 1]->filename);
    if (strcmp(frame_basename(file), frame_basename(NAMES_STRIPPED_PATH)) != 0) continue;
    a2l_line_t want[64];
    /* Innermost frames are pcs, the others return addresses: either is in
       the same chain of a hot loop's location only when they agree; take
       the one addr2line gives as many lines for. */
    size_t k = addr2line(loc->address, want, ARRAY_LEN(want));
    if (k != loc->n_line) k = addr2line(loc->address - 1, want, ARRAY_LEN(want));
    CHECKF(k == loc->n_line, "location 0x%llx: %zu lines, addr2line %zu",
           (unsigned long long)loc->address, loc->n_line, k);
    chains += loc->n_line > 1;
    for (size_t j = 0; j < k; j++) {
      const Perftools__Profiles__Function *fn = NULL;
      for (size_t f = 0; f < p->n_function; f++)
        if (p->function[f]->id == loc->line[j]->function_id) fn = p->function[f];
      CHECK(fn != NULL);
      const char *name = pprof_string(p, fn->name), *sys = pprof_string(p, fn->system_name);
      CHECKF(same_name(name, want[j].function), "pprof 0x%llx line %zu: %s, addr2line %s",
             (unsigned long long)loc->address, j, name, want[j].function);
      if (want[j].line) CHECK_EQ_INT(loc->line[j]->line, want[j].line);
      linkage += strncmp(sys, "_Z", 2) == 0;
      checked++;
    }
  }
  fprintf(stderr, "pprof: %zu lines of names_app checked, %zu inline chains, %zu linkage names\n",
          checked, chains, linkage);
  CHECK(chains >= 1);
  CHECK(linkage >= 1);
  perftools__profiles__profile__free_unpacked(p, NULL);
  free(r);
}

/* The flame graph shows the inlined hot loop as frames of its own. */
static void check_flame(const collector_t *c) {
  json_t *flame = get_ok(c, "/api/v1/flame?kind=cpu");
  char *text = json_dumps(flame, JSON_COMPACT);
  CHECK(text != NULL);
  CHECKF(strstr(text, " [inline]\"") != NULL, "no inline frame in the flame graph: %.2000s", text);
  free(text);
  json_decref(flame);
}

/* ---- cases ----------------------------------------------------------------- */

/* Names off on the device, the debug file in the collector first. */
static void case_names_off(void) {
  char id[81];
  build_id_of(NAMES_STRIPPED_PATH, id);
  collector_t c;
  collector_start(&c, NULL);
  upload_debug_file(&c, id);
  run_names_app(&c, false);
  check_manual(&c);
  wait_event(&c, "cpu");
  check_pprof(&c);
  check_flame(&c);
  collector_stop_healthy(&c);
}

/* Names on (the symbol table's, no DWARF on the device), the debug file
   uploaded after the events: the stored stacks are renamed with it. */
static void case_names_on(void) {
  char id[81];
  build_id_of(NAMES_STRIPPED_PATH, id);
  collector_t c;
  collector_start(&c, NULL);
  run_names_app(&c, true);
  json_int_t manual = wait_event(&c, "manual");
  char path[64];
  snprintf(path, sizeof path, "/api/v1/events/%lld", (long long)manual);
  json_t *before = get_ok(&c, path);
  char *text = json_dumps(before, JSON_COMPACT);
  CHECK(text != NULL);
  CHECKF(strstr(text, "consume_orders") != NULL, "the device did not name: %.2000s", text);
  free(text);
  size_t i, k;
  json_t *s, *f;
  json_array_foreach(json_object_get(before, "stacks"), i, s) {
    json_array_foreach(json_object_get(s, "frames"), k, f) {
      CHECKF(!of_names_app(f) || !json_is_true(json_object_get(f, "inline")),
             "the device had no DWARF of names_app: %s",
             json_string_value(json_object_get(f, "function")));
    }
  }
  json_decref(before);
  upload_debug_file(&c, id); /* renames the stored stacks before it answers */
  check_manual(&c);
  check_pprof(&c);
  collector_stop_healthy(&c);
}

/* Names on, the debug file in the collector first: named at ingest, the
   collector's answer over the device's. */
static void case_names_on_first(void) {
  char id[81];
  build_id_of(NAMES_STRIPPED_PATH, id);
  collector_t c;
  collector_start(&c, NULL);
  upload_debug_file(&c, id);
  run_names_app(&c, true);
  check_manual(&c);
  wait_event(&c, "cpu");
  check_pprof(&c);
  collector_stop_healthy(&c);
}

/* ---- hand-made batches ------------------------------------------------------ */

/* One CPU event of two stacks of the same three named frames: one
   complete, one cut by the depth cap (end), `samples` each. */
static void send_two_ends(const collector_t *c, unsigned seed, Perf__V1__StackEnd end) {
  Perf__V1__Resource res;
  Perf__V1__Batch b;
  batch_begin(&b, &res, "ends", NULL, NULL, NULL);
  char *strings[] = {"", "leaf_fn", "mid_fn", "root_fn"};
  uint32_t ids[] = {1, 2, 3};
  Perf__V1__Stack complete = PERF__V1__STACK__INIT, cut = PERF__V1__STACK__INIT;
  complete.n_frames = cut.n_frames = 3;
  complete.frames = cut.frames = ids;
  complete.end = PERF__V1__STACK_END__STACK_END_COMPLETE;
  cut.end = end;
  Perf__V1__Stack *sts[] = {&complete, &cut};
  Perf__V1__StackCount sc[2] = {PERF__V1__STACK_COUNT__INIT, PERF__V1__STACK_COUNT__INIT};
  sc[0].stack = 1, sc[1].stack = 2;
  sc[0].samples = 3, sc[1].samples = 2;
  sc[0].tid = sc[1].tid = 7;
  Perf__V1__StackCount *scs[] = {&sc[0], &sc[1]};
  Perf__V1__Event ev = PERF__V1__EVENT__INIT;
  ev.kind = PERF__V1__EVENT_KIND__EVENT_KIND_CPU;
  ev.start_unix_nanos = 1700000000000000000LL + seed;
  ev.duration_nanos = 1000000;
  ev.tid = 7;
  ev.n_stack_counts = 2, ev.stack_counts = scs;
  Perf__V1__Event *evs[] = {&ev};
  batch_frames_t frames;
  batch_set_frames(&b, &frames, strings, ARRAY_LEN(strings));
  b.n_stacks = 2, b.stacks = sts;
  b.n_events = 1, b.events = evs;
  batch_post(c, &b, seed);
}

/* The stacks of the CPU top list whose innermost frame is leaf_fn. */
static void check_two_ends(const collector_t *c, const char *marker, json_int_t samples_each) {
  json_t *top = get_ok(c, "/api/v1/top-stacks?kind=cpu&from=0");
  size_t i, complete = 0, cut = 0;
  json_t *s;
  json_array_foreach(json_object_get(top, "stacks"), i, s) {
    json_t *frames = json_object_get(s, "frames");
    json_int_t n = json_integer_value(json_object_get(s, "samples"));
    const char *last = json_string_value(json_array_get(frames, json_array_size(frames) - 1));
    CHECK(strcmp(json_string_value(json_array_get(frames, 0)), "leaf_fn") == 0);
    if (json_array_size(frames) == 3 && strcmp(last, "root_fn") == 0) {
      complete++;
      CHECK_EQ_INT(n, 3 * samples_each);
    } else if (json_array_size(frames) == 4 && strcmp(last, marker) == 0) {
      cut++;
      CHECK_EQ_INT(n, 2 * samples_each);
    } else {
      CHECKF(false, "unexpected stack ending %s", last);
    }
  }
  CHECK_EQ_INT(complete, 1);
  CHECK_EQ_INT(cut, 1);
  json_decref(top);
}

/* A stack cut by the depth cap says so as its last frame, in the API and
   the event detail, and is a stack of its own beside the complete one. */
static void case_truncated(void) {
  collector_t c;
  collector_start(&c, NULL);
  send_two_ends(&c, 1, PERF__V1__STACK_END__STACK_END_DEPTH);
  send_two_ends(&c, 2, PERF__V1__STACK_END__STACK_END_DEPTH);
  check_two_ends(&c, "<truncated: depth>", 2);
  json_int_t id = wait_event(&c, "cpu");
  char path[64];
  snprintf(path, sizeof path, "/api/v1/events/%lld", (long long)id);
  json_t *ev = get_ok(&c, path);
  json_t *stacks = json_object_get(ev, "stacks");
  CHECK_EQ_INT(json_array_size(stacks), 2);
  size_t seen = 0, i;
  json_t *s;
  json_array_foreach(stacks, i, s) {
    json_t *frames = json_object_get(s, "frames");
    json_t *last = json_array_get(frames, json_array_size(frames) - 1);
    if (!json_object_get(last, "truncated")) continue;
    CHECK(strcmp(json_string_value(json_object_get(last, "function")), "<truncated: depth>") == 0);
    CHECK(strcmp(json_string_value(json_object_get(last, "truncated")), "depth") == 0);
    seen++;
  }
  CHECK_EQ_INT(seen, 1);
  json_decref(ev);
  /* The folded export keeps the two apart too. */
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(get_key(&c, GOOD_KEY, "/api/v1/export/folded?kind=cpu&from=0", r), 200);
  CHECKF(strstr(r->body, "<truncated: depth>;root_fn;mid_fn;leaf_fn 4\n") != NULL &&
             strstr(r->body, "root_fn;mid_fn;leaf_fn 6\n") != NULL,
         "folded: %s", r->body);
  free(r);
  collector_stop_healthy(&c);
}

/* A database made before stack ends (no stacks.stack_end): the collector
   opens it, adds the column and stores and shows new batches. */
static void case_old_db(void) {
  collector_t c;
  collector_start(&c, NULL);
  collector_stop_healthy(&c);
  sqlite3 *h = NULL;
  CHECK(sqlite3_open_v2(c.db, &h, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
  CHECKF(sqlite3_exec(h,
                      "DROP TABLE stacks; CREATE TABLE stacks(signature TEXT PRIMARY KEY,"
                      " frames TEXT NOT NULL, first_seen INTEGER NOT NULL,"
                      " last_seen INTEGER NOT NULL);"
                      "INSERT INTO stacks VALUES('old', '[{\"function\":\"f\",\"module\":\"m\","
                      "\"address\":\"0x1\",\"offset\":1}]', 1, 1);",
                      NULL, NULL, NULL) == SQLITE_OK,
         "%s", sqlite3_errmsg(h));
  sqlite3_close(h);
  /* The same database again (collector_start makes a new one). */
  char keys[160], listen[32];
  snprintf(keys, sizeof keys, "%.*s/keys", (int)(strrchr(c.db, '/') - c.db), c.db);
  c.port = free_port();
  snprintf(listen, sizeof listen, "127.0.0.1:%u", (unsigned)c.port);
  snprintf(c.url, sizeof c.url, "http://%s", listen);
  char *argv[] = {PERF_COLLECTOR_PATH, "--listen", listen,      "--db", c.db,
                  "--api-keys-file",   keys,       "--threads", "2",    NULL};
  c.pid = g_running = spawn(argv, NULL);
  CHECK(healthy_within(&c, 20));
  send_two_ends(&c, 3, PERF__V1__STACK_END__STACK_END_NO_RULE);
  check_two_ends(&c, "<truncated: no rule>", 1);
  collector_stop_healthy(&c);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE(names_off), TEST_CASE(names_on), TEST_CASE(names_on_first),
      TEST_CASE(truncated), TEST_CASE(old_db),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
