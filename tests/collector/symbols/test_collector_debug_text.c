/*
 * test_collector_debug_text.c - debug files whose text is not UTF-8, or is
 * garbage, never cost the collector a batch. latin1_app.c (the SDK linked)
 * is built at test time with -g inside a directory named "caf\xe9"
 * (Latin-1: its source paths and one symbol name are not UTF-8), run with
 * its uploads going to a real perf-collector, and its binary uploaded
 * with the real tools/perf-symbols:
 *  - latin1_named_at_ingest: uploaded first, then run: each of its 5 hangs
 *    stored (exactly 5, nothing left in its spool), its frames named from
 *    the file with U+FFFD only where a byte was not UTF-8;
 *  - latin1_renamed_later: run first, then uploaded: the stored stacks are
 *    renamed the same way;
 *  - replace: a debug file replaced for its build-id (POST
 *    /v1/symbols/<id>?replace=1): 409 without it, 200 with it and the
 *    stored stacks renamed from the new file, 400 for a file of another
 *    build-id (the stored one kept); perf-symbols --replace both ways;
 *  - mutated_debug_files: MUTATED copies of the binary with bytes changed
 *    in their debug sections and symbol tables (a fixed seed), each under
 *    a build-id of its own: each upload 201 or a 400 naming what is wrong
 *    with the file, then a batch with frames in that module: 200, never a
 *    503.
 * Each case on SQLite, and again on PostgreSQL (pg_ variants), in its own
 * process: `test_collector_debug_text <case>`.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <jansson.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "tempdir.h"
#include "test_util.h"

#define FFFD "\xef\xbf\xbd"
#define HANGS 5 /* latin1_app.c's */
#define APP_DEADLINE_S 120.0
#define POLL_DEADLINE_S 60.0
#define MUTATED 300
#define MUTATED_DEADLINE_S 150.0

static const char *const APP_CHAIN[] = {"burn_in_latin1_dir", "handle_job", "main"};

/* ---- the program ---------------------------------------------------------- */

typedef struct app_s {
  char dir[256]; /* .../caf\xe9 */
  char bin[320];
  char id[41]; /* its GNU build-id, hex */
} app_t;

static void run(const char *cmd) {
  int rc = system(cmd);
  CHECKF(rc == 0, "`%s` failed (%d)", cmd, rc);
}

/* The text a command prints (the first line, newline cut) into out. */
static void command_line(const char *cmd, char *out, size_t size) {
  FILE *p = popen(cmd, "r");
  CHECK(p != NULL);
  out[0] = '\0';
  CHECKF(fgets(out, (int)size, p) != NULL, "`%s` printed nothing", cmd);
  out[strcspn(out, "\n")] = '\0';
  CHECK(pclose(p) == 0);
}

/* latin1_app.c built with -g in <temp>/caf\xe9 (debug paths in Latin-1). */
static void app_build(app_t *a) {
  snprintf(a->dir, sizeof a->dir, "%s/caf\xe9", tempdir_make("perf-dtext"));
  CHECK(mkdir(a->dir, 0755) == 0 || errno == EEXIST);
  snprintf(a->bin, sizeof a->bin, "%s/latin1_app", a->dir);
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "cd '%s' && cp '%s' latin1_app.c && cc -g -O1 -fno-omit-frame-pointer %s -I'%s' "
           "latin1_app.c -o latin1_app -L'%s' -lperfsdk -Wl,-rpath,'%s'",
           a->dir, LATIN1_APP_SRC, LATIN1_APP_CFLAGS, PERF_INCLUDE_DIR, PERF_SDK_LIB_DIR,
           PERF_SDK_LIB_DIR);
  run(cmd);
  snprintf(cmd, sizeof cmd,
           "readelf -n '%s' | sed -n 's/.*Build ID: \\([0-9a-f]*\\).*/\\1/p' | head -1", a->bin);
  command_line(cmd, a->id, sizeof a->id);
  CHECKF(strlen(a->id) == 40, "build-id %s", a->id);
}

