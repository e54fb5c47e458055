/*
 * test_collector_scopes.c - who may do what on perf-collector (the real
 * binary, a child process on 127.0.0.1): every route with a key of every
 * scope (200/201, 403 naming the scope, 401), a bare key keeping every
 * scope, /metrics behind read unless --open-metrics; open mode's (no keys
 * file) Host, Origin, Sec-Fetch-Site and Content-Type checks; a build-id's
 * debug file immutable (same bytes 200, different bytes 409, the stored
 * file unchanged) and the symbols directory's quota (507, nothing left
 * behind). The ELF files uploaded are this test program and a library it
 * has loaded, each with its own GNU build-id.
 * Each case runs in its own process: `test_collector_scopes <case>`.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "perf/v1/perf.pb-c.h"

/* One key per scope, a combination, and a bare key (every scope). */
static const char KEYS_TEXT[] = "# scopes\n"
                                "bare-key\n"
                                "ingest-key ingest\n"
                                "read-key read\n"
                                "symbols-key symbols\n"
                                "admin-key admin\n"
                                "ci-key ingest,symbols\n";

/* ---- a valid batch ----------------------------------------------------------- */

/* One hang event with one 3-frame stack; seed makes the batch id. */
static void make_batch(payload_t *p, unsigned seed) {
  uint8_t id[16];
  for (int i = 0; i < 16; i++)
    id[i] = (uint8_t)(seed * 131 + (unsigned)i * 7 + (unsigned)getpid());
  batch_one_event_t o;
  batch_one_event_init(&o, id, "scopes", "/usr/bin/scopes", "scoped_function");
  Perf__V1__Frame frame = PERF__V1__FRAME__INIT, *frs[] = {&frame};
  frame.module = 1, frame.address = 0x1000, frame.function = 1;
  o.b.n_frames = 1, o.b.frames = frs;
  uint32_t ids[] = {1, 1, 1};
  o.st.n_frames = 3, o.st.frames = ids;
  o.sc.tid = 9, o.sc.samples = 5;
  o.ev.kind = PERF__V1__EVENT_KIND__EVENT_KIND_HANG;
  o.ev.start_unix_nanos = 1700000000000000000 + (int64_t)seed * 1000000;
  o.ev.duration_nanos = 300000000;
  o.ev.tid = 9;
  o.ev.reason = "scoped";
  payload_pack(p, &o.b, 3);
}

/* ---- requests ---------------------------------------------------------------- */

/* The Authorization header for key ("" : none; "Basic ..." as is). */
static const char *auth_header(const char *key, char *buf, size_t size) {
  if (!*key) return NULL;
  snprintf(buf, size,
           strncmp(key, "Basic ", 6) == 0 ? "Authorization: %s" : "Authorization: Bearer %s", key);
  return buf;
}

/* make_batch(seed) sent with key ("": no Authorization). */
static long post_seeded(const collector_t *c, const char *key, unsigned seed, reply_t *r) {
  payload_t p;
  make_batch(&p, seed);
  long st = payload_post(c, *key ? key : NULL, &p, r);
  free(p.data);
  return st;
}

/* POST body to /v1/symbols/<id> with key and content type (NULL: none)
   and one more header (NULL: none). */
static long post_symbols(const collector_t *c, const char *id, const char *key, const char *type,
                         const char *extra, const void *body, size_t len, bool chunked,
                         reply_t *r) {
  char path[160], auth[128], type_line[128];
  snprintf(path, sizeof path, "/v1/symbols/%s", id);
  snprintf(type_line, sizeof type_line, "Content-Type: %s", type ? type : "");
  const char *headers[4] = {NULL};
  size_t n = 0;
  if (type) headers[n++] = type_line;
  if (extra) headers[n++] = extra;
  headers[n++] = auth_header(key, auth, sizeof auth);
  return request(c, "POST", path, headers, body, len, chunked, r);
}

