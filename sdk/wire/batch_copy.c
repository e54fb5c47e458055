/*
 * batch_copy.c - an event of a decoded batch copied into the open batch
 * (see perf__batch_copy_event in batch.h): its modules, functions, frames
 * (with their lines), stacks (with how they ended) and strings interned
 * again, as one transaction. The SDK uses it
 * for a hang marker left by a process that died hung: the marker is a
 * one-event batch, reported as a fatal hang in the next batch. Writer
 * thread.
 */
#include <stdlib.h>
#include <string.h>

#include "sdk/wire/batch.h"

/* References of src's tables to the builder's, filled as they are needed
   (0: not interned yet). */
typedef struct copy_s {
  perf__batch_builder_t *b;
  const Perf__V1__Batch *src;
  uint32_t *modules, *functions, *frames, *stacks;
  uint32_t scratch[PERF__BATCH_MAX_DEPTH];
} copy_t;

static int copy_stacks(copy_t *c, const Perf__V1__Event *e);
static int copy_stack(copy_t *c, uint32_t ref, uint32_t *out);
static int copy_frame(copy_t *c, uint32_t ref, uint32_t *out);
static int copy_module(copy_t *c, uint32_t ref, uint32_t *out);
static int copy_function(copy_t *c, uint32_t ref, uint32_t *out);
static int copy_lines(copy_t *c, const Perf__V1__Frame *f, perf__batch_line_t *lines,
                      size_t *count);
static int describe(copy_t *c, const Perf__V1__Event *e, perf__batch_event_t *ev);
static const char *string_at(const Perf__V1__Batch *src, uint32_t index);

int perf__batch_copy_event(perf__batch_builder_t *b, const Perf__V1__Batch *src, size_t index,
                           Perf__V1__EventKind kind, const char *reason) {
  if (!b || !src || index >= src->n_events) return PERF_E_INVALID_ARGUMENT;
  const Perf__V1__Event *e = src->events[index];
  copy_t c = {b, src, NULL, NULL, NULL, NULL, {0}};
  c.modules = calloc(src->n_modules + 1, sizeof *c.modules);
  c.functions = calloc(src->n_functions + 1, sizeof *c.functions);
  c.frames = calloc(src->n_frames + 1, sizeof *c.frames);
  c.stacks = calloc(src->n_stacks + 1, sizeof *c.stacks);
  perf__batch_begin_event(b);
  int err = c.modules && c.functions && c.frames && c.stacks ? PERF_OK : PERF_E_NO_MEMORY;
  if (!err) err = copy_stacks(&c, e);
  perf__batch_event_t ev;
  if (!err) err = describe(&c, e, &ev);
  if (!err) {
    ev.kind = kind;
    if (reason) ev.reason = reason;
    err = perf__batch_add_event(b, &ev);
    free((void *)ev.threads);
    free((void *)ev.counts);
    free((void *)ev.samples);
    free((void *)ev.count_weights_ns);
    free((void *)ev.count_states);
  } else {
    err = perf__batch_abort_event(b, err);
  }
  free(c.modules);
  free(c.functions);
  free(c.frames);
  free(c.stacks);
  return err;
}

/* Every stack the event refers to, into c->stacks. */
static int copy_stacks(copy_t *c, const Perf__V1__Event *e) {
  int err = PERF_OK;
  for (size_t i = 0; i < e->n_stack_counts && !err; i++)
    err = copy_stack(c, e->stack_counts[i]->stack, NULL);
  for (size_t i = 0; i < e->n_sample_stacks && !err; i++)
    if (e->sample_stacks[i]) err = copy_stack(c, e->sample_stacks[i], NULL);
  return err;
}

static int copy_stack(copy_t *c, uint32_t ref, uint32_t *out) {
  if (!c->stacks[ref]) {
    const Perf__V1__Stack *s = c->src->stacks[ref - 1];
    uint32_t depth =
        s->n_frames < PERF__BATCH_MAX_DEPTH ? (uint32_t)s->n_frames : PERF__BATCH_MAX_DEPTH;
    for (uint32_t i = 0; i < depth; i++) {
      int err = copy_frame(c, s->frames[i], &c->scratch[i]);
      if (err) return err;
    }
    int err = perf__batch_intern_stack(c->b, c->scratch, depth, s->end, &c->stacks[ref]);
    if (err) return err;
  }
  if (out) *out = c->stacks[ref];
  return PERF_OK;
}

static int copy_frame(copy_t *c, uint32_t ref, uint32_t *out) {
  if (!c->frames[ref]) {
    const Perf__V1__Frame *f = c->src->frames[ref - 1];
    perf__batch_line_t lines[PERF__BATCH_MAX_LINES];
    perf__batch_frame_t k = {0, 0, f->address, f->function_offset, f->runtime_address, lines, 0};
    int err = copy_module(c, f->module, &k.module);
    if (!err) err = copy_function(c, f->function, &k.function);
    if (!err) err = copy_lines(c, f, lines, &k.line_count);
    if (!err) err = perf__batch_intern_frame(c->b, &k, &c->frames[ref]);
    if (err) return err;
  }
  *out = c->frames[ref];
  return PERF_OK;
}

static int copy_module(copy_t *c, uint32_t ref, uint32_t *out) {
  if (ref && !c->modules[ref]) {
    const Perf__V1__Module *m = c->src->modules[ref - 1];
    perf__batch_module_t k = {m->path,  m->build_id.data, m->build_id.len,  m->load_bias,
                              m->start, m->end,           m->only_basename, m->executable};
    int err = perf__batch_intern_module(c->b, &k, &c->modules[ref]);
    if (err) return err;
  }
  *out = ref ? c->modules[ref] : 0;
  return PERF_OK;
}

