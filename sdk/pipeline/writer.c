/*
 * writer.c - the event writer thread (see writer.h).
 *
 * Producers (the monitors, the capture_now caller) push event pointers into
 * a fixed ring of queue_capacity slots under a mutex and signal a condition
 * variable; a full ring refuses the event at once. The hang marker has a
 * one-slot mailbox where the latest post replaces an unwritten older one.
 */
#include "sdk/pipeline/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sdk/base/clock.h"
#include "sdk/base/fileio.h"
#include "sdk/base/log.h"
#include "sdk/base/threads.h"
#include "sdk/pipeline/batch_sink.h"
#include "sdk/pipeline/event_text.h"
#include "sdk/pipeline/hang_marker.h"

#define REPORT_MAX_BYTES (16u << 20) /* one event's text */

struct perf__writer_s {
  const perf__config_t *cfg;
  perf__stats_t *stats;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t wake; /* producers -> writer */
  perf__event_t **ring;
  size_t head, count, capacity;
  bool hang_posted;    /* the mailbox holds a post */
  perf__event_t *hang; /* ... which is this progress copy, or NULL = clear */
  bool stopping, abandon, held, exited;
  int sink_fd;
  perf__hang_marker_t marker;
  bool data_dir_ready;
  atomic_int tid;
  /* the wire path: batches into the spool (and, for http, to the collector) */
  perf__batch_sink_t *batches;          /* set by the writer thread under lock; NULL without */
  bool batches_tried;                   /* the open was attempted (lock) */
  perf_sdk_stats_t batch_stats;         /* the batch sink's last counters, once it is closed */
  uint64_t flush_requested, flush_done; /* perf__writer_flush handshake (lock) */
  int64_t stop_deadline_ns;             /* shutdown: send until then */
};

static void *writer_main(void *arg);
static void open_batches(perf__writer_t *w);
static void close_batches(perf__writer_t *w, int64_t deadline_ns);
static bool batch_due(perf__writer_t *w);
static void wait_for_work(perf__writer_t *w);
static void report_fatal_hangs(perf__writer_t *w);
static void write_event(perf__writer_t *w, perf__event_t *ev);
static void count_batched(perf__writer_t *w, int batched);
static void write_report(perf__writer_t *w, const perf__strbuf_t *b, int err);
static void handle_hang_post(perf__writer_t *w, perf__event_t *progress);
static void free_writer(perf__writer_t *w);

int perf__writer_start(const perf__config_t *cfg, perf__stats_t *stats, perf__writer_t **out) {
  perf__writer_t *w = calloc(1, sizeof *w);
  if (!w) return PERF_E_NO_MEMORY;
  w->cfg = cfg;
  w->stats = stats;
  w->capacity = cfg->queue_capacity;
  w->sink_fd = -1;
  w->marker = (perf__hang_marker_t)PERF__HANG_MARKER_INIT;
  w->ring = calloc(w->capacity, sizeof *w->ring);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->wake, &ca);
  pthread_condattr_destroy(&ca);
  if (!w->ring || pthread_create(&w->thread, NULL, writer_main, w) != 0) {
    int err = w->ring ? PERF_E_SYSTEM : PERF_E_NO_MEMORY;
    free_writer(w);
    return err;
  }
  while (atomic_load(&w->tid) == 0)
    sched_yield(); /* published first thing */
  *out = w;
  return PERF_OK;
}

pid_t perf__writer_tid(perf__writer_t *w) {
  return atomic_load(&w->tid);
}

int perf__writer_submit(perf__writer_t *w, perf__event_t *ev) {
  pthread_mutex_lock(&w->lock);
  bool full = w->count == w->capacity || w->stopping;
  if (!full) {
    w->ring[(w->head + w->count) % w->capacity] = ev;
    w->count++;
    pthread_cond_signal(&w->wake);
  }
  pthread_mutex_unlock(&w->lock);
  if (full) perf__event_free(ev);
  return full ? PERF_E_BUSY : PERF_OK;
}

void perf__writer_post_hang(perf__writer_t *w, perf__event_t *progress) {
  pthread_mutex_lock(&w->lock);
  perf__event_t *older = w->hang_posted ? w->hang : NULL;
  w->hang = progress;
  w->hang_posted = true;
  pthread_cond_signal(&w->wake);
  pthread_mutex_unlock(&w->lock);
  perf__event_free(older);
}

