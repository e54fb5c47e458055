/*
 * perf_dump.c - perf-dump: prints the batches the SDK wrote to disk as text,
 * or with --json as one JSON document {"batches": [...], "errors": [...]}.
 *
 * A path may be a spool directory (its own *.batch files, oldest first:
 * quarantine/, <pid>/ subdirectories and *.tmp files are skipped), one
 * .batch file, or the file sink's report path (its batches are in
 * <path>.batches/). Every file is verified before it is printed: the spool
 * header and CRC-32C (perf__spool_read_file), then the bounded decode
 * (zstd when the payload is a zstd frame, the file sink's are not) of the
 * protobuf with its reference checks (perf__batch_decode_stored, at most
 * DECODE_MAX bytes decompressed). A bad or unreadable file is named on
 * stderr as "perf-dump: <path>: <reason>" and skipped; the others are still
 * printed.
 *
 * Exit status: 0 every file was good; 1 some path or file was bad or
 * unreadable; 2 usage error.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "perf_sdk.h"
#include "sdk/base/frame_text.h"
#include "sdk/base/strbuf.h"
#include "sdk/base/utf8.h"
#include "sdk/wire/batch.h"
#include "sdk/wire/batch_decode.h"
#include "sdk/wire/event_weights.h"
#include "sdk/wire/spool.h"
#include "tools/dump_states.h"

#define PROG "perf-dump"
#define DECODE_MAX ((size_t)256 << 20) /* a batch is at most 64 MiB serialized */
#define EXIT_BAD 1
#define EXIT_USAGE 2
#define TIME_MAX 48

typedef struct dump_s {
  bool json;
  size_t max_stacks; /* per event; 0 = all */
  json_t *batches;   /* --json: the document's arrays */
  json_t *errors;
  int status;
} dump_t;

/* One frame of a stack, resolved against the batch's tables. */
typedef struct frame_view_s {
  const char *module;      /* basename, "??" when in no known module */
  const char *module_path; /* as recorded; NULL when in no known module */
  const Perf__V1__Module *mod;
  uint64_t address;         /* module-relative (module NULL: the runtime pc) */
  const char *function;     /* NULL when not named on the device */
  const char *system_name;  /* the raw linkage name when it differs; else NULL */
  uint64_t offset;          /* from the function's start */
  uint64_t runtime_address; /* fatal hangs: the pc in the dead process; else 0 */
  const Perf__V1__Frame *frame;
} frame_view_t;

static int parse_args(int argc, char **argv, dump_t *d, bool *help);
static void usage(FILE *out);
static void dump_path(dump_t *d, const char *path);
static void dump_dir(dump_t *d, const char *dir);
static void dump_file(dump_t *d, const char *path, bool listed);
static void bad(dump_t *d, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static const char *reason_text(const char *reason);
static void text_batch(const dump_t *d, const char *path, const Perf__V1__Batch *b);
static void text_loop(const Perf__V1__LoopStats *l);
static void text_event(const dump_t *d, const Perf__V1__Batch *b, const Perf__V1__Event *e);
static void text_stack(const Perf__V1__Batch *b, const Perf__V1__Event *e,
                       const Perf__V1__StackCount *sc, int64_t cpu_us);
static int64_t *stack_cpu_us(const Perf__V1__Event *e);
static size_t *stack_order(const Perf__V1__Event *e, const int64_t *cpu_us);
static void text_states(const Perf__V1__Batch *b, const Perf__V1__Event *e);
static void count_states(const Perf__V1__Batch *b, const Perf__V1__Event *e,
                         const Perf__V1__StackCount *sc, perf__state_tally_t *t);
static void text_put(const char *s);
static json_t *json_batch(const dump_t *d, const char *path, const Perf__V1__Batch *b);
static json_t *json_resource(const Perf__V1__Resource *r);
static json_t *json_drops(const Perf__V1__DropCounters *dr);
static json_t *json_loop(const Perf__V1__LoopStats *l);
static json_t *json_event(const dump_t *d, const Perf__V1__Batch *b, const Perf__V1__Event *e);
static json_t *json_stack(const Perf__V1__Batch *b, const Perf__V1__Event *e,
                          const Perf__V1__StackCount *sc, int64_t cpu_us);
static json_t *json_frame(const Perf__V1__Batch *b, size_t index, uint32_t frame_ref);
static json_t *jstr(const char *s);
static json_t *ju64(uint64_t v);
static json_t *jhex64(uint64_t v);
static void jset(json_t *obj, const char *key, json_t *value);
static bool frame_view(const Perf__V1__Batch *b, uint32_t frame_ref, frame_view_t *v);
static const Perf__V1__Stack *stack_at(const Perf__V1__Batch *b, uint32_t ref);
static const char *string_at(const Perf__V1__Batch *b, uint32_t index);
static const char *kind_name(Perf__V1__EventKind kind);
static uint64_t event_samples(const Perf__V1__Event *e);
static size_t stacks_shown(const dump_t *d, const Perf__V1__Event *e);
static const char *iso_time(int64_t unix_ns, char out[TIME_MAX]);
static void hex(const uint8_t *p, size_t n, char *out);
static void batch_id_hex(const Perf__V1__Batch *b, char out[2 * PERF__BATCH_ID_BYTES + 1]);
static bool has_suffix(const char *s, const char *suffix);

int main(int argc, char **argv) {
  dump_t d = {0};
  bool help = false;
  if (parse_args(argc, argv, &d, &help) != 0) return EXIT_USAGE;
  if (help) {
    usage(stdout);
    return 0;
  }
  if (d.json) {
    d.batches = json_array();
    d.errors = json_array();
    if (!d.batches || !d.errors) {
      fprintf(stderr, PROG ": out of memory\n");
      return EXIT_BAD;
    }
  }
  for (int i = optind; i < argc; i++)
    dump_path(&d, argv[i]);
  if (d.json) {
    json_t *doc = json_object();
    jset(doc, "batches", d.batches);
    jset(doc, "errors", d.errors);
    if (!doc || json_dumpf(doc, stdout, JSON_INDENT(2)) != 0) d.status = EXIT_BAD;
    fputc('\n', stdout);
    json_decref(doc);
  }
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, PROG ": writing the output: %s\n", strerror(errno));
    return EXIT_BAD;
  }
  return d.status;
}

