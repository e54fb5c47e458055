/*
 * batch_sink.c - events into batches, batches into the spool, the spool to
 * the uploader (see batch_sink.h). Writer thread.
 */
#include "sdk/pipeline/batch_sink.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sdk/base/clock.h"
#include "sdk/base/fileio.h"
#include "sdk/base/hex.h"
#include "sdk/base/log.h"
#include "sdk/pipeline/event_encode.h"
#include "sdk/pipeline/unsent_drops.h"
#include "sdk/wire/batch.h"
#include "sdk/wire/batch_decode.h"
#include "sdk/wire/journal.h"
#include "sdk/wire/spool.h"
#include "uploader/transport.h"
#include "uploader/uploader.h"

/* A closed batch kept in its journal until the spool takes it. */
typedef struct pending_s {
  uint8_t id[PERF__BATCH_ID_BYTES];
  size_t events;
} pending_t;

/* How often the pending journals are tried again while no batch closes. */
#define RETRY_NS (1000 * 1000000LL)

struct perf__batch_sink_s {
  const perf__config_t *cfg;
  perf__stats_t *stats;
  perf__batch_builder_t *builder;
  perf__event_encoder_t *encoder;
  perf__spool_t *spool;
  perf__uploader_t *uploader;   /* NULL for the file sink */
  uint64_t oversized;           /* events too big for any batch, since open */
  perf__batch_drops_t reported; /* drop counters as of the last batch */
  perf__batch_drops_t carried;  /* saved by an earlier run (unsent_drops.h), not yet sent */
  bool carried_file;            /* ... in a file to remove once they are in a batch */
  /* The journal of the open batch (sdk/wire/journal.h): each event also
     as a one-event batch of its own builder, appended to the journal. */
  perf__batch_builder_t *jbuilder;
  perf__event_encoder_t *jencoder;
  perf__journal_t journal;
  uint8_t open_id[PERF__BATCH_ID_BYTES]; /* the open batch's id, chosen at its first event */
  uint64_t journal_max;                  /* bytes: the open batch is closed before more */
  bool journal_gap;                      /* a record of the open batch is not in its journal */
  atomic_bool put_failed;                /* a batch could not be written since the last flush */
  /* Closed batches the spool could not take (disk full, I/O error), kept
     in their journals, oldest first, written when the spool takes them. */
  pending_t pending[PERF__PENDING_JOURNALS_MAX];
  size_t n_pending;
  int64_t retry_at; /* monotonic ns: the next try */
};

/* A journal's records before it is replayed: several batch_max_bytes, as
   each record is a whole one-event batch (tables not shared). */
#define JOURNAL_MAX_FACTOR 4

static void spool_root(const perf__config_t *cfg, char dir[PATH_MAX]);
static int start_uploader(perf__batch_sink_t *s);
static int add_to_batch(perf__batch_sink_t *s, const perf__event_t *ev,
                        const Perf__V1__Batch *marker, const char *reason);
static int add_record(perf__batch_sink_t *s, const uint8_t *rec, size_t rec_len, bool event);
static void current_drops(perf__batch_sink_t *s, perf__batch_drops_t *d);
static int journal_record(perf__batch_sink_t *s, const perf__event_t *ev,
                          const Perf__V1__Batch *marker, const char *reason, uint8_t **rec,
                          size_t *len);
static void open_journal(perf__batch_sink_t *s);
static int put_batch(perf__batch_sink_t *s, const uint8_t id[PERF__BATCH_ID_BYTES], size_t events);
static void replay_journals(perf__batch_sink_t *s);
static void save_drops(perf__batch_sink_t *s);
static void replay_found(void *ctx, const char *name, const uint8_t id[16]);
static int replay_journal(perf__batch_sink_t *s, const char *name, const uint8_t id[16],
                          size_t *events);
static bool keep_pending(perf__batch_sink_t *s, int err, size_t events);
static void retry_pending(perf__batch_sink_t *s);
static int spool_fd(perf__batch_sink_t *s);
static int replay_record(void *ctx, const uint8_t *payload, size_t len);