void perf__writer_hold(perf__writer_t *w, bool hold) {
  pthread_mutex_lock(&w->lock);
  w->held = hold;
  pthread_cond_signal(&w->wake);
  pthread_mutex_unlock(&w->lock);
}

int perf__writer_flush(perf__writer_t *w, int64_t deadline_ns) {
  pthread_mutex_lock(&w->lock);
  uint64_t ticket = ++w->flush_requested;
  pthread_cond_broadcast(&w->wake);
  struct timespec ts = {(time_t)(deadline_ns / 1000000000), (long)(deadline_ns % 1000000000)};
  /* First everything queued into the spool, by the writer thread... */
  while ((w->flush_done < ticket || !w->batches_tried) && !w->exited &&
         perf__now_ns() < deadline_ns)
    pthread_cond_timedwait(&w->wake, &w->lock, &ts);
  bool queued_out = w->flush_done >= ticket;
  perf__batch_sink_t *b = w->batches;
  pthread_mutex_unlock(&w->lock);
  if (!queued_out) return PERF_E_TIMEOUT;
  /* ... then the spool to the collector, by the uploader. The sink stays
     open until perf__writer_stop, which cannot run concurrently (the SDK's
     lifecycle lock). */
  return b ? perf__batch_sink_wait_sent(b, deadline_ns) : PERF_OK;
}

void perf__writer_batch_stats(perf__writer_t *w, perf_sdk_stats_t *out) {
  pthread_mutex_lock(&w->lock);
  if (w->batches)
    perf__batch_sink_stats(w->batches, out);
  else
    *out = w->batch_stats;
  pthread_mutex_unlock(&w->lock);
}

int perf__writer_stop(perf__writer_t *w, int64_t deadline_ns, perf_sdk_stats_t *last) {
  pthread_mutex_lock(&w->lock);
  w->stop_deadline_ns = deadline_ns;
  w->stopping = true;
  w->held = false;
  pthread_cond_signal(&w->wake);
  pthread_mutex_unlock(&w->lock);
  struct timespec abs;
  clock_gettime(CLOCK_REALTIME, &abs); /* pthread_timedjoin_np takes CLOCK_REALTIME */
  int64_t left = deadline_ns - perf__now_ns();
  if (left < 0) left = 0;
  abs.tv_sec += (time_t)(left / 1000000000);
  abs.tv_nsec += (long)(left % 1000000000);
  if (abs.tv_nsec >= 1000000000) {
    abs.tv_sec++;
    abs.tv_nsec -= 1000000000;
  }
  if (pthread_timedjoin_np(w->thread, NULL, &abs) != 0) {
    /* Past the deadline: drop what is queued and wait a last moment for a
       writer that is between two events. */
    pthread_mutex_lock(&w->lock);
    w->abandon = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    abs.tv_nsec += 20 * 1000000;
    if (abs.tv_nsec >= 1000000000) {
      abs.tv_sec++;
      abs.tv_nsec -= 1000000000;
    }
    if (pthread_timedjoin_np(w->thread, NULL, &abs) != 0) {
      pthread_detach(w->thread); /* stuck in I/O: it keeps its memory */
      perf__log(PERF__LOG_WARN, "event writer still busy at the shutdown deadline; left running");
      return PERF_E_TIMEOUT;
    }
  }
  if (last) *last = w->batch_stats;
  free_writer(w);
  return PERF_OK;
}

