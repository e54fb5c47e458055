/*
 * batch_limits.c - a batch's sizes checked before they cost memory (see
 * batch_limits.h). The scan reads the protobuf wire format with the
 * generated descriptors (perf/v1/perf.pb-c.h), so field numbers and types
 * come from the schema, not from this file; it descends into message
 * fields with an explicit stack whose depth the schema fixes (Batch ->
 * Event -> Thread is the deepest), never by recursion.
 */
#include "collector/ingest/batch_limits.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/frame_json.h"
#include "collector/symbols/symbolize.h"
#include "sdk/base/utf8.h"

#define MAX_DEPTH 8   /* the schema nests 3 deep */
#define MAX_FIELDS 32 /* fields per message in the schema (Batch: 14) */
/* protobuf-c's unpack, per allocation and per field occurrence (its
   ScannedMember slabs, alive while the message is unpacked): measured
   with glibc malloc on x86_64, rounded up. */
#define MALLOC_OVERHEAD 16
#define SCANNED_MEMBER 40

void batch_limits_default(batch_limits_t *l) {
  *l = (batch_limits_t){
      BATCH_LIMIT_STRINGS,       BATCH_LIMIT_MODULES,      BATCH_LIMIT_FUNCTIONS,
      BATCH_LIMIT_FRAMES,        BATCH_LIMIT_STACKS,       BATCH_LIMIT_EVENTS,
      BATCH_LIMIT_EVENT_SAMPLES, BATCH_LIMIT_STACK_FRAMES, BATCH_LIMIT_STRING_BYTES,
      BATCH_LIMIT_DECODED_BYTES, BATCH_LIMIT_TEXT_BYTES};
}

/* ---- the scan ------------------------------------------------------------ */

/* One message being walked: its bytes and how often each field occurred. */
typedef struct level_s {
  const ProtobufCMessageDescriptor *desc;
  const uint8_t *p, *end;
  uint64_t count[MAX_FIELDS];
} level_t;

typedef struct scan_s {
  const batch_limits_t *l;
  level_t stack[MAX_DEPTH];
  size_t depth;
  uint64_t decoded; /* protobuf-c's allocations so far */
  unsigned status;  /* 0, 400 or 413 */
  char *why;
  size_t why_size;
} scan_t;

static void fail(scan_t *s, unsigned status, const char *what, uint64_t n, const char *flag,
                 size_t max) {
  if (s->status) return;
  s->status = status;
  if (status == 400)
    snprintf(s->why, s->why_size, "not a valid perf.v1.Batch: %s", what);
  else
    snprintf(s->why, s->why_size, "batch over the limit: %llu %s (%s %zu)", (unsigned long long)n,
             what, flag, max);
}

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  *v = 0;
  for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
    uint8_t b = *(*p)++;
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

/* Bytes one element of a repeated field takes in protobuf-c's array. */
static size_t element_size(ProtobufCType type) {
  switch (type) {
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_FIXED64:
  case PROTOBUF_C_TYPE_DOUBLE: return 8;
  case PROTOBUF_C_TYPE_STRING:
  case PROTOBUF_C_TYPE_MESSAGE: return sizeof(void *);
  case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
  default: return 4; /* 32-bit numbers, enums, protobuf_c_boolean */
  }
}

static bool is_varint_type(ProtobufCType type) {
  size_t size = element_size(type);
  return type != PROTOBUF_C_TYPE_SFIXED32 && type != PROTOBUF_C_TYPE_FIXED32 &&
         type != PROTOBUF_C_TYPE_FLOAT && type != PROTOBUF_C_TYPE_SFIXED64 &&
         type != PROTOBUF_C_TYPE_FIXED64 && type != PROTOBUF_C_TYPE_DOUBLE && size <= 8;
}

/* Elements in a packed field of n bytes. */
static bool packed_count(ProtobufCType type, const uint8_t *p, size_t n, uint64_t *count) {
  if (!is_varint_type(type)) {
    size_t size = element_size(type);
    *count = n / size;
    return n % size == 0;
  }
  *count = 0;
  for (size_t i = 0; i < n; i++)
    *count += !(p[i] & 0x80);
  return n == 0 || !(p[n - 1] & 0x80);
}