int perf__batch_sink_open(const perf__config_t *cfg, perf__stats_t *stats, perf__dir_t *root,
                          perf__batch_sink_t **out) {
  perf__batch_sink_t *s = calloc(1, sizeof *s);
  if (!s) return PERF_E_NO_MEMORY;
  s->cfg = cfg;
  s->stats = stats;
  char dir[PATH_MAX];
  spool_root(cfg, dir);
  perf__batch_options_t bo;
  perf__batch_options_init(&bo);
  bo.zstd_level = (int)cfg->zstd_level;
  bo.symbolize = cfg->symbolize != 0;
  bo.max_bytes = cfg->batch_max_bytes;
  /* The file sink's batch records stay on this machine (perf-dump reads
     them): not compressed, so the app never runs zstd's compressor for
     them (its code would stay resident where the app maps libzstd itself:
     docs/operations.md, "Side effects on the app"). */
  bo.uncompressed = cfg->sink == PERF_SINK_FILE;
  perf__spool_options_t so = {
      dir, cfg->spool_max_bytes, cfg->spool_max_files, cfg->spool_max_age_s, NULL, root};
  perf__batch_resource_t res;
  perf__config_batch_resource(cfg, &res);
  s->journal = (perf__journal_t)PERF__JOURNAL_INIT;
  s->journal_max = (uint64_t)JOURNAL_MAX_FACTOR * cfg->batch_max_bytes;
  int err = perf__batch_builder_new(&res, &bo, &s->builder);
  if (!err && !(s->encoder = perf__event_encoder_new())) err = PERF_E_NO_MEMORY;
  bo.uncompressed = true; /* journal records: no zstd on the writer's path */
  if (!err) err = perf__batch_builder_new(&res, &bo, &s->jbuilder);
  if (!err && !(s->jencoder = perf__event_encoder_new())) err = PERF_E_NO_MEMORY;
  if (!err) err = perf__spool_open(&so, &s->spool);
  if (err) perf__log(PERF__LOG_ERROR, "batch spool %s: %s", dir, perf_strerror(err));
  if (!err)
    s->carried_file = perf__unsent_drops_load(spool_fd(s), perf__spool_dir(s->spool), &s->carried);
  if (!err) replay_journals(s); /* before the uploader: it sends them with the rest */
  if (!err && cfg->sink == PERF_SINK_HTTP) err = start_uploader(s);
  if (err) {
    perf__batch_sink_close(s, NULL);
    return err;
  }
  *out = s;
  return PERF_OK;
}

int perf__batch_sink_open_dir(const perf__config_t *cfg, perf__dir_t *root) {
  *root = (perf__dir_t)PERF__DIR_INIT;
  if (cfg->sink == PERF_SINK_NONE) return PERF_OK;
  char dir[PATH_MAX];
  spool_root(cfg, dir);
  const char *what =
      cfg->sink == PERF_SINK_HTTP ? "data_dir: the spool" : "sink_path: the batch records";
  if (cfg->sink == PERF_SINK_HTTP) {
    /* data_dir itself holds the spool and the hang markers: checked as
       the spool is. */
    perf__dir_t data = PERF__DIR_INIT;
    int err = perf__dir_open(&data, cfg->data_dir, PERF__DIR_CREATE | PERF__DIR_TRUST, "data_dir");
    perf__dir_close(&data);
    if (err) return err;
  }
  int err = perf__dir_open(root, dir, PERF__DIR_CREATE | PERF__DIR_TRUST, what);
  if (err) return err;
  if (faccessat(root->own.fd, ".", W_OK | X_OK, 0) != 0) {
    int e = errno;
    perf__dir_close(root);
    PERF__FAIL(PERF_E_SYSTEM, "%s %s is unusable: %s (errno %d)", what, dir, strerror(e), e);
  }
  char helper[PATH_MAX];
  if (cfg->sink == PERF_SINK_HTTP &&
      perf__upload_helper_find(cfg->upload_helper, helper, sizeof helper) ==
          PERF_E_INVALID_CONFIG) {
    perf__dir_close(root);
    return PERF_E_INVALID_CONFIG;
  }
  return PERF_OK;
}