/* ---- arguments ----------------------------------------------------------- */

/* 0, or EXIT_USAGE after saying what is wrong. */
static int parse_args(int argc, char **argv, dump_t *d, bool *help) {
  static const struct option longopts[] = {
      {"json", no_argument, NULL, 'j'},
      {"max-stacks", required_argument, NULL, 'n'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":jn:h", longopts, NULL)) != -1) {
    switch (c) {
    case 'j': d->json = true; break;
    case 'h': *help = true; break;
    case 'n': {
      char *end;
      errno = 0;
      unsigned long long v = strtoull(optarg, &end, 10);
      if (optarg[0] < '0' || optarg[0] > '9' || *end || errno || v > SIZE_MAX) {
        fprintf(stderr, PROG ": --max-stacks wants a number (0 = all), not '%s'\n", optarg);
        goto usage_error;
      }
      d->max_stacks = (size_t)v;
      break;
    }
    case ':':
      fprintf(stderr, PROG ": option '%s' needs a value\n", argv[optind - 1]);
      goto usage_error;
    default:
      if (optopt && argv[optind - 1][1] != '-')
        fprintf(stderr, PROG ": unknown option '-%c'\n", optopt);
      else
        fprintf(stderr, PROG ": unknown option '%s'\n", argv[optind - 1]);
      goto usage_error;
    }
  }
  if (*help) return 0;
  if (optind < argc) return 0;
  fprintf(stderr, PROG ": no path given\n");
usage_error:
  fprintf(stderr, "Try '" PROG " --help'.\n");
  return EXIT_USAGE;
}

static void usage(FILE *out) {
  fputs("usage: " PROG " [--json] [--max-stacks N] PATH...\n"
        "\n"
        "Print the batches the perf SDK wrote to disk, verified (spool header,\n"
        "CRC-32C, bounded zstd + protobuf decode).\n"
        "\n"
        "PATH is one of:\n"
        "  a spool directory   its *.batch files, oldest first (quarantine/,\n"
        "                      <pid>/ subdirectories and *.tmp files are skipped)\n"
        "  a .batch file       one batch\n"
        "  a report path       the file sink's sink_path: reads <PATH>.batches/\n"
        "\n"
        "Options:\n"
        "  -j, --json          one JSON document {\"batches\": [...], \"errors\": [...]}\n"
        "  -n, --max-stacks N  at most N stacks per event, dominant first (0 = all)\n"
        "  -h, --help          this text\n"
        "\n"
        "A bad or unreadable file is named on stderr (\"" PROG ": <path>: <reason>\")\n"
        "and skipped; the other files are still printed.\n"
        "Exit status: 0 all good, 1 some file bad or unreadable, 2 usage error.\n",
        out);
}

/* ---- paths, directories, files ------------------------------------------- */

/* <path>.batches/ (the file sink's), else a directory, else a batch file. */
static void dump_path(dump_t *d, const char *path) {
  char sink_dir[PATH_MAX];
  struct stat st;
  if (snprintf(sink_dir, sizeof sink_dir, "%s.batches", path) < (int)sizeof sink_dir &&
      stat(sink_dir, &st) == 0 && S_ISDIR(st.st_mode)) {
    dump_dir(d, sink_dir);
    return;
  }
  if (stat(path, &st) != 0) {
    bad(d, path, "%s", strerror(errno));
    return;
  }
  if (S_ISDIR(st.st_mode))
    dump_dir(d, path);
  else
    dump_file(d, path, false);
}

static int is_batch_entry(const struct dirent *de) {
  return de->d_name[0] != '.' && has_suffix(de->d_name, ".batch");
}

/* Spool names are <20-digit seq>-<id>.batch: by name is by age. */
static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

