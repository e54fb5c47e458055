/*
 * batch_post.c - hand-made batches to a test collector (see batch_post.h).
 */
#include "batch_post.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "check.h"

void payload_compress(payload_t *p, const void *raw, size_t len, int level) {
  size_t cap = ZSTD_compressBound(len);
  CHECK((p->data = malloc(cap)) != NULL);
  p->len = ZSTD_compress(p->data, cap, raw, len, level);
  CHECK(!ZSTD_isError(p->len));
}

void payload_pack(payload_t *p, const Perf__V1__Batch *b, int level) {
  p->id_hex[0] = '\0';
  if (b->batch_id.len == 16) batch_id_hex(b->batch_id.data, p->id_hex);
  size_t len = perf__v1__batch__get_packed_size(b);
  uint8_t *raw = malloc(len ? len : 1);
  CHECK(raw != NULL);
  perf__v1__batch__pack(b, raw);
  payload_compress(p, raw, len, level);
  free(raw);
}

long payload_post(const collector_t *c, const char *key, const payload_t *p, reply_t *r) {
  return post_batch(c, key, p->id_hex, p->data, p->len, r);
}

long batch_send(const collector_t *c, Perf__V1__Batch *b, const uint8_t id[16], reply_t *r) {
  b->batch_id = (ProtobufCBinaryData){16, (uint8_t *)id};
  payload_t p;
  payload_pack(&p, b, 3);
  long status = payload_post(c, GOOD_KEY, &p, r);
  free(p.data);
  return status;
}

long batch_post_answer(const collector_t *c, Perf__V1__Batch *b, unsigned seed, reply_t *r) {
  /* On the caller's stack: posters on several threads (test_collector_pg_multi)
     once shared one static id, and a batch went out under another's id. */
  uint8_t id[16];
  for (int i = 0; i < 16; i++)
    id[i] = (uint8_t)(seed * 37 + (unsigned)i + (unsigned)getpid());
  long status = batch_send(c, b, id, r);
  b->batch_id = (ProtobufCBinaryData){0, NULL}; /* id ends here */
  return status;
}

void batch_post(const collector_t *c, Perf__V1__Batch *b, unsigned seed) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  long status = batch_post_answer(c, b, seed, r);
  CHECKF(status == 200, "batch -> %ld %.300s", status, r->body);
  free(r);
}

void batch_begin(Perf__V1__Batch *b, Perf__V1__Resource *res, const char *app, const char *version,
                 const char *env, const char *host) {
  perf__v1__resource__init(res);
  res->app_name = (char *)app;
  if (version) res->app_version = (char *)version;
  if (env) res->environment = (char *)env;
  if (host) res->host = (char *)host;
  perf__v1__batch__init(b);
  b->resource = res;
}

void batch_one_event_init(batch_one_event_t *o, const uint8_t id[16], const char *app,
                          const char *module_path, const char *function) {
  memcpy(o->id, id, sizeof o->id);
  batch_begin(&o->b, &o->res, app, NULL, NULL, NULL);
  o->b.batch_id = (ProtobufCBinaryData){sizeof o->id, o->id};
  o->strings[0] = "", o->strings[1] = (char *)function;
  o->b.n_strings = 2, o->b.strings = o->strings;
  perf__v1__module__init(&o->mod);
  o->mod.path = (char *)module_path;
  o->mods[0] = &o->mod;
  o->b.n_modules = 1, o->b.modules = o->mods;
  perf__v1__function__init(&o->fn);
  o->fn.name = 1;
  o->fns[0] = &o->fn;
  o->b.n_functions = 1, o->b.functions = o->fns;
  perf__v1__stack__init(&o->st);
  o->sts[0] = &o->st;
  o->b.n_stacks = 1, o->b.stacks = o->sts;
  perf__v1__stack_count__init(&o->sc);
  o->sc.stack = 1;
  o->scs[0] = &o->sc;
  perf__v1__event__init(&o->ev);
  o->ev.n_stack_counts = 1, o->ev.stack_counts = o->scs;
  o->ev.dominant_stack = 1;
  o->evs[0] = &o->ev;
  o->b.n_events = 1, o->b.events = o->evs;
}