int perf__batch_sink_add(perf__batch_sink_t *s, const perf__event_t *ev) {
  return add_to_batch(s, ev, NULL, NULL);
}

int perf__batch_sink_add_fatal_hang(perf__batch_sink_t *s, const Perf__V1__Batch *marker,
                                    const char *reason) {
  return add_to_batch(s, NULL, marker, reason);
}

int perf__batch_sink_add_loop_stats(perf__batch_sink_t *s, const perf__batch_loops_t *stats) {
  /* Its journal record: a batch of no event with these stats alone. */
  uint8_t *rec = NULL;
  size_t rec_len = 0;
  perf__batch_add_loops(s->jbuilder, stats);
  if (perf__batch_finish_as(s->jbuilder, NULL, s->open_id, &rec, &rec_len) != PERF_OK) {
    perf__batch_reset(s->jbuilder);
    rec = NULL;
  }
  if (rec && s->journal.bytes + PERF__JOURNAL_RECORD_HEADER + rec_len > s->journal_max)
    perf__batch_sink_close_batch(s); /* the journal is full: these start the next batch */
  if (!perf__batch_has_content(s->builder)) open_journal(s);
  if (perf__batch_add_loops(s->builder, stats) != PERF_OK) {
    perf__batch_sink_close_batch(s); /* full: these start the next batch */
    open_journal(s);
    perf__batch_add_loops(s->builder, stats); /* an empty batch has room */
  }
  int err = add_record(s, rec, rec_len, false);
  free(rec);
  return err;
}

int64_t perf__batch_sink_deadline(const perf__batch_sink_t *s) {
  int64_t opened = perf__batch_opened_ns(s->builder);
  if (!opened) return s->n_pending ? s->retry_at : 0; /* kept journals tried again */
  /* A batch of loop stats alone waits longer: an idle app sends one every
     few minutes, not one per batch period (each is an fsync'd spool file
     and, with http, a request). An event closes it at its usual time. */
  int64_t delay_ms = s->cfg->batch_max_delay_ms;
  if (perf__batch_event_count(s->builder) == 0 && delay_ms < PERF__STATS_BATCH_DELAY_MS)
    delay_ms = PERF__STATS_BATCH_DELAY_MS;
  return opened + delay_ms * 1000000;
}

void perf__batch_sink_close_batch(perf__batch_sink_t *s) {
  size_t events = perf__batch_event_count(s->builder);
  if (!perf__batch_has_content(s->builder)) { /* a stats-only batch goes too */
    if (s->n_pending && perf__now_ns() >= s->retry_at) retry_pending(s);
    return;
  }
  int err = put_batch(s, s->open_id, events);
  if (err && keep_pending(s, err, events)) {
    atomic_store(&s->put_failed, true);
    return;
  }
  /* http: an event is written when its batch is in the spool; lost with
     it, it is counted by reason, and that count goes out with the next
     batch that is written. (The file sink counts its text reports.) */
  bool http = s->cfg->sink == PERF_SINK_HTTP;
  if (http) PERF__COUNT(s->stats, events_written, err ? 0 : events);
  if (http && err) PERF__COUNT(s->stats, events_dropped_sink, events);
  if (err) {
    atomic_store(&s->put_failed, true);
    save_drops(s); /* the lost batch's events among them, should we die now */
  }
  /* The batch is durable in the spool (renamed, directory synced), or
     dropped and counted: its journal goes, and only then the uploader is
     woken (a journal never outlives a batch the collector has). */
  perf__journal_end(&s->journal, spool_fd(s));
  if (!err && s->n_pending) retry_pending(s); /* the spool takes batches again */
  if (!err && s->uploader) perf__uploader_wake(s->uploader);
}

