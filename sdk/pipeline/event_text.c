/*
 * event_text.c - formats events as text (see event_text.h): frames with
 * their inline functions and source lines (sdk/base/frame_text.h), names
 * demangled. Writer thread.
 */
#include "sdk/pipeline/event_text.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/base/clock.h"
#include "sdk/base/frame_text.h"
#include "sdk/sampler/backtrace_text.h"
#include "sdk/sampler/sample_state.h"
#include "sdk/wire/state_text.h"

/* Stacks that differ only in where inside the same functions they were
   taken (a busy loop sampled at different instructions) are shown as one,
   with their samples added up: readers think in functions. The functions
   are every line of every frame, inline ones included (a pc inside an
   inlined helper is another place than one beside it), by their base
   names (a function's clones are one function), and how the stack ended. */
typedef struct {
  char *signature;       /* thread, the functions innermost first, the end */
  size_t representative; /* the group's most sampled stack */
  uint32_t samples;
  uint64_t weight_ns; /* weighted events: their CPU time (the groups' order) */
  size_t tally;       /* its samples' states: tallies[tally] (the order before sorting) */
} group_t;

/* What the first lines of a report say. */
typedef struct header_s {
  const char *kind;
  int64_t start_wall_ns, duration_ns;
  pid_t tid;
  size_t samples;
  int cpu_percent; /* -1: not shown */
  uint64_t dropped;
  size_t failed;
  const char *reason;
  const char *label;
  const char *loop; /* hang, fatal hang: the loop's name; NULL or "" for none */
} header_t;

static int format_header(perf__strbuf_t *b, const header_t *h, const perf__config_t *cfg);
static int format_thread(perf__strbuf_t *b, pid_t tid, const char *name, int cpu_percent);
static int quoted_line(perf__strbuf_t *b, const char *name, const char *text);
static int format_decoded_stack(perf__strbuf_t *b, const Perf__V1__Batch *bt,
                                const Perf__V1__Stack *s);
static const char *string_at(const Perf__V1__Batch *bt, uint32_t index);
static int stack_signature(const perf__event_t *ev, const perf__stack_t *s, char **out);
static int compare_groups(const void *a, const void *b);
static int format_decoded_states(perf__strbuf_t *b, const Perf__V1__Batch *bt,
                                 const Perf__V1__Event *e);
static void tally_sample(perf__state_tally_t *t, perf__sample_state_t s);
static int format_profile(perf__strbuf_t *b, const perf__event_t *ev, const perf__config_t *cfg);

int perf__format_event_stacks(perf__strbuf_t *b, const perf__event_t *ev) {
  size_t cap = ev->stack_count ? ev->stack_count : 1;
  group_t *groups = calloc(cap, sizeof *groups);
  size_t *group_of = calloc(cap, sizeof *group_of);
  perf__state_tally_t *tallies = calloc(cap, sizeof *tallies);
  size_t n = 0;
  int err = groups && group_of && tallies ? 0 : PERF_E_NO_MEMORY;
  for (size_t i = 0; i < ev->stack_count && !err; i++) {
    char *sig = NULL;
    if ((err = stack_signature(ev, &ev->stacks[i], &sig)) != 0) break;
    size_t g = 0;
    while (g < n && strcmp(groups[g].signature, sig) != 0)
      g++;
    if (g == n) {
      groups[n++] = (group_t){sig, i, 0, 0, g};
    } else {
      free(sig);
    }
    groups[g].samples += ev->stacks[i].samples;
    groups[g].weight_ns += ev->stacks[i].weight_ns;
    group_of[i] = g;
  }
  for (size_t i = 0; i < ev->sample_count && !err; i++) {
    int32_t st = ev->samples[i].stack;
    if (st >= 0 && (size_t)st < ev->stack_count)
      tally_sample(&tallies[group_of[st]], ev->samples[i].state);
  }
  /* A profile has no samples: each stack is of one state. */
  for (size_t i = 0; i < ev->stack_count && !err && ev->kind == PERF__EVENT_PROFILE; i++)
    for (uint32_t k = 0; k < ev->stacks[i].samples; k++)
      perf__state_tally_add(&tallies[group_of[i]], ev->stacks[i].state, 0, NULL);
  /* Stacks arrive sorted by their own counts; groups may reorder. */
  qsort(groups, n, sizeof *groups, compare_groups);
  for (size_t g = 0; g < n && !err; g++) {
    const perf__stack_t *s = &ev->stacks[groups[g].representative];
    const perf__state_tally_t *t = &tallies[groups[g].tally];
    err = perf__strbuf_appendf(b, "stack samples=%u thread=%d", groups[g].samples, (int)s->tid);
    /* A CPU profile's stacks: the CPU time their samples stand for. */
    if (!err && ev->weighted)
      err = perf__strbuf_appendf(b, " cpu_ms=%" PRIu64 ".%03" PRIu64, groups[g].weight_ns / 1000000,
                                 groups[g].weight_ns / 1000 % 1000);
    if (!err && t->known) err = perf__strbuf_appendf(b, " state=\"");
    if (!err) err = perf__format_state_tally(b, t);
    if (!err) err = perf__strbuf_appendf(b, t->known ? "\"\n" : "\n");
    if (!err) err = perf__format_frames(b, ev->mods, &ev->frames[s->first], s->depth, s->end);
  }
  for (size_t g = 0; g < n; g++)
    free(groups[g].signature);
  free(groups);
  free(group_of);
  free(tallies);
  return err;
}