/* Run the program with its events sent to c, the SDK naming nothing
   itself (PERF_SDK_SYMBOLIZE=0: every name comes from the collector). */
static void app_run(const collector_t *c, const app_t *a, char *data_dir, size_t size) {
  snprintf(data_dir, size, "%s/sdk", tempdir_make("perf-dtext"));
  static const char *const names[] = {"PERF_SDK_SINK", "PERF_SDK_ENDPOINT", "PERF_SDK_API_KEY",
                                      "PERF_SDK_DATA_DIR", "PERF_SDK_SYMBOLIZE"};
  const char *values[] = {"http", c->url, GOOD_KEY, data_dir, "0"};
  for (size_t i = 0; i < ARRAY_LEN(names); i++)
    CHECK(setenv(names[i], values[i], 1) == 0);
  char out[512];
  snprintf(out, sizeof out, "%s/app.out", tempdir_make("perf-dtext"));
  char *argv[] = {(char *)a->bin, NULL};
  int status = spawn_wait(spawn(argv, out), APP_DEADLINE_S);
  for (size_t i = 0; i < ARRAY_LEN(names); i++)
    unsetenv(names[i]);
  char *said = read_text(out);
  fprintf(stderr, "latin1_app: %s", said ? said : "(no output)\n");
  free(said);
  CHECKF(status == 0, "latin1_app exited with %d (see %s)", status, out);
}

/* Batch files left in the app's spool (the journal, lock and quarantine
   aside): 0 once every batch got its 2xx. */
static int spool_left(const char *data_dir) {
  char cmd[600], line[64];
  snprintf(cmd, sizeof cmd, "find '%s/spool' -type f ! -name LOCK ! -name '*.journal' | wc -l",
           data_dir);
  command_line(cmd, line, sizeof line);
  return atoi(line);
}

static size_t events_stored(const collector_t *c) {
  json_t *j = get_ok(c, "/api/v1/events?app=latin1_app&limit=1000");
  size_t n = json_array_size(json_object_get(j, "events"));
  json_decref(j);
  return n;
}

/* Exactly HANGS events stored: polled up to the deadline, then no more. */
static void wait_all_stored(const collector_t *c) {
  double end = now_s() + POLL_DEADLINE_S;
  size_t n;
  while ((n = events_stored(c)) < HANGS) {
    CHECKF(now_s() < end, "%zu of %d events stored", n, HANGS);
    usleep(100000);
  }
  CHECK_EQ_INT(n, HANGS);
}

/* perf-symbols uploading the binary; its summary line into out. */
static void upload_with_perf_symbols(const collector_t *c, const app_t *a, char *out, size_t size) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "'%s' --url %s --key %s '%s' 2>&1 | grep -a 'stored stacks renamed'",
           PERF_SYMBOLS_PATH, c->url, GOOD_KEY, a->bin);
  command_line(cmd, out, size);
  fprintf(stderr, "perf-symbols: %s\n", out);
}

/* ---- what the API shows --------------------------------------------------- */

/* The hang stack whose labels hold APP_CHAIN in order, from top-stacks. */
static bool chain_at(json_t *frames, size_t at) {
  for (size_t k = 0; k < ARRAY_LEN(APP_CHAIN); k++) {
    const char *f = json_string_value(json_array_get(frames, at + k));
    if (!f || strcmp(f, APP_CHAIN[k]) != 0) return false;
  }
  return true;
}

static bool top_named(const collector_t *c, bool print) {
  json_t *j = get_ok(c, "/api/v1/top-stacks?kind=hang&app=latin1_app");
  bool found = false;
  size_t i, k;
  json_t *g;
  json_array_foreach(json_object_get(j, "stacks"), i, g) {
    json_t *frames = json_object_get(g, "frames");
    for (k = 0; k < json_array_size(frames) && !found; k++)
      found = chain_at(frames, k);
  }
  if (print && !found) {
    char *text = json_dumps(j, JSON_INDENT(1));
    fprintf(stderr, "top-stacks: %.6000s\n", text ? text : "?");
    free(text);
  }
  json_decref(j);
  return found;
}