int perf__batch_sink_take_failure(perf__batch_sink_t *s) {
  return atomic_exchange(&s->put_failed, false) ? PERF_E_SYSTEM : PERF_OK;
}

int perf__batch_sink_wait_sent(perf__batch_sink_t *s, int64_t deadline_ns) {
  return s->uploader ? perf__uploader_flush(s->uploader, deadline_ns) : PERF_OK;
}

void perf__batch_sink_stats(perf__batch_sink_t *s, perf_sdk_stats_t *out) {
  perf__spool_stats_t st;
  perf__spool_stats(s->spool, &st);
  out->batches_written = st.written;
  out->batches_rejected = st.quarantined_rejected;
  out->batches_quarantined_corrupt = st.quarantined_corrupt;
  out->batches_evicted = st.evicted_quota;
  out->batches_write_failed = st.write_failed + st.refused_too_big;
  out->spool_files = st.files;
  out->spool_bytes = st.bytes;
  out->batches_sent = atomic_load(&s->stats->batches_sent);
  out->batches_retried = atomic_load(&s->stats->batches_retried);
  out->batches_dropped_server = atomic_load(&s->stats->batches_dropped_server);
}

void perf__batch_sink_close(perf__batch_sink_t *s, perf_sdk_stats_t *last) {
  if (!s) return;
  if (s->builder && s->spool) perf__batch_sink_close_batch(s);
  if (s->builder && s->spool && s->n_pending) retry_pending(s); /* a last try */
  if (s->builder && s->spool) save_drops(s); /* what no batch carried, for the next run */
  perf__uploader_stop(s->uploader);
  if (last && s->spool) perf__batch_sink_stats(s, last);
  /* One whose batch never got an event. Kept journals stay on disk: the
     next start replays them. */
  perf__journal_end(&s->journal, spool_fd(s));
  perf__spool_close(s->spool);
  perf__batch_free(s->builder);
  perf__event_encoder_free(s->encoder);
  perf__batch_free(s->jbuilder);
  perf__event_encoder_free(s->jencoder);
  free(s);
}

/* <data_dir>/spool, or for the file sink <sink_path>.batches. */
static void spool_root(const perf__config_t *cfg, char dir[PATH_MAX]) {
  if (cfg->sink == PERF_SINK_HTTP)
    snprintf(dir, PATH_MAX, "%s/spool", cfg->data_dir);
  else
    snprintf(dir, PATH_MAX, "%s.batches", cfg->sink_path);
}

static int start_uploader(perf__batch_sink_t *s) {
  perf__curl_options_t co = {s->cfg->connect_timeout_ms, s->cfg->request_timeout_ms,
                             s->cfg->tls_verify != 0, s->cfg->ca_bundle};
  perf__transport_t *t = NULL;
  /* libcurl in the upload helper's process, else in this one; either way
     only once there is a batch to send. */
  char helper[PATH_MAX];
  int err = perf__upload_helper_find(s->cfg->upload_helper, helper, sizeof helper);
  if (err == PERF_OK)
    err = perf__helper_transport_new(&co, helper, &t);
  else if (err == PERF_E_UNSUPPORTED)
    err = perf__lazy_curl_transport_new(&co, &t);
  if (err) return err;
  perf__uploader_options_t uo = {s->cfg->endpoint,
                                 s->cfg->api_key,
                                 s->spool,
                                 t,
                                 s->cfg->backoff_base_ms,
                                 s->cfg->backoff_cap_ms,
                                 s->cfg->max_server_errors,
                                 s->stats,
                                 s->cfg->upload_stall_warn_s * 1000u};
  err = perf__uploader_start(&uo, &s->uploader);
  if (err) t->destroy(t);
  return err;
}

/* An event of this process, or the fatal hang in a dead process's marker,
   into the open batch, closing it first when it is full, and into the
   open batch's journal. */