static int copy_function(copy_t *c, uint32_t ref, uint32_t *out) {
  if (ref && !c->functions[ref]) {
    const Perf__V1__Function *fn = c->src->functions[ref - 1];
    const char *name = string_at(c->src, fn->name);
    const char *system = fn->system_name ? string_at(c->src, fn->system_name) : NULL;
    perf__batch_function_t k = {name, strlen(name), system, system ? strlen(system) : 0};
    int err = perf__batch_intern_function(c->b, &k, &c->functions[ref]);
    if (err) return err;
  }
  *out = ref ? c->functions[ref] : 0;
  return PERF_OK;
}

/* The frame's lines in the builder's references; a chain deeper than the
   builder keeps (another SDK's) loses its innermost-but-one lines first,
   as the SDK's own symbolizer does: the physical function stays last. */
static int copy_lines(copy_t *c, const Perf__V1__Frame *f, perf__batch_line_t *lines,
                      size_t *count) {
  size_t n = f->n_lines < PERF__BATCH_MAX_LINES ? f->n_lines : PERF__BATCH_MAX_LINES;
  for (size_t i = 0; i < n; i++) {
    const Perf__V1__Line *l = f->lines[i + 1 == n ? f->n_lines - 1 : i];
    const char *file = string_at(c->src, l->file);
    perf__batch_line_t *d = &lines[i];
    *d = (perf__batch_line_t){0, 0, l->line, l->column};
    int err = copy_function(c, l->function, &d->function);
    if (!err && l->file) err = perf__batch_intern_string(c->b, file, strlen(file), &d->file);
    if (err) return err;
  }
  *count = n;
  return PERF_OK;
}

/* The event as perf__batch_add_event wants it, in the builder's references
   (the arrays are malloc'd; the caller frees them). Sample times are
   rebuilt from the offsets so that they go out unchanged. */
static int describe(copy_t *c, const Perf__V1__Event *e, perf__batch_event_t *ev) {
  perf__batch_thread_t *threads = calloc(e->n_threads + 1, sizeof *threads);
  perf__batch_count_t *counts = calloc(e->n_stack_counts + 1, sizeof *counts);
  perf__batch_sample_t *samples = calloc(e->n_sample_stacks + 1, sizeof *samples);
  uint64_t *weights = calloc(e->n_stack_counts + 1, sizeof *weights);
  uint8_t *states = calloc(e->n_stack_counts + 1, sizeof *states);
  if (!threads || !counts || !samples || !weights || !states) {
    free(threads);
    free(counts);
    free(samples);
    free(weights);
    free(states);
    return PERF_E_NO_MEMORY;
  }
  for (size_t i = 0; i < e->n_threads; i++) {
    const char *name = string_at(c->src, e->threads[i]->name);
    threads[i] =
        (perf__batch_thread_t){e->threads[i]->tid, name, strlen(name), e->threads[i]->cpu_percent};
  }
  bool profile = false; /* counts with their own CPU time or state */
  for (size_t i = 0; i < e->n_stack_counts; i++) {
    const Perf__V1__StackCount *sc = e->stack_counts[i];
    counts[i] = (perf__batch_count_t){c->stacks[sc->stack], sc->tid, sc->samples};
    weights[i] = sc->weight_micros * 1000;
    states[i] = (uint8_t)sc->state;
    profile = profile || sc->weight_micros || sc->state;
  }
  if (!profile) {
    free(weights);
    free(states);
    weights = NULL;
    states = NULL;
  }
  int64_t t_us = 0;
  size_t failed = 0;
  for (size_t i = 0; i < e->n_sample_stacks; i++) {
    t_us += e->sample_offsets_micros[i];
    uint32_t stack = e->sample_stacks[i] ? c->stacks[e->sample_stacks[i]] : 0;
    int32_t error = stack ? 0 : e->sample_errors[failed++];
    uint32_t tid = e->n_sample_tids ? e->sample_tids[i] : e->tid;
    uint64_t weight_ns = e->n_sample_weights_micros ? e->sample_weights_micros[i] * 1000 : 0;
    samples[i] = (perf__batch_sample_t){t_us * 1000, tid, stack, error, 0, 0, NULL, weight_ns};
    if (e->n_sample_states) samples[i].state = (uint8_t)e->sample_states[i];
    if (e->n_sample_fds) samples[i].fd_kind = (uint8_t)e->sample_fds[i];
    if (e->n_sample_syscalls && e->sample_syscalls[i])
      samples[i].syscall = string_at(c->src, e->sample_syscalls[i]);
  }
  *ev = (perf__batch_event_t){e->kind,
                              e->start_unix_nanos,
                              0,
                              e->duration_nanos,
                              e->tid,
                              e->cpu_percent,
                              e->reason,
                              e->label,
                              e->samples_dropped,
                              threads,
                              e->n_threads,
                              counts,
                              e->n_stack_counts,
                              samples,
                              e->n_sample_stacks,
                              e->n_sample_weights_micros != 0,
                              e->loop,
                              weights,
                              states};
  return PERF_OK;
}

static const char *string_at(const Perf__V1__Batch *src, uint32_t index) {
  return index < src->n_strings ? src->strings[index] : "";
}