void batch_set_frames(Perf__V1__Batch *b, batch_frames_t *f, char **strings, size_t n_strings) {
  CHECK(n_strings >= 1 && n_strings - 1 <= BATCH_MAX_FRAMES);
  size_t n = n_strings - 1;
  for (size_t i = 0; i < n; i++) {
    perf__v1__function__init(&f->fn[i]);
    f->fn[i].name = (uint32_t)i + 1;
    f->fns[i] = &f->fn[i];
    perf__v1__frame__init(&f->fr[i]);
    f->fr[i].function = (uint32_t)i + 1;
    f->fr[i].address = 0x1000 + 0x100 * (uint64_t)i;
    f->frs[i] = &f->fr[i];
  }
  b->n_strings = n_strings, b->strings = strings;
  b->n_functions = n, b->functions = f->fns;
  b->n_frames = n, b->frames = f->frs;
}

long batch_post_profile(const collector_t *c, const profile_window_t *w,
                        void (*edit)(Perf__V1__Event *), unsigned seed, reply_t *r) {
  CHECK(w->n_leaves >= 1 && w->n_leaves < BATCH_MAX_FRAMES && w->n_counts >= 1 &&
        w->n_counts <= 16);
  char *strings[BATCH_MAX_FRAMES + 1] = {"", (char *)w->root};
  for (size_t i = 0; i < w->n_leaves; i++)
    strings[i + 2] = (char *)w->leaves[i];
  uint32_t frames[BATCH_MAX_FRAMES][2];
  Perf__V1__Stack st[BATCH_MAX_FRAMES], *sts[BATCH_MAX_FRAMES];
  for (size_t i = 0; i < w->n_leaves; i++) {
    perf__v1__stack__init(&st[i]);
    frames[i][0] = (uint32_t)i + 2, frames[i][1] = 1; /* innermost first */
    st[i].n_frames = 2, st[i].frames = frames[i];
    st[i].end = PERF__V1__STACK_END__STACK_END_COMPLETE;
    sts[i] = &st[i];
  }
  Perf__V1__StackCount sc[16], *scs[16];
  for (size_t i = 0; i < w->n_counts; i++) {
    const profile_count_t *k = &w->counts[i];
    CHECK(k->stack >= 1 && k->stack <= w->n_leaves);
    perf__v1__stack_count__init(&sc[i]);
    sc[i].stack = k->stack, sc[i].tid = k->tid, sc[i].samples = k->samples;
    sc[i].weight_micros = k->weight_micros;
    sc[i].state = (Perf__V1__SampleState)k->state;
    scs[i] = &sc[i];
  }
  Perf__V1__Event ev = PERF__V1__EVENT__INIT, *evs[] = {&ev};
  ev.kind = PERF__V1__EVENT_KIND__EVENT_KIND_PROFILE;
  ev.start_unix_nanos = w->start_ns;
  ev.duration_nanos = w->duration_ns;
  ev.tid = w->counts[0].tid;
  ev.cpu_percent = -1;
  ev.n_stack_counts = w->n_counts, ev.stack_counts = scs;
  if (edit) edit(&ev);
  Perf__V1__Resource res;
  Perf__V1__Batch b;
  batch_begin(&b, &res, w->app, w->version, NULL, w->host);
  batch_frames_t f;
  batch_set_frames(&b, &f, strings, w->n_leaves + 2);
  b.n_stacks = w->n_leaves, b.stacks = sts;
  b.n_events = 1, b.events = evs;
  return batch_post_answer(c, &b, seed, r);
}

long batch_post_loop(const collector_t *c, const loop_batch_t *sp, unsigned seed, reply_t *r) {
  return batch_post_loops(c, sp, NULL, 0, seed, r);
}

