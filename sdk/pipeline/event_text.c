/*
 * event_text.c - formats events as text (see event_text.h). Writer thread.
 */
#include "sdk/pipeline/event_text.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/base/clock.h"
#include "sdk/sampler/backtrace_text.h"

/* Stacks that differ only in where inside the same functions they were
   taken (a busy loop sampled at different instructions) are shown as one,
   with their samples added up: readers think in functions. */
typedef struct {
  char *signature;       /* thread and the functions, innermost first */
  size_t representative; /* the group's most sampled stack */
  uint32_t samples;
} group_t;

static int format_app_line(perf__strbuf_t *b, const perf__event_t *ev, const perf__config_t *cfg);
static int stack_signature(const perf__event_t *ev, const perf__stack_t *s, char **out);
static int compare_groups(const void *a, const void *b);

int perf__format_event_stacks(perf__strbuf_t *b, const perf__event_t *ev) {
  if (ev->stacks_text) return perf__strbuf_appendf(b, "%s", ev->stacks_text);
  group_t *groups = calloc(ev->stack_count ? ev->stack_count : 1, sizeof *groups);
  size_t n = 0;
  int err = groups ? 0 : PERF_E_NO_MEMORY;
  for (size_t i = 0; i < ev->stack_count && !err; i++) {
    char *sig = NULL;
    if ((err = stack_signature(ev, &ev->stacks[i], &sig)) != 0) break;
    size_t g = 0;
    while (g < n && strcmp(groups[g].signature, sig) != 0)
      g++;
    if (g == n) {
      groups[n++] = (group_t){sig, i, 0};
    } else {
      free(sig);
    }
    groups[g].samples += ev->stacks[i].samples;
  }
  /* Stacks arrive sorted by their own counts; groups may reorder. */
  qsort(groups, n, sizeof *groups, compare_groups);
  for (size_t g = 0; g < n && !err; g++) {
    const perf__stack_t *s = &ev->stacks[groups[g].representative];
    err = perf__strbuf_appendf(b, "stack samples=%u thread=%d\n", groups[g].samples, (int)s->tid);
    if (!err) err = perf__format_frames(b, ev->mods, &ev->frames[s->first], s->depth);
  }
  for (size_t g = 0; g < n; g++)
    free(groups[g].signature);
  free(groups);
  return err;
}

int perf__format_event(perf__strbuf_t *b, const perf__event_t *ev, const perf__config_t *cfg) {
  char start[40];
  perf__format_iso8601(ev->start_wall_ns, start, sizeof start);
  size_t samples = ev->stacks_text ? ev->text_samples : perf__event_good_samples(ev);
  int err = perf__strbuf_appendf(
      b, "event %s start=%s duration_ms=%" PRId64 " thread=%d samples=%zu",
      perf__event_kind_name(ev->kind), start, ev->duration_ns / 1000000, (int)ev->tid, samples);
  if (!err && ev->kind == PERF__EVENT_CPU)
    err = perf__strbuf_appendf(b, " cpu_percent=%d", ev->cpu_percent);
  if (!err) err = perf__strbuf_appendf(b, "\n");
  if (!err) err = format_app_line(b, ev, cfg);
  if (!err && ev->reason[0]) err = perf__strbuf_appendf(b, "reason=\"%s\"\n", ev->reason);
  for (size_t i = 0; i < ev->thread_count && !err; i++) {
    const perf__thread_t *t = &ev->threads[i];
    err = perf__strbuf_appendf(b, "thread tid=%d name=\"%s\"", (int)t->tid, t->name);
    if (!err && t->cpu_percent >= 0)
      err = perf__strbuf_appendf(b, " cpu_percent=%d", t->cpu_percent);
    if (!err) err = perf__strbuf_appendf(b, "\n");
  }
  if (!err) err = perf__format_event_stacks(b, ev);
  if (!err) err = perf__strbuf_appendf(b, "\n");
  return err;
}

static int format_app_line(perf__strbuf_t *b, const perf__event_t *ev, const perf__config_t *cfg) {
  int err = perf__strbuf_appendf(b, "app name=%s version=%s environment=%s", cfg->app_name,
                                 cfg->app_version, cfg->environment);
  for (size_t i = 0; i < cfg->tag_count && !err; i++)
    err = perf__strbuf_appendf(b, "%s%s=%s", i ? "," : " tags=", cfg->tags[i].key,
                               cfg->tags[i].value);
  size_t failed = ev->sample_count - perf__event_good_samples(ev);
  if (!err)
    err = perf__strbuf_appendf(b, " dropped=%" PRIu64 " failed_samples=%zu\n", ev->dropped, failed);
  return err;
}

static int stack_signature(const perf__event_t *ev, const perf__stack_t *s, char **out) {
  perf__strbuf_t sig;
  perf__strbuf_init(&sig, 1u << 20);
  int err = perf__strbuf_appendf(&sig, "%d", (int)s->tid);
  for (uint32_t i = 0; i < s->depth && !err; i++) {
    perf__frame_info_t fi;
    uintptr_t pc = ev->frames[s->first + i];
    perf__modules_symbolize(ev->mods, pc, i > 0, &fi);
    err = fi.symbol ? perf__strbuf_appendf(&sig, "|%s!%s", fi.module, fi.symbol)
                    : perf__strbuf_appendf(&sig, "|%s!%" PRIxPTR, fi.module, fi.module_rel);
  }
  if (!err) err = perf__strbuf_take(&sig, out);
  perf__strbuf_free(&sig);
  return err;
}

static int compare_groups(const void *a, const void *b) {
  const group_t *x = a, *y = b;
  if (x->samples != y->samples) return x->samples > y->samples ? -1 : 1;
  return (x->representative > y->representative) - (x->representative < y->representative);
}