static long get_with(const collector_t *c, const char *key, const char *path, const char *extra,
                     reply_t *r) {
  char auth[128];
  const char *a = auth_header(key, auth, sizeof auth);
  const char *headers[] = {extra ? extra : a, extra ? a : NULL, NULL};
  return request(c, "GET", path, headers, NULL, 0, false, r);
}

/* ---- ELF files with build-ids -------------------------------------------------- */

typedef struct elf_file_s {
  char path[512];
  char id[81];
  uint8_t *bytes;
  size_t len;
} elf_file_t;

typedef struct find_s {
  int skip; /* loaded modules with a build-id to pass over */
  elf_file_t *out;
  bool found;
} find_t;

static bool note_build_id(const struct dl_phdr_info *info, char hex[81]) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
      const uint8_t *desc = (const uint8_t *)p + sizeof *nh + ((nh->n_namesz + 3) & ~3u);
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
          memcmp(p + sizeof *nh, "GNU", 4) == 0 && nh->n_descsz <= 40) {
        for (unsigned k = 0; k < nh->n_descsz; k++)
          sprintf(hex + 2 * k, "%02x", desc[k]);
        return nh->n_descsz > 0;
      }
      p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
    }
  }
  return false;
}

static int on_module(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  find_t *f = arg;
  const char *name = info->dlpi_name;
  bool main_program = !name || !*name;
  if (!main_program && name[0] != '/') return 0; /* the vDSO */
  char id[81];
  if (!note_build_id(info, id) || f->skip-- > 0) return 0;
  if (main_program) {
    ssize_t n = readlink("/proc/self/exe", f->out->path, sizeof f->out->path - 1);
    CHECK(n > 0);
    f->out->path[n] = '\0';
  } else {
    snprintf(f->out->path, sizeof f->out->path, "%s", name);
  }
  memcpy(f->out->id, id, sizeof id);
  f->found = true;
  return 1;
}

static uint8_t *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  CHECKF(f != NULL, "%s: %s", path, strerror(errno));
  CHECK(fseek(f, 0, SEEK_END) == 0);
  long size = ftell(f);
  CHECK(size > 0 && fseek(f, 0, SEEK_SET) == 0);
  uint8_t *data = malloc((size_t)size + 1);
  CHECK(data != NULL && fread(data, 1, (size_t)size, f) == (size_t)size);
  fclose(f);
  *len = (size_t)size;
  return data;
}

/* The index-th loaded ELF file with a build-id (0: this program), read. */
static void loaded_elf(int index, elf_file_t *out) {
  find_t f = {index, out, false};
  dl_iterate_phdr(on_module, &f);
  CHECKF(f.found, "no loaded module %d with a build-id", index);
  out->bytes = read_file(out->path, &out->len);
}

static void stored_path(const collector_t *c, const char *id, char *out, size_t size) {
  snprintf(out, size, "%s/collector.db.symbols/.build-id/%.2s/%s.debug", c->dir, id, id + 2);
}

static bool stored_bytes_are(const collector_t *c, const elf_file_t *e) {
  char path[600];
  stored_path(c, e->id, path, sizeof path);
  struct stat st;
  if (stat(path, &st) != 0) return false;
  size_t len;
  uint8_t *bytes = read_file(path, &len);
  bool same = len == e->len && memcmp(bytes, e->bytes, len) == 0;
  free(bytes);
  return same;
}

static bool stored(const collector_t *c, const char *id) {
  char path[600];
  stored_path(c, id, path, sizeof path);
  struct stat st;
  return stat(path, &st) == 0;
}

/* Everything under the symbols directory: files (recursively), and how
   many of them are temporary uploads (.incoming-*). */
static int count_files(const char *dir, int *incoming) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(path, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      n += count_files(path, incoming);
    } else {
      n++;
      *incoming += strncmp(e->d_name, ".incoming-", 10) == 0;
    }
  }
  closedir(d);
  return n;
}

/* ---- key scopes ---------------------------------------------------------------- */