static int add_to_batch(perf__batch_sink_t *s, const perf__event_t *ev,
                        const Perf__V1__Batch *marker, const char *reason) {
  uint8_t *rec = NULL;
  size_t rec_len = 0;
  if (journal_record(s, ev, marker, reason, &rec, &rec_len) == PERF_OK &&
      s->journal.bytes + PERF__JOURNAL_RECORD_HEADER + rec_len > s->journal_max)
    perf__batch_sink_close_batch(s); /* the journal is full: this event starts the next */
  int err = PERF_E_NO_MEMORY;
  for (int attempt = 0; attempt < 2 && err == PERF_E_NO_MEMORY; attempt++) {
    if (attempt == 1) {
      if (perf__batch_event_count(s->builder) == 0) break;
      perf__batch_sink_close_batch(s); /* full: this event starts the next batch */
    }
    if (perf__batch_event_count(s->builder) == 0) open_journal(s);
    err = ev ? perf__event_encode(s->encoder, s->builder, ev)
             : perf__batch_copy_event(s->builder, marker, 0,
                                      PERF__V1__EVENT_KIND__EVENT_KIND_FATAL_HANG, reason);
  }
  if (!err) add_record(s, rec, rec_len, true);
  free(rec);
  if (err == PERF_E_TRUNCATED) {
    s->oversized++;
    PERF__COUNT(s->stats, events_dropped_oversized, 1);
    perf__log(PERF__LOG_WARN, "an event larger than batch_max_bytes (%u) was dropped",
              s->cfg->batch_max_bytes);
  } else if (err) {
    PERF__COUNT(s->stats, events_dropped_sink, 1);
  }
  return err;
}

/* What was just added to the open batch, as its journal record `rec`
   (NULL: it could not be made), appended to the open batch's journal.
   0, or PERF_E_SYSTEM when it is in memory only (counted; an event
   journaled is counted too, loop stats are not events). */
static int add_record(perf__batch_sink_t *s, const uint8_t *rec, size_t rec_len, bool event) {
  bool journaled = rec && s->journal.file.fd >= 0 &&
                   perf__journal_append(&s->journal, spool_fd(s), rec, rec_len) == PERF_OK;
  if (!journaled) s->journal_gap = true;
  PERF__COUNT(s->stats, events_journaled, journaled && event ? 1 : 0);
  PERF__COUNT(s->stats, journal_write_failed, journaled ? 0 : 1);
  return journaled ? PERF_OK : PERF_E_SYSTEM;
}

/* The event as a one-event serialized batch (uncompressed): a journal
   record. *rec is malloc'd. */
static int journal_record(perf__batch_sink_t *s, const perf__event_t *ev,
                          const Perf__V1__Batch *marker, const char *reason, uint8_t **rec,
                          size_t *len) {
  int err = ev ? perf__event_encode(s->jencoder, s->jbuilder, ev)
               : perf__batch_copy_event(s->jbuilder, marker, 0,
                                        PERF__V1__EVENT_KIND__EVENT_KIND_FATAL_HANG, reason);
  if (!err) err = perf__batch_finish_as(s->jbuilder, NULL, s->open_id, rec, len);
  if (err) {
    perf__batch_reset(s->jbuilder);
    *rec = NULL;
  }
  return err;
}

/* The batch opens: its id, and its journal (a failure is logged; the
   batch then lives in memory only, as before journals). */
static void open_journal(perf__batch_sink_t *s) {
  perf__journal_end(&s->journal, spool_fd(s)); /* one left with no event in its batch */
  s->journal_gap = false;
  if (perf__batch_new_id(s->open_id) != PERF_OK) {
    PERF__COUNT(s->stats, journal_write_failed, 1);
    s->journal_gap = true;
    return;
  }
  if (perf__journal_begin(&s->journal, spool_fd(s), perf__spool_dir(s->spool), s->open_id) !=
      PERF_OK)
    s->journal_gap = true;
}