/* Every event's stacks: the chain's functions with their file in the
   Latin-1 directory as U+FFFD, the symbol caf\xe9_spin as caf\uFFFD_spin
   in some stack, and no other U+FFFD in a function name. */
static void check_event_frames(const collector_t *c) {
  json_t *list = get_ok(c, "/api/v1/events?app=latin1_app&limit=1000");
  size_t i, s, f;
  json_t *e, *stack, *frame;
  int spin = 0, burn = 0;
  json_array_foreach(json_object_get(list, "events"), i, e) {
    char path[96];
    snprintf(path, sizeof path, "/api/v1/events/%lld",
             (long long)json_integer_value(json_object_get(e, "id")));
    json_t *ev = get_ok(c, path);
    json_array_foreach(json_object_get(ev, "stacks"), s, stack) {
      json_array_foreach(json_object_get(stack, "frames"), f, frame) {
        const char *fn = json_string_value(json_object_get(frame, "function"));
        const char *file = json_string_value(json_object_get(frame, "file"));
        if (!fn) continue;
        if (strcmp(fn, "caf" FFFD "_spin") == 0) spin++;
        if (strcmp(fn, "burn_in_latin1_dir") == 0) {
          burn++;
          CHECKF(file && strstr(file, "/caf" FFFD "/latin1_app.c"), "burn_in_latin1_dir's file %s",
                 file ? file : "(none)");
        }
        CHECKF(strcmp(fn, "caf" FFFD "_spin") == 0 || !strstr(fn, FFFD), "function %s", fn);
      }
    }
    json_decref(ev);
  }
  json_decref(list);
  CHECKF(burn >= HANGS && spin >= 1, "burn_in_latin1_dir in %d stacks, caf_spin in %d", burn, spin);
}

static void check_nothing_refused(const collector_t *c) {
  CHECK_EQ_INT(metric(c, "perf_collector_batches_rejected_total{reason=\"store_error\"}"), 0);
}

/* ---- cases ---------------------------------------------------------------- */

static void case_latin1_named_at_ingest(void) {
  app_t a;
  app_build(&a);
  collector_t c;
  collector_start(&c, NULL);
  char line[512], data_dir[300];
  upload_with_perf_symbols(&c, &a, line, sizeof line);
  CHECKF(strstr(line, "stored ") && strstr(line, a.id), "%s", line);
  app_run(&c, &a, data_dir, sizeof data_dir);
  wait_all_stored(&c);
  CHECK_EQ_INT(spool_left(data_dir), 0);
  CHECK(top_named(&c, true));
  check_event_frames(&c);
  check_nothing_refused(&c);
  collector_stop_healthy(&c);
}

static void case_latin1_renamed_later(void) {
  app_t a;
  app_build(&a);
  collector_t c;
  collector_start(&c, NULL);
  char line[512], data_dir[300];
  app_run(&c, &a, data_dir, sizeof data_dir);
  wait_all_stored(&c);
  CHECK_EQ_INT(spool_left(data_dir), 0);
  CHECK(!top_named(&c, false));
  upload_with_perf_symbols(&c, &a, line, sizeof line);
  long long renamed = -1;
  const char *semi = strstr(line, "; ");
  CHECKF(semi && sscanf(semi, "; %lld stored stacks renamed", &renamed) == 1 && renamed >= 1, "%s",
         line);
  CHECKF(!strstr(line, "store failed"), "%s", line);
  CHECK(top_named(&c, true));
  check_event_frames(&c);
  CHECK_EQ_INT(events_stored(&c), HANGS);
  check_nothing_refused(&c);
  collector_stop_healthy(&c);
}

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  CHECKF(f != NULL, "%s: %s", path, strerror(errno));
  CHECK(fseek(f, 0, SEEK_END) == 0);
  long size = ftell(f);
  CHECK(size > 0 && fseek(f, 0, SEEK_SET) == 0);
  char *data = malloc((size_t)size);
  CHECK(data && fread(data, 1, (size_t)size, f) == (size_t)size);
  fclose(f);
  *len = (size_t)size;
  return data;
}