static void dump_dir(dump_t *d, const char *dir) {
  struct dirent **names = NULL;
  int n = scandir(dir, &names, is_batch_entry, by_name);
  if (n < 0) {
    bad(d, dir, "cannot list the directory: %s", strerror(errno));
    return;
  }
  size_t dumped = 0;
  for (int i = 0; i < n; i++) {
    char path[PATH_MAX];
    struct stat st;
    if (snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name) >= (int)sizeof path) {
      bad(d, names[i]->d_name, "path too long");
    } else if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) {
      dump_file(d, path, true);
      dumped++;
    }
    free(names[i]);
  }
  free(names);
  if (dumped == 0) fprintf(stderr, PROG ": %s: no batch files\n", dir);
}

/* Verify, decode and print one batch file. A file listed in a directory
   that is gone when it is read was delivered, evicted or quarantined
   meanwhile by the SDK owning the spool: skipped, not an error. */
static void dump_file(dump_t *d, const char *path, bool listed) {
  struct stat st;
  if (stat(path, &st) != 0) {
    if (!(listed && errno == ENOENT)) bad(d, path, "%s", strerror(errno));
    return;
  }
  if (!S_ISREG(st.st_mode)) { /* a FIFO would block the open */
    bad(d, path, "not a regular file");
    return;
  }
  uint8_t *payload = NULL;
  size_t len = 0;
  const char *reason = NULL;
  int err = perf__spool_read_file(path, NULL, NULL, &payload, &len, &reason);
  if (err == PERF__E_SPOOL_CORRUPT) {
    bool hint = strcmp(reason, "bad_magic") == 0 && !has_suffix(path, ".batch");
    bad(d, path, "%s%s", reason_text(reason),
        hint ? " (not a batch file, and no <path>.batches/ directory beside it)" : "");
    return;
  }
  if (err == PERF_E_SYSTEM && listed && errno == ENOENT) return;
  if (err) {
    bad(d, path, "%s", err == PERF_E_SYSTEM ? strerror(errno) : perf_strerror(err));
    return;
  }
  Perf__V1__Batch *b = NULL;
  err = perf__batch_decode_stored(payload, len, DECODE_MAX, &b);
  free(payload);
  if (err == PERF_E_TRUNCATED) {
    bad(d, path, "not a valid perf.v1 Batch (decompresses to more than %zu MiB)", DECODE_MAX >> 20);
    return;
  }
  if (err) {
    bad(d, path, "not a valid perf.v1 Batch (%s)",
        err == PERF_E_NO_MEMORY ? "out of memory" : "bad zstd frame, protobuf or table reference");
    return;
  }
  if (d->json) {
    json_t *j = json_batch(d, path, b);
    if (!j || json_array_append_new(d->batches, j) != 0) bad(d, path, "out of memory");
  } else {
    text_batch(d, path, b);
  }
  perf__v1__batch__free_unpacked(b, NULL);
}

static void bad(dump_t *d, const char *path, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, PROG ": %s: %s\n", path, msg);
  d->status = EXIT_BAD;
  if (!d->errors) return;
  json_t *e = json_object();
  jset(e, "path", jstr(path));
  jset(e, "reason", jstr(msg));
  if (e) json_array_append_new(d->errors, e);
}

/* The spool's quarantine reasons (perf__spool_read_file) for people. */
static const char *reason_text(const char *reason) {
  static const struct {
    const char *code, *text;
  } texts[] = {
      {"empty", "empty file"},
      {"torn", "torn file (shorter than its header says)"},
      {"bad_magic", "bad magic"},
      {"bad_version", "unknown spool format version"},
      {"bad_header", "bad header (header CRC mismatch or wrong header size)"},
      {"bad_length", "bad length (payload length does not match the file size)"},
      {"bad_id", "batch id does not match the file name"},
      {"bad_crc", "payload CRC mismatch"},
  };
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
    if (strcmp(texts[i].code, reason) == 0) return texts[i].text;
  return reason;
}

/* ---- text ---------------------------------------------------------------- */

static void text_batch(const dump_t *d, const char *path, const Perf__V1__Batch *b) {
  char id[2 * PERF__BATCH_ID_BYTES + 1], when[TIME_MAX];
  batch_id_hex(b, id);
  printf("batch %s sequence=%" PRIu64 " created=%s file=", id, b->sequence,
         iso_time(b->created_unix_nanos, when));
  text_put(path);
  printf("\nsdk name=");
  text_put(b->sdk_name);
  printf(" version=");
  text_put(b->sdk_version);
  printf(" symbolized=%s\n", b->symbolized ? "true" : "false");
  const Perf__V1__Resource *r = b->resource;
  if (r) {
    printf("resource app=");
    text_put(r->app_name);
    printf(" version=");
    text_put(r->app_version);
    printf(" environment=");
    text_put(r->environment);
    for (size_t i = 0; i < r->n_tags; i++) {
      fputs(i == 0 ? " tags=" : ",", stdout);
      text_put(r->tags[i]->key);
      putchar('=');
      text_put(r->tags[i]->value);
    }
    printf(" host=");
    text_put(r->host);
    printf(" pid=%" PRIu32 " os=", r->pid);
    text_put(r->os);
    printf(" arch=");
    text_put(r->arch);
    putchar('\n');
  }
  const Perf__V1__DropCounters *dr = b->drops;
  printf("drops rate_limited=%" PRIu64 " queue_full=%" PRIu64 " sink_failed=%" PRIu64
         " spool_quota=%" PRIu64 " oversized=%" PRIu64 "\n",
         dr ? dr->rate_limited : 0, dr ? dr->queue_full : 0, dr ? dr->sink_failed : 0,
         dr ? dr->spool_quota : 0, dr ? dr->oversized : 0);
  perf__batch_loop_stats_t ls;
  if (perf__batch_loop_stats_of(b, &ls)) {
    printf("loop_stats watched_ms=%.3f busy_ms=%.3f units=", (double)ls.watched_ns / 1e6,
           (double)ls.busy_ns / 1e6);
    for (size_t i = 0; i < PERF__LOOP_BUCKETS; i++)
      printf("%s%" PRIu64, i ? "," : "", ls.units[i]);
    putchar('\n');
  }
  for (size_t i = 0; i < b->n_loops; i++) /* each loop's, when the SDK watched several */
    text_loop(b->loops[i]);
  printf("events=%zu\n\n", b->n_events);
  for (size_t i = 0; i < b->n_events; i++)
    text_event(d, b, b->events[i]);
}