typedef struct route_s {
  const char *what;
  unsigned scope; /* bit: 1 ingest, 2 read, 4 symbols, 8 admin; 0: none needed */
} route_t;

enum { INGEST = 1, READ = 2, SYMBOLS = 4, ADMIN = 8 };

typedef struct scoped_key_s {
  const char *key;
  unsigned scopes; /* 0: unknown (401) */
} scoped_key_t;

static const scoped_key_t KEYS[] = {
    {"bare-key", INGEST | READ | SYMBOLS | ADMIN},
    {"ingest-key", INGEST},
    {"read-key", READ},
    {"symbols-key", SYMBOLS},
    {"admin-key", INGEST | READ | SYMBOLS | ADMIN},
    {"ci-key", INGEST | SYMBOLS},
    {"", 0},
    {"unknown-key", 0},
    {"Basic YmFyZS1rZXk6", 0},
};

static const char *scope_name(unsigned scope) {
  return scope == INGEST ? "ingest" : scope == READ ? "read" : scope == ADMIN ? "admin" : "symbols";
}

static const char *const READ_ROUTES[] = {
    "/api/v1/top-stacks?kind=hang",
    "/api/v1/flame?kind=hang",
    "/api/v1/events",
    "/api/v1/events/1",
    "/api/v1/export/folded?kind=hang",
    "/api/v1/export/pprof?kind=hang",
    "/api/v1/drops",
    "/api/v1/loops",
    "/api/v1/timeseries?kind=hang&bucket=hour",
    "/api/v1/alerts/deliveries",
    "/metrics",
};
#define ADMIN_ROUTE "/api/v1/alerts/rules" /* the webhooks' URLs: admin only */

/* One request to route i (0 batches, 1 symbols, 2.. READ_ROUTES, then
   ADMIN_ROUTE, last /healthz) with key. */
static long call_route(const collector_t *c, size_t i, const char *key, const elf_file_t *elf,
                       unsigned seed, reply_t *r) {
  if (i == 0) return post_seeded(c, key, seed, r);
  if (i == 1)
    return post_symbols(c, elf->id, key, "application/octet-stream", NULL, elf->bytes, elf->len,
                        false, r);
  if (i - 2 < ARRAY_LEN(READ_ROUTES)) return get_with(c, key, READ_ROUTES[i - 2], NULL, r);
  if (i - 2 == ARRAY_LEN(READ_ROUTES)) return get_with(c, key, ADMIN_ROUTE, NULL, r);
  return get_with(c, key, "/healthz", NULL, r);
}

static unsigned route_scope(size_t i) {
  return i == 0                            ? INGEST
         : i == 1                          ? SYMBOLS
         : i - 2 < ARRAY_LEN(READ_ROUTES)  ? READ
         : i - 2 == ARRAY_LEN(READ_ROUTES) ? ADMIN
                                           : 0;
}

static const char *route_name(size_t i) {
  return i == 0                            ? "POST /v1/batches"
         : i == 1                          ? "POST /v1/symbols"
         : i - 2 < ARRAY_LEN(READ_ROUTES)  ? READ_ROUTES[i - 2]
         : i - 2 == ARRAY_LEN(READ_ROUTES) ? ADMIN_ROUTE
                                           : "/healthz";
}

/* Every route with every key: the scope's holder 200 (a new debug file
   201, then 200: the same bytes), a known key without it 403 naming the
   scope, no key / an unknown key / not a bearer token 401; /healthz needs
   none. */