static bool push(scan_t *s, const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t n) {
  if (s->depth == MAX_DEPTH || desc->n_fields > MAX_FIELDS) return false;
  level_t *lv = &s->stack[s->depth++];
  lv->desc = desc;
  lv->p = p;
  lv->end = p + n;
  memset(lv->count, 0, sizeof lv->count);
  s->decoded += desc->sizeof_message + MALLOC_OVERHEAD;
  return true;
}

/* One length-delimited field: a string, bytes, a packed array or a message. */
static void scan_delimited(scan_t *s, level_t *lv, const ProtobufCFieldDescriptor *f,
                           const uint8_t *p, size_t n) {
  size_t index = (size_t)(f - lv->desc->fields);
  if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
    lv->count[index]++;
    if (!push(s, f->descriptor, p, n)) fail(s, 400, "nested too deep", 0, NULL, 0);
  } else if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_BYTES) {
    lv->count[index]++;
    s->decoded += n + 1 + MALLOC_OVERHEAD;
  } else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
    uint64_t k;
    if (!packed_count(f->type, p, n, &k)) fail(s, 400, "a bad packed array", 0, NULL, 0);
    lv->count[index] += k;
  } else if (f->type == PROTOBUF_C_TYPE_BOOL) {
    /* protobuf-c's unpack takes a bool in any wire type (it checks none
       for bools); the walk refuses nothing the decoder takes, or a batch
       the decoder accepts would get 400 here (fuzz_ingest's invariant). */
    lv->count[index]++;
  } else {
    fail(s, 400, "a number sent as bytes", 0, NULL, 0);
  }
}

/* The next field of the innermost message. */
static void scan_field(scan_t *s, level_t *lv) {
  uint64_t tag, v;
  if (!read_varint(&lv->p, lv->end, &tag) || tag >> 3 == 0 || tag >> 3 > UINT32_MAX)
    return fail(s, 400, "a bad field tag", 0, NULL, 0);
  s->decoded += SCANNED_MEMBER;
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field(lv->desc, (unsigned)(tag >> 3));
  const uint8_t *start = lv->p;
  size_t n = 0;
  switch (tag & 7) {
  case 0:
    if (!read_varint(&lv->p, lv->end, &v)) return fail(s, 400, "a bad varint", 0, NULL, 0);
    n = (size_t)(lv->p - start);
    break;
  case 1:
  case 5:
    n = (tag & 7) == 1 ? 8 : 4;
    if ((size_t)(lv->end - lv->p) < n) return fail(s, 400, "a cut number", 0, NULL, 0);
    lv->p += n;
    break;
  case 2:
    if (!read_varint(&lv->p, lv->end, &v) || v > (uint64_t)(lv->end - lv->p))
      return fail(s, 400, "a bad length", 0, NULL, 0);
    start = lv->p;
    n = (size_t)v;
    lv->p += n;
    break;
  default: return fail(s, 400, "an unsupported wire type", 0, NULL, 0);
  }
  if (!f) /* kept by protobuf-c as an unknown field: a copy of its bytes */
    s->decoded += sizeof(ProtobufCMessageUnknownField) + n + MALLOC_OVERHEAD;
  else if ((tag & 7) == 2)
    scan_delimited(s, lv, f, start, n);
  else
    lv->count[f - lv->desc->fields]++;
}

static uint64_t count_of(const level_t *lv, const char *name) {
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field_by_name(lv->desc, name);
  return f ? lv->count[f - lv->desc->fields] : 0;
}

/* The Batch's tables against their limits. */
static void check_batch(scan_t *s, const level_t *lv) {
  const batch_limits_t *l = s->l;
  const struct {
    const char *field, *flag;
    size_t max;
  } tables[] = {
      {"strings", "--max-batch-strings", l->strings},
      {"modules", "--max-batch-modules", l->modules},
      {"functions", "--max-batch-functions", l->functions},
      {"frames", "--max-batch-frames", l->frames},
      {"stacks", "--max-batch-stacks", l->stacks},
      {"events", "--max-batch-events", l->events},
  };
  for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
    uint64_t n = count_of(lv, tables[i].field);
    if (n > tables[i].max) fail(s, 413, tables[i].field, n, tables[i].flag, tables[i].max);
  }
}