static void *writer_main(void *arg) {
  perf__writer_t *w = arg;
  pthread_setname_np(pthread_self(), "perf-writer");
  atomic_store(&w->tid, perf__gettid());
  /* Compile the loaded modules' unwind rules here (it reads their ELF
     files: I/O), not on the app's thread and not on the hang monitor, which
     must start watching at once. A hang caught meanwhile waits for this at
     its first capture, a few milliseconds. */
  perf__modules_release(perf__modules_acquire());
  if (w->cfg->data_dir) {
    w->data_dir_ready = perf__mkdir_p(w->cfg->data_dir) == 0;
    if (!w->data_dir_ready)
      perf__log(PERF__LOG_WARN, "data_dir %s: %s; fatal hangs are not recorded", w->cfg->data_dir,
                strerror(errno));
  }
  /* The batch sink first: fatal hangs go into batches like any event. */
  open_batches(w);
  if (w->data_dir_ready) report_fatal_hangs(w);
  pthread_mutex_lock(&w->lock);
  for (;;) {
    /* A flush is work once the queue is empty (a held writer with events
       queued cannot finish one: the flush times out). */
    while (!w->abandon && (w->held || w->count == 0) && !w->hang_posted && !w->stopping &&
           (w->flush_done == w->flush_requested || w->count > 0) && !batch_due(w))
      wait_for_work(w);
    if (w->abandon) break;
    if (batch_due(w) || (w->count == 0 && w->flush_done != w->flush_requested)) {
      /* The open batch is old enough, or a flush wants everything queued
         so far in the spool. */
      uint64_t requested = w->flush_requested;
      pthread_mutex_unlock(&w->lock);
      if (w->batches) perf__batch_sink_close_batch(w->batches);
      pthread_mutex_lock(&w->lock);
      if (w->count == 0) w->flush_done = requested;
      pthread_cond_broadcast(&w->wake);
      continue;
    }
    if (w->hang_posted) {
      perf__event_t *progress = w->hang;
      w->hang = NULL;
      w->hang_posted = false;
      pthread_mutex_unlock(&w->lock);
      handle_hang_post(w, progress);
      pthread_mutex_lock(&w->lock);
      continue;
    }
    if (w->count > 0 && !w->held) {
      perf__event_t *ev = w->ring[w->head];
      w->head = (w->head + 1) % w->capacity;
      w->count--;
      pthread_mutex_unlock(&w->lock);
      write_event(w, ev);
      pthread_mutex_lock(&w->lock);
      continue;
    }
    if (w->stopping) break;
  }
  /* Whatever is still queued now will not be written. */
  PERF__COUNT(w->stats, events_dropped_queue, w->count);
  for (; w->count > 0; w->count--) {
    perf__event_free(w->ring[w->head]);
    w->head = (w->head + 1) % w->capacity;
  }
  w->exited = true;
  bool abandon = w->abandon;
  int64_t deadline = w->stop_deadline_ns;
  pthread_mutex_unlock(&w->lock);
  /* Leave the stopper a moment to join after the uploader's last try. */
  close_batches(w, abandon ? 0 : deadline - 30 * 1000000);
  return NULL;
}

/* The wire path's spool and uploader, opened here because it reads and
   writes files (adopting what earlier runs left). Without it (no spool
   possible) events of an http sink are counted as dropped. */
static void open_batches(perf__writer_t *w) {
  perf__batch_sink_t *b = NULL;
  if (w->cfg->sink != PERF_SINK_NONE && perf__batch_sink_open(w->cfg, w->stats, &b) != 0) b = NULL;
  pthread_mutex_lock(&w->lock);
  w->batches = b;
  w->batches_tried = true;
  pthread_cond_broadcast(&w->wake);
  pthread_mutex_unlock(&w->lock);
}

/* Shutdown: the open batch into the spool, then send what can be sent
   before the deadline; the rest stays on disk for the next run. */
static void close_batches(perf__writer_t *w, int64_t deadline_ns) {
  if (!w->batches) return;
  perf__batch_sink_close_batch(w->batches);
  if (deadline_ns > perf__now_ns()) perf__batch_sink_wait_sent(w->batches, deadline_ns);
  perf_sdk_stats_t last = {0};
  perf__batch_sink_close(w->batches, &last);
  pthread_mutex_lock(&w->lock);
  w->batch_stats = last;
  w->batches = NULL;
  pthread_mutex_unlock(&w->lock);
}

/* With the lock held: the open batch has reached batch_max_delay_ms. */
static bool batch_due(perf__writer_t *w) {
  if (!w->batches) return false;
  int64_t due = perf__batch_sink_deadline(w->batches);
  return due && perf__now_ns() >= due;
}

/* With the lock held: sleep until woken, or until the open batch is due. */
static void wait_for_work(perf__writer_t *w) {
  int64_t due = w->batches ? perf__batch_sink_deadline(w->batches) : 0;
  if (!due) {
    pthread_cond_wait(&w->wake, &w->lock);
    return;
  }
  struct timespec ts = {(time_t)(due / 1000000000), (long)(due % 1000000000)};
  pthread_cond_timedwait(&w->wake, &w->lock, &ts);
}

/* The hang markers of processes that died hung, each reported once as a
   fatal hang. */
