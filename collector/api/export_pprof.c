/*
 * export_pprof.c - GET /api/v1/export/pprof (see export_pprof.h): the store
 * streams one row per distinct stack of the matching events (stack_rows,
 * the folded export's rows); each becomes one pprof Sample. Its physical
 * frames (innermost first, pprof's own order) become Locations, each with
 * one Line per function of its inline chain (innermost first, the
 * physical function last, as pprof specifies), deduplicated by (mapping,
 * address, lines); their functions Functions (name demangled, system_name
 * the raw linkage name), deduplicated by (name, system name, file); their
 * modules Mappings, by (path, build id); every text
 * goes once into the string table. The Profile is then packed with the
 * protoc-c code of proto/pprof/profile.proto and gzipped with zlib.
 *
 * Every location carries its function: the frame's function name, or for
 * a frame unnamed on the device the same "module+0xaddr" label as the
 * folded export, so pprof shows the names the other exports show and
 * never symbolizes our module-relative addresses against whatever file
 * sits at that path on the reader's machine.
 */
#include "collector/api/export_pprof.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "collector/api/frames.h"
#include "collector/api/stacks.h"
#include "pprof/profile.pb-c.h"

typedef Perftools__Profiles__Function pprof_function_t;
typedef Perftools__Profiles__Location pprof_location_t;
typedef Perftools__Profiles__Line pprof_line_t;
typedef Perftools__Profiles__Mapping pprof_mapping_t;
typedef Perftools__Profiles__Sample pprof_sample_t;
typedef Perftools__Profiles__ValueType pprof_value_type_t;

/* Distinct keys in the order first seen; lookup by an open-addressing hash
   of slots holding index + 1 (0: empty). */
typedef struct intern_s {
  char **keys;
  size_t n, cap;
  uint32_t *slots;
  size_t n_slots; /* a power of two, at least twice n */
} intern_t;

/* One pprof table: its keys and its entries (entry i has id i + 1). */
#define TABLE(type)                                                                                \
  struct {                                                                                         \
    intern_t keys;                                                                                 \
    type *v;                                                                                       \
    size_t cap;                                                                                    \
  }

typedef struct builder_s {
  bool hang; /* the second value: wall/nanoseconds (hang), else cpu/microseconds */
  intern_t strings;
  TABLE(pprof_function_t) functions;
  TABLE(pprof_mapping_t) mappings;
  TABLE(pprof_location_t) locations;
  pprof_line_t *lines; /* every location's, in order: location i has n_line from line_at[i] */
  size_t n_lines, cap_lines;
  size_t *line_at; /* per location */
  size_t cap_line_at;
  pprof_sample_t *samples;
  size_t n_samples, cap_samples;
  int64_t first_ns, last_ns; /* the matching events' earliest start, latest end */
  size_t text;               /* stored frames read, capped at QUERY_MAX_STACK_TEXT */
  uint64_t cut_samples;      /* the stacks past the cap: one QUERY_TRUNCATED sample */
  int64_t cut_time;          /* their wall or CPU time */
  query_rows_t rows;         /* the rows the store summed, and its limit */
  bool failed;
} builder_t;

static int on_stack(const store_stack_row_t *row, void *user);
static bool add_truncated_sample(builder_t *b);
static uint8_t *profile_gzip(builder_t *b, const store_top_query_t *q, size_t *len);
static void builder_free(builder_t *b);
static int64_t string_index(builder_t *b, const char *text);

unsigned export_pprof(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                      uint8_t **body, size_t *len) {
  char *error = NULL;
  store_top_query_t q;
  unsigned status = query_stack_filters(arg, ctx, &q, &error);
  builder_t b = {.hang = strcmp(q.kind ? q.kind : "", "hang") == 0,
                 .first_ns = INT64_MAX,
                 .last_ns = INT64_MIN};
  if (!status) {
    /* string 0 is "" in the format */
    if (string_index(&b, "") != 0 || ops->stack_rows(store, &q, on_stack, &b) != STORE_OK ||
        b.failed || !add_truncated_sample(&b)) {
      status = 503;
      error = query_error_json("the store failed or ran out of memory");
    } else if (!(*body = profile_gzip(&b, &q, len))) {
      status = 503;
      error = query_error_json("out of memory");
    } else {
      status = 200;
    }
  }
  builder_free(&b);
  if (status != 200) {
    *body = (uint8_t *)error;
    *len = error ? strlen(error) : 0;
  }
  return status;
}

/* ---- interning ------------------------------------------------------------- */

