/*
 * resym_flow.h - re-symbolization's algorithm, once for every backend
 * (store_ops_t.resymbolize): the stored stacks whose frames hold a needle
 * read first; each one the renamer renames gets its new frames, or its
 * rows moved to its new signature (merged into a stack stored there
 * already), and its CPU group; then every hang event that sampled a
 * renamed stack is grouped again from its stacks, picked among the stored
 * hang groups as put_batch picks. A backend gives the steps as
 * statements of its own and runs the flow inside its transaction, with
 * what is its own around it (locks, temporary tables, dropping the groups
 * nobody refers to, its hang groups and rollups kept true).
 */
#ifndef PERF_COLLECTOR_RESYM_FLOW_H
#define PERF_COLLECTOR_RESYM_FLOW_H

#include <stddef.h>
#include <stdint.h>

#include "collector/store/store.h"

/* A stored stack (matching), or a hang event to group again (hang_events). */
typedef struct resym_stack_s {
  char *signature, *frames_json;
  int64_t first_seen, last_seen;
} resym_stack_t;

typedef struct resym_hang_s {
  int64_t id, received_ns;
  char *dominant, *group; /* NULL: none */
} resym_hang_t;

/* The steps; each returns 0, or -1 when the backend failed (said). The
   lists are malloc'ed by the backend (each string too) and freed by the
   flow with free(). */
typedef struct resym_steps_s {
  void *ctx;
  /* The stored stacks whose frames contain needle. */
  int (*matching)(void *ctx, const char *needle, resym_stack_t **out, size_t *n);
  /* Note the events that sampled stack old (hang_events reads them). */
  int (*note_events)(void *ctx, const char *old);
  /* Stack sig's frames replaced (renamed without a new signature). */
  int (*set_frames)(void *ctx, const char *sig, const char *frames_json);
  /* Stack old's rows moved to to (stored, or merged into the stack stored
     with that signature, first/last seen widened): its counts, the events
     it dominates; old deleted and its CPU group noted (note_group). */
  int (*move_stack)(void *ctx, const char *old, const store_stack_t *to, int64_t first,
                    int64_t last);
  /* A group stored, or its first/last seen widened. */
  int (*upsert_group)(void *ctx, const store_group_t *g, int64_t first, int64_t last);
  /* A group that may have lost its last reference (the backend drops such
     groups after the flow). */
  int (*note_group)(void *ctx, const char *sig);
  /* The noted events that are hangs (hang, fatal_hang). */
  int (*hang_events)(void *ctx, resym_hang_t **out, size_t *n);
  /* Event id's stacks' frames and samples (samples > 0), the dominant one
     first, then by samples, descending. */
  int (*event_stacks)(void *ctx, int64_t id, const char *dominant, char ***frames,
                      uint64_t **samples, size_t *n);
  /* The stored hang group hang joins (a new one made when none takes it),
     as put_batch picks, into group. */
  int (*pick_group)(void *ctx, store_hang_t *hang, int64_t received_ns,
                    char group[STORE_SIG_CHARS + 1]);
  /* Event id's group set. */
  int (*set_group)(void *ctx, int64_t id, const char *group);
} resym_steps_t;

/* Run the flow: 0 with *renamed the stacks renamed (a stack the renamer
   fails on is kept as it was, logged; the backend then does
   its own end when *renamed > 0), or -1 (the backend rolls back). */
int resym_flow_run(const resym_steps_t *s, const char *needle, const store_renamer_t *r,
                   uint64_t *renamed);

#endif