static void case_key_scopes(void) {
  collector_t c;
  collector_start_keys(&c, KEYS_TEXT, NULL);
  elf_file_t elf;
  loaded_elf(0, &elf);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(post_seeded(&c, "ingest-key", 1, r), 200); /* event 1 for /api/v1/events/1 */
  bool symbols_stored = false;
  unsigned seed = 10;
  size_t routes = 2 + ARRAY_LEN(READ_ROUTES) + 2;
  for (size_t i = 0; i < routes; i++) {
    unsigned need = route_scope(i);
    for (size_t k = 0; k < ARRAY_LEN(KEYS); k++) {
      long expect = need == 0                   ? 200
                    : KEYS[k].scopes == 0       ? 401
                    : !(KEYS[k].scopes & need)  ? 403
                    : i == 1 && !symbols_stored ? 201
                                                : 200;
      long st = call_route(&c, i, KEYS[k].key, &elf, seed++, r);
      CHECKF(st == expect, "%s with '%s': %ld, expected %ld (%s)", route_name(i), KEYS[k].key, st,
             expect, r->body);
      if (expect == 403) {
        char says[64];
        snprintf(says, sizeof says, "lacks the %s scope", scope_name(need));
        CHECKF(strstr(r->body, says) != NULL, "%s with %s: %s", route_name(i), KEYS[k].key,
               r->body);
      }
      if (expect == 401) CHECKF(strstr(r->body, "API key") != NULL, "%s", r->body);
      if (i == 1 && expect == 201) symbols_stored = true;
    }
  }
  CHECK(symbols_stored && stored_bytes_are(&c, &elf));
  /* The dashboard's own files need no key (its API calls do). */
  CHECK_EQ_INT(get_with(&c, "", "/", NULL, r), 302);
  CHECK_EQ_INT(get_with(&c, "", "/dashboard/", NULL, r), 200);
  CHECK_EQ_INT(get_with(&c, "", "/dashboard/app.js", NULL, r), 200);
  CHECK_EQ_INT(get_with(&c, "ingest-key", "/dashboard/", NULL, r), 200);
  /* The batches accepted: one per key holding ingest, plus the first. */
  json_t *events = NULL;
  CHECK_EQ_INT(get_with(&c, "read-key", "/api/v1/events?limit=1000", NULL, r), 200);
  json_error_t err;
  CHECK((events = json_loads(r->body, 0, &err)) != NULL);
  CHECK_EQ_INT(json_array_size(json_object_get(events, "events")), 1 + 4);
  json_decref(events);
  free(elf.bytes);
  free(r);
  collector_stop_healthy(&c);
}

/* /metrics: read scope (401 without a key, 403 with ingest only); with
   --open-metrics no key is needed. */
static void case_metrics_scope(void) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  collector_t c;
  collector_start_keys(&c, KEYS_TEXT, NULL);
  CHECK_EQ_INT(get_with(&c, "", "/metrics", NULL, r), 401);
  CHECK_EQ_INT(get_with(&c, "ingest-key", "/metrics", NULL, r), 403);
  CHECKF(strstr(r->body, "lacks the read scope") != NULL, "%s", r->body);
  CHECK_EQ_INT(get_with(&c, "read-key", "/metrics", NULL, r), 200);
  CHECK(strstr(r->body, "perf_collector_batches_accepted_total") != NULL);
  collector_stop_healthy(&c);
  collector_start_keys(&c, KEYS_TEXT, (const char *[]){"--open-metrics", NULL});
  CHECK_EQ_INT(get_with(&c, "", "/metrics", NULL, r), 200);
  CHECK(strstr(r->body, "perf_collector_batches_accepted_total") != NULL);
  CHECK_EQ_INT(get_with(&c, "", "/api/v1/events", NULL, r), 401); /* only /metrics is open */
  collector_stop_healthy(&c);
  free(r);
}

/* ---- open mode ------------------------------------------------------------------- */

/* No keys file (loopback only): any key or none, but the Host must name
   this collector (DNS rebinding), a foreign Origin or Sec-Fetch-Site:
   cross-site is refused, and a symbols upload in a type a cross-site page
   can send (text/plain) is refused with nothing stored. */