/* A finished message: its repeated arrays, and an event's per-sample
   arrays, stack counts and threads against --max-event-samples. */
static void finish_level(scan_t *s, const level_t *lv) {
  bool event = lv->desc == &perf__v1__event__descriptor;
  for (size_t i = 0; i < lv->desc->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &lv->desc->fields[i];
    if (f->label != PROTOBUF_C_LABEL_REPEATED || !lv->count[i]) continue;
    s->decoded += lv->count[i] * element_size(f->type) + MALLOC_OVERHEAD;
    if (event && lv->count[i] > s->l->event_samples) {
      char what[64];
      snprintf(what, sizeof what, "%s in one event", f->name);
      fail(s, 413, what, lv->count[i], "--max-event-samples", s->l->event_samples);
    }
  }
  if (lv->desc == &perf__v1__batch__descriptor) check_batch(s, lv);
}

unsigned batch_limits_scan(const batch_limits_t *l, const uint8_t *data, size_t len, char *why,
                           size_t why_size) {
  scan_t s = {.l = l, .why = why, .why_size = why_size};
  static const uint8_t empty[1];
  push(&s, &perf__v1__batch__descriptor, data ? data : empty, data ? len : 0);
  while (s.depth && !s.status) {
    level_t *lv = &s.stack[s.depth - 1];
    if (lv->p < lv->end) {
      scan_field(&s, lv);
      continue;
    }
    finish_level(&s, lv);
    s.depth--;
  }
  if (!s.status && s.decoded > l->decoded_bytes)
    fail(&s, 413, "bytes once decoded", s.decoded, "--max-decoded-bytes", l->decoded_bytes);
  return s.status;
}

/* ---- the record's text --------------------------------------------------- */

/* Bytes of the first max bytes of s in JSON (jansson escapes '"', '\\'
   and control characters). */
static size_t json_len(const char *s, size_t max) {
  size_t n = 2;
  for (size_t i = 0; s && s[i] && i < max; i++)
    n += s[i] == '"' || s[i] == '\\' ? 2 : (unsigned char)s[i] < 0x20 ? 6 : 1;
  return n;
}

#define LABEL_BYTES 512      /* a frame's label (signature.c), NUL included */
#define FRAME_JSON_FIXED 180 /* keys, address, offset, line, executable, punctuation */
#define LINE_JSON_FIXED 48   /* an inline line's keys, line number, punctuation */
#define LABEL_SUFFIX (sizeof FRAME_INLINE_SUFFIX + 4)

typedef struct frame_text_s {
  uint64_t object; /* its object in the stack's frames JSON, its labels, pointers */
  uint64_t name;   /* its labels in a group's names JSON */
} frame_text_t;

/* Each text's json_len once per batch: a module's path, a string's whole
   and as a label (its first LABEL_BYTES); stored plus one, 0 not made (a
   table that could not be allocated: measured each time). Most frames
   share their module and many their names and files. */
typedef struct text_memo_s {
  uint64_t *path;          /* per module */
  uint64_t *whole, *label; /* per string */
} text_memo_t;

static uint64_t string_len(text_memo_t *m, const Perf__V1__Batch *bt, uint32_t i, bool label) {
  if (!i || i >= bt->n_strings || !bt->strings[i][0]) return json_len(NULL, 0);
  uint64_t *memo = label ? m->label : m->whole;
  if (!memo) return json_len(bt->strings[i], label ? LABEL_BYTES : SIZE_MAX);
  if (!memo[i]) memo[i] = 1 + json_len(bt->strings[i], label ? LABEL_BYTES : SIZE_MAX);
  return memo[i] - 1;
}

/* The json_len of a function's name (or linkage name) string; as for no
   name when function is 0 or out of the table. */