static uint64_t hash_key(const char *key) {
  uint64_t h = 14695981039346656037ULL; /* FNV-1a */
  for (const unsigned char *p = (const unsigned char *)key; *p; p++)
    h = (h ^ *p) * 1099511628211ULL;
  return h;
}

static bool intern_rehash(intern_t *t) {
  size_t n_slots = t->n_slots ? 2 * t->n_slots : 256;
  uint32_t *slots = calloc(n_slots, sizeof *slots);
  if (!slots) return false;
  for (size_t i = 0; i < t->n; i++) {
    size_t s = hash_key(t->keys[i]) & (n_slots - 1);
    while (slots[s])
      s = (s + 1) & (n_slots - 1);
    slots[s] = (uint32_t)(i + 1);
  }
  free(t->slots);
  t->slots = slots;
  t->n_slots = n_slots;
  return true;
}

/* Grow *v (of elements of size) to hold at least n + 1; false when out of
   memory. */
static bool grow(void **v, size_t *cap, size_t n, size_t size) {
  if (n < *cap) return true;
  size_t want = *cap ? 2 * *cap : 64;
  void *grown = realloc(*v, want * size);
  if (!grown) return false;
  *v = grown;
  *cap = want;
  return true;
}

/* The index of key (0-based, in the order first seen); *added when it is
   new. SIZE_MAX when out of memory (or past 2^32 keys). */
static size_t intern(intern_t *t, const char *key, bool *added) {
  *added = false;
  if (2 * (t->n + 1) > t->n_slots && !intern_rehash(t)) return SIZE_MAX;
  size_t s = hash_key(key) & (t->n_slots - 1);
  for (; t->slots[s]; s = (s + 1) & (t->n_slots - 1))
    if (strcmp(t->keys[t->slots[s] - 1], key) == 0) return t->slots[s] - 1;
  if (t->n >= UINT32_MAX - 1 || !grow((void **)&t->keys, &t->cap, t->n, sizeof *t->keys))
    return SIZE_MAX;
  if (!(t->keys[t->n] = strdup(key))) return SIZE_MAX;
  t->slots[s] = (uint32_t)(t->n + 1);
  *added = true;
  return t->n++;
}

static void intern_free(intern_t *t) {
  for (size_t i = 0; i < t->n; i++)
    free(t->keys[i]);
  free(t->keys);
  free(t->slots);
}

/* A string table index; 0 ("") for NULL or empty, -1 when out of memory. */
static int64_t string_index(builder_t *b, const char *text) {
  bool added;
  size_t i = intern(&b->strings, text ? text : "", &added);
  return i == SIZE_MAX ? -1 : (int64_t)i;
}

/* The entries of a TABLE grow with its keys: room for entry index i. */
#define TABLE_ROOM(table, i) grow((void **)&(table).v, &(table).cap, (i), sizeof *(table).v)

/* ---- frames to functions, mappings, locations ------------------------------ */

/* A key of parts joined by a separator no name contains. */
static char *join_key(const char *const *parts, size_t n) {
  size_t len = 1;
  for (size_t i = 0; i < n; i++)
    len += strlen(parts[i]) + 1;
  char *key = malloc(len), *p = key;
  if (!key) return NULL;
  for (size_t i = 0; i < n; i++) {
    size_t k = strlen(parts[i]);
    memcpy(p, parts[i], k);
    p += k;
    *p++ = '\x1f';
  }
  *p = '\0';
  return key;
}

/* The id (1-based) of the Function (name, system name, file); 0 when out
   of memory. system_name NULL: the name. */
static uint64_t function_id(builder_t *b, const char *name, const char *system_name,
                            const char *file) {
  const char *parts[] = {name, system_name ? system_name : "", file ? file : ""};
  char *key = join_key(parts, 3);
  bool added = false;
  size_t i = key ? intern(&b->functions.keys, key, &added) : SIZE_MAX;
  free(key);
  if (i == SIZE_MAX) return 0;
  if (added) {
    int64_t n = string_index(b, name), f = string_index(b, file);
    int64_t sys = system_name ? string_index(b, system_name) : n;
    if (n < 0 || f < 0 || sys < 0 || !TABLE_ROOM(b->functions, i)) return 0;
    pprof_function_t fn = PERFTOOLS__PROFILES__FUNCTION__INIT;
    fn.id = i + 1;
    fn.name = n;
    fn.system_name = sys;
    fn.filename = f;
    b->functions.v[i] = fn;
  }
  return i + 1;
}