static void case_open_mode(void) {
  collector_t c;
  collector_start_keys(&c, NULL, NULL);
  elf_file_t elf;
  loaded_elf(0, &elf);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  char ours[96], other_port[96], origin_ours[128], localhost[96];
  snprintf(ours, sizeof ours, "Host: 127.0.0.1:%u", (unsigned)c.port);
  snprintf(localhost, sizeof localhost, "Host: localhost:%u", (unsigned)c.port);
  snprintf(other_port, sizeof other_port, "Host: 127.0.0.1:%u", (unsigned)(c.port ^ 1));
  snprintf(origin_ours, sizeof origin_ours, "Origin: http://127.0.0.1:%u", (unsigned)c.port);
  static const char *const PATHS[] = {"/healthz", "/api/v1/events", "/metrics"};
  for (size_t i = 0; i < ARRAY_LEN(PATHS); i++) {
    const char *p = PATHS[i];
    CHECKF(get_with(&c, "", p, NULL, r) == 200, "%s: %s", p, r->body);
    CHECK_EQ_INT(get_with(&c, "", p, ours, r), 200);
    CHECK_EQ_INT(get_with(&c, "", p, localhost, r), 200);
    CHECK_EQ_INT(get_with(&c, "any-key", p, NULL, r), 200);
    CHECK_EQ_INT(get_with(&c, "", p, "Host: evil.example", r), 403);
    CHECKF(strstr(r->body, "Host") != NULL, "%s", r->body);
    CHECK_EQ_INT(get_with(&c, "", p, "Host: evil.example:80", r), 403);
    CHECK_EQ_INT(get_with(&c, "", p, other_port, r), 403);
    CHECK_EQ_INT(get_with(&c, "", p, "Origin: http://evil.example", r), 403);
    CHECKF(strstr(r->body, "Origin") != NULL, "%s", r->body);
    CHECK_EQ_INT(get_with(&c, "", p, "Origin: null", r), 403);
    CHECK_EQ_INT(get_with(&c, "", p, origin_ours, r), 200);
    CHECK_EQ_INT(get_with(&c, "", p, "Sec-Fetch-Site: cross-site", r), 403);
    CHECKF(strstr(r->body, "cross-site") != NULL, "%s", r->body);
    CHECK_EQ_INT(get_with(&c, "", p, "Sec-Fetch-Site: same-origin", r), 200);
  }
  /* Writes: a cross-site batch or upload is refused, nothing stored. */
  CHECK_EQ_INT(post_symbols(&c, elf.id, "", "text/plain", NULL, elf.bytes, elf.len, false, r), 403);
  CHECKF(strstr(r->body, "application/octet-stream") != NULL, "%s", r->body);
  CHECK_EQ_INT(post_symbols(&c, elf.id, "", NULL, NULL, elf.bytes, elf.len, false, r), 403);
  CHECK_EQ_INT(post_symbols(&c, elf.id, "", "application/x-www-form-urlencoded", NULL, elf.bytes,
                            elf.len, false, r),
               403);
  CHECK_EQ_INT(post_symbols(&c, elf.id, "", "multipart/form-data; boundary=x", NULL, elf.bytes,
                            elf.len, false, r),
               403);
  CHECK_EQ_INT(post_symbols(&c, elf.id, "", "application/octet-stream",
                            "Origin: http://evil.example", elf.bytes, elf.len, false, r),
               403);
  CHECK_EQ_INT(post_symbols(&c, elf.id, "", "application/octet-stream",
                            "Sec-Fetch-Site: cross-site", elf.bytes, elf.len, false, r),
               403);
  CHECK_EQ_INT(post_symbols(&c, elf.id, "", "application/octet-stream", "Host: evil.example",
                            elf.bytes, elf.len, false, r),
               403);
  CHECK(!stored(&c, elf.id));
  char dir[300];
  snprintf(dir, sizeof dir, "%s/collector.db.symbols", c.dir);
  int incoming = 0;
  CHECK_EQ_INT(count_files(dir, &incoming), 0);
  /* Our own tool's upload (octet-stream, no Origin) is stored. */
  CHECKF(post_symbols(&c, elf.id, "", "application/octet-stream", NULL, elf.bytes, elf.len, false,
                      r) == 201,
         "%s", r->body);
  CHECK(stored_bytes_are(&c, &elf));
  CHECK_EQ_INT(post_seeded(&c, "", 1, r), 200);
  char origin_batch[160];
  snprintf(origin_batch, sizeof origin_batch, "Origin: http://evil.example");
  payload_t p;
  make_batch(&p, 2);
  char id[64];
  snprintf(id, sizeof id, "X-Perf-Batch-Id: %s", p.id_hex);
  const char *headers[] = {"Content-Type: application/x-protobuf", "Content-Encoding: zstd", id,
                           origin_batch, NULL};
  CHECK_EQ_INT(request(&c, "POST", "/v1/batches", headers, p.data, p.len, false, r), 403);
  free(p.data);
  CHECK_EQ_INT(get_with(&c, "", "/api/v1/events", NULL, r), 200);
  json_error_t err;
  json_t *events = json_loads(r->body, 0, &err);
  CHECK(events != NULL);
  CHECK_EQ_INT(json_array_size(json_object_get(events, "events")), 1); /* not the refused one */
  json_decref(events);
  free(elf.bytes);
  free(r);
  collector_stop_healthy(&c);
}