/* The builder's batch (`events` events) with the drops not yet reported,
   finished under `id` and put into the spool. The drops count as reported
   only when the batch is in the spool. */
static int put_batch(perf__batch_sink_t *s, const uint8_t id[PERF__BATCH_ID_BYTES], size_t events) {
  perf__batch_drops_t drops;
  current_drops(s, &drops);
  uint8_t *payload = NULL;
  size_t len = 0;
  int err = perf__batch_finish_as(s->builder, &drops, id, &payload, &len);
  if (err) { /* cannot happen short of memory */
    perf__log(PERF__LOG_WARN, "a batch of %zu events was not made: %s", events, perf_strerror(err));
    perf__batch_reset(s->builder);
    return err;
  }
  err = perf__spool_put(s->spool, id, payload, len, NULL);
  free(payload);
  if (err) return err;
  /* Reported: this run's part of them; an earlier run's part is gone. */
  s->reported.rate_limited += drops.rate_limited - s->carried.rate_limited;
  s->reported.queue_full += drops.queue_full - s->carried.queue_full;
  s->reported.sink_failed += drops.sink_failed - s->carried.sink_failed;
  s->reported.spool_quota += drops.spool_quota - s->carried.spool_quota;
  s->reported.oversized += drops.oversized - s->carried.oversized;
  s->carried = (perf__batch_drops_t){0};
  if (s->carried_file) perf__unsent_drops_clear(spool_fd(s));
  s->carried_file = false;
  return PERF_OK;
}

/* The drops no written batch carried, into <spool dir>/drops. */
static void save_drops(perf__batch_sink_t *s) {
  perf__batch_drops_t d;
  current_drops(s, &d);
  if (perf__unsent_drops_save(spool_fd(s), perf__spool_dir(s->spool), &d) == PERF_OK)
    s->carried_file =
        d.rate_limited || d.queue_full || d.sink_failed || d.spool_quota || d.oversized;
}

/* ---- the journals of earlier runs ----------------------------------------- */

typedef struct replay_s {
  perf__batch_sink_t *s;
  uint8_t id[PERF__BATCH_ID_BYTES];
  size_t events, batches;
  int err;
} replay_t;

/* Each journal left in our spool directory (by a process that died with a
   batch open, or adopted from a dead process's subdirectory by the spool)
   becomes a batch of the same id, unless that batch made it into the spool
   before the journal could be removed. */
static void replay_journals(perf__batch_sink_t *s) {
  if (perf__journal_scan(spool_fd(s), PERF__SPOOL_SCAN_LIMIT, replay_found, s) != 0)
    perf__log(PERF__LOG_WARN, "journal: cannot list %s: %s", perf__spool_dir(s->spool),
              strerror(errno));
}

static void replay_found(void *ctx, const char *name, const uint8_t id[16]) {
  perf__batch_sink_t *s = ctx;
  size_t events = 0;
  if (replay_journal(s, name, id, &events) == PERF_OK)
    PERF__COUNT(s->stats, events_replayed, events);
}

/* The journal `name` of batch `id` made a batch of that id and put into
   the spool, then removed; *events gets how many it held. Not written
   (an error): the journal stays. */
