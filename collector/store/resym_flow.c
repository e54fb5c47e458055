/*
 * resym_flow.c - re-symbolization's algorithm over a backend's steps (see
 * resym_flow.h).
 */
#include "collector/store/resym_flow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/base/log.h"

/* One renamed stack: its frames, or its rows at the new signature; then
   its CPU group. */
static int apply_rename(const resym_steps_t *s, const resym_stack_t *m, const store_stack_t *stack,
                        const store_group_t *group) {
  int rc = s->note_events(s->ctx, m->signature);
  if (rc == 0 && strcmp(m->signature, stack->signature) == 0)
    rc = s->set_frames(s->ctx, stack->signature, stack->frames_json);
  else if (rc == 0)
    rc = s->move_stack(s->ctx, m->signature, stack, m->first_seen, m->last_seen);
  if (rc == 0) rc = s->upsert_group(s->ctx, group, m->first_seen, m->last_seen);
  return rc;
}

static int rename_matching(const resym_steps_t *s, const char *needle, const store_renamer_t *r,
                           uint64_t *renamed) {
  resym_stack_t *m = NULL;
  size_t n = 0;
  int rc = s->matching(s->ctx, needle, &m, &n);
  size_t kept = 0;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    store_stack_t stack = {0};
    store_group_t group = {0};
    /* A stack the renamer fails on keeps its frames; the others are
       renamed all the same (a failure here would refuse every later
       rename of the build-id). */
    int changed = r->rename_stack(r->user, m[i].frames_json, &stack, &group);
    if (changed < 0) kept++;
    if (changed > 0) {
      rc = apply_rename(s, &m[i], &stack, &group);
      (*renamed)++;
    }
    free((char *)stack.frames_json);
    free((char *)group.names_json);
  }
  for (size_t i = 0; i < n; i++)
    free(m[i].signature), free(m[i].frames_json);
  free(m);
  if (kept)
    collector_log("re-symbolization kept %zu stored stacks as they were: "
                  "renaming them ran out of memory\n",
                  kept);
  return rc;
}

/* A hang event whose stacks changed: its group again from its stacks. */
static int regroup_event(const resym_steps_t *s, const store_renamer_t *r, const resym_hang_t *h) {
  char **frames = NULL;
  uint64_t *samples = NULL;
  size_t n = 0;
  int rc = s->event_stacks(s->ctx, h->id, h->dominant, &frames, &samples, &n);
  if (rc == 0 && n) {
    store_hang_t hang = {0};
    char group[STORE_SIG_CHARS + 1];
    if (r->hang_group(r->user, (const char *const *)frames, samples, n, &hang) != 0) rc = -1;
    if (rc == 0) rc = s->pick_group(s->ctx, &hang, h->received_ns, group);
    if (rc == 0 && h->group) rc = s->note_group(s->ctx, h->group);
    if (rc == 0) rc = s->set_group(s->ctx, h->id, group);
    r->hang_free(r->user, &hang);
  }
  for (size_t i = 0; i < n; i++)
    free(frames[i]);
  free(frames);
  free(samples);
  return rc;
}

static int regroup_hangs(const resym_steps_t *s, const store_renamer_t *r) {
  resym_hang_t *h = NULL;
  size_t n = 0;
  int rc = s->hang_events(s->ctx, &h, &n);
  for (size_t i = 0; rc == 0 && i < n; i++)
    rc = regroup_event(s, r, &h[i]);
  for (size_t i = 0; i < n; i++)
    free(h[i].dominant), free(h[i].group);
  free(h);
  return rc;
}

int resym_flow_run(const resym_steps_t *s, const char *needle, const store_renamer_t *r,
                   uint64_t *renamed) {
  *renamed = 0;
  int rc = rename_matching(s, needle, r, renamed);
  if (rc == 0 && *renamed) rc = regroup_hangs(s, r);
  return rc;
}
