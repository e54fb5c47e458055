/*
 * store.h - the collector's storage interface: one table of function
 * pointers a backend fills in (store/sqlite/, store/pg/), taking and giving
 * the records of collector/model/records.h, and the registry that picks a
 * backend for a --db location.
 *
 * The contract every backend keeps (tests/collector/store/test_store_contract.c
 * drives each registered backend through it):
 * - put_batch is atomic: every row of a batch is stored, or none is; a
 *   failure leaves the store as it was.
 * - Batch ids are idempotent: a batch whose id is stored already changes
 *   nothing and answers STORE_DUPLICATE, on every collector of a database.
 * - Hang groups are picked one hang at a time, in the batch's order, each
 *   pick seeing the groups the earlier hangs made (on a shared database,
 *   across collectors too).
 * - Reads see committed batches only and stream rows in the order each op
 *   states.
 * - health, claim_job and release_job may be NULL (a database with one
 *   collector, a store whose check says enough); every other op is required.
 *
 * Threads: a backend is called from MHD's worker threads (put_batch, reads,
 * stats), the retention thread (delete_older_than) and the re-symbolization
 * thread at the same time; it serializes what it must itself.
 */
#ifndef PERF_COLLECTOR_STORE_H
#define PERF_COLLECTOR_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "collector/model/records.h"

enum store_status {
  STORE_OK = 0,
  STORE_DUPLICATE = 1, /* put_batch: that batch id is stored already; nothing changed */
  STORE_NOT_FOUND = 2, /* event_detail: no event with that id */
  STORE_ERROR = -1,    /* the backend failed; the reason went to stderr */
  STORE_LOST = -2,     /* put_batch, check: the location no longer names the store opened
                          (deleted or replaced, db_identity.h); the batch is not acknowledged */
};

/* What a stored batch survives once put_batch returned (--durability;
   docs/operations.md "Durability": the policy and its measured cost). */
typedef enum store_durability {
  STORE_DURABLE_FULL,    /* written and fsync'ed at each commit: survives the collector's
                            death, an OS crash and a power loss (the default) */
  STORE_DURABLE_PROCESS, /* written at each commit, fsync'ed at checkpoints: survives the
                            collector's death (kill -9, OOM killer); an OS crash or a power
                            loss may take the last commits */
} store_durability_t;

/* How a store is opened (the collector's --durability and
   --rollup-fold-interval). */
typedef struct store_config_s {
  store_durability_t durability;
  /* How often the collector folds the rollup rows batches appended into
     the rollup tables (sqlite_fold.c, pg_fold.c); 0: the default,
     STORE_FOLD_INTERVAL_S. */
  unsigned fold_interval_s;
  /* The rows one read of top_rows or stack_rows sums at most
     (--max-read-rows); 0: the default, STORE_READ_ROWS_MAX. */
  uint64_t read_rows_max;
} store_config_t;

#define STORE_FOLD_INTERVAL_S 1
/* top_rows, stack_rows: the rollup and raw rows one read sums, at most, by
   default. Whatever was stored (a flood of distinct stacks from one key
   makes a rollup row per stack), a read's work is this many rows and the
   heaviest of what they hold; the rows streamed say how many were read
   (rows_read) and the limit (rows_limit): rows_read == rows_limit, the
   read stopped there and the answer is cut. */
#define STORE_READ_ROWS_MAX 100000

/* A stored stack's frames that may show a group's (group_stacks): index
   is the group's place in the signatures asked for. Return non-zero when
   that group needs no more of its rows. */
typedef int (*store_group_stack_fn)(size_t index, const char *frames_json, void *user);

/* group_stacks: at most this many signatures per call, and per signature
   the stacks of at most this many of its events, this many in all. */
#define STORE_GROUP_STACKS_SIGS 32
#define STORE_GROUP_STACKS_EVENTS 4
#define STORE_GROUP_STACKS_ROWS 16
/* stack_rows: the stacks streamed with their frames, at most. A flood of
   distinct stacks (an ingest key anyone can take) makes every read over
   it that much work and no more; a flame graph of more is unreadable. */
#define STORE_STACK_ROWS_MAX 5000
/* top_rows: the groups streamed, at most (the API's largest limit). */
#define STORE_TOP_GROUPS_MAX 1000
#define STORE_STR_(x) #x
#define STORE_STR(x) STORE_STR_(x) /* a number in SQL text */

/* Re-symbolization: symbols for some frames arrived after their stacks
   were stored (resymbolize.c fills this in; the store calls it inside its
   transaction). */