/* Why samples gave no stack: the distinct errors in the order first seen
   and how many samples failed with each (an error enum is small). */
typedef struct {
  int error[16];
  size_t count[16], n;
} failures_t;

static void count_failure(failures_t *f, int error) {
  size_t k = 0;
  while (k < f->n && f->error[k] != error)
    k++;
  if (k == f->n) {
    if (f->n == 16) return;
    f->error[f->n] = error;
    f->count[f->n++] = 0;
  }
  f->count[k]++;
}

/* "failed samples=<n> error="<text>"", one line per distinct error. */
static int format_failures(perf__strbuf_t *b, const failures_t *f) {
  int err = PERF_OK;
  for (size_t k = 0; k < f->n && !err; k++)
    err = perf__strbuf_appendf(b, "failed samples=%zu error=\"%s\"\n", f->count[k],
                               perf_strerror(f->error[k]));
  return err;
}

/* The states lines of a decoded event (a dead process's marker), as
   format_thread_states says them for a live one. */
static int format_decoded_states(perf__strbuf_t *b, const Perf__V1__Batch *bt,
                                 const Perf__V1__Event *e) {
  uint32_t *tids;
  size_t n;
  int err = perf__state_threads(e, &tids, &n);
  for (size_t i = 0; i < n && !err; i++) {
    perf__state_tally_t t;
    perf__state_tally_event(bt, e, tids[i], 0, &t);
    err = perf__strbuf_appendf(b, "states thread=%u ", tids[i]);
    if (!err) err = perf__format_state_tally(b, &t);
    if (!err) err = perf__strbuf_appendf(b, "\n");
  }
  free(tids);
  return err;
}

/* "states thread=<tid> waiting in read() (pipe) 62%, running 38%", one
   line per sampled thread (in the order first sampled) whose states are
   known. */
static int format_thread_states(perf__strbuf_t *b, const perf__event_t *ev) {
  pid_t tids[PERF__EVENT_MAX_THREADS];
  size_t n = 0;
  for (size_t i = 0; i < ev->sample_count; i++) {
    size_t k = 0;
    while (k < n && tids[k] != ev->samples[i].tid)
      k++;
    if (k == n && n < PERF__EVENT_MAX_THREADS) tids[n++] = ev->samples[i].tid;
  }
  int err = PERF_OK;
  for (size_t k = 0; k < n && !err; k++) {
    perf__state_tally_t t = {0};
    for (size_t i = 0; i < ev->sample_count; i++)
      if (ev->samples[i].tid == tids[k]) tally_sample(&t, ev->samples[i].state);
    if (!t.known) continue;
    err = perf__strbuf_appendf(b, "states thread=%d ", (int)tids[k]);
    if (!err) err = perf__format_state_tally(b, &t);
    if (!err) err = perf__strbuf_appendf(b, "\n");
  }
  return err;
}

