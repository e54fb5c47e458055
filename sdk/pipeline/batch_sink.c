/*
 * batch_sink.c - events into batches, batches into the spool, the spool to
 * the uploader (see batch_sink.h). Writer thread.
 */
#include "sdk/pipeline/batch_sink.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/base/clock.h"
#include "sdk/base/log.h"
#include "sdk/pipeline/event_encode.h"
#include "sdk/wire/batch.h"
#include "sdk/wire/spool.h"
#include "uploader/transport.h"
#include "uploader/uploader.h"

struct perf__batch_sink_s {
  const perf__config_t *cfg;
  perf__stats_t *stats;
  perf__batch_builder_t *builder;
  perf__event_encoder_t *encoder;
  perf__spool_t *spool;
  perf__uploader_t *uploader;   /* NULL for the file sink */
  uint64_t oversized;           /* events too big for any batch, since open */
  perf__batch_drops_t reported; /* drop counters as of the last batch */
};

static int start_uploader(perf__batch_sink_t *s);
static int add_to_batch(perf__batch_sink_t *s, const perf__event_t *ev,
                        const Perf__V1__Batch *marker, const char *reason);
static void current_drops(perf__batch_sink_t *s, perf__batch_drops_t *d);

int perf__batch_sink_open(const perf__config_t *cfg, perf__stats_t *stats,
                          perf__batch_sink_t **out) {
  perf__batch_sink_t *s = calloc(1, sizeof *s);
  if (!s) return PERF_E_NO_MEMORY;
  s->cfg = cfg;
  s->stats = stats;
  char dir[PATH_MAX];
  if (cfg->sink == PERF_SINK_HTTP)
    snprintf(dir, sizeof dir, "%s/spool", cfg->data_dir);
  else
    snprintf(dir, sizeof dir, "%s.batches", cfg->sink_path);
  perf__batch_options_t bo;
  perf__batch_options_init(&bo);
  bo.zstd_level = (int)cfg->zstd_level;
  bo.symbolize = cfg->symbolize != 0;
  bo.max_bytes = cfg->batch_max_bytes;
  perf__spool_options_t so = {dir, cfg->spool_max_bytes, cfg->spool_max_files, cfg->spool_max_age_s,
                              NULL};
  perf__batch_resource_t res;
  perf__config_batch_resource(cfg, &res);
  int err = perf__batch_builder_new(&res, &bo, &s->builder);
  if (!err && !(s->encoder = perf__event_encoder_new())) err = PERF_E_NO_MEMORY;
  if (!err) err = perf__spool_open(&so, &s->spool);
  if (err) perf__log(PERF__LOG_ERROR, "batch spool %s: %s", dir, perf_strerror(err));
  if (!err && cfg->sink == PERF_SINK_HTTP) err = start_uploader(s);
  if (err) {
    perf__batch_sink_close(s, NULL);
    return err;
  }
  *out = s;
  return PERF_OK;
}

int perf__batch_sink_add(perf__batch_sink_t *s, const perf__event_t *ev) {
  return add_to_batch(s, ev, NULL, NULL);
}

int perf__batch_sink_add_fatal_hang(perf__batch_sink_t *s, const Perf__V1__Batch *marker,
                                    const char *reason) {
  return add_to_batch(s, NULL, marker, reason);
}

int64_t perf__batch_sink_deadline(const perf__batch_sink_t *s) {
  int64_t opened = perf__batch_opened_ns(s->builder);
  return opened ? opened + (int64_t)s->cfg->batch_max_delay_ms * 1000000 : 0;
}

void perf__batch_sink_close_batch(perf__batch_sink_t *s) {
  if (perf__batch_event_count(s->builder) == 0) return;
  perf__batch_drops_t drops;
  current_drops(s, &drops);
  uint8_t *payload = NULL, id[PERF__BATCH_ID_BYTES];
  size_t len = 0;
  int err = perf__batch_finish(s->builder, &drops, &payload, &len, id);
  if (err) { /* cannot happen short of memory: the events are lost, counted */
    PERF__COUNT(s->stats, events_dropped_sink, perf__batch_event_count(s->builder));
    perf__batch_reset(s->builder);
    return;
  }
  /* The drops went out with this batch whether or not the spool takes it:
     reporting them twice would be wrong, losing them with a lost batch is
     counted (write_failed) and logged by the spool. */
  s->reported.rate_limited += drops.rate_limited;
  s->reported.queue_full += drops.queue_full;
  s->reported.sink_failed += drops.sink_failed;
  s->reported.spool_quota += drops.spool_quota;
  s->reported.oversized += drops.oversized;
  err = perf__spool_put(s->spool, id, payload, len, NULL);
  free(payload);
  if (!err && s->uploader) perf__uploader_wake(s->uploader);
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
  perf__uploader_stop(s->uploader);
  if (last && s->spool) perf__batch_sink_stats(s, last);
  perf__spool_close(s->spool);
  perf__batch_free(s->builder);
  perf__event_encoder_free(s->encoder);
  free(s);
}

static int start_uploader(perf__batch_sink_t *s) {
  perf__curl_options_t co = {s->cfg->connect_timeout_ms, s->cfg->request_timeout_ms,
                             s->cfg->tls_verify != 0, s->cfg->ca_bundle};
  perf__transport_t *t = NULL;
  int err = perf__curl_transport_new(&co, &t);
  if (err) return err;
  perf__uploader_options_t uo = {
      s->cfg->endpoint,       s->cfg->api_key,           s->spool, t, s->cfg->backoff_base_ms,
      s->cfg->backoff_cap_ms, s->cfg->max_server_errors, s->stats};
  err = perf__uploader_start(&uo, &s->uploader);
  if (err) t->destroy(t);
  return err;
}

/* An event of this process, or the fatal hang in a dead process's marker,
   into the open batch, closing it first when it is full. */
static int add_to_batch(perf__batch_sink_t *s, const perf__event_t *ev,
                        const Perf__V1__Batch *marker, const char *reason) {
  int err = PERF_E_NO_MEMORY;
  for (int attempt = 0; attempt < 2 && err == PERF_E_NO_MEMORY; attempt++) {
    if (attempt == 1) {
      if (perf__batch_event_count(s->builder) == 0) break;
      perf__batch_sink_close_batch(s); /* full: this event starts the next batch */
    }
    err = ev ? perf__event_encode(s->encoder, s->builder, ev)
             : perf__batch_copy_event(s->builder, marker, 0,
                                      PERF__V1__EVENT_KIND__EVENT_KIND_FATAL_HANG, reason);
  }
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

/* Drops since the last batch, by reason. */
static void current_drops(perf__batch_sink_t *s, perf__batch_drops_t *d) {
  perf__spool_stats_t st;
  perf__spool_stats(s->spool, &st);
  d->rate_limited = atomic_load(&s->stats->events_dropped_rate) - s->reported.rate_limited;
  d->queue_full = atomic_load(&s->stats->events_dropped_queue) - s->reported.queue_full;
  d->sink_failed = atomic_load(&s->stats->events_dropped_sink) - s->reported.sink_failed;
  d->spool_quota = st.evicted_quota - s->reported.spool_quota;
  d->oversized = s->oversized - s->reported.oversized;
}
