/*
 * records.h - the plain records the collector's stages exchange: a decoded
 * batch as ingest hands it to the store (store_batch_t and what it holds),
 * a query's filters (store_top_query_t) and the rows a store answers with.
 * Data only: no I/O, nothing of protobuf, SQL or HTTP. The interface that
 * takes and gives them is collector/store/store.h.
 */
#ifndef PERF_COLLECTOR_RECORDS_H
#define PERF_COLLECTOR_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "collector/model/signature.h"

#define STORE_BATCH_ID_BYTES 16
/* Room for a stack or group signature in lowercase hex: the collector makes
   16 digits (64 bits, perf__signature_hash in signature.h); a query's group
   filter accepts up to this many. */
#define STORE_SIG_CHARS 32

/* One distinct stack of a batch: signature and frames, innermost first. */
typedef struct store_stack_s {
  char signature[STORE_SIG_CHARS + 1];
  const char *frames_json; /* JSON array, innermost frame first (frame_json.h) */
  const char *end;         /* why the stack ended early ("depth", "no rule"...); NULL: complete */
} store_stack_t;

/* Samples of one stack on one thread within an event (stack_counts).
   cpu_us: a CPU event's CPU time on that stack, the sum of its samples'
   weights (Event.sample_weights_micros, sdk/wire/event_weights.h); -1 when the event has no weights
   (other kinds, older SDKs): then each sample counts 1. */
typedef struct store_stack_count_s {
  const char *stack_sig;
  uint32_t tid;
  uint32_t samples;
  int64_t cpu_us;
} store_stack_count_t;

/* A grouping key: a signature and its frames as a JSON array of names
   ("fn" or "module+0xaddr"), innermost first. Every stack of a batch is
   one (the CPU grouping), and so is every hang group's key (store_hang_t). */
typedef struct store_group_s {
  char signature[STORE_SIG_CHARS + 1];
  const char *names_json;
} store_group_t;

/* A hang event's grouping input (signature.h): its sampled stacks' labels
   and samples, its majority key (perf__hang_key, len >= 1) and the group
   that key makes when no stored group takes the hang (perf__group_pick,
   over the stored hang groups). */
typedef struct store_hang_s {
  perf__hang_samples_t samples;
  const char *const *key; /* innermost first */
  size_t len;
  store_group_t group; /* the key's own signature and names */
  void *owned;         /* what its maker allocated for it (store_renamer_t.hang_free) */
} store_hang_t;

/* Samples of one thread in one state within an event (event_states), or a
   state's samples summed over events (state_rows: tid 0). state: "running",
   "lock", "io", "poll", "sleep", "other" or "unknown" (the wire's
   SampleState); syscall: the call waited in ("read"), "" for none; fd: an
   I/O wait's descriptor kind ("file", "pipe", "socket", "other"), "" for
   none. */
typedef struct store_state_count_s {
  uint32_t tid;
  const char *state, *syscall, *fd;
  uint64_t samples;
} store_state_count_t;

typedef int (*store_state_row_fn)(const store_state_count_t *row, void *user);

/* A state's samples summed over a query's events (state_rows), with the
   event_states rows summed into it and the most one read sums. */
typedef struct store_state_sum_s {
  store_state_count_t count;
  uint64_t rows, rows_limit;
} store_state_sum_t;

typedef int (*store_state_sum_fn)(const store_state_sum_t *row, void *user);

/* Whether events of kind have CPU time (cpu_us) as their stacks' own
   time: a CPU burst, and a window of the always-on CPU profile
   ("profile"); hangs have wall time instead. Each stack of such an event
   is a group of its own in top-stacks (a rollup_groups row of the event's
   kind). */
static inline bool store_kind_cpu_time(const char *kind) {
  return kind && (strcmp(kind, "cpu") == 0 || strcmp(kind, "profile") == 0);
}

typedef struct store_event_s {
  const char *kind; /* "hang", "fatal_hang", "cpu", "manual", "profile", "unspecified" */
  int64_t start_ns;
  int64_t duration_ns;
  uint32_t tid;
  int32_t cpu_percent;
  const char *reason;
  const char *label;              /* the unit of work's label; NULL or "": none */
  const char *loop;               /* the loop that hung ("main" or a registered name);
                                     NULL or "": not a loop's event */
  const char *dominant_stack_sig; /* NULL: none */
  const char *group_sig;          /* hang / fatal_hang without a key: the group (a groups
                                     row, the dominant stack's); NULL for other kinds or
                                     no samples */
  const store_hang_t *hang;       /* hang / fatal_hang with a majority key: the store
                                     picks its group (then group_sig is unused) */
  const store_stack_count_t *counts;
  size_t n_counts;
  const store_state_count_t *states; /* per thread and state; none from older SDKs */
  size_t n_states;
} store_event_t;