static int replay_journal(perf__batch_sink_t *s, const char *name, const uint8_t id[16],
                          size_t *events) {
  int dfd = spool_fd(s);
  *events = 0;
  if (perf__spool_has_batch(s->spool, id)) { /* died between the rename and the unlink */
    unlinkat(dfd, name, 0);
    return PERF_OK;
  }
  replay_t r = {.s = s};
  memcpy(r.id, id, sizeof r.id);
  uint64_t torn = 0;
  int err = perf__journal_read(dfd, name, s->journal_max + (1u << 20), replay_record, &r, &torn);
  if (!err) err = r.err;
  if (!err && torn) {
    /* The process died inside that event's write: dropped, counted (and
       reported with the batch made of the rest). */
    PERF__COUNT(s->stats, journal_torn, torn);
    PERF__COUNT(s->stats, events_dropped_sink, torn);
  }
  if (!err && perf__batch_has_content(s->builder)) {
    size_t n = perf__batch_event_count(s->builder);
    err = put_batch(s, r.id, n);
  }
  if (err) {
    /* Not written: the journal stays for the next start. */
    perf__batch_reset(s->builder);
    perf__log(PERF__LOG_WARN, "journal %s/%s not replayed: %s", perf__spool_dir(s->spool), name,
              perf_strerror(err));
    return err;
  }
  perf__log(PERF__LOG_INFO, "journal %s/%s: %zu events replayed%s", perf__spool_dir(s->spool), name,
            r.events, torn ? ", a torn last record dropped" : "");
  unlinkat(dfd, name, 0);
  *events = r.events;
  return PERF_OK;
}

/* The open batch could not be put into the spool (err). When that may
   pass (an I/O error, a full disk: PERF_E_SYSTEM, PERF_E_BUSY; not a batch
   larger than the spool) and every one of its records is in its journal,
   the journal is kept (closed, on disk) and the batch is written from it
   once the spool takes batches again: true. False: the batch is dropped
   (the caller counts it). At most
   PERF__PENDING_JOURNALS_MAX are kept; past that the oldest is deleted and
   its events counted as dropped. */
static bool keep_pending(perf__batch_sink_t *s, int err, size_t events) {
  if ((err != PERF_E_SYSTEM && err != PERF_E_BUSY) || s->journal_gap || s->journal.file.fd < 0)
    return false;
  if (s->n_pending == PERF__PENDING_JOURNALS_MAX) {
    pending_t *old = &s->pending[0];
    char name[48];
    perf__hex_encode(old->id, PERF__BATCH_ID_BYTES, name);
    memcpy(name + 32, PERF__JOURNAL_SUFFIX, sizeof PERF__JOURNAL_SUFFIX);
    unlinkat(spool_fd(s), name, 0);
    perf__log(PERF__LOG_WARN,
              "spool %s: %d batches wait in their journals: the oldest (%zu events) is dropped",
              perf__spool_dir(s->spool), PERF__PENDING_JOURNALS_MAX, old->events);
    PERF__COUNT(s->stats, events_dropped_sink, old->events);
    memmove(s->pending, s->pending + 1, (s->n_pending - 1) * sizeof *s->pending);
    s->n_pending--;
  }
  pending_t *p = &s->pending[s->n_pending++];
  memcpy(p->id, s->open_id, sizeof p->id);
  p->events = events;
  perf__journal_close(&s->journal); /* the file stays */
  s->retry_at = perf__now_ns() + RETRY_NS;
  perf__log(PERF__LOG_WARN,
            "spool %s: a batch of %zu events is kept in its journal until it can be written",
            perf__spool_dir(s->spool), events);
  return true;
}

/* The kept journals, oldest first, into the spool while it takes them
   (the open batch is empty: they are rebuilt in its builder). */
static void retry_pending(perf__batch_sink_t *s) {
  if (perf__batch_has_content(s->builder)) return;
  while (s->n_pending) {
    pending_t *p = &s->pending[0];
    char name[48];
    perf__hex_encode(p->id, PERF__BATCH_ID_BYTES, name);
    memcpy(name + 32, PERF__JOURNAL_SUFFIX, sizeof PERF__JOURNAL_SUFFIX);
    size_t events = 0;
    if (replay_journal(s, name, p->id, &events) != PERF_OK) {
      s->retry_at = perf__now_ns() + RETRY_NS;
      return;
    }
    if (s->cfg->sink == PERF_SINK_HTTP) PERF__COUNT(s->stats, events_written, events);
    memmove(s->pending, s->pending + 1, (s->n_pending - 1) * sizeof *s->pending);
    s->n_pending--;
    if (s->uploader) perf__uploader_wake(s->uploader);
  }
}