static long post_symbols(const collector_t *c, const char *id, bool replace, const void *data,
                         size_t len, reply_t *r) {
  char path[160];
  snprintf(path, sizeof path, "/v1/symbols/%s%s", id, replace ? "?replace=1" : "");
  const char *headers[] = {"Authorization: Bearer " GOOD_KEY,
                           "Content-Type: application/octet-stream", NULL};
  long status = request(c, "POST", path, headers, data, len, false, r);
  fprintf(stderr, "POST %s -> %ld %s", path, status, r->body);
  return status;
}

static void case_replace(void) {
  app_t a;
  app_build(&a);
  char stripped[400], cmd[1024], data_dir[300];
  snprintf(stripped, sizeof stripped, "%s.stripped", a.bin);
  snprintf(cmd, sizeof cmd, "strip --strip-all -o '%s' '%s'", stripped, a.bin);
  run(cmd); /* the same build-id, no names for the static functions */
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  size_t n_stripped, n_full;
  char *bytes_stripped = read_all(stripped, &n_stripped), *bytes_full = read_all(a.bin, &n_full);
  CHECK_EQ_INT(post_symbols(&c, a.id, false, bytes_stripped, n_stripped, r), 201);
  app_run(&c, &a, data_dir, sizeof data_dir);
  wait_all_stored(&c);
  CHECK(!top_named(&c, false));
  /* Immutable unless asked: 409 saying how. */
  CHECK_EQ_INT(post_symbols(&c, a.id, false, bytes_full, n_full, r), 409);
  CHECK(strstr(r->body, "?replace=1"));
  CHECK(!top_named(&c, false));
  /* A file of another build-id never replaces it. */
  char other[40 + 1];
  snprintf(other, sizeof other, "%.38s%s", a.id, strcmp(a.id + 38, "00") ? "00" : "11");
  CHECK_EQ_INT(post_symbols(&c, other, true, bytes_full, n_full, r), 400);
  CHECK(strstr(r->body, "build-id mismatch"));
  /* Replaced: the stored stacks named from the new file at once. */
  CHECK_EQ_INT(post_symbols(&c, a.id, true, bytes_full, n_full, r), 200);
  long long renamed = -1;
  const char *semi = strstr(r->body, "; ");
  CHECKF(strncmp(r->body, "replaced ", 9) == 0 && semi &&
             sscanf(semi, "; %lld stored stacks renamed", &renamed) == 1 && renamed >= 1,
         "%s", r->body);
  CHECK(top_named(&c, true));
  check_event_frames(&c);
  /* The stripped copy back: frames it cannot name keep the names they
     have; then perf-symbols --replace sends the whole file again. */
  CHECK_EQ_INT(post_symbols(&c, a.id, true, bytes_stripped, n_stripped, r), 200);
  CHECKF(strncmp(r->body, "replaced ", 9) == 0, "%s", r->body);
  CHECK(top_named(&c, true));
  char line[512];
  snprintf(cmd, sizeof cmd, "'%s' --url %s --key %s --replace '%s' 2>&1 | grep -a '^uploaded'",
           PERF_SYMBOLS_PATH, c.url, GOOD_KEY, a.bin);
  command_line(cmd, line, sizeof line);
  CHECKF(strstr(line, "replaced ") && strstr(line, a.id), "%s", line);
  CHECK(top_named(&c, true));
  /* The same bytes again, replace or not: nothing to do. */
  CHECK_EQ_INT(post_symbols(&c, a.id, true, bytes_full, n_full, r), 200);
  CHECK(strncmp(r->body, "already stored", 14) == 0);
  CHECK_EQ_INT(post_symbols(&c, a.id, false, bytes_full, n_full, r), 200);
  char path[96];
  snprintf(path, sizeof path, "/v1/symbols/%s", a.id);
  CHECK_EQ_INT(get_key(&c, GOOD_KEY, path, r), 200);
  free(bytes_stripped);
  free(bytes_full);
  free(r);
  collector_stop_healthy(&c);
}