/* A tag of a batch's resource (perf_sdk_config_t.tags), or a tag filter:
   the key is key_len bytes at key (a filter's is the front of its
   "key:value" text), the value a NUL-terminated string. */
typedef struct store_tag_s {
  const char *key, *value;
  size_t key_len;
} store_tag_t;

/* Why the SDK dropped events (the wire's DropCounters), in its order. */
enum store_drop_reason {
  STORE_DROP_RATE_LIMITED,
  STORE_DROP_QUEUE_FULL,
  STORE_DROP_SINK_FAILED,
  STORE_DROP_SPOOL_QUOTA,
  STORE_DROP_OVERSIZED,
  STORE_DROP_COUNT
};

/* A batch's count of one reason is capped here (ingest.c), so sums over
   2^31 batches still fit SQLite's signed 64-bit integers. */
#define STORE_MAX_DROPS UINT32_MAX

/* The reason's name: the JSON key of /api/v1/drops, the label of
   perf_collector_sdk_events_dropped_total, the wire's field name. */
static inline const char *store_drop_name(enum store_drop_reason r) {
  static const char *const NAMES[STORE_DROP_COUNT] = {"rate_limited", "queue_full", "sink_failed",
                                                      "spool_quota", "oversized"};
  return (unsigned)r < STORE_DROP_COUNT ? NAMES[r] : "?";
}

/* The watched loop's statistics a batch carried (the wire's LoopStats):
   time watched, time busy, units of work by duration bucket (bounds in
   docs/protocol.md "Loop stats"). Each value of one batch is capped at
   STORE_MAX_LOOP_VALUE (ingest.c), so sums stay exact in SQLite. */
#define STORE_LOOP_BUCKETS 9
#define STORE_MAX_LOOP_VALUE (UINT64_C(1) << 48) /* ns: 3.3 days; units: plenty */
typedef struct store_loop_stats_s {
  uint64_t watched_ns, busy_ns;
  uint64_t units[STORE_LOOP_BUCKETS];
} store_loop_stats_t;

/* One loop's statistics in a batch that named its loops (the wire's
   Batch.loops): the loop's name ("main" or a registered name, never empty)
   and its stats. batch.loop_stats stays their sum. */
#define STORE_MAX_LOOPS 64 /* PERF_SDK_MAX_LOOPS: entries a batch may carry */
typedef struct store_named_loop_s {
  const char *loop;
  store_loop_stats_t stats;
} store_named_loop_t;

typedef struct store_batch_s {
  uint8_t id[STORE_BATCH_ID_BYTES];
  int64_t received_ns; /* wall clock, the retention job's reference */
  const char *app, *version, *environment, *host;
  uint32_t pid;
  uint64_t drops[STORE_DROP_COUNT]; /* events the SDK dropped since its previous batch,
                                       each at most STORE_MAX_DROPS */
  const store_tag_t *tags;          /* the resource's tags; exact repeats stored once */
  size_t n_tags;
  const store_stack_t *stacks;
  size_t n_stacks;
  const store_event_t *events;
  size_t n_events;
  const store_group_t *groups; /* duplicates allowed */
  size_t n_groups;
  const store_loop_stats_t *loop_stats; /* NULL: the batch carried none */
  const store_named_loop_t *loops;      /* each loop's, names distinct (an SDK that
                                           watched one loop only sends none) */
  size_t n_loops;
} store_batch_t;

#define STORE_MAX_TAG_FILTERS 4       /* tags a query may require at once */
#define STORE_TAG_KEY_ESCAPED_MAX 256 /* an escaped filter key's bytes, unescaped */