/* `loop_stats loop="worker-1" watched_ms=... busy_ms=... units=...` */
static void text_loop(const Perf__V1__LoopStats *l) {
  printf("loop_stats loop=\"");
  text_put(l->loop);
  printf("\" watched_ms=%.3f busy_ms=%.3f units=", (double)l->watched_nanos / 1e6,
         (double)l->busy_nanos / 1e6);
  for (size_t i = 0; i < l->n_busy_units_by_bucket; i++)
    printf("%s%" PRIu64, i ? "," : "", l->busy_units_by_bucket[i]);
  putchar('\n');
}

static void text_event(const dump_t *d, const Perf__V1__Batch *b, const Perf__V1__Event *e) {
  char start[TIME_MAX];
  printf("event %s start=%s duration_ms=%.3f thread=%" PRIu32 " samples=%" PRIu64
         " failed_samples=%zu",
         kind_name(e->kind), iso_time(e->start_unix_nanos, start), (double)e->duration_nanos / 1e6,
         e->tid, event_samples(e), e->n_sample_errors);
  if (e->cpu_percent >= 0) printf(" cpu_percent=%" PRId32, e->cpu_percent);
  if (e->samples_dropped) printf(" samples_dropped=%" PRIu64, e->samples_dropped);
  putchar('\n');
  if (e->reason[0]) {
    printf("reason=\"");
    text_put(e->reason);
    printf("\"\n");
  }
  if (e->loop[0]) { /* the loop that hung, on the event's thread */
    printf("loop name=\"");
    text_put(e->loop);
    printf("\" thread=%" PRIu32 "\n", e->tid);
  }
  for (size_t i = 0; i < e->n_threads; i++) {
    const Perf__V1__Thread *t = e->threads[i];
    printf("thread tid=%" PRIu32 " name=\"", t->tid);
    text_put(string_at(b, t->name));
    putchar('"');
    if (t->cpu_percent >= 0) printf(" cpu_percent=%" PRId32, t->cpu_percent);
    putchar('\n');
  }
  text_states(b, e);
  size_t shown = stacks_shown(d, e);
  int64_t *cpu_us = stack_cpu_us(e);
  size_t *order = stack_order(e, cpu_us);
  for (size_t i = 0; i < shown; i++) {
    size_t k = order ? order[i] : i;
    text_stack(b, e, e->stack_counts[k], cpu_us ? cpu_us[k] : -1);
  }
  free(order);
  free(cpu_us);
  if (shown < e->n_stack_counts) printf("(%zu more stacks)\n", e->n_stack_counts - shown);
  putchar('\n');
}

/* The function a Line names, and the source position after a frame line. */
static const char *line_function(const Perf__V1__Batch *b, const Perf__V1__Line *l) {
  return l->function > 0 && l->function <= b->n_functions
             ? string_at(b, b->functions[l->function - 1]->name)
             : "??";
}

static void text_position(const Perf__V1__Batch *b, const Perf__V1__Line *l) {
  if (!l || !l->file || !l->line) return;
  putchar(' ');
  text_put(string_at(b, l->file));
  printf(":%" PRIu32, l->line);
}

/* "<index> <module> 0x<module-relative address> " */
static void text_frame_start(size_t index, const frame_view_t *v) {
  printf("%-3zu ", index);
  text_put(v->module);
  for (size_t w = strlen(v->module); w < 24; w++)
    putchar(' ');
  printf(" 0x%016" PRIx64 " ", v->address);
}

/* One frame's lines: its inline functions ("[inline] <function>"), then
   "<function> + <offset>" (unnamed: "<module>+0x<address>"), each with
   "<file>:<line>" when known. */