/* ---- mutated files -------------------------------------------------------- */

typedef struct span_s {
  size_t off, len;
} span_t;

/* The file ranges of the sections a symbolizer reads text and tables from:
   the DWARF and the symbol tables. */
static size_t debug_spans(const char *path, span_t *out, size_t max) {
  elf_version(EV_CURRENT);
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0);
  Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
  CHECK(elf != NULL);
  size_t shstrndx, n = 0;
  CHECK(elf_getshdrstrndx(elf, &shstrndx) == 0);
  for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn)) != NULL && n < max;) {
    GElf_Shdr sh;
    CHECK(gelf_getshdr(scn, &sh) != NULL);
    const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (name && sh.sh_type != SHT_NOBITS && sh.sh_size &&
        (strncmp(name, ".debug_", 7) == 0 || strcmp(name, ".symtab") == 0 ||
         strcmp(name, ".strtab") == 0))
      out[n++] = (span_t){(size_t)sh.sh_offset, (size_t)sh.sh_size};
  }
  elf_end(elf);
  close(fd);
  return n;
}

static uint64_t g_rand = 0x9e3779b97f4a7c15u;

static uint64_t next_rand(void) { /* xorshift64: the same files every run */
  g_rand ^= g_rand << 13;
  g_rand ^= g_rand >> 7;
  g_rand ^= g_rand << 17;
  return g_rand;
}

/* A copy of the binary's bytes with 1..16 bytes of its debug sections
   changed (often to bytes that are not UTF-8) and its build-id's last
   four bytes made index's. */
static void mutate(const char *orig, size_t len, const span_t *spans, size_t n_spans,
                   const uint8_t *id_at, unsigned index, char *out) {
  memcpy(out, orig, len);
  static const uint8_t BYTES[] = {0xe9, 0xff, 0x00, 0xc3, 0x80, 0x2f};
  int changes = 1 + (int)(next_rand() % 16);
  for (int k = 0; k < changes; k++) {
    const span_t *s = &spans[next_rand() % n_spans];
    size_t at = s->off + next_rand() % s->len;
    uint64_t r = next_rand();
    out[at] = (char)(r % 3 ? BYTES[(r >> 8) % sizeof BYTES] : (uint8_t)(r >> 16));
  }
  size_t id_off = (size_t)(id_at - (const uint8_t *)orig);
  uint8_t tail[4] = {(uint8_t)(index >> 24), (uint8_t)(index >> 16), (uint8_t)(index >> 8),
                     (uint8_t)index};
  memcpy(out + id_off + 16, tail, 4);
}

static void hex20(const uint8_t *b, char out[41]) {
  for (int i = 0; i < 20; i++)
    sprintf(out + 2 * i, "%02x", b[i]);
}

/* nm's address of a function of the binary. */
static uint64_t function_address(const app_t *a, const char *name) {
  char cmd[600], line[64];
  snprintf(cmd, sizeof cmd, "nm '%s' | grep -a ' [tT] %s$' | cut -d' ' -f1", a->bin, name);
  command_line(cmd, line, sizeof line);
  return strtoull(line, NULL, 16);
}

/* One hang whose stack is the chain (and the spin) in the module of
   build-id id (20 bytes), the device naming nothing. */