/* ---- symbols ------------------------------------------------------------------------ */

/* A stored debug file never changes: the same bytes again 200, other bytes
   for the same build-id (one byte more) 409 with the stored file as it
   was, also chunked; no temporary file left. */
static void case_symbols_immutable(void) {
  collector_t c;
  collector_start_keys(&c, KEYS_TEXT, NULL);
  elf_file_t elf;
  loaded_elf(0, &elf);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  const char *T = "application/octet-stream";
  CHECKF(post_symbols(&c, elf.id, "symbols-key", T, NULL, elf.bytes, elf.len, false, r) == 201,
         "%s", r->body);
  CHECK_EQ_INT(post_symbols(&c, elf.id, "symbols-key", T, NULL, elf.bytes, elf.len, false, r), 200);
  CHECK_EQ_INT(post_symbols(&c, elf.id, "symbols-key", T, NULL, elf.bytes, elf.len, true, r), 200);
  elf.bytes[elf.len] = 0; /* read_file leaves room for one more byte */
  CHECK_EQ_INT(post_symbols(&c, elf.id, "symbols-key", T, NULL, elf.bytes, elf.len + 1, false, r),
               409);
  CHECKF(strstr(r->body, "never changes") != NULL, "%s", r->body);
  CHECK_EQ_INT(post_symbols(&c, elf.id, "symbols-key", T, NULL, elf.bytes, elf.len + 1, true, r),
               409);
  CHECK(stored_bytes_are(&c, &elf));
  char dir[300];
  snprintf(dir, sizeof dir, "%s/collector.db.symbols", c.dir);
  int incoming = 0;
  CHECK_EQ_INT(count_files(dir, &incoming), 1);
  CHECK_EQ_INT(incoming, 0);
  free(elf.bytes);
  free(r);
  collector_stop_healthy(&c);
}

/* --max-symbols-dir-bytes with room for one file: a second file (declared
   length, then chunked) gets 507 and leaves nothing behind; the first is
   untouched and re-uploading it is still 200. */