static void text_frame(const Perf__V1__Batch *b, const frame_view_t *v, size_t *index) {
  const Perf__V1__Frame *f = v->frame;
  for (size_t k = 0; k + 1 < f->n_lines; k++) {
    text_frame_start((*index)++, v);
    fputs("[inline] ", stdout);
    text_put(line_function(b, f->lines[k]));
    text_position(b, f->lines[k]);
    putchar('\n');
  }
  text_frame_start((*index)++, v);
  if (v->function) {
    text_put(v->function);
    printf(" + %" PRIu64, v->offset);
  } else { /* unnamed: the notation of the SDK's reports and the collector's labels */
    text_put(v->module);
    printf("+0x%" PRIx64, v->address);
  }
  text_position(b, f->n_lines ? f->lines[f->n_lines - 1] : NULL);
  if (v->runtime_address) printf(" [pc 0x%016" PRIx64 "]", v->runtime_address);
  putchar('\n');
}

/* A CPU event's CPU time per stack count (malloc'd, one per count), or
   NULL when it has no weights (or memory ran out). A profile's counts
   carry their own (StackCount.weight_micros). */
static int64_t *stack_cpu_us(const Perf__V1__Event *e) {
  if (e->kind == PERF__V1__EVENT_KIND__EVENT_KIND_PROFILE && e->n_stack_counts) {
    int64_t *out = malloc(e->n_stack_counts * sizeof *out);
    for (size_t i = 0; out && i < e->n_stack_counts; i++)
      out[i] = (int64_t)e->stack_counts[i]->weight_micros;
    return out;
  }
  if (!e->n_sample_weights_micros || !e->n_stack_counts) return NULL;
  int64_t *out = malloc(e->n_stack_counts * sizeof *out);
  if (out && perf__event_cpu_us(e, out) != 0) {
    free(out);
    out = NULL;
  }
  return out;
}

typedef struct {
  size_t index;
  int64_t cpu_us;
} ranked_t;