static long post_hang_in(const collector_t *c, const uint8_t id[20], const uint64_t pcs[4],
                         unsigned seed, reply_t *r) {
  uint8_t batch_id[16] = {0};
  memcpy(batch_id, &seed, sizeof seed);
  batch_id[15] = 0xd7;
  batch_one_event_t o;
  batch_one_event_init(&o, batch_id, "mutated_app", "/opt/caf\xc3\xa9/latin1_app", "unused");
  uint8_t id_copy[20];
  memcpy(id_copy, id, 20);
  o.mod.build_id = (ProtobufCBinaryData){20, id_copy};
  o.mod.executable = true;
  Perf__V1__Frame fr[4], *frs[4];
  uint32_t ids[4];
  for (int i = 0; i < 4; i++) {
    perf__v1__frame__init(&fr[i]);
    fr[i].module = 1;
    fr[i].address = pcs[i];
    frs[i] = &fr[i];
    ids[i] = (uint32_t)i + 1;
  }
  o.b.n_frames = 4, o.b.frames = frs;
  o.st.n_frames = 4, o.st.frames = ids;
  o.sc.samples = 3, o.sc.tid = 77;
  o.ev.kind = PERF__V1__EVENT_KIND__EVENT_KIND_HANG;
  o.ev.start_unix_nanos = (uint64_t)(now_s() * 1e9) - 2000000000u;
  o.ev.duration_nanos = 400000000u;
  o.ev.tid = 77;
  return batch_send(c, &o.b, batch_id, r);
}

static void case_mutated_debug_files(void) {
  app_t a;
  app_build(&a);
  size_t len;
  char *orig = read_all(a.bin, &len), *copy = malloc(len);
  CHECK(copy != NULL);
  uint8_t id[20];
  for (int i = 0; i < 20; i++)
    CHECK(sscanf(a.id + 2 * i, "%2hhx", &id[i]) == 1);
  const uint8_t *id_at = memmem(orig, len, id, sizeof id);
  CHECK(id_at != NULL);
  span_t spans[64];
  size_t n_spans = debug_spans(a.bin, spans, ARRAY_LEN(spans));
  CHECK(n_spans >= 4);
  /* Return addresses a little into each function (looked up at - 1). */
  uint64_t pcs[4] = {function_address(&a, "caf\xe9_spin") + 4,
                     function_address(&a, "burn_in_latin1_dir") + 8,
                     function_address(&a, "handle_job") + 8, function_address(&a, "main") + 8};
  collector_t c;
  static const char *const fast[] = {"--rate-limit", "100000", "--rate-burst", "100000", NULL};
  collector_start(&c, fast);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  int stored = 0, refused = 0;
  double end = now_s() + MUTATED_DEADLINE_S;
  for (unsigned i = 1; i <= MUTATED; i++) {
    CHECKF(now_s() < end, "%u of %d files in %.0f s", i - 1, MUTATED, MUTATED_DEADLINE_S);
    mutate(orig, len, spans, n_spans, id_at, i, copy);
    uint8_t new_id[20];
    memcpy(new_id, copy + (id_at - (const uint8_t *)orig), 20);
    char hex[41];
    hex20(new_id, hex);
    long status = post_symbols(&c, hex, false, copy, len, r);
    CHECKF(status == 201 || status == 400, "file %u: upload %ld %s", i, status, r->body);
    if (status == 400) {
      refused++;
      CHECKF(strstr(r->body, "ELF") || strstr(r->body, "build-id"), "file %u: 400 %s", i, r->body);
      continue;
    }
    stored++;
    status = post_hang_in(&c, new_id, pcs, i, r);
    CHECKF(status == 200, "file %u (%s): batch %ld %s", i, hex, status, r->body);
    /* Sent again (a retry): the same answer, never a 503 that repeats. */
    CHECKF(post_hang_in(&c, new_id, pcs, i, r) == 200, "file %u: retry %s", i, r->body);
  }
  fprintf(stderr, "%d mutated files stored, %d refused\n", stored, refused);
  CHECK(stored >= MUTATED / 2);
  json_t *j = get_ok(&c, "/api/v1/events?app=mutated_app&limit=1000");
  CHECK_EQ_INT(json_array_size(json_object_get(j, "events")), stored);
  json_decref(j);
  check_nothing_refused(&c);
  free(r);
  free(orig);
  free(copy);
  collector_stop_healthy(&c);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE(latin1_named_at_ingest),
      TEST_CASE(latin1_renamed_later),
      TEST_CASE(replace),
      TEST_CASE(mutated_debug_files),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
