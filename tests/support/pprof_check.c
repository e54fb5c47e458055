/*
 * pprof_check.c - a pprof export read back two ways (see pprof_check.h):
 * decoded here and checked against the format's rules, and by `go tool
 * pprof` as a child process (collector_rig's spawn) whose output the
 * tests read.
 */
#include "pprof_check.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "collector_rig.h"

#define MAX_PROFILE_BYTES (64u << 20)

/* The gzip member in data, inflated (malloc'ed); *n its size. */
static uint8_t *gunzip(const void *data, size_t len, size_t *n) {
  z_stream z = {0};
  CHECK(inflateInit2(&z, 15 + 16) == Z_OK); /* gzip only */
  size_t cap = 65536;
  uint8_t *out = malloc(cap);
  CHECK(out != NULL);
  z.next_in = (Bytef *)data;
  z.avail_in = (uInt)len;
  int rc;
  do {
    if (z.total_out == cap) {
      CHECK(cap < MAX_PROFILE_BYTES);
      cap *= 2;
      CHECK((out = realloc(out, cap)) != NULL);
    }
    z.next_out = out + z.total_out;
    z.avail_out = (uInt)(cap - z.total_out);
    rc = inflate(&z, Z_NO_FLUSH);
  } while (rc == Z_OK);
  CHECKF(rc == Z_STREAM_END, "not one complete gzip member: zlib %d", rc);
  CHECKF(z.avail_in == 0, "%u bytes after the gzip member", z.avail_in);
  *n = z.total_out;
  inflateEnd(&z);
  return out;
}

const char *pprof_string(const pprof_profile_t *p, int64_t i) {
  CHECKF(i >= 0 && (size_t)i < p->n_string_table, "string index %lld of %zu", (long long)i,
         p->n_string_table);
  return p->string_table[i];
}

/* ids[0..n) are non-zero and unique. */
static void check_ids(const uint64_t *ids, size_t n, const char *what) {
  for (size_t i = 0; i < n; i++) {
    CHECKF(ids[i] != 0, "%s %zu has id 0", what, i);
    for (size_t k = 0; k < i; k++)
      CHECKF(ids[k] != ids[i], "two %ss with id %llu", what, (unsigned long long)ids[i]);
  }
}

static bool has_id(const uint64_t *ids, size_t n, uint64_t id) {
  for (size_t i = 0; i < n; i++)
    if (ids[i] == id) return true;
  return false;
}

pprof_profile_t *pprof_decode_checked(const void *data, size_t len) {
  size_t n;
  uint8_t *raw = gunzip(data, len, &n);
  pprof_profile_t *p = perftools__profiles__profile__unpack(NULL, n, raw);
  free(raw);
  CHECKF(p != NULL, "not a perftools.profiles.Profile");
  CHECK(p->n_string_table >= 1);
  CHECKF(strcmp(p->string_table[0], "") == 0, "string_table[0] = \"%s\"", p->string_table[0]);
  size_t most = p->n_mapping + p->n_location + p->n_function + 1;
  uint64_t *ids = calloc(most, sizeof *ids);
  CHECK(ids != NULL);
  uint64_t *mappings = ids, *functions = ids + p->n_mapping, *locations = functions + p->n_function;
  for (size_t i = 0; i < p->n_mapping; i++) {
    mappings[i] = p->mapping[i]->id;
    pprof_string(p, p->mapping[i]->filename);
    pprof_string(p, p->mapping[i]->build_id);
  }
  for (size_t i = 0; i < p->n_function; i++) {
    functions[i] = p->function[i]->id;
    CHECK(*pprof_string(p, p->function[i]->name) != '\0');
    pprof_string(p, p->function[i]->system_name);
    pprof_string(p, p->function[i]->filename);
  }
  for (size_t i = 0; i < p->n_location; i++)
    locations[i] = p->location[i]->id;
  check_ids(mappings, p->n_mapping, "mapping");
  check_ids(functions, p->n_function, "function");
  check_ids(locations, p->n_location, "location");
  for (size_t i = 0; i < p->n_location; i++) {
    const Perftools__Profiles__Location *loc = p->location[i];
    CHECKF(loc->mapping_id == 0 || has_id(mappings, p->n_mapping, loc->mapping_id),
           "location %llu: no mapping %llu", (unsigned long long)loc->id,
           (unsigned long long)loc->mapping_id);
    CHECKF(loc->n_line >= 1, "location %llu without a function", (unsigned long long)loc->id);
    for (size_t k = 0; k < loc->n_line; k++)
      CHECKF(has_id(functions, p->n_function, loc->line[k]->function_id),
             "location %llu: no function %llu", (unsigned long long)loc->id,
             (unsigned long long)loc->line[k]->function_id);
  }
  for (size_t i = 0; i < p->n_sample_type; i++) {
    pprof_string(p, p->sample_type[i]->type);
    pprof_string(p, p->sample_type[i]->unit);
  }
  for (size_t i = 0; i < p->n_sample; i++) {
    const Perftools__Profiles__Sample *s = p->sample[i];
    CHECK_EQ_INT(s->n_value, p->n_sample_type);
    CHECK(s->n_location_id >= 1);
    for (size_t k = 0; k < s->n_location_id; k++)
      CHECKF(has_id(locations, p->n_location, s->location_id[k]), "sample %zu: no location %llu", i,
             (unsigned long long)s->location_id[k]);
  }
  for (size_t i = 0; i < p->n_comment; i++)
    pprof_string(p, p->comment[i]);
  pprof_string(p, p->default_sample_type);
  free(ids);
  return p;
}