/* The spool directory's descriptor, checked (perf__spool_dir_fd). */
static int spool_fd(perf__batch_sink_t *s) {
  if (!s->spool) {
    errno = EBADF;
    return -1;
  }
  return perf__spool_dir_fd(s->spool);
}

/* A journal record of loop stats alone into the batch being rebuilt. */
static int replay_loop_stats(replay_t *r, const Perf__V1__Batch *bt) {
  perf__batch_sink_t *s = r->s;
  perf__batch_loops_t *stats = malloc(sizeof *stats);
  if (!stats) return PERF_E_NO_MEMORY;
  perf__batch_loops_of(bt, stats);
  int err = perf__batch_add_loops(s->builder, stats);
  if (err == PERF_E_NO_MEMORY) { /* full, as below for an event */
    err = put_batch(s, r->id, perf__batch_event_count(s->builder));
    r->id[PERF__BATCH_ID_BYTES - 1] ^= (uint8_t)(1 + r->batches++);
    if (!err) err = perf__batch_add_loops(s->builder, stats);
  }
  free(stats);
  return err;
}

/* One journal record (a one-event batch, or a batch of loop stats alone)
   into the batch being rebuilt. */
static int replay_record(void *ctx, const uint8_t *payload, size_t len) {
  replay_t *r = ctx;
  perf__batch_sink_t *s = r->s;
  Perf__V1__Batch *bt = NULL;
  bool decoded = perf__batch_decode_uncompressed(payload, len, &bt) == 0;
  if (decoded && bt->n_events == 0 && bt->loop_stats) {
    int err = replay_loop_stats(r, bt);
    perf__v1__batch__free_unpacked(bt, NULL);
    if (err) r->err = err;
    return r->err;
  }
  if (!decoded || bt->n_events != 1) {
    if (decoded) perf__v1__batch__free_unpacked(bt, NULL);
    PERF__COUNT(s->stats, events_dropped_sink, 1); /* CRC good, content not: counted */
    return PERF_OK;
  }
  int err = perf__batch_copy_event(s->builder, bt, 0, bt->events[0]->kind, NULL);
  if (err == PERF_E_NO_MEMORY && perf__batch_event_count(s->builder) > 0) {
    /* Fuller than the batch it journaled (not expected): the part so far
       under the journal's id, the rest under the next id. */
    err = put_batch(s, r->id, perf__batch_event_count(s->builder));
    r->id[PERF__BATCH_ID_BYTES - 1] ^= (uint8_t)(1 + r->batches++);
    if (!err) err = perf__batch_copy_event(s->builder, bt, 0, bt->events[0]->kind, NULL);
  }
  perf__v1__batch__free_unpacked(bt, NULL);
  if (err == PERF_OK) r->events++;
  if (err == PERF_E_NO_MEMORY || err == PERF_E_SYSTEM) r->err = err;
  if (err == PERF_E_TRUNCATED) PERF__COUNT(s->stats, events_dropped_oversized, 1);
  return r->err;
}

/* Drops since the last batch, by reason. */
static void current_drops(perf__batch_sink_t *s, perf__batch_drops_t *d) {
  perf__spool_stats_t st;
  perf__spool_stats(s->spool, &st);
  d->rate_limited = atomic_load(&s->stats->events_dropped_rate) - s->reported.rate_limited;
  d->queue_full = atomic_load(&s->stats->events_dropped_queue) - s->reported.queue_full;
  d->sink_failed = atomic_load(&s->stats->events_dropped_sink) - s->reported.sink_failed;
  d->spool_quota = st.evicted_quota - s->reported.spool_quota;
  d->oversized = s->oversized - s->reported.oversized;
  d->rate_limited += s->carried.rate_limited;
  d->queue_full += s->carried.queue_full;
  d->sink_failed += s->carried.sink_failed;
  d->spool_quota += s->carried.spool_quota;
  d->oversized += s->carried.oversized;
}