long batch_post_loops(const collector_t *c, const loop_batch_t *sp, Perf__V1__LoopStats **loops,
                      size_t n_loops, unsigned seed, reply_t *r) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t now_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
  char *strings[] = {"", "slow_query", "handle_db", "render", "draw_frame"};
  uint32_t db_ids[] = {1, 2}, ui_ids[] = {3, 4};
  Perf__V1__Stack st[2] = {PERF__V1__STACK__INIT, PERF__V1__STACK__INIT};
  st[0].n_frames = 2, st[0].frames = db_ids;
  st[1].n_frames = 2, st[1].frames = ui_ids;
  st[0].end = st[1].end = PERF__V1__STACK_END__STACK_END_COMPLETE;
  Perf__V1__Stack *sts[] = {&st[0], &st[1]};
  Perf__V1__StackCount sc[2] = {PERF__V1__STACK_COUNT__INIT, PERF__V1__STACK_COUNT__INIT};
  sc[0].stack = 1, sc[1].stack = 2;
  sc[0].samples = sc[1].samples = 5;
  sc[0].tid = sc[1].tid = 7;
  Perf__V1__StackCount *sc_db[] = {&sc[0]}, *sc_ui[] = {&sc[1]};
  Perf__V1__Event ev[8];
  Perf__V1__Event *evs[8];
  CHECK(sp->hangs <= 8);
  for (int i = 0; i < sp->hangs; i++) {
    perf__v1__event__init(&ev[i]);
    ev[i].kind = PERF__V1__EVENT_KIND__EVENT_KIND_HANG;
    ev[i].start_unix_nanos = now_ns - 1000000000LL + (int64_t)seed * 1000 + i; /* a second ago */
    ev[i].duration_nanos = sp->hang_ms * 1000000;
    ev[i].tid = 7;
    ev[i].n_stack_counts = 1;
    ev[i].stack_counts = i < sp->db ? sc_db : sc_ui;
    ev[i].dominant_stack = i < sp->db ? 1 : 2;
    evs[i] = &ev[i];
  }
  Perf__V1__LoopStats ls = PERF__V1__LOOP_STATS__INIT;
  ls.watched_nanos = sp->watched_ns;
  ls.busy_nanos = sp->busy_ns;
  ls.n_busy_units_by_bucket = sp->n_units;
  ls.busy_units_by_bucket = (uint64_t *)sp->units;
  Perf__V1__Resource res;
  Perf__V1__Batch b;
  batch_begin(&b, &res, sp->app, sp->version, sp->env, "h1");
  batch_frames_t frames;
  batch_set_frames(&b, &frames, strings, sizeof strings / sizeof strings[0]);
  b.n_stacks = 2, b.stacks = sts;
  b.n_events = (size_t)sp->hangs, b.events = evs;
  if (sp->watched_ns || sp->units) b.loop_stats = &ls;
  b.n_loops = n_loops, b.loops = loops;
  return batch_post_answer(c, &b, seed, r);
}

/* The messages of a distinct_batch_t, each array malloc'ed with n slots. */
typedef struct distinct_parts_s {
  Perf__V1__Batch b;
  Perf__V1__Resource res;
  Perf__V1__KeyValue tag, *tags[1];
  Perf__V1__Module mod, *mods[1];
  Perf__V1__Function *fn, **fns;
  Perf__V1__Frame *fr, **frs;
  Perf__V1__Stack *st, **sts;
  uint32_t *frame_ids;
  Perf__V1__StackCount *sc, **scs;
  Perf__V1__Event ev, *evs[1];
  char **strings;
  uint8_t id[16];
} distinct_parts_t;

static void distinct_alloc(distinct_parts_t *d, size_t n) {
  CHECK((d->fn = calloc(n, sizeof *d->fn)) && (d->fns = calloc(n, sizeof *d->fns)) &&
        (d->fr = calloc(n, sizeof *d->fr)) && (d->frs = calloc(n, sizeof *d->frs)) &&
        (d->st = calloc(n, sizeof *d->st)) && (d->sts = calloc(n, sizeof *d->sts)) &&
        (d->frame_ids = calloc(n, sizeof *d->frame_ids)) && (d->sc = calloc(n, sizeof *d->sc)) &&
        (d->scs = calloc(n, sizeof *d->scs)) && (d->strings = calloc(n + 1, sizeof *d->strings)));
}