static void case_symbols_quota(void) {
  elf_file_t first, second;
  loaded_elf(0, &first);
  loaded_elf(1, &second);
  CHECK(strcmp(first.id, second.id) != 0);
  CHECK(second.len > 8192);
  char quota[32];
  snprintf(quota, sizeof quota, "%zu", first.len + 4096);
  collector_t c;
  collector_start_keys(&c, KEYS_TEXT, (const char *[]){"--max-symbols-dir-bytes", quota, NULL});
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  const char *T = "application/octet-stream";
  CHECKF(post_symbols(&c, first.id, "ci-key", T, NULL, first.bytes, first.len, false, r) == 201,
         "%s", r->body);
  CHECKF(post_symbols(&c, second.id, "ci-key", T, NULL, second.bytes, second.len, false, r) == 507,
         "%s: %s", second.path, r->body);
  CHECKF(strstr(r->body, "--max-symbols-dir-bytes") != NULL, "%s", r->body);
  CHECK_EQ_INT(post_symbols(&c, second.id, "ci-key", T, NULL, second.bytes, second.len, true, r),
               507);
  CHECK(!stored(&c, second.id));
  CHECK(stored_bytes_are(&c, &first));
  char dir[300];
  snprintf(dir, sizeof dir, "%s/collector.db.symbols", c.dir);
  int incoming = 0;
  CHECK_EQ_INT(count_files(dir, &incoming), 1);
  CHECK_EQ_INT(incoming, 0);
  CHECK_EQ_INT(post_symbols(&c, first.id, "ci-key", T, NULL, first.bytes, first.len, false, r),
               200);
  free(first.bytes);
  free(second.bytes);
  free(r);
  collector_stop_healthy(&c);
}

/* A request refused from its headers alone, whose client sends its whole
   body without waiting (no Expect: 100-continue), gets its status every
   time: the collector reads and drops the body before it answers, so
   the client is never cut off while it sends (a broken pipe, then no
   answer). Bodies of 3 MiB (more than the sockets buffer, under
   --max-body-bytes), sized and chunked with curl, and sent whole before
   reading with a plain socket (Expect: 100-continue sent and not waited
   for); 20 rounds with keys, then open mode's text/plain write. */
/* A client that sends its whole request, then reads the answer (as simple
   HTTP/1.1 clients do): headers (CRLF-separated lines), Content-Length and
   len bytes of body on a fresh connection to c. The answer's status (the
   last, after any 100 Continue), 0 when the request could not be sent
   whole (the server closed the connection) or no answer arrived. */
static long send_then_read(const collector_t *c, const char *path, const char *headers,
                           const uint8_t *body, size_t len) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK(fd >= 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(c->port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0);
  struct timeval tv = {30, 0};
  CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
  CHECK(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0);
  char head[1024];
  int n = snprintf(head, sizeof head,
                   "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n%sContent-Length: %zu\r\n"
                   "Connection: close\r\n\r\n",
                   path, (unsigned)c->port, headers, len);
  CHECK(n > 0 && (size_t)n < sizeof head);
  bool sent = send(fd, head, (size_t)n, MSG_NOSIGNAL) == n;
  for (size_t off = 0; sent && off < len;) {
    ssize_t w = send(fd, body + off, len - off, MSG_NOSIGNAL);
    if (w <= 0) sent = false; /* cut off: a client such as curl reports no answer */
    if (w <= 0) break;
    off += (size_t)w;
  }
  if (!sent) {
    close(fd);
    return 0;
  }
  char answer[256];
  size_t got = 0;
  ssize_t k;
  while (got < sizeof answer - 1 && (k = recv(fd, answer + got, sizeof answer - 1 - got, 0)) > 0)
    got += (size_t)k;
  answer[got] = '\0';
  close(fd);
  const char *final = answer;
  while (strncmp(final, "HTTP/1.1 100 ", 13) == 0 && strstr(final, "\r\n\r\n"))
    final = strstr(final, "\r\n\r\n") + 4;
  long status = 0;
  if (sscanf(final, "HTTP/1.1 %ld", &status) != 1) status = 0;
  return status;
}

#define REFUSAL_BODY (3u << 20)
#define REFUSAL_ROUNDS 20