static int cmp_ranked(const void *x, const void *y) {
  const ranked_t *a = x, *b = y;
  if (a->cpu_us != b->cpu_us) return a->cpu_us > b->cpu_us ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

/* The order an event's stacks are shown in (malloc'd indices of its
   stack counts): a CPU profile's (cpu_us, from stack_cpu_us) most CPU time
   first, as the SDK's report and the collector show them, ties as the
   batch has them; NULL without weights (the batch's order: most samples
   first) or when memory ran out. */
static size_t *stack_order(const Perf__V1__Event *e, const int64_t *cpu_us) {
  if (!cpu_us) return NULL;
  ranked_t *r = malloc(e->n_stack_counts * sizeof *r);
  size_t *order = malloc(e->n_stack_counts * sizeof *order);
  if (r && order) {
    for (size_t i = 0; i < e->n_stack_counts; i++)
      r[i] = (ranked_t){i, cpu_us[i]};
    qsort(r, e->n_stack_counts, sizeof *r, cmp_ranked);
    for (size_t i = 0; i < e->n_stack_counts; i++)
      order[i] = r[i].index;
  } else {
    free(order);
    order = NULL;
  }
  free(r);
  return order;
}

/* The frames innermost first, as the stack text format (docs/protocol.md)
   with module-relative addresses, and `<truncated: reason>` when the
   stack did not reach its outermost frame (cpu_ms: a CPU event's CPU time
   in the stack; state: its samples' states). */
static void text_stack(const Perf__V1__Batch *b, const Perf__V1__Event *e,
                       const Perf__V1__StackCount *sc, int64_t cpu_us) {
  printf("stack samples=%" PRIu32 " thread=%" PRIu32, sc->samples, sc->tid);
  if (cpu_us >= 0) printf(" cpu_ms=%" PRId64 ".%03" PRId64, cpu_us / 1000, cpu_us % 1000);
  perf__state_tally_t t;
  count_states(b, e, sc, &t);
  char *words = dump_states_words(&t);
  if (words && words[0]) {
    fputs(" state=\"", stdout);
    text_put(words);
    putchar('"');
  }
  free(words);
  putchar('\n');
  const Perf__V1__Stack *s = stack_at(b, sc->stack);
  size_t index = 0;
  for (size_t i = 0; s && i < s->n_frames; i++) {
    frame_view_t v;
    if (frame_view(b, s->frames[i], &v)) text_frame(b, &v, &index);
  }
  if (s && s->end != PERF__V1__STACK_END__STACK_END_UNSPECIFIED &&
      s->end != PERF__V1__STACK_END__STACK_END_COMPLETE)
    printf("%-3zu <truncated: %s>\n", index, perf__stack_end_text((int)s->end));
}

/* The states of a stack count's samples: from the event's per-sample
   states, or (a profile, which has none) the count's own. */
static void count_states(const Perf__V1__Batch *b, const Perf__V1__Event *e,
                         const Perf__V1__StackCount *sc, perf__state_tally_t *t) {
  perf__state_tally_event(b, e, sc->tid, sc->stack, t);
  if (t->total || !sc->state) return;
  for (uint32_t i = 0; i < sc->samples; i++)
    perf__state_tally_add(t, (int)sc->state, 0, NULL);
}

/* "states thread=<tid> waiting in read() (pipe) 62%, running 38%" per
   thread whose states are known, as the file sink's report. */
static void text_states(const Perf__V1__Batch *b, const Perf__V1__Event *e) {
  uint32_t *tids;
  size_t n;
  if (perf__state_threads(e, &tids, &n) != 0) return;
  for (size_t i = 0; i < n; i++) {
    perf__state_tally_t t;
    perf__state_tally_event(b, e, tids[i], 0, &t);
    char *words = dump_states_words(&t);
    if (words && words[0]) {
      printf("states thread=%" PRIu32 " ", tids[i]);
      text_put(words);
      putchar('\n');
    }
    free(words);
  }
  free(tids);
}

/* A string from the batch, escaped as every report line escapes it
   (perf__strbuf_append_escaped: '"', '\\' and control characters). */
static void text_put(const char *s) {
  perf__strbuf_t b;
  perf__strbuf_init(&b, SIZE_MAX);
  if (perf__strbuf_append_escaped(&b, s) == 0 && b.data) fputs(b.data, stdout);
  perf__strbuf_free(&b);
}

/* ---- JSON ---------------------------------------------------------------- */

static json_t *json_batch(const dump_t *d, const char *path, const Perf__V1__Batch *b) {
  char id[2 * PERF__BATCH_ID_BYTES + 1], when[TIME_MAX];
  batch_id_hex(b, id);
  json_t *j = json_object(), *sdk = json_object(), *events = json_array();
  jset(j, "file", jstr(path));
  jset(j, "batch_id", jstr(id));
  jset(j, "sequence", ju64(b->sequence));
  jset(j, "created", jstr(iso_time(b->created_unix_nanos, when)));
  jset(j, "created_unix_nanos", json_integer(b->created_unix_nanos));
  jset(sdk, "name", jstr(b->sdk_name));
  jset(sdk, "version", jstr(b->sdk_version));
  jset(j, "sdk", sdk);
  jset(j, "symbolized", json_boolean(b->symbolized));
  jset(j, "resource", json_resource(b->resource));
  jset(j, "drops", json_drops(b->drops));
  perf__batch_loop_stats_t ls;
  if (perf__batch_loop_stats_of(b, &ls)) {
    json_t *loop = json_object(), *units = json_array();
    jset(loop, "watched_nanos", ju64(ls.watched_ns));
    jset(loop, "busy_nanos", ju64(ls.busy_ns));
    for (size_t i = 0; units && i < PERF__LOOP_BUCKETS; i++)
      json_array_append_new(units, ju64(ls.units[i]));
    jset(loop, "busy_units_by_bucket", units);
    jset(j, "loop_stats", loop);
  }
  json_t *loops = json_array();
  for (size_t i = 0; loops && i < b->n_loops; i++)
    json_array_append_new(loops, json_loop(b->loops[i]));
  jset(j, "loops", loops);
  for (size_t i = 0; events && i < b->n_events; i++)
    json_array_append_new(events, json_event(d, b, b->events[i]));
  jset(j, "events", events);
  return j;
}

/* One loop's stats (Batch.loops): {"loop", "watched_nanos", "busy_nanos",
   "busy_units_by_bucket"}. */
static json_t *json_loop(const Perf__V1__LoopStats *l) {
  json_t *j = json_object(), *units = json_array();
  jset(j, "loop", jstr(l->loop));
  jset(j, "watched_nanos", ju64(l->watched_nanos));
  jset(j, "busy_nanos", ju64(l->busy_nanos));
  for (size_t i = 0; units && i < l->n_busy_units_by_bucket; i++)
    json_array_append_new(units, ju64(l->busy_units_by_bucket[i]));
  jset(j, "busy_units_by_bucket", units);
  return j;
}

static json_t *json_resource(const Perf__V1__Resource *r) {
  json_t *j = json_object(), *tags = json_array();
  if (!r) {
    json_decref(tags);
    return j;
  }
  jset(j, "app_name", jstr(r->app_name));
  jset(j, "app_version", jstr(r->app_version));
  jset(j, "environment", jstr(r->environment));
  for (size_t i = 0; tags && i < r->n_tags; i++) {
    json_t *kv = json_object();
    jset(kv, "key", jstr(r->tags[i]->key));
    jset(kv, "value", jstr(r->tags[i]->value));
    json_array_append_new(tags, kv);
  }
  jset(j, "tags", tags);
  jset(j, "host", jstr(r->host));
  jset(j, "pid", json_integer(r->pid));
  jset(j, "os", jstr(r->os));
  jset(j, "arch", jstr(r->arch));
  return j;
}

static json_t *json_drops(const Perf__V1__DropCounters *dr) {
  json_t *j = json_object();
  jset(j, "rate_limited", ju64(dr ? dr->rate_limited : 0));
  jset(j, "queue_full", ju64(dr ? dr->queue_full : 0));
  jset(j, "sink_failed", ju64(dr ? dr->sink_failed : 0));
  jset(j, "spool_quota", ju64(dr ? dr->spool_quota : 0));
  jset(j, "oversized", ju64(dr ? dr->oversized : 0));
  return j;
}

static json_t *json_event(const dump_t *d, const Perf__V1__Batch *b, const Perf__V1__Event *e) {
  char start[TIME_MAX];
  json_t *j = json_object(), *threads = json_array(), *stacks = json_array();
  jset(j, "kind", jstr(kind_name(e->kind)));
  jset(j, "start", jstr(iso_time(e->start_unix_nanos, start)));
  jset(j, "start_unix_nanos", json_integer(e->start_unix_nanos));
  jset(j, "duration_nanos", json_integer(e->duration_nanos));
  jset(j, "duration_ms", json_real((double)e->duration_nanos / 1e6));
  jset(j, "tid", json_integer(e->tid));
  jset(j, "cpu_percent", json_integer(e->cpu_percent));
  jset(j, "reason", jstr(e->reason));
  jset(j, "loop", e->loop[0] ? jstr(e->loop) : json_null());
  jset(j, "samples", ju64(event_samples(e)));
  jset(j, "failed_samples", ju64(e->n_sample_errors));
  jset(j, "samples_dropped", ju64(e->samples_dropped));
  for (size_t i = 0; threads && i < e->n_threads; i++) {
    json_t *t = json_object();
    jset(t, "tid", json_integer(e->threads[i]->tid));
    jset(t, "name", jstr(string_at(b, e->threads[i]->name)));
    jset(t, "cpu_percent", json_integer(e->threads[i]->cpu_percent));
    json_array_append_new(threads, t);
  }
  jset(j, "threads", threads);
  jset(j, "states", dump_states_json(b, e));
  size_t shown = stacks_shown(d, e);
  int64_t *cpu_us = stack_cpu_us(e);
  size_t *order = stack_order(e, cpu_us);
  for (size_t i = 0; stacks && i < shown; i++) {
    size_t k = order ? order[i] : i;
    json_array_append_new(stacks, json_stack(b, e, e->stack_counts[k], cpu_us ? cpu_us[k] : -1));
  }
  free(order);
  free(cpu_us);
  jset(j, "stacks", stacks);
  jset(j, "stacks_not_shown", ju64(e->n_stack_counts - shown));
  return j;
}

static json_t *json_stack(const Perf__V1__Batch *b, const Perf__V1__Event *e,
                          const Perf__V1__StackCount *sc, int64_t cpu_us) {
  json_t *j = json_object(), *frames = json_array();
  jset(j, "samples", json_integer(sc->samples));
  if (cpu_us >= 0) jset(j, "cpu_us", json_integer(cpu_us));
  jset(j, "tid", json_integer(sc->tid));
  perf__state_tally_t t;
  count_states(b, e, sc, &t);
  char *words = dump_states_words(&t);
  jset(j, "states", jstr(words ? words : ""));
  free(words);
  const Perf__V1__Stack *s = stack_at(b, sc->stack);
  for (size_t i = 0; frames && s && i < s->n_frames; i++) {
    json_t *f = json_frame(b, i, s->frames[i]);
    if (f) json_array_append_new(frames, f);
  }
  jset(j, "frames", frames);
  jset(j, "end", jstr(perf__stack_end_text(s ? (int)s->end : 0)));
  return j;
}

/* A frame's Frame.lines, innermost first: {function, system_name, file,
   line, column, inline}. */
static json_t *json_lines(const Perf__V1__Batch *b, const Perf__V1__Frame *f) {
  json_t *lines = json_array();
  for (size_t k = 0; lines && k < f->n_lines; k++) {
    const Perf__V1__Line *l = f->lines[k];
    const Perf__V1__Function *fn =
        l->function > 0 && l->function <= b->n_functions ? b->functions[l->function - 1] : NULL;
    json_t *o = json_object();
    jset(o, "function", jstr(line_function(b, l)));
    if (fn && fn->system_name) jset(o, "system_name", jstr(string_at(b, fn->system_name)));
    jset(o, "file", l->file ? jstr(string_at(b, l->file)) : json_null());
    jset(o, "line", json_integer(l->line));
    jset(o, "column", json_integer(l->column));
    jset(o, "inline", json_boolean(k + 1 < f->n_lines));
    if (o) json_array_append_new(lines, o);
  }
  return lines;
}

static json_t *json_frame(const Perf__V1__Batch *b, size_t index, uint32_t frame_ref) {
  frame_view_t v;
  if (!frame_view(b, frame_ref, &v)) return NULL;
  json_t *j = json_object();
  jset(j, "index", ju64(index));
  jset(j, "module", jstr(v.module));
  jset(j, "module_path", v.module_path ? jstr(v.module_path) : json_null());
  if (v.mod) {
    char *id = malloc(2 * v.mod->build_id.len + 1);
    if (id) hex(v.mod->build_id.data, v.mod->build_id.len, id);
    jset(j, "build_id", id ? jstr(id) : NULL);
    free(id);
  }
  jset(j, "address", jhex64(v.address));
  jset(j, "function", v.function ? jstr(v.function) : json_null());
  if (v.system_name) jset(j, "system_name", jstr(v.system_name));
  jset(j, "offset", ju64(v.offset));
  if (v.runtime_address) jset(j, "runtime_address", jhex64(v.runtime_address));
  jset(j, "lines", json_lines(b, v.frame));
  return j;
}

/* A JSON string from bytes that may not be UTF-8: invalid sequences become
   U+FFFD, so the document is always valid. */
static json_t *jstr(const char *s) {
  if (!s) s = "";
  json_t *j = json_string(s);
  if (j) return j;
  char *clean = perf__utf8_sanitize(s);
  if (!clean) return NULL;
  j = json_string(clean);
  free(clean);
  return j;
}

/* Counts past INT64_MAX (only in a crafted batch) as decimal strings. */
static json_t *ju64(uint64_t v) {
  if (v <= (uint64_t)INT64_MAX) return json_integer((json_int_t)v);
  char s[24];
  snprintf(s, sizeof s, "%" PRIu64, v);
  return json_string(s);
}

static json_t *jhex64(uint64_t v) {
  char s[24];
  snprintf(s, sizeof s, "0x%016" PRIx64, v);
  return json_string(s);
}

/* obj[key] = value, taking value's reference; a NULL (failed) value or
   object leaves the key out. */
static void jset(json_t *obj, const char *key, json_t *value) {
  if (obj && value)
    json_object_set_new(obj, key, value);
  else
    json_decref(value);
}

/* ---- the batch's tables -------------------------------------------------- */

/* perf__batch_decode_stored has checked every reference; the bounds are checked
   again here so that nothing is read out of range whatever the batch. */
static bool frame_view(const Perf__V1__Batch *b, uint32_t frame_ref, frame_view_t *v) {
  if (frame_ref == 0 || frame_ref > b->n_frames) return false;
  const Perf__V1__Frame *f = b->frames[frame_ref - 1];
  memset(v, 0, sizeof *v);
  v->module = "??";
  if (f->module > 0 && f->module <= b->n_modules) {
    v->mod = b->modules[f->module - 1];
    v->module_path = v->mod->path;
    const char *slash = strrchr(v->mod->path, '/');
    v->module = slash && slash[1] ? slash + 1 : v->mod->path;
  }
  v->address = f->address;
  if (f->function > 0 && f->function <= b->n_functions) {
    const Perf__V1__Function *fn = b->functions[f->function - 1];
    v->function = string_at(b, fn->name);
    v->system_name = fn->system_name ? string_at(b, fn->system_name) : NULL;
    v->offset = f->function_offset;
  }
  v->runtime_address = f->runtime_address;
  v->frame = f;
  return true;
}

static const Perf__V1__Stack *stack_at(const Perf__V1__Batch *b, uint32_t ref) {
  return ref > 0 && ref <= b->n_stacks ? b->stacks[ref - 1] : NULL;
}

static const char *string_at(const Perf__V1__Batch *b, uint32_t index) {
  return index < b->n_strings ? b->strings[index] : "";
}

static const char *kind_name(Perf__V1__EventKind kind) {
  switch (kind) {
  case PERF__V1__EVENT_KIND__EVENT_KIND_HANG: return "hang";
  case PERF__V1__EVENT_KIND__EVENT_KIND_FATAL_HANG: return "fatal_hang";
  case PERF__V1__EVENT_KIND__EVENT_KIND_CPU: return "cpu";
  case PERF__V1__EVENT_KIND__EVENT_KIND_MANUAL: return "manual";
  case PERF__V1__EVENT_KIND__EVENT_KIND_PROFILE: return "profile";
  default: return "unknown";
  }
}

/* Samples that produced a stack: the stack counts add up to them (fatal
   hangs have no per-sample arrays, only the counts). */
static uint64_t event_samples(const Perf__V1__Event *e) {
  uint64_t n = 0;
  for (size_t i = 0; i < e->n_stack_counts; i++)
    n += e->stack_counts[i]->samples;
  return n;
}

static size_t stacks_shown(const dump_t *d, const Perf__V1__Event *e) {
  return d->max_stacks && d->max_stacks < e->n_stack_counts ? d->max_stacks : e->n_stack_counts;
}

/* ---- small helpers ------------------------------------------------------- */

/* ISO 8601 UTC with milliseconds; "@<ns>" when out of gmtime's range. */
static const char *iso_time(int64_t unix_ns, char out[TIME_MAX]) {
  int64_t s = unix_ns / 1000000000, ns = unix_ns % 1000000000;
  if (ns < 0) {
    ns += 1000000000;
    s--;
  }
  time_t t = (time_t)s;
  struct tm tm;
  char date[TIME_MAX - 8];
  if (!gmtime_r(&t, &tm) || strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
    snprintf(out, TIME_MAX, "@%" PRId64, unix_ns);
    return out;
  }
  snprintf(out, TIME_MAX, "%s.%03dZ", date, (int)(ns / 1000000));
  return out;
}

static void hex(const uint8_t *p, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  out[2 * n] = '\0';
}

/* The decoder has checked the id is 16 bytes; never more are written. */
static void batch_id_hex(const Perf__V1__Batch *b, char out[2 * PERF__BATCH_ID_BYTES + 1]) {
  size_t n = b->batch_id.len;
  hex(b->batch_id.data, n < PERF__BATCH_ID_BYTES ? n : PERF__BATCH_ID_BYTES, out);
}

static bool has_suffix(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}