int64_t pprof_value_total(const pprof_profile_t *p, size_t column) {
  int64_t total = 0;
  for (size_t i = 0; i < p->n_sample; i++) {
    CHECK(column < p->sample[i]->n_value);
    total += p->sample[i]->value[column];
  }
  return total;
}

bool pprof_has_function(const pprof_profile_t *p, const char *name) {
  for (size_t i = 0; i < p->n_function; i++)
    if (strcmp(pprof_string(p, p->function[i]->name), name) == 0) return true;
  return false;
}

/* ---- go tool pprof ------------------------------------------------------- */

static char *read_text(const char *path) {
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  size_t cap = 1 << 20;
  char *text = malloc(cap);
  CHECK(text != NULL);
  size_t n = fread(text, 1, cap - 1, f);
  text[n] = '\0';
  fclose(f);
  return text;
}

char *pprof_tool(const char *dir, const char *const *args, const char *file) {
  char home[256], cache[256], out[256];
  snprintf(home, sizeof home, "%s/go-home", dir);
  snprintf(cache, sizeof cache, "%s/go-home/cache", dir);
  snprintf(out, sizeof out, "%s/pprof.out", dir);
  /* Offline and inside dir: nothing is fetched, nothing written elsewhere. */
  CHECK(setenv("HOME", home, 1) == 0 && setenv("GOCACHE", cache, 1) == 0);
  CHECK(setenv("PPROF_TMPDIR", home, 1) == 0 && setenv("GOPROXY", "off", 1) == 0);
  CHECK(setenv("GOTOOLCHAIN", "local", 1) == 0 && setenv("GOFLAGS", "", 1) == 0);
  CHECKF(access(PERF_GO_PATH, X_OK) == 0, "no go at \"%s\" (Debian: golang-go)", PERF_GO_PATH);
  char *argv[MAX_ARGS] = {PERF_GO_PATH, "tool", "pprof"};
  size_t n = 3;
  for (size_t i = 0; args[i] && n < MAX_ARGS - 2; i++)
    argv[n++] = (char *)args[i];
  argv[n++] = (char *)file;
  argv[n] = NULL;
  pid_t pid = spawn(argv, out);
  double end = now_s() + 90; /* generous: a loaded machine */
  int st = 0;
  pid_t done;
  while ((done = waitpid(pid, &st, WNOHANG)) == 0 && now_s() < end)
    usleep(20000);
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    CHECKF(false, "go tool pprof still running after 90 s");
  }
  char *text = read_text(out);
  CHECKF(done == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "go tool pprof status 0x%x:\n%s", st,
         text);
  return text;
}

long long pprof_top_total(const char *output) {
  const char *line = strstr(output, "Showing nodes accounting for ");
  if (!line) return -1;
  const char *end = strchr(line, '\n');
  const char *of = strstr(line, "% of ");
  if (!of || (end && of > end)) return -1;
  char *after;
  long long total = strtoll(of + 5, &after, 10);
  return strncmp(after, " total", 6) == 0 ? total : -1;
}

bool pprof_top_lists(const char *output, const char *name) {
  size_t n = strlen(name);
  for (const char *line = output; line && *line;) {
    const char *nl = strchr(line, '\n');
    size_t len = nl ? (size_t)(nl - line) : strlen(line);
    if (len > n && line[len - n - 1] == ' ' && strncmp(line + len - n, name, n) == 0) return true;
    line = nl ? nl + 1 : NULL;
  }
  return false;
}