int perf__format_event(perf__strbuf_t *b, const perf__event_t *ev, const perf__config_t *cfg) {
  if (ev->kind == PERF__EVENT_PROFILE) return format_profile(b, ev, cfg);
  size_t good = perf__event_good_samples(ev);
  header_t h = {perf__event_kind_name(ev->kind),
                ev->start_wall_ns,
                ev->duration_ns,
                ev->tid,
                good,
                ev->kind == PERF__EVENT_CPU ? ev->cpu_percent : -1,
                ev->dropped,
                ev->sample_count - good,
                ev->reason,
                ev->label,
                ev->loop};
  int err = format_header(b, &h, cfg);
  if (!err && h.failed) {
    failures_t f = {.n = 0};
    for (size_t i = 0; i < ev->sample_count; i++)
      if (ev->samples[i].stack < 0) count_failure(&f, ev->samples[i].error);
    err = format_failures(b, &f);
  }
  for (size_t i = 0; i < ev->thread_count && !err; i++)
    err = format_thread(b, ev->threads[i].tid, ev->threads[i].name, ev->threads[i].cpu_percent);
  if (!err) err = format_thread_states(b, ev);
  if (!err) err = perf__format_event_stacks(b, ev);
  if (!err) err = perf__strbuf_appendf(b, "\n");
  return err;
}

/* One function of a profile: its CPU time where it is the innermost
   frame (self) and where it is anywhere on the stack (total). */
typedef struct {
  char *name; /* "module!function" */
  uint64_t self_ns, total_ns;
} function_t;

typedef struct {
  function_t *items;
  size_t count, cap;
} functions_t;

static function_t *function_named(functions_t *f, const char *name) {
  for (size_t i = 0; i < f->count; i++)
    if (strcmp(f->items[i].name, name) == 0) return &f->items[i];
  if (f->count == f->cap) {
    size_t cap = f->cap ? f->cap * 2 : 64;
    function_t *grown = realloc(f->items, cap * sizeof *grown);
    if (!grown) return NULL;
    f->items = grown;
    f->cap = cap;
  }
  char *copy = strdup(name);
  if (!copy) return NULL;
  f->items[f->count] = (function_t){copy, 0, 0};
  return &f->items[f->count++];
}

/* A frame's function as the profile's lines name it: "function" (its
   physical function's base name: clones together, as perf report's
   symbols) or "module+0x<address>" when it has no name. */
static void function_text(perf__modules_t *mods, uintptr_t pc, bool ret, char *out, size_t len) {
  perf__frame_info_t fi;
  perf__modules_symbolize(mods, pc, ret, &fi);
  const char *fn = perf__frame_symbol(&fi);
  if (fn)
    perf__sym_base_name(fn, out, len);
  else
    snprintf(out, len, "%s+0x%" PRIxPTR, fi.module, fi.module_rel);
}

/* The CPU time of each function of a profile, into *f. */
static int tally_functions(const perf__event_t *ev, functions_t *f) {
  char name[512];
  for (size_t i = 0; i < ev->stack_count; i++) {
    const perf__stack_t *s = &ev->stacks[i];
    char *seen[PERF__EVENT_MAX_DEPTH];
    size_t nseen = 0;
    for (uint32_t k = 0; k < s->depth; k++) {
      function_text(ev->mods, ev->frames[s->first + k], k > 0, name, sizeof name);
      function_t *fn = function_named(f, name);
      if (!fn) return PERF_E_NO_MEMORY;
      if (k == 0) fn->self_ns += s->weight_ns;
      bool counted = false; /* a recursive function counts once per stack */
      for (size_t j = 0; j < nseen && !counted; j++)
        counted = seen[j] == fn->name;
      if (!counted) {
        fn->total_ns += s->weight_ns;
        seen[nseen++] = fn->name;
      }
    }
  }
  return PERF_OK;
}