/* The id of the Mapping of module (with its build id, hex, when known); 0
   for no module ("??"), UINT64_MAX when out of memory. */
static uint64_t mapping_id(builder_t *b, const char *module, const char *build_id) {
  if (!module || !*module || strcmp(module, "??") == 0) return 0;
  const char *parts[] = {module, build_id ? build_id : ""};
  char *key = join_key(parts, 2);
  bool added = false;
  size_t i = key ? intern(&b->mappings.keys, key, &added) : SIZE_MAX;
  free(key);
  if (i == SIZE_MAX) return UINT64_MAX;
  if (added) {
    int64_t path = string_index(b, module), id = string_index(b, build_id);
    if (path < 0 || id < 0 || !TABLE_ROOM(b->mappings, i)) return UINT64_MAX;
    pprof_mapping_t m = PERFTOOLS__PROFILES__MAPPING__INIT;
    m.id = i + 1;
    m.filename = path;
    m.build_id = id;
    m.has_functions = true; /* every location carries its name (see the top) */
    b->mappings.v[i] = m;
  }
  return i + 1;
}

#define MAX_LINES 64 /* a location's lines kept (sdk/symbols keeps 32) */

/* One Line of a location: a stored line object (frame_json.h) named name
   (NULL: its "function"). False when out of memory. */
static bool line_of(builder_t *b, const json_t *o, const char *name, pprof_line_t *out,
                    uint64_t mapping) {
  const char *file = json_string_value(json_object_get(o, "file"));
  json_int_t line = json_integer_value(json_object_get(o, "line"));
  if (!name) name = json_string_value(json_object_get(o, "function"));
  uint64_t function = function_id(b, name ? name : "??",
                                  json_string_value(json_object_get(o, "system_name")), file);
  if (!function) return false;
  pprof_line_t l = PERFTOOLS__PROFILES__LINE__INIT;
  l.function_id = function;
  l.line = line > 0 ? line : 0;
  *out = l;
  if (mapping && file) b->mappings.v[mapping - 1].has_filenames = true;
  if (mapping && line > 0) b->mappings.v[mapping - 1].has_line_numbers = true;
  return true;
}

/* The id of the Location of one stored frame object: its inlined
   functions' Lines, innermost first, then its own (pprof's order); 0 when
   out of memory. */
static uint64_t location_id(builder_t *b, const json_t *frame) {
  json_t *name_json = query_frame_name(frame);
  const char *name = json_string_value(name_json);
  const char *address_text = json_string_value(json_object_get(frame, "address"));
  uint64_t address = address_text ? strtoull(address_text, NULL, 16) : 0;
  uint64_t mapping = mapping_id(b, json_string_value(json_object_get(frame, "module")),
                                json_string_value(json_object_get(frame, "build_id")));
  json_t *inlined = json_object_get(frame, "inlined");
  size_t n = json_array_size(inlined) + 1;
  if (n > MAX_LINES) n = MAX_LINES;
  pprof_line_t lines[MAX_LINES];
  bool ok = name && mapping != UINT64_MAX;
  for (size_t k = 0; ok && k + 1 < n; k++)
    ok = line_of(b, json_array_get(inlined, k), NULL, &lines[k], mapping);
  ok = ok && line_of(b, frame, name, &lines[n - 1], mapping);
  json_decref(name_json);
  if (!ok) return 0;
  char head[48];
  snprintf(head, sizeof head, "%llu:%llx", (unsigned long long)mapping,
           (unsigned long long)address);
  const char *parts[1 + MAX_LINES];
  char texts[MAX_LINES][48];
  parts[0] = head;
  for (size_t k = 0; k < n; k++) {
    snprintf(texts[k], sizeof texts[k], "%llu:%lld", (unsigned long long)lines[k].function_id,
             (long long)lines[k].line);
    parts[k + 1] = texts[k];
  }
  char *key = join_key(parts, n + 1);
  bool added = false;
  size_t i = key ? intern(&b->locations.keys, key, &added) : SIZE_MAX;
  free(key);
  if (i == SIZE_MAX) return 0;
  if (added) {
    if (!TABLE_ROOM(b->locations, i)) return 0;
    if (!grow((void **)&b->line_at, &b->cap_line_at, i, sizeof *b->line_at)) return 0;
    for (size_t k = 0; k < n; k++) {
      if (!grow((void **)&b->lines, &b->cap_lines, b->n_lines + k, sizeof *b->lines)) return 0;
      b->lines[b->n_lines + k] = lines[k];
    }
    b->line_at[i] = b->n_lines;
    b->n_lines += n;
    pprof_location_t loc = PERFTOOLS__PROFILES__LOCATION__INIT;
    loc.id = i + 1;
    loc.mapping_id = mapping;
    loc.address = address;
    loc.n_line = n;
    b->locations.v[i] = loc; /* its line pointers are set when packing */
  }
  return i + 1;
}