typedef struct store_renamer_s {
  /* A stored stack's frames: return 1 and fill *stack (signature, and
     frames_json malloc'ed) and *group (the same signature, names_json
     malloc'ed) when symbols change its frames now; 0 when nothing
     changed; -1 on failure. The store frees the two strings with free(). */
  int (*rename_stack)(void *user, const char *frames_json, store_stack_t *stack,
                      store_group_t *group);
  /* A hang event's grouping input from its sampled stacks' frames and
     samples (n >= 1, the dominant stack first, then by samples), made as
     ingest makes it: *hang with its key (len 0: no majority root, then
     hang->group is the first stack's own group). Everything in *hang is
     malloc'ed and released with hang_free. 0, or -1 on failure. */
  int (*hang_group)(void *user, const char *const *frames_json, const uint64_t *samples, size_t n,
                    store_hang_t *hang);
  void (*hang_free)(void *user, store_hang_t *hang);
  void *user;
} store_renamer_t;

typedef struct store_s store_t; /* a backend's own state */

/* How long past a retention cutoff a stack or group nobody named since
   may stay stored (delete_older_than). */
#define STORE_RETENTION_SLACK_NS INT64_C(3600000000000)

typedef struct store_ops_s {
  const char *name;
  /* Open (creating the schema when missing) the store at location, its
     commits as durable as config->durability says. */
  int (*open)(const char *location, const store_config_t *config, store_t **out);
  void (*close)(store_t *st);
  /* Everything of one batch in one transaction, durable as opened;
     STORE_DUPLICATE when its id is stored already; STORE_LOST (nothing
     acknowledged) when check fails before or after the commit. */
  int (*put_batch)(store_t *st, const store_batch_t *batch);
  /* Delete batches received before cutoff_ns with their events, counts, tags
     and loop stats, and the stacks and groups no batch has named since: a
     backend may keep those up to STORE_RETENTION_SLACK_NS longer (the
     PostgreSQL backend moves last_seen in steps). *deleted_batches (may be
     NULL): the batches deleted. */
  int (*delete_older_than)(store_t *st, int64_t cutoff_ns, uint64_t *deleted_batches);
  int (*stats)(store_t *st, store_stats_t *out);
  /* STORE_OK while location still names what was opened; else STORE_LOST
     with the reason (the path, deleted or replaced) in why, for good: only
     a restart opens the store again. Cheap (two stat calls), lock-free:
     any thread, at every batch and every GET /healthz. */
  int (*check)(store_t *st, char *why, size_t why_len);
  /* GET /healthz beyond check: whether the database answers now (a
     PostgreSQL server may be down, refuse the database, or not answer);
     STORE_ERROR with the reason in why. Bounded in time, never waits for
     a query in progress. NULL: check says it. */
  int (*health)(store_t *st, char *why, size_t why_len);
  /* A job that collectors on one database must not run twice at once (a
     debuginfod fetch of one build-id: "debuginfod:<id>"): 1 claimed, until
     release_job; 0 another collector holds it now; -1 the database failed.
     NULL: a database has one collector (SQLite), every claim succeeds. */
  int (*claim_job)(store_t *st, const char *job);
  void (*release_job)(store_t *st, const char *job);
  /* Stream the top-stacks rows of q to fn (read-only): those of the
     STORE_TOP_GROUPS_MAX groups of most impact (hang: the events'
     durations; cpu: CPU time; then samples, then durations), ordered by
     group; each row says how many groups q matched in all. At most the
     store's read_rows_max rollup and raw rows are summed, in the store's
     order (day rows, 10-minute rows, then raw rows), each row saying how
     many were. */
  int (*top_rows)(store_t *st, const store_top_query_t *q, store_row_fn fn, void *user);
  /* Stream the per-stack sample sums of q (kind required) to fn: the
     heaviest STORE_STACK_ROWS_MAX stacks (CPU time, then samples,
     descending), then, when more matched, one row of the rest's sums with
     stack_sig and frames_json NULL and `stacks` the number it sums. The
     rows read are bounded as top_rows's. */
  int (*stack_rows)(store_t *st, const store_top_query_t *q, store_stack_row_fn fn, void *user);
  /* Stream up to limit events of q (kind NULL: any kind), newest first
     (start, then id, descending). */
  int (*event_rows)(store_t *st, const store_top_query_t *q, int64_t limit, store_event_row_fn fn,
                    void *user);
  /* Stream the events of q (kind required; group unused) counted per bucket
     of bucket_ns (> 0; buckets start at multiples of it since the epoch),
     buckets with events only, oldest first, at most limit of them. */
  int (*time_buckets)(store_t *st, const store_top_query_t *q, int64_t bucket_ns, int64_t limit,
                      store_bucket_row_fn fn, void *user);
  /* The drop counters of the batches matching q's resource, time (the
     batch's received_ns) and tag filters, summed (kind and group unused). */
  int (*drops)(store_t *st, const store_top_query_t *q, store_drops_t *out);
  /* The loop stats and hang count of q (kind, group and label unused). */
  int (*loop_totals)(store_t *st, const store_top_query_t *q, store_loop_totals_t *out);
  /* Event id to on_event, then each of its stack_counts to on_count (by
     CPU time, then samples, descending); STORE_NOT_FOUND when there is no
     such event. */
  int (*event_detail)(store_t *st, int64_t id, store_event_row_fn on_event,
                      store_count_row_fn on_count, void *user);
  /* Event id's samples per thread and state (most samples first) to fn;
     nothing for an event without states (an older SDK) or no such event. */
  int (*event_states)(store_t *st, int64_t id, store_state_row_fn fn, void *user);
  /* The samples per state (tid 0) summed over the events of q (kind
     required; q->group: only the events of that group, hang or cpu: the
     events that sampled that stack), most samples first; at most the
     store's read_rows_max event_states rows of the newest events, each
     row saying how many it sums. */
  int (*state_rows)(store_t *st, const store_top_query_t *q, store_state_sum_fn fn, void *user);
  /* The stored stacks that may show the frames of groups sigs[0..n) (n at
     most STORE_GROUP_STACKS_SIGS), to fn in the order of sigs: for each,
     the stack stored with that signature (a CPU group is a stack), then
     the stacks sampled by STORE_GROUP_STACKS_EVENTS of the events of that
     group (events.group_sig: a hang group), most samples first, at most
     STORE_GROUP_STACKS_ROWS of them (headline.c picks the one through the
     group's frames). */
  int (*group_stacks)(store_t *st, const char *const *sigs, size_t n, store_group_stack_fn fn,
                      void *user);
  /* Re-symbolize, in one transaction, every stack whose frames_json
     contains the text `needle`: r->rename_stack renames it; a renamed
     stack's counts, events and CPU group move to its new signature, merged
     into a stack stored with that signature already; the hang events that
     sampled a renamed stack get their group recomputed (r->hang_group,
     then the same pick among the stored hang groups as put_batch);
     groups nothing refers to any more are deleted. *renamed (may be NULL):
     the stacks renamed. */
  int (*resymbolize)(store_t *st, const char *needle, const store_renamer_t *r, uint64_t *renamed);
  /* Alert rules (records.h store_alert_rule_t): add one (its created_ns
     as given; *id the new rule's), delete one (STORE_NOT_FOUND: no such
     rule; its alerts stay listed), stream all to fn, oldest first. */
  int (*alert_rule_add)(store_t *st, const store_alert_rule_t *rule, int64_t *id);
  int (*alert_rule_delete)(store_t *st, int64_t id);
  int (*alert_rules)(store_t *st, store_alert_rule_fn fn, void *user);
  /* Raise alert a (rule_id, alert_key, state, time_ns, summary, link):
     STORE_OK and *id when no alert of that rule has that key yet,
     STORE_DUPLICATE (nothing changed) when one has, on every collector of
     a database: an alert is raised once, ever. */
  int (*alert_claim)(store_t *st, const store_alert_t *a, int64_t *id);
  /* Alert a->id's state, status, attempts and time_ns set to a's. */
  int (*alert_update)(store_t *st, const store_alert_t *a);
  /* The newest limit alerts (time raised, then id, descending) to fn;
     rule_id > 0: only that rule's. */
  int (*alert_rows)(store_t *st, int64_t rule_id, int64_t limit, store_alert_fn fn, void *user);
  /* The versions of app's batches (NULL and "" versions left out), by
     their first batch's arrival (then by name), oldest first: which
     version came before another. */
  int (*app_versions)(store_t *st, const char *app, store_version_fn fn, void *user);
  /* The groups named by events of app's batches received at or after
     scan_ns (the scan's bound, >= since_ns) that no event of their kind
     named in a batch received before since_ns, of any app: new since
     then (retention forgets what it deleted). Each once per kind, by the
     first of those batches to name it, then signature. */
  int (*new_groups)(store_t *st, const char *app, int64_t since_ns, int64_t scan_ns,
                    store_new_group_fn fn, void *user);
} store_ops_t;

/* The backends built in (CMake options PERF_STORE_SQLITE, PERF_STORE_PG),
   one registry row each (store/registry.c). */
extern const store_ops_t store_sqlite_ops; /* embedded, a file path */
extern const store_ops_t store_pg_ops;     /* PostgreSQL through libpq: several collectors on one
                                              database (docs/operations.md "Running on PostgreSQL") */

/* A registry row: the backend of the --db locations that start with one of
   its schemes ("postgresql://"); the row with no scheme takes every other
   location (a path). */
typedef struct store_backend_s {
  const char *const *schemes; /* NULL-terminated; NULL: the default for paths */
  const store_ops_t *ops;
} store_backend_t;

/* The rows built in, n_out of them. */
const store_backend_t *store_backends(size_t *n_out);

/* The row a --db location selects: the first whose scheme starts it, else
   the row for paths. NULL when the location's scheme is one of a backend
   this build left out, or it is a path and no backend takes paths: *why
   then says so (static text). */
const store_backend_t *store_backend_for(const char *location, const char **why);

#endif