static void case_refusals_arrive(void) {
  collector_t c;
  collector_start_keys(&c, KEYS_TEXT, NULL);
  uint8_t *body = malloc(REFUSAL_BODY);
  reply_t *r = malloc(sizeof *r);
  CHECK(body && r);
  for (size_t i = 0; i < REFUSAL_BODY; i++)
    body[i] = (uint8_t)(i * 2654435761u >> 24);
  static const char ID[] = "X-Perf-Batch-Id: 0123456789abcdef0123456789abcdef";
  static const char PB[] = "Content-Type: application/x-protobuf",
                    ZSTD[] = "Content-Encoding: zstd";
  const char *no_key[] = {"Expect:", PB, ZSTD, ID, NULL};
  const char *wrong_type[] = {
      "Expect:", "Authorization: Bearer ingest-key", "Content-Type: text/plain", ZSTD, ID, NULL};
  const char *bad_id[] = {"Expect:", "Authorization: Bearer ingest-key", PB,
                          ZSTD,      "X-Perf-Batch-Id: nothex",          NULL};
  const char *read_key[] = {"Expect:", "Authorization: Bearer read-key",
                            "Content-Type: application/octet-stream", NULL};
  char symbols_path[128];
  snprintf(symbols_path, sizeof symbols_path, "/v1/symbols/%040d", 7);
  for (int round = 0; round < REFUSAL_ROUNDS; round++) {
    bool chunked = round % 2;
    CHECKF(request(&c, "POST", "/v1/batches", no_key, body, REFUSAL_BODY, chunked, r) == 401,
           "round %d: no key: %ld", round, r->status);
    CHECKF(request(&c, "POST", "/v1/batches", wrong_type, body, REFUSAL_BODY, chunked, r) == 415,
           "round %d: text/plain: %ld", round, r->status);
    CHECKF(request(&c, "POST", "/v1/batches", bad_id, body, REFUSAL_BODY, chunked, r) == 400,
           "round %d: batch id: %ld", round, r->status);
    CHECKF(request(&c, "POST", symbols_path, read_key, body, REFUSAL_BODY, chunked, r) == 403,
           "round %d: symbols with the read key: %ld", round, r->status);
    CHECKF(request(&c, "POST", "/api/v1/events", no_key, body, REFUSAL_BODY, chunked, r) == 405,
           "round %d: POST to the API: %ld", round, r->status);
  }
  static const char RAW_NO_KEY[] =
      "Expect: 100-continue\r\nContent-Type: application/x-protobuf\r\n"
      "Content-Encoding: zstd\r\n"
      "X-Perf-Batch-Id: 0123456789abcdef0123456789abcdef\r\n";
  static const char RAW_READ_KEY[] = "Expect: 100-continue\r\nAuthorization: Bearer read-key\r\n"
                                     "Content-Type: application/octet-stream\r\n";
  for (int round = 0; round < REFUSAL_ROUNDS; round++) {
    CHECKF(send_then_read(&c, "/v1/batches", RAW_NO_KEY, body, REFUSAL_BODY) == 401,
           "round %d: the whole body, then no key's answer", round);
    CHECKF(send_then_read(&c, symbols_path, RAW_READ_KEY, body, REFUSAL_BODY) == 403,
           "round %d: the whole body, then the read key's answer", round);
  }
  collector_stop_healthy(&c);

  collector_start_keys(&c, NULL, NULL);
  const char *text_plain[] = {"Expect:", "Content-Type: text/plain", NULL};
  for (int round = 0; round < REFUSAL_ROUNDS; round++)
    CHECKF(request(&c, "POST", symbols_path, text_plain, body, REFUSAL_BODY, round % 2, r) == 403,
           "round %d: open mode text/plain: %ld", round, r->status);
  for (int round = 0; round < REFUSAL_ROUNDS; round++)
    CHECKF(send_then_read(&c, symbols_path, "Content-Type: text/plain\r\n", body, REFUSAL_BODY) ==
               403,
           "round %d: the whole body, then open mode's text/plain answer", round);
  collector_stop_healthy(&c);
  free(body);
  free(r);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE(key_scopes),        TEST_CASE(metrics_scope), TEST_CASE(open_mode),
      TEST_CASE(symbols_immutable), TEST_CASE(symbols_quota), TEST_CASE(refusals_arrive),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