/* One Sample of the frames (a JSON array, innermost first): its samples
   and its time (hang: wall nanoseconds; cpu: CPU microseconds). */
static bool add_sample(builder_t *b, json_t *frames, uint64_t samples, int64_t time);

/* One stored stack: its Sample (locations innermost first, as stored); past
   QUERY_MAX_STACK_TEXT, and the row of the stacks past STORE_STACK_ROWS_MAX,
   only its values, for the QUERY_TRUNCATED sample. */
static int on_stack(const store_stack_row_t *row, void *user) {
  builder_t *b = user;
  query_rows_seen(&b->rows, row->rows_read, row->rows_limit);
  if (row->samples == 0) return 0;
  if (row->first_start_ns < b->first_ns) b->first_ns = row->first_start_ns;
  if (row->last_end_ns > b->last_ns) b->last_ns = row->last_end_ns;
  int64_t time = b->hang ? row->wall_ns : (int64_t)row->cpu_us;
  size_t len = row->frames_json ? strlen(row->frames_json) : 0;
  if (!row->stack_sig || b->cut_samples || len > QUERY_MAX_STACK_TEXT - b->text) {
    b->cut_samples += row->samples;
    b->cut_time += time;
    return 0;
  }
  b->text += len;
  json_t *frames = json_loads(row->frames_json, 0, NULL);
  if (!frames || !json_is_array(frames)) return json_decref(frames), b->failed = true, 1;
  bool ok = json_array_size(frames) == 0 || add_sample(b, frames, row->samples, time);
  json_decref(frames);
  return ok ? 0 : (b->failed = true, 1);
}

/* The stacks past the cap, as one stack of one frame named QUERY_TRUNCATED. */
static bool add_truncated_sample(builder_t *b) {
  if (!b->cut_samples) return true;
  json_t *frames = json_pack("[{s:s}]", "function", QUERY_TRUNCATED);
  bool ok = frames && add_sample(b, frames, b->cut_samples, b->cut_time);
  json_decref(frames);
  return ok;
}

static bool add_sample(builder_t *b, json_t *frames, uint64_t samples, int64_t time) {
  size_t depth = json_array_size(frames);
  uint64_t *ids = calloc(depth, sizeof *ids);
  int64_t *values = calloc(2, sizeof *values);
  bool ok = ids && values &&
            grow((void **)&b->samples, &b->cap_samples, b->n_samples, sizeof *b->samples);
  for (size_t k = 0; ok && k < depth; k++)
    ok = (ids[k] = location_id(b, json_array_get(frames, k))) != 0;
  if (!ok) {
    free(ids);
    free(values);
    return false;
  }
  values[0] = (int64_t)samples;
  values[1] = time;
  pprof_sample_t s = PERFTOOLS__PROFILES__SAMPLE__INIT;
  s.n_location_id = depth;
  s.location_id = ids;
  s.n_value = 2;
  s.value = values;
  b->samples[b->n_samples++] = s;
  return true;
}

/* ---- the Profile ------------------------------------------------------------ */

/* An array of pointers to the n elements of v (of size each); NULL when
   out of memory (or n is 0: protoc-c then reads nothing). */
static void *pointers_to(void *v, size_t n, size_t size) {
  void **p = n ? calloc(n, sizeof *p) : NULL;
  for (size_t i = 0; p && i < n; i++)
    p[i] = (char *)v + i * size;
  return p;
}

/* The profiled window: the query's bounds where given, else the matching
   events' own extent; 0, 0 when unbounded and nothing matched. */
static void window(const builder_t *b, const store_top_query_t *q, int64_t *time,
                   int64_t *duration) {
  int64_t start = q->from_ns > 0 ? q->from_ns : b->first_ns;
  int64_t end = q->to_ns != INT64_MAX ? q->to_ns + 1 : b->last_ns;
  bool known = start != INT64_MAX && end != INT64_MIN && end >= start;
  *time = known ? start : 0;
  *duration = known ? end - start : 0;
}