static uint64_t function_len(text_memo_t *m, const Perf__V1__Batch *bt, uint32_t function,
                             bool linkage, bool label) {
  if (!function || function > bt->n_functions) return json_len(NULL, 0);
  const Perf__V1__Function *f = bt->functions[function - 1];
  return string_len(m, bt, linkage ? f->system_name : f->name, label);
}

static bool function_named(const Perf__V1__Batch *bt, uint32_t function) {
  if (!function || function > bt->n_functions) return false;
  uint32_t i = bt->functions[function - 1]->name;
  return i && i < bt->n_strings && bt->strings[i][0];
}

static uint64_t path_len(text_memo_t *m, const Perf__V1__Batch *bt, uint32_t module) {
  if (!module) return json_len("??", SIZE_MAX);
  if (!m->path) return json_len(bt->modules[module - 1]->path, SIZE_MAX);
  if (!m->path[module - 1])
    m->path[module - 1] = 1 + json_len(bt->modules[module - 1]->path, SIZE_MAX);
  return m->path[module - 1] - 1;
}

/* What one frame of a stack costs in the record (ingest.c build_stack):
   the device's names and lines, or when the frame's module has a
   build-id, what a debug file may name it with instead (a chain of at
   most SYMBOL_TEXT_MAX bytes of text, PERF__SYM_MAX_LINES lines). */
static frame_text_t frame_text(text_memo_t *tm, const Perf__V1__Batch *bt, uint32_t index) {
  const Perf__V1__Frame *f = bt->frames[index - 1];
  const Perf__V1__Module *m = f->module ? bt->modules[f->module - 1] : NULL;
  bool fn = function_named(bt, f->function);
  uint64_t path = path_len(tm, bt, f->module);
  bool symbolizable = m && m->build_id.len;
  frame_text_t t;
  t.name = 1 + (fn ? function_len(tm, bt, f->function, false, true) : path + 20);
  t.object = FRAME_JSON_FIXED + path + 2 * (m ? m->build_id.len : 0) +
             (fn ? function_len(tm, bt, f->function, false, false) +
                       function_len(tm, bt, f->function, true, false)
                 : 0) +
             LABEL_BYTES + MALLOC_OVERHEAD + sizeof(void *);
  for (size_t i = 0; fn && i < f->n_lines; i++) {
    const Perf__V1__Line *l = f->lines[i];
    t.name += function_len(tm, bt, l->function, false, true) + LABEL_SUFFIX;
    t.object += LINE_JSON_FIXED + function_len(tm, bt, l->function, false, false) +
                function_len(tm, bt, l->function, true, false) +
                string_len(tm, bt, l->file, false) + LABEL_BYTES + MALLOC_OVERHEAD + sizeof(void *);
  }
  if (symbolizable) {
    t.name += SYMBOL_TEXT_MAX + PERF__SYM_MAX_LINES * LABEL_SUFFIX;
    t.object += SYMBOL_TEXT_MAX + PERF__SYM_MAX_LINES * (LINE_JSON_FIXED + MALLOC_OVERHEAD);
  }
  t.object += t.name;
  return t;
}

unsigned batch_limits_text(const batch_limits_t *l, const Perf__V1__Batch *bt, char *why,
                           size_t why_size) {
  uint64_t total = 0, widest = 0;
  /* Each frame's cost once: stacks share most of their frames. */
  frame_text_t *memo = calloc(bt->n_frames + 1, sizeof *memo);
  text_memo_t tm = {calloc(bt->n_modules + 1, sizeof *tm.path),
                    calloc(bt->n_strings + 1, sizeof *tm.whole),
                    calloc(bt->n_strings + 1, sizeof *tm.label)};
  for (size_t i = 0; i < bt->n_stacks; i++) {
    const Perf__V1__Stack *st = bt->stacks[i];
    size_t n = st->n_frames < l->stack_frames ? st->n_frames : l->stack_frames;
    uint64_t names = 0;
    for (size_t k = 0; k < n; k++) {
      uint32_t index = st->frames[k];
      frame_text_t t =
          memo && memo[index - 1].object ? memo[index - 1] : frame_text(&tm, bt, index);
      if (memo) memo[index - 1] = t;
      total += t.object;
      names += t.name;
    }
    if (names > widest) widest = names;
  }
  free(memo);
  free(tm.path);
  free(tm.whole);
  free(tm.label);
  /* A hang event's group: the shared part of its stacks, at most one
     stack's names. */
  for (size_t i = 0; i < bt->n_events; i++)
    if (bt->events[i]->n_stack_counts) total += widest + MALLOC_OVERHEAD;
  if (total <= l->text_bytes) return 0;
  snprintf(why, why_size,
           "batch over the limit: its stacks take %llu bytes as text (--max-stack-text-bytes %zu)",
           (unsigned long long)total, l->text_bytes);
  return 413;
}