static int compare_functions(const void *a, const void *b) {
  const function_t *x = a, *y = b;
  if (x->self_ns != y->self_ns) return x->self_ns > y->self_ns ? -1 : 1;
  if (x->total_ns != y->total_ns) return x->total_ns > y->total_ns ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* "function self_percent=<..> total_percent=<..> cpu_ms=<self> name="<..>"",
   most self CPU first, the first PROFILE_FUNCTIONS of them (shares of the
   profile's CPU time). */
#define PROFILE_FUNCTIONS 40
static int format_profile_functions(perf__strbuf_t *b, const perf__event_t *ev, uint64_t all_ns) {
  functions_t f = {NULL, 0, 0};
  int err = tally_functions(ev, &f);
  if (!err) qsort(f.items, f.count, sizeof *f.items, compare_functions);
  for (size_t i = 0; i < f.count && i < PROFILE_FUNCTIONS && !err && all_ns; i++) {
    const function_t *fn = &f.items[i];
    err = perf__strbuf_appendf(
        b, "function self_percent=%.1f total_percent=%.1f cpu_ms=%" PRIu64 ".%03" PRIu64 " name=\"",
        100.0 * (double)fn->self_ns / (double)all_ns, 100.0 * (double)fn->total_ns / (double)all_ns,
        fn->self_ns / 1000000, fn->self_ns / 1000 % 1000);
    if (!err) err = perf__strbuf_append_escaped(b, fn->name);
    if (!err) err = perf__strbuf_appendf(b, "\"\n");
  }
  if (!err && f.count > PROFILE_FUNCTIONS)
    err = perf__strbuf_appendf(b, "(%zu more functions)\n", f.count - PROFILE_FUNCTIONS);
  for (size_t i = 0; i < f.count; i++)
    free(f.items[i].name);
  free(f.items);
  return err;
}

/* A window of the continuous CPU profile: the header, a "profile" line
   (its CPU time, samples not kept), its threads, its functions with their
   shares of its CPU time, then its stacks. */
static int format_profile(perf__strbuf_t *b, const perf__event_t *ev, const perf__config_t *cfg) {
  size_t samples = 0;
  uint64_t all_ns = 0;
  for (size_t i = 0; i < ev->stack_count; i++) {
    samples += ev->stacks[i].samples;
    all_ns += ev->stacks[i].weight_ns;
  }
  header_t h = {"profile",
                ev->start_wall_ns,
                ev->duration_ns,
                ev->tid,
                samples,
                -1,
                ev->dropped,
                0,
                NULL,
                NULL,
                NULL};
  int err = format_header(b, &h, cfg);
  if (!err)
    err = perf__strbuf_appendf(b,
                               "profile cpu_ms=%" PRIu64 ".%03" PRIu64 " stacks=%zu"
                               " samples_dropped=%" PRIu64 "\n",
                               all_ns / 1000000, all_ns / 1000 % 1000, ev->stack_count,
                               ev->samples_over);
  for (size_t i = 0; i < ev->thread_count && !err; i++)
    err = format_thread(b, ev->threads[i].tid, ev->threads[i].name, ev->threads[i].cpu_percent);
  if (!err) err = format_profile_functions(b, ev, all_ns);
  if (!err) err = perf__format_event_stacks(b, ev);
  if (!err) err = perf__strbuf_appendf(b, "\n");
  return err;
}

int perf__format_fatal_hang(perf__strbuf_t *b, const Perf__V1__Batch *marker, const char *reason,
                            const perf__config_t *cfg) {
  const Perf__V1__Event *e = marker->events[0];
  size_t failed = e->n_sample_errors;
  header_t h = {"fatal_hang",
                e->start_unix_nanos,
                e->duration_nanos,
                (pid_t)e->tid,
                e->n_sample_stacks - failed,
                -1,
                0,
                failed,
                reason,
                e->label,
                e->loop};
  int err = format_header(b, &h, cfg);
  if (!err && failed) {
    failures_t f = {.n = 0};
    for (size_t i = 0; i < e->n_sample_errors; i++)
      count_failure(&f, e->sample_errors[i]);
    err = format_failures(b, &f);
  }
  for (size_t i = 0; i < e->n_threads && !err; i++)
    err = format_thread(b, (pid_t)e->threads[i]->tid, string_at(marker, e->threads[i]->name),
                        e->threads[i]->cpu_percent);
  if (!err) err = format_decoded_states(b, marker, e);
  for (size_t i = 0; i < e->n_stack_counts && !err; i++) {
    const Perf__V1__StackCount *c = e->stack_counts[i];
    perf__state_tally_t t;
    perf__state_tally_event(marker, e, c->tid, c->stack, &t);
    err = perf__strbuf_appendf(b, "stack samples=%u thread=%u", c->samples, c->tid);
    if (!err && t.known) err = perf__strbuf_appendf(b, " state=\"");
    if (!err) err = perf__format_state_tally(b, &t);
    if (!err) err = perf__strbuf_appendf(b, t.known ? "\"\n" : "\n");
    if (!err) err = format_decoded_stack(b, marker, marker->stacks[c->stack - 1]);
  }
  if (!err) err = perf__strbuf_appendf(b, "\n");
  return err;
}

/* The "event" and "app" lines, and the reason, label and loop when there
   are. */
static int format_header(perf__strbuf_t *b, const header_t *h, const perf__config_t *cfg) {
  char start[40];
  perf__format_iso8601(h->start_wall_ns, start, sizeof start);
  int err =
      perf__strbuf_appendf(b, "event %s start=%s duration_ms=%" PRId64 " thread=%d samples=%zu",
                           h->kind, start, h->duration_ns / 1000000, (int)h->tid, h->samples);
  if (!err && h->cpu_percent >= 0) err = perf__strbuf_appendf(b, " cpu_percent=%d", h->cpu_percent);
  if (!err) err = perf__strbuf_appendf(b, "\napp name=");
  if (!err) err = perf__strbuf_append_escaped(b, cfg->app_name);
  if (!err) err = perf__strbuf_appendf(b, " version=");
  if (!err) err = perf__strbuf_append_escaped(b, cfg->app_version);
  if (!err) err = perf__strbuf_appendf(b, " environment=");
  if (!err) err = perf__strbuf_append_escaped(b, cfg->environment);
  for (size_t i = 0; i < cfg->tag_count && !err; i++) {
    err = perf__strbuf_appendf(b, "%s", i ? "," : " tags=");
    if (!err) err = perf__strbuf_append_escaped(b, cfg->tags[i].key);
    if (!err) err = perf__strbuf_appendf(b, "=");
    if (!err) err = perf__strbuf_append_escaped(b, cfg->tags[i].value);
  }
  if (!err)
    err =
        perf__strbuf_appendf(b, " dropped=%" PRIu64 " failed_samples=%zu\n", h->dropped, h->failed);
  if (!err && h->reason && h->reason[0]) err = quoted_line(b, "reason", h->reason);
  if (!err && h->label && h->label[0]) err = quoted_line(b, "label", h->label);
  if (!err && h->loop && h->loop[0]) {
    err = perf__strbuf_appendf(b, "loop name=\"");
    if (!err) err = perf__strbuf_append_escaped(b, h->loop);
    if (!err) err = perf__strbuf_appendf(b, "\" thread=%d\n", (int)h->tid);
  }
  return err;
}

/* `name="text"` and a newline, text escaped: whatever a label or a reason
   holds, it stays inside its own line. */
static int quoted_line(perf__strbuf_t *b, const char *name, const char *text) {
  int err = perf__strbuf_appendf(b, "%s=\"", name);
  if (!err) err = perf__strbuf_append_escaped(b, text);
  return err ? err : perf__strbuf_appendf(b, "\"\n");
}

static int format_thread(perf__strbuf_t *b, pid_t tid, const char *name, int cpu_percent) {
  int err = perf__strbuf_appendf(b, "thread tid=%d name=\"", (int)tid);
  if (!err) err = perf__strbuf_append_escaped(b, name);
  if (!err) err = perf__strbuf_appendf(b, "\"");
  if (!err && cpu_percent >= 0) err = perf__strbuf_appendf(b, " cpu_percent=%d", cpu_percent);
  if (!err) err = perf__strbuf_appendf(b, "\n");
  return err;
}

/* The lines of a decoded frame, as the live frames print: its Frame.lines
   (inline functions, then the physical one) when it has them, else the
   function it names, else `<module>+0x<address>` (frame_text.h). */
static int format_decoded_frame(perf__strbuf_t *b, const Perf__V1__Batch *bt,
                                const Perf__V1__Frame *f, size_t *index) {
  const Perf__V1__Module *m = f->module ? bt->modules[f->module - 1] : NULL;
  const char *module = "??";
  if (m) {
    const char *slash = strrchr(m->path, '/');
    module = slash ? slash + 1 : m->path;
  }
  uint64_t pc = m ? m->load_bias + f->address : f->address;
  const char *fn = f->function ? string_at(bt, bt->functions[f->function - 1]->name) : NULL;
  perf__frame_line_t line = {module, pc, fn, fn ? f->function_offset : f->address, false, NULL, 0};
  for (size_t k = 0; k < f->n_lines; k++) {
    const Perf__V1__Line *l = f->lines[k];
    bool physical = k + 1 == f->n_lines;
    line.function = physical && fn ? fn : string_at(bt, bt->functions[l->function - 1]->name);
    line.offset = physical ? f->function_offset : 0;
    line.is_inline = !physical;
    line.file = l->file ? string_at(bt, l->file) : NULL;
    line.line = l->line;
    int err = perf__format_frame_line(b, (*index)++, &line);
    if (err) return err;
  }
  return f->n_lines ? PERF_OK : perf__format_frame_line(b, (*index)++, &line);
}

/* A decoded stack's frames: the runtime pc in the dead process (load bias
   + module-relative address), the module's basename, and the names that
   process gave it; then how the stack ended when it was cut short. */
static int format_decoded_stack(perf__strbuf_t *b, const Perf__V1__Batch *bt,
                                const Perf__V1__Stack *s) {
  int err = PERF_OK;
  size_t index = 0;
  for (size_t i = 0; i < s->n_frames && !err; i++)
    err = format_decoded_frame(b, bt, bt->frames[s->frames[i] - 1], &index);
  return err ? err : perf__format_stack_end(b, index, (int)s->end);
}

static const char *string_at(const Perf__V1__Batch *bt, uint32_t index) {
  return index < bt->n_strings ? bt->strings[index] : "";
}

/* "|module!base name" per line of the frame, or "|module!address". */
static int frame_signature(perf__strbuf_t *sig, const perf__frame_info_t *fi) {
  if (fi->sym.count == 0)
    return perf__strbuf_appendf(sig, "|%s!%" PRIxPTR, fi->module, fi->module_rel);
  int err = PERF_OK;
  for (size_t k = 0; k < fi->sym.count && !err; k++) {
    char base[512];
    perf__sym_base_name(fi->sym.lines[k].function, base, sizeof base);
    err = perf__strbuf_appendf(sig, "|%s!%s", fi->module, base);
  }
  return err;
}

static int stack_signature(const perf__event_t *ev, const perf__stack_t *s, char **out) {
  perf__strbuf_t sig;
  perf__strbuf_init(&sig, 1u << 20);
  int err = perf__strbuf_appendf(&sig, "%d#%d", (int)s->tid, (int)s->end);
  for (uint32_t i = 0; i < s->depth && !err; i++) {
    perf__frame_info_t fi;
    perf__modules_symbolize(ev->mods, ev->frames[s->first + i], i > 0, &fi);
    err = frame_signature(&sig, &fi);
  }
  if (!err) err = perf__strbuf_take(&sig, out);
  perf__strbuf_free(&sig);
  return err;
}

static int compare_groups(const void *a, const void *b) {
  const group_t *x = a, *y = b;
  if (x->weight_ns != y->weight_ns) return x->weight_ns > y->weight_ns ? -1 : 1;
  if (x->samples != y->samples) return x->samples > y->samples ? -1 : 1;
  return (x->representative > y->representative) - (x->representative < y->representative);
}

/* A sample's state counted as the wire says it (the call by its name). */
static void tally_sample(perf__state_tally_t *t, perf__sample_state_t s) {
  char call[PERF__STATE_CALL_MAX] = "";
  if (s.state > PERF__STATE_RUNNING) perf__syscall_label(s.syscall, call, sizeof call);
  perf__state_tally_add(t, s.state, s.fd_kind, call);
}