/* The rows the top-stacks aggregation (query.c) reads. kind "hang" takes
   events of kind hang and fatal_hang, grouped by their group_sig; "cpu"
   the stacks of cpu events, each its own group (an event counts once per
   stack it sampled).
   Filters: NULL (app, version, environment, host) matches any; event
   start_ns within [from_ns, to_ns] (drops: the batch's received_ns); the
   batch has every one of tags[0..n_tags) (key and value exactly). Both
   backends answer from their rollups (rollup.h) where q allows it. */
typedef struct store_top_query_s {
  const char *kind;
  const char *app, *version, *environment, *host;
  int64_t from_ns, to_ns;
  const char *group; /* stack_rows: NULL, or only the events of this group */
  const char *label; /* NULL, or only events with this label (not for drops) */
  const char *loop;  /* NULL, or only events of this loop (event_rows, loop_totals) */
  store_tag_t tags[STORE_MAX_TAG_FILTERS];
  size_t n_tags;
  /* The keys of tag filters written with escapes, unescaped: tags[i].key
     points here for those (so a copy of the query must not outlive it). */
  char tag_keys[STORE_MAX_TAG_FILTERS][STORE_TAG_KEY_ESCAPED_MAX];
} store_top_query_t;

/* The SDK's drop counters summed over the batches of a query (drops). */
typedef struct store_drops_s {
  uint64_t dropped[STORE_DROP_COUNT];
  uint64_t batches;    /* the rows summed: the newest at most rows_limit */
  uint64_t rows_limit; /* the most a read sums */
} store_drops_t;

/* One version's watch (loop_totals): the loop stats of the batches
   matching q's resource, tag and time filters (the batch's received_ns)
   summed, how many batches carried them, and the hang and fatal hang
   events matching q (start_ns within from..to, as top-stacks). With
   q->loop: that loop's stats only (store_named_loop_t; for "main" also the
   sums of the batches that named no loop: an SDK that watched one loop
   only watched the main loop) and that loop's hangs. */
typedef struct store_loop_totals_s {
  store_loop_stats_t sum;
  uint64_t batches, hangs; /* each the rows of a scan, the newest at most rows_limit */
  uint64_t rows_limit;     /* the most a scan sums */
} store_loop_totals_t;

/* A part of a group's aggregate (top_rows): the events of one version and
   one label whose durations fall in one bin (rollup.h), from the rollups
   or from raw events. Rows come ordered by group. */
typedef struct store_top_row_s {
  const char *group_sig, *names_json;
  const char *version, *label; /* NULL or "": none */
  size_t majority_len;         /* hang groups: the root frames of names_json the majority of
                                  the group's samples share (perf__group_majority_len); 0: all */
  uint64_t events, samples;    /* samples: hang, all the events' samples; cpu, the stack's */
  uint64_t cpu_us;             /* cpu: the stack's CPU time (its counts' cpu_us); hang: 0 */
  int64_t total_ns;            /* the events' durations summed */
  int64_t first_ns, last_ns;   /* the earliest and the latest start */
  int64_t max_ns;              /* the longest duration */
  int dbin;                    /* the durations' bin (rollup_dbin) */
  uint64_t groups;             /* every group the query matched (top_rows streams the rows of
                                  at most STORE_TOP_GROUPS_MAX) */
  uint64_t rows_read;          /* the rollup and raw rows the read summed, all of them */
  uint64_t rows_limit;         /* the most it sums (rows_read == rows_limit: cut there) */
} store_top_row_t;

/* Return non-zero to stop (the scan then fails with STORE_ERROR). */
typedef int (*store_row_fn)(const store_top_row_t *row, void *user);

/* One stack's samples summed over the events of q (stack_rows): kind
   "hang" takes hang and fatal_hang events, "cpu" cpu events; one row per
   distinct stack, heaviest first (CPU time, then samples, then signature:
   the exports' caps keep the heaviest), frames_json as stored (objects,
   innermost first). samples: a count; cpu_us: the CPU time of those
   samples (their counts' cpu_us; none for events without weights);
   wall_ns: each event's duration shared among its stacks by their samples
   (rollup_wall_share, rollup.h), summed: a hang stack's own time;
   first_start_ns, last_end_ns: the earliest start and the latest end of
   those events. */
typedef struct store_stack_row_s {
  const char *stack_sig, *frames_json;
  uint64_t samples, cpu_us;
  int64_t wall_ns;
  int64_t first_start_ns, last_end_ns;
  uint64_t stacks;     /* 1; the row of the stacks past the cap (stack_sig NULL): how many */
  uint64_t rows_read;  /* the rollup and raw rows the read summed, all of them */
  uint64_t rows_limit; /* the most it sums (rows_read == rows_limit: cut there) */
} store_stack_row_t;