/* ---- cutting ------------------------------------------------------------ */

/* Memory as protobuf-c's allocator a gives it (NULL: its default,
   malloc), so the batch's free (or its arena's reset) takes it too. */
static void *pb_alloc(ProtobufCAllocator *a, size_t n) {
  return a ? a->alloc(a->allocator_data, n) : malloc(n);
}

static void pb_free(ProtobufCAllocator *a, void *p) {
  if (a)
    a->free(a->allocator_data, p);
  else
    free(p);
}

static bool grow_table(ProtobufCAllocator *a, void **v, size_t n, size_t size) {
  void *grown = pb_alloc(a, (n + 1) * size);
  if (!grown) return false;
  if (n) memcpy(grown, *v, n * size);
  pb_free(a, *v);
  *v = grown;
  return true;
}

/* Index (1-based) of a frame named BATCH_TRUNCATED added to bt's tables:
   a string, a function and a frame in no module, allocated as protobuf-c
   did (with a: freed with the rest of the batch). 0 when out of memory. */
static uint32_t truncated_frame(ProtobufCAllocator *a, Perf__V1__Batch *bt) {
  char *name = pb_alloc(a, sizeof BATCH_TRUNCATED);
  Perf__V1__Function *fn = pb_alloc(a, sizeof *fn);
  Perf__V1__Frame *frame = pb_alloc(a, sizeof *frame);
  if (!name || !fn || !frame || !grow_table(a, (void **)&bt->strings, bt->n_strings, sizeof name) ||
      !grow_table(a, (void **)&bt->functions, bt->n_functions, sizeof fn) ||
      !grow_table(a, (void **)&bt->frames, bt->n_frames, sizeof frame)) {
    pb_free(a, name), pb_free(a, fn), pb_free(a, frame);
    return 0;
  }
  memcpy(name, BATCH_TRUNCATED, sizeof BATCH_TRUNCATED);
  perf__v1__function__init(fn);
  perf__v1__frame__init(frame);
  bt->strings[bt->n_strings] = name;
  fn->name = (uint32_t)bt->n_strings++;
  bt->functions[bt->n_functions++] = fn;
  frame->function = (uint32_t)bt->n_functions;
  bt->frames[bt->n_frames++] = frame;
  return (uint32_t)bt->n_frames;
}

int batch_limits_cut_stacks(ProtobufCAllocator *a, Perf__V1__Batch *bt, size_t max) {
  uint32_t mark = 0;
  for (size_t i = 0; max && i < bt->n_stacks; i++) {
    Perf__V1__Stack *s = bt->stacks[i];
    if (s->n_frames <= max) continue;
    if (!mark && !(mark = truncated_frame(a, bt))) return -1;
    s->frames[max - 1] = mark; /* innermost first: the root end goes */
    s->n_frames = max;
  }
  return 0;
}

void batch_limits_cut_string(char *s, size_t max) {
  static const char MARK[] = BATCH_TRUNCATED;
  size_t n = strlen(s);
  if (n <= max || max < sizeof MARK) return;
  size_t keep = 0, room = max - (sizeof MARK - 1);
  while (keep < room) {
    size_t k = perf__utf8_seq((const unsigned char *)s + keep, room - keep);
    if (k == 0) break;
    keep += k;
  }
  memcpy(s + keep, MARK, sizeof MARK);
}