static void report_fatal_hangs(perf__writer_t *w) {
  Perf__V1__Batch **markers = NULL;
  size_t n = 0;
  if (perf__hang_marker_collect(w->cfg->data_dir, &markers, &n) != 0)
    perf__log(PERF__LOG_WARN, "could not read hang markers in %s", w->cfg->data_dir);
  for (size_t i = 0; i < n; i++) {
    PERF__COUNT(w->stats, events_recorded, 1);
    char reason[128];
    snprintf(reason, sizeof reason, "process %u ended while its thread %u was hung",
             markers[i]->resource ? markers[i]->resource->pid : 0, markers[i]->events[0]->tid);
    int batched = w->batches ? perf__batch_sink_add_fatal_hang(w->batches, markers[i], reason)
                             : PERF_E_UNSUPPORTED;
    if (w->cfg->sink == PERF_SINK_FILE) {
      perf__strbuf_t b;
      perf__strbuf_init(&b, REPORT_MAX_BYTES);
      int err = perf__format_fatal_hang(&b, markers[i], reason, w->cfg);
      write_report(w, &b, err);
      perf__strbuf_free(&b);
    } else {
      count_batched(w, batched);
    }
    perf__v1__batch__free_unpacked(markers[i], NULL);
  }
  free(markers);
}

static void write_event(perf__writer_t *w, perf__event_t *ev) {
  int batched = w->batches ? perf__batch_sink_add(w->batches, ev) : PERF_E_UNSUPPORTED;
  if (w->cfg->sink != PERF_SINK_FILE) { /* http: batches only; none: counted only */
    count_batched(w, batched);
    perf__event_free(ev);
    return;
  }
  perf__strbuf_t b;
  perf__strbuf_init(&b, REPORT_MAX_BYTES);
  int err = perf__format_event(&b, ev, w->cfg);
  perf__event_free(ev);
  write_report(w, &b, err);
  perf__strbuf_free(&b);
}

/* http sink: written = in a batch; the batch sink counted its own drops. */
static void count_batched(perf__writer_t *w, int batched) {
  if (w->cfg->sink != PERF_SINK_HTTP) return;
  if (batched == PERF_OK)
    PERF__COUNT(w->stats, events_written, 1);
  else if (!w->batches)
    PERF__COUNT(w->stats, events_dropped_sink, 1);
}

/* File sink: one event's report (or the error `err` formatting it) into
   the report file, counted. */
static void write_report(perf__writer_t *w, const perf__strbuf_t *b, int err) {
  if (!err && w->sink_fd < 0) {
    w->sink_fd = open(w->cfg->sink_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (w->sink_fd < 0) err = PERF_E_SYSTEM;
  }
  /* One write per event on an O_APPEND descriptor: the report lands whole,
     and nothing is buffered in the process (flushed per event). */
  if (!err && perf__write_all(w->sink_fd, b->data, b->len) != 0) err = PERF_E_SYSTEM;
  if (err) {
    PERF__COUNT(w->stats, events_dropped_sink, 1);
    perf__log(PERF__LOG_WARN, "file sink %s: event not written (%s)", w->cfg->sink_path,
              err == PERF_E_SYSTEM ? strerror(errno) : perf_strerror(err));
    if (w->sink_fd >= 0 && err == PERF_E_SYSTEM) { /* reopen next time (moved, rotated) */
      close(w->sink_fd);
      w->sink_fd = -1;
    }
  } else {
    PERF__COUNT(w->stats, events_written, 1);
  }
}

static void handle_hang_post(perf__writer_t *w, perf__event_t *progress) {
  if (!w->data_dir_ready) {
    perf__event_free(progress);
    return;
  }
  if (progress)
    perf__hang_marker_write(&w->marker, w->cfg, progress);
  else
    perf__hang_marker_clear(&w->marker, w->cfg->data_dir);
  perf__event_free(progress);
}

static void free_writer(perf__writer_t *w) {
  if (w->hang_posted) perf__event_free(w->hang);
  if (w->data_dir_ready) perf__hang_marker_clear(&w->marker, w->cfg->data_dir);
  perf__hang_marker_free(&w->marker);
  if (w->sink_fd >= 0) close(w->sink_fd);
  pthread_cond_destroy(&w->wake);
  pthread_mutex_destroy(&w->lock);
  free(w->ring);
  free(w);
}