typedef int (*store_stack_row_fn)(const store_stack_row_t *row, void *user);

/* An event with its batch's resource (event_rows, event_detail); the
   strings may be NULL. tags_json: the batch's tags, a JSON array of
   {"key","value"} objects ordered by key then value ("[]": none). */
typedef struct store_event_row_s {
  int64_t id, start_ns, duration_ns;
  const char *kind, *reason, *app, *version, *environment, *group_sig, *tags_json;
  const char *label; /* NULL: none */
  const char *loop;  /* NULL: not a loop's event, or stored before events kept their loop */
  uint32_t tid;
  int32_t cpu_percent;
} store_event_row_t;

typedef int (*store_event_row_fn)(const store_event_row_t *row, void *user);

/* The events of one time bucket (time_buckets): those starting in
   [start_ns, start_ns + the bucket), their count and durations summed. */
typedef struct store_bucket_row_s {
  int64_t start_ns;
  uint64_t events;
  double total_ns;
  uint64_t rows_limit; /* the events a read sums at most (the newest): all buckets' events */
} store_bucket_row_t;

typedef int (*store_bucket_row_fn)(const store_bucket_row_t *row, void *user);

/* One stack_count of an event (event_detail) with its stack's frames. */
typedef struct store_count_row_s {
  const char *stack_sig, *frames_json; /* frames_json NULL: stack deleted */
  uint32_t tid;
  uint64_t samples;
  int64_t cpu_us; /* the CPU time of those samples; -1: the event has no weights */
} store_count_row_t;

typedef int (*store_count_row_fn)(const store_count_row_t *row, void *user);

typedef struct store_stats_s {
  uint64_t batches, events, stacks, stack_counts;
  uint64_t db_bytes; /* on disk, write-ahead log included */
  int lost;          /* check fails: the location was deleted or replaced */
} store_stats_t;

/* An alert rule (store.h alert_rule_add, alert_rules; collector/alerts/):
   what raises an alert, where it is delivered and in which shape. */
typedef struct store_alert_rule_s {
  int64_t id;             /* given by the store */
  const char *kind;       /* "new_group", "hang_rate_regression", "share_regression" */
  const char *url;        /* the webhook: http:// or https://, a host --alert-allow names */
  const char *format;     /* "json" or "slack" */
  const char *app;        /* NULL: every app */
  const char *event_kind; /* new_group, share_regression: "hang" or "cpu"; NULL: both */
  int64_t created_ns;     /* wall clock; new_group: only groups first seen since */
} store_alert_rule_t;

typedef int (*store_alert_rule_fn)(const store_alert_rule_t *rule, void *user);

/* An alert raised by a rule and its delivery (alert_claim, alert_update,
   alert_rows): one row per rule and key, ever (the key names what the
   alert is about: a group, a pair of versions), so an alert is raised
   once. state: "pending" (queued or being sent), "delivered" (a 2xx),
   "failed" (the retries spent), "suppressed" (over the rule's rate, never
   sent). */
typedef struct store_alert_s {
  int64_t id, rule_id;
  const char *alert_key;
  const char *state;
  int64_t status;      /* the webhook's last HTTP status; 0: none (no answer, not sent) */
  int64_t attempts;    /* POSTs made */
  int64_t time_ns;     /* raised, then the last attempt (wall clock) */
  const char *summary; /* one line of what happened */
  const char *link;    /* the dashboard's view of it ("" without --public-url) */
} store_alert_t;

typedef int (*store_alert_fn)(const store_alert_t *alert, void *user);

/* A version of an app and its first batch's arrival (app_versions). */
typedef int (*store_version_fn)(const char *version, int64_t first_received_ns, void *user);

/* A group new to an app's recent batches (new_groups): kind "hang" (a
   hang group) or "cpu" (a stack sampled by a CPU event), its frames'
   names (a JSON array, innermost first) and the arrival of the first of
   those batches that named it. */
typedef struct store_new_group_s {
  const char *group_sig, *kind, *names_json;
  int64_t first_seen_ns;
} store_new_group_t;

typedef int (*store_new_group_fn)(const store_new_group_t *group, void *user);

#endif