static void distinct_free(distinct_parts_t *d, size_t n) {
  for (size_t i = 1; i <= n; i++)
    free(d->strings[i]);
  free(d->strings), free(d->fn), free(d->fns), free(d->fr), free(d->frs), free(d->st);
  free(d->sts), free(d->frame_ids), free(d->sc), free(d->scs);
}

static void distinct_stack(distinct_parts_t *d, const distinct_batch_t *s, size_t i) {
  char name[96];
  snprintf(name, sizeof name, "%s_%zu", s->prefix, s->first + i);
  CHECK((d->strings[i + 1] = strdup(name)) != NULL);
  perf__v1__function__init(&d->fn[i]);
  d->fn[i].name = (uint32_t)(i + 1);
  d->fns[i] = &d->fn[i];
  perf__v1__frame__init(&d->fr[i]);
  d->fr[i].module = 1;
  d->fr[i].function = (uint32_t)(i + 1);
  d->fr[i].address = 0x1000 + 0x10 * (uint64_t)i;
  d->frs[i] = &d->fr[i];
  perf__v1__stack__init(&d->st[i]);
  d->frame_ids[i] = (uint32_t)(i + 1);
  d->st[i].n_frames = 1, d->st[i].frames = &d->frame_ids[i];
  d->sts[i] = &d->st[i];
  perf__v1__stack_count__init(&d->sc[i]);
  d->sc[i].stack = (uint32_t)(i + 1);
  d->sc[i].samples = 1;
  d->sc[i].tid = 7;
  d->scs[i] = &d->sc[i];
}

void batch_distinct_payload(payload_t *p, const distinct_batch_t *spec, unsigned seed) {
  size_t n = spec->n;
  CHECK(n >= 1);
  distinct_parts_t d;
  memset(&d, 0, sizeof d);
  distinct_alloc(&d, n);
  batch_begin(&d.b, &d.res, spec->app, spec->version, NULL, NULL);
  if (spec->tag_key) {
    perf__v1__key_value__init(&d.tag);
    d.tag.key = (char *)spec->tag_key, d.tag.value = (char *)spec->tag_value;
    d.tags[0] = &d.tag;
    d.res.n_tags = 1, d.res.tags = d.tags;
  }
  d.strings[0] = "";
  perf__v1__module__init(&d.mod);
  d.mod.path = "/opt/flood/app";
  d.mods[0] = &d.mod;
  for (size_t i = 0; i < n; i++)
    distinct_stack(&d, spec, i);
  d.b.n_strings = n + 1, d.b.strings = d.strings;
  d.b.n_modules = 1, d.b.modules = d.mods;
  d.b.n_functions = n, d.b.functions = d.fns;
  d.b.n_frames = n, d.b.frames = d.frs;
  d.b.n_stacks = n, d.b.stacks = d.sts;
  perf__v1__event__init(&d.ev);
  d.ev.kind = PERF__V1__EVENT_KIND__EVENT_KIND_CPU;
  d.ev.start_unix_nanos = (uint64_t)(time(NULL) - 1) * 1000000000u;
  d.ev.duration_nanos = 100000000;
  d.ev.tid = 7;
  d.ev.dominant_stack = 1;
  if (spec->label) d.ev.label = (char *)spec->label;
  d.ev.n_stack_counts = n, d.ev.stack_counts = d.scs;
  d.evs[0] = &d.ev;
  d.b.n_events = 1, d.b.events = d.evs;
  for (int i = 0; i < 16; i++)
    d.id[i] = (uint8_t)(seed * 37 + (unsigned)i + (unsigned)getpid());
  d.b.batch_id = (ProtobufCBinaryData){16, d.id};
  payload_pack(p, &d.b, 3);
  d.strings[0] = NULL;
  distinct_free(&d, n);
}