static uint8_t *gzip_bytes(const uint8_t *in, size_t n, size_t *len) {
  z_stream z = {0};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16 /* gzip */, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK)
    return NULL;
  uLong bound = deflateBound(&z, (uLong)n);
  uint8_t *out = malloc(bound);
  z.next_in = (Bytef *)in;
  z.avail_in = (uInt)n;
  z.next_out = out;
  z.avail_out = (uInt)bound;
  bool ok = out && n <= UINT32_MAX && deflate(&z, Z_FINISH) == Z_STREAM_END;
  *len = z.total_out;
  deflateEnd(&z);
  if (!ok) free(out);
  return ok ? out : NULL;
}

static uint8_t *profile_gzip(builder_t *b, const store_top_query_t *q, size_t *len) {
  pprof_value_type_t types[2] = {PERFTOOLS__PROFILES__VALUE_TYPE__INIT,
                                 PERFTOOLS__PROFILES__VALUE_TYPE__INIT};
  char note[160];
  snprintf(note, sizeof note, "perf-collector export, kind=%s%s", q->kind,
           b->hang ? "; wall: each hang's duration shared among its stacks by samples"
                   : "; cpu: the CPU time of the stacks' samples (events without weights: none)");
  /* A second comment when the store's read stopped at its row limit. */
  char cut[128];
  snprintf(cut, sizeof cut, "truncated: rows_read=%llu rows_limit=%llu",
           (unsigned long long)b->rows.read, (unsigned long long)b->rows.limit);
  int64_t comments[2] = {string_index(b, note),
                         query_rows_cut(&b->rows) ? string_index(b, cut) : 0};
  int64_t comment = comments[0] < 0 || comments[1] < 0 ? -1 : 0;
  types[0].type = string_index(b, "samples");
  types[0].unit = string_index(b, "count");
  types[1].type = string_index(b, b->hang ? "wall" : "cpu");
  types[1].unit = string_index(b, b->hang ? "nanoseconds" : "microseconds");
  if (comment < 0 || types[0].type < 0 || types[0].unit < 0 || types[1].type < 0 ||
      types[1].unit < 0)
    return NULL;
  size_t n_locations = b->locations.keys.n;
  pprof_line_t **lines = pointers_to(b->lines, b->n_lines, sizeof *b->lines);
  if (b->n_lines && !lines) return NULL;
  for (size_t i = 0; i < n_locations; i++)
    b->locations.v[i].line = &lines[b->line_at[i]];
  pprof_value_type_t *type_ptrs[2] = {&types[0], &types[1]};
  Perftools__Profiles__Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
  p.n_sample_type = 2;
  p.sample_type = type_ptrs;
  /* What pprof shows first: a hang profile's samples (the folded export's
     default), a CPU profile's CPU time. */
  p.default_sample_type = b->hang ? types[0].type : types[1].type;
  p.n_comment = query_rows_cut(&b->rows) ? 2 : 1;
  p.comment = comments;
  p.n_string_table = b->strings.n;
  p.string_table = b->strings.keys;
  window(b, q, &p.time_nanos, &p.duration_nanos);
  p.n_sample = b->n_samples;
  p.sample = pointers_to(b->samples, b->n_samples, sizeof *b->samples);
  p.n_location = b->locations.keys.n;
  p.location = pointers_to(b->locations.v, p.n_location, sizeof *b->locations.v);
  p.n_function = b->functions.keys.n;
  p.function = pointers_to(b->functions.v, p.n_function, sizeof *b->functions.v);
  p.n_mapping = b->mappings.keys.n;
  p.mapping = pointers_to(b->mappings.v, p.n_mapping, sizeof *b->mappings.v);
  uint8_t *packed = NULL, *out = NULL;
  if ((p.sample || !p.n_sample) && (p.location || !p.n_location) && (p.function || !p.n_function) &&
      (p.mapping || !p.n_mapping)) {
    size_t n = perftools__profiles__profile__get_packed_size(&p);
    if ((packed = malloc(n ? n : 1))) {
      perftools__profiles__profile__pack(&p, packed);
      out = gzip_bytes(packed, n, len);
    }
  }
  free(packed);
  free(p.sample);
  free(p.location);
  free(p.function);
  free(p.mapping);
  free(lines);
  return out;
}

static void builder_free(builder_t *b) {
  for (size_t i = 0; i < b->n_samples; i++) {
    free(b->samples[i].location_id);
    free(b->samples[i].value);
  }
  free(b->samples);
  free(b->lines);
  free(b->line_at);
  free(b->functions.v);
  free(b->mappings.v);
  free(b->locations.v);
  intern_free(&b->functions.keys);
  intern_free(&b->mappings.keys);
  intern_free(&b->locations.keys);
  intern_free(&b->strings);
}
