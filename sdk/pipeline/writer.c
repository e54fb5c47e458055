/*
 * writer.c - the event writer thread (see writer.h).
 *
 * Producers (the monitors, the capture_now caller) push event pointers into
 * a fixed ring of queue_capacity slots under the worker's lock and notify
 * it; a full ring refuses the event at once. The hang marker has a
 * one-slot mailbox where the latest post replaces an unwritten older one.
 * The thread is a perf__worker ("perf-writer"): the worker's lock is the
 * writer's (queue, mailbox, flags, the batch sink pointer), and shutdown
 * waits for it by a deadline on the monotonic clock.
 */
#include "sdk/pipeline/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sdk/base/clock.h"
#include "sdk/base/dir_handle.h"
#include "sdk/base/fileio.h"
#include "sdk/base/lazy_lib.h"
#include "sdk/base/log.h"
#include "sdk/base/owned_fds.h"
#include "sdk/base/worker.h"
#include "sdk/pipeline/batch_sink.h"
#include "sdk/pipeline/capture.h"
#include "sdk/pipeline/event_text.h"
#include "sdk/pipeline/hang_marker.h"
#include "sdk/pipeline/idle_memory.h"

#define REPORT_MAX_BYTES (16u << 20) /* one event's text */
/* Shutdown: how long past its deadline the stopper waits for a writer that
   was between two events to drop the rest and close the batch sink. */
#define STOP_GRACE_NS (20 * 1000000)
/* How long the writer keeps the DWARF it read to name frames after the
   last event: events come in bursts (a hang's progress, a CPU burst), and
   an idle app should not carry the debug info of libc (~14 MiB). */
#define DWARF_IDLE_NS (2 * 1000000000LL)

struct perf__writer_s {
  const perf__config_t *cfg;
  perf__stats_t *stats;
  perf__worker_t *worker; /* the thread; its lock is the writer's lock */
  perf__event_t **ring;
  size_t head, count, capacity;
  bool hang_posted;    /* the mailbox holds a post */
  perf__event_t *hang; /* ... which is this progress copy, or NULL = clear */
  bool stats_posted;   /* loop_stats holds stats not yet in a batch */
  perf__loop_stats_t loop_stats;
  bool held, exited;
  perf__owned_fd_t sink; /* the file sink's report, .fd -1: not open */
  perf__hang_marker_t marker;
  /* The directories, opened by perf__writer_start on the app's thread
     (sdk/base/dir_handle.h): every file is reached from them, also after
     the app chroots. data_dir is made when a hang marker first needs it,
     not at start: an app that never hangs gets no state directory (its
     handle then has no descriptor until then). */
  perf__dir_t spool_root; /* handed to the batch sink */
  perf__dir_t data_dir;
  perf__dir_t sink_dir; /* the report file's directory */
  char sink_name[NAME_MAX + 1];
  int64_t drop_dwarf_at; /* when to close the symbolizer's DWARF; 0: nothing to drop */
  /* the wire path: batches into the spool (and, for http, to the collector) */
  perf__batch_sink_t *batches;          /* set by the writer thread under lock; NULL without */
  bool batches_tried;                   /* the open was attempted (lock) */
  perf_sdk_stats_t batch_stats;         /* the batch sink's last counters, once it is closed */
  uint64_t flush_requested, flush_done; /* perf__writer_flush handshake (lock) */
  /* Events queued and written so far, and how many of them the latest flush
     wants in the spool (lock): a flush closes the open batch once those are
     written, whatever was queued after it. */
  uint64_t submitted, written, flush_upto;
  int64_t stop_deadline_ns; /* shutdown: write and send until then (lock) */
  pid_t prepare_tid;        /* a thread to capture once; 0: none (lock) */
};

static void writer_main(perf__worker_t *worker, void *arg);
static void open_batches(perf__writer_t *w);
static void close_batches(perf__writer_t *w, int64_t deadline_ns);
static bool batch_due(perf__writer_t *w);
static bool past_stop_deadline(perf__writer_t *w);
static void wait_for_work(perf__writer_t *w);
static bool dwarf_due(perf__writer_t *w);
static void lazy_lib_loaded(void *arg);
static void prepare_capture(perf__writer_t *w);
static bool flush_ready(const perf__writer_t *w);
static void report_fatal_hangs(perf__writer_t *w);
static void write_event(perf__writer_t *w, perf__event_t *ev);
static void count_batched(perf__writer_t *w, int batched);
static void write_report(perf__writer_t *w, const perf__strbuf_t *b, int err);
static void handle_hang_post(perf__writer_t *w, perf__event_t *progress);
static int open_dirs(perf__writer_t *w);
static void free_writer(perf__writer_t *w);

int perf__writer_start(const perf__config_t *cfg, perf__stats_t *stats, pid_t watched,
                       perf__writer_t **out) {
  perf__writer_t *w = calloc(1, sizeof *w);
  if (!w) return PERF_E_NO_MEMORY;
  w->cfg = cfg;
  w->stats = stats;
  w->capacity = cfg->queue_capacity;
  w->sink = (perf__owned_fd_t)PERF__OWNED_FD_NONE;
  w->marker = (perf__hang_marker_t)PERF__HANG_MARKER_INIT;
  w->spool_root = w->data_dir = w->sink_dir = (perf__dir_t)PERF__DIR_INIT;
  w->prepare_tid = watched;
  /* An unusable or untrusted directory is the caller's error now, not a
     silent drop of every event later. */
  int err = open_dirs(w);
  if (!err) w->ring = calloc(w->capacity, sizeof *w->ring);
  if (!err)
    err =
        w->ring ? perf__worker_start("perf-writer", writer_main, w, &w->worker) : PERF_E_NO_MEMORY;
  if (err) {
    free_writer(w);
    return err;
  }
  *out = w;
  return PERF_OK;
}

int perf__writer_submit(perf__writer_t *w, perf__event_t *ev) {
  perf__worker_lock(w->worker);
  bool full = w->count == w->capacity || perf__worker_stopping(w->worker);
  if (!full) {
    w->ring[(w->head + w->count) % w->capacity] = ev;
    w->count++;
    w->submitted++;
    perf__worker_notify_locked(w->worker);
  }
  perf__worker_unlock(w->worker);
  if (full) perf__event_free(ev);
  return full ? PERF_E_QUEUE_FULL : PERF_OK;
}

void perf__writer_post_hang(perf__writer_t *w, perf__event_t *progress) {
  perf__worker_lock(w->worker);
  perf__event_t *older = w->hang_posted ? w->hang : NULL;
  w->hang = progress;
  w->hang_posted = true;
  perf__worker_notify_locked(w->worker);
  perf__worker_unlock(w->worker);
  perf__event_free(older);
}

void perf__writer_add_loop_stats(perf__writer_t *w, const perf__loop_stats_t *stats) {
  perf__worker_lock(w->worker);
  perf__batch_loops_merge(&w->loop_stats, stats);
  w->stats_posted = true;
  perf__worker_notify_locked(w->worker);
  perf__worker_unlock(w->worker);
}

void perf__writer_prepare_capture(perf__writer_t *w, pid_t tid) {
  perf__worker_lock(w->worker);
  w->prepare_tid = tid;
  perf__worker_notify_locked(w->worker);
  perf__worker_unlock(w->worker);
}

void perf__writer_hold(perf__writer_t *w, bool hold) {
  perf__worker_lock(w->worker);
  w->held = hold;
  perf__worker_notify_locked(w->worker);
  perf__worker_unlock(w->worker);
}

int perf__writer_flush(perf__writer_t *w, int64_t deadline_ns) {
  perf__worker_lock(w->worker);
  uint64_t ticket = ++w->flush_requested;
  w->flush_upto = w->submitted;
  perf__worker_notify_locked(w->worker);
  /* First everything queued into the spool, by the writer thread... */
  while ((w->flush_done < ticket || !w->batches_tried) && !w->exited &&
         perf__now_ns() < deadline_ns)
    perf__worker_wait(w->worker, deadline_ns);
  bool queued_out = w->flush_done >= ticket;
  perf__batch_sink_t *b = w->batches;
  perf__worker_unlock(w->worker);
  if (!queued_out) return PERF_E_DEADLINE;
  /* No spool (it could not be opened: logged at start) or a batch that
     could not be written since the last flush: recorded events were lost. */
  if (!b && w->cfg->sink != PERF_SINK_NONE) return PERF_E_SINK_FAILED;
  if (b && perf__batch_sink_take_failure(b) != PERF_OK) return PERF_E_SINK_FAILED;
  /* ... then the spool to the collector, by the uploader. The sink stays
     open until perf__writer_stop, which cannot run concurrently (the SDK's
     lifecycle lock). */
  int err = b ? perf__batch_sink_wait_sent(b, deadline_ns) : PERF_OK;
  return err == PERF_E_TIMEOUT ? PERF_E_DEADLINE : err;
}

void perf__writer_batch_stats(perf__writer_t *w, perf_sdk_stats_t *out) {
  perf__worker_lock(w->worker);
  if (w->batches)
    perf__batch_sink_stats(w->batches, out);
  else
    *out = w->batch_stats;
  perf__worker_unlock(w->worker);
}

int perf__writer_stop(perf__writer_t *w, int64_t deadline_ns, perf_sdk_stats_t *last) {
  perf__worker_lock(w->worker);
  w->stop_deadline_ns = deadline_ns;
  w->held = false;
  perf__worker_unlock(w->worker);
  /* Past the deadline the writer drops what is queued (it looks between two
     events); the grace is for the event it is writing then. */
  if (perf__worker_stop(w->worker, deadline_ns + STOP_GRACE_NS) != PERF_OK) {
    /* Stuck in I/O: it keeps its memory (and the caller the config). */
    perf__log(PERF__LOG_WARN, "event writer still busy at the shutdown deadline; left running");
    return PERF_E_DEADLINE;
  }
  if (last) *last = w->batch_stats;
  free_writer(w);
  return PERF_OK;
}

static void writer_main(perf__worker_t *worker, void *arg) {
  perf__writer_t *w = arg;
  (void)worker; /* the same as w->worker, set before this runs */
  /* Map the loaded modules here (it reads /proc/self/maps and their build
     ids: I/O), not on the app's thread and not on the hang monitor, which
     must start watching at once. Their unwind rules are compiled when a
     capture first needs them. */
  perf__lazy_libs_set_load_hook(lazy_lib_loaded, w);
  perf__modules_release(perf__modules_acquire());
  /* The batch sink first: fatal hangs go into batches like any event. */
  open_batches(w);
  /* The watched thread's first capture before the fatal hangs, whose
     reports name frames (DWARF: slow). */
  prepare_capture(w);
  if (w->cfg->data_dir) report_fatal_hangs(w);
  perf__worker_lock(w->worker);
  bool abandon = false;
  for (;;) {
    if (w->prepare_tid) {
      perf__worker_unlock(w->worker);
      prepare_capture(w);
      perf__worker_lock(w->worker);
      continue;
    }
    if (dwarf_due(w) && w->count == 0 && !w->hang_posted) {
      /* Idle for a while: the DWARF read to name frames goes until the
         next event needs it, and malloc's free pages go back. */
      w->drop_dwarf_at = 0;
      perf__worker_unlock(w->worker);
      perf__release_idle_memory();
      perf__worker_lock(w->worker);
      continue;
    }
    /* A flush is work once the events queued before it are written (a
       held writer with such events queued cannot finish one: the flush
       times out). */
    while ((w->held || w->count == 0) && !w->hang_posted && (w->held || !w->stats_posted) &&
           !w->prepare_tid && !perf__worker_stopping(w->worker) && !flush_ready(w) &&
           !batch_due(w) && !dwarf_due(w))
      wait_for_work(w);
    if ((abandon = past_stop_deadline(w))) break;
    bool flush = flush_ready(w);
    if (batch_due(w) || flush) {
      /* The open batch is old enough, or a flush wants the events queued
         before it in the spool (not those queued since: a flush that timed
         out would otherwise close a batch at an event of later). */
      uint64_t requested = w->flush_requested;
      perf__worker_unlock(w->worker);
      if (w->batches) perf__batch_sink_close_batch(w->batches);
      perf__worker_lock(w->worker);
      if (flush) w->flush_done = requested;
      perf__worker_notify_locked(w->worker);
      continue;
    }
    if (w->hang_posted) {
      perf__event_t *progress = w->hang;
      w->hang = NULL;
      w->hang_posted = false;
      perf__worker_unlock(w->worker);
      handle_hang_post(w, progress);
      perf__worker_lock(w->worker);
      continue;
    }
    if (w->stats_posted && !w->held) {
      perf__loop_stats_t stats = w->loop_stats; /* about 8 KiB */
      memset(&w->loop_stats, 0, sizeof w->loop_stats);
      w->stats_posted = false;
      perf__worker_unlock(w->worker);
      if (w->batches) perf__batch_sink_add_loop_stats(w->batches, &stats);
      perf__worker_lock(w->worker);
      continue;
    }
    if (w->count > 0 && !w->held) {
      perf__event_t *ev = w->ring[w->head];
      w->head = (w->head + 1) % w->capacity;
      w->count--;
      perf__worker_unlock(w->worker);
      write_event(w, ev);
      perf__worker_lock(w->worker);
      w->written++;
      w->drop_dwarf_at = perf__now_ns() + DWARF_IDLE_NS;
      continue;
    }
    if (perf__worker_stopping(w->worker)) break;
  }
  /* Whatever is still queued now will not be written. */
  PERF__COUNT(w->stats, events_dropped_queue, w->count);
  for (; w->count > 0; w->count--) {
    perf__event_free(w->ring[w->head]);
    w->head = (w->head + 1) % w->capacity;
  }
  w->exited = true;
  int64_t deadline = w->stop_deadline_ns;
  perf__worker_unlock(w->worker);
  perf__lazy_libs_set_load_hook(NULL, NULL);
  /* Leave the stopper a moment to join after the uploader's last try. */
  close_batches(w, abandon ? 0 : deadline - 30 * 1000000);
}

/* A flush is waiting and every event queued before it is written (lock). */
static bool flush_ready(const perf__writer_t *w) {
  return w->flush_done != w->flush_requested && w->written >= w->flush_upto;
}

/* The thread posted to be prepared (perf__writer_prepare_capture), captured
   once, outside the lock. */
static void prepare_capture(perf__writer_t *w) {
  perf__worker_lock(w->worker);
  pid_t tid = w->prepare_tid;
  w->prepare_tid = 0;
  perf__worker_unlock(w->worker);
  if (tid) perf__capture_prepare(tid);
}

/* A library was loaded (to compile unwind rules on a capturing thread, to
   name frames or compress here): the idle release unloads it again. */
static void lazy_lib_loaded(void *arg) {
  perf__writer_t *w = arg;
  perf__worker_lock(w->worker);
  if (!w->drop_dwarf_at) w->drop_dwarf_at = perf__now_ns() + DWARF_IDLE_NS;
  perf__worker_notify_locked(w->worker);
  perf__worker_unlock(w->worker);
}

/* The wire path's spool and uploader, opened here because it reads and
   writes files (adopting what earlier runs left). Without it (no spool
   possible) events of an http sink are counted as dropped. */
static void open_batches(perf__writer_t *w) {
  perf__batch_sink_t *b = NULL;
  if (w->cfg->sink != PERF_SINK_NONE &&
      perf__batch_sink_open(w->cfg, w->stats, &w->spool_root, &b) != 0)
    b = NULL;
  perf__worker_lock(w->worker);
  w->batches = b;
  w->batches_tried = true;
  perf__worker_notify_locked(w->worker);
  perf__worker_unlock(w->worker);
}

/* Shutdown: the open batch into the spool, then send what can be sent
   before the deadline; the rest stays on disk for the next run. */
static void close_batches(perf__writer_t *w, int64_t deadline_ns) {
  if (!w->batches) return;
  perf__batch_sink_close_batch(w->batches);
  if (deadline_ns > perf__now_ns()) perf__batch_sink_wait_sent(w->batches, deadline_ns);
  perf_sdk_stats_t last = {0};
  perf__batch_sink_close(w->batches, &last);
  perf__worker_lock(w->worker);
  w->batch_stats = last;
  w->batches = NULL;
  perf__worker_unlock(w->worker);
}

/* With the lock held: the open batch has reached batch_max_delay_ms. */
static bool batch_due(perf__writer_t *w) {
  if (!w->batches) return false;
  int64_t due = perf__batch_sink_deadline(w->batches);
  return due && perf__now_ns() >= due;
}

/* With the lock held: shutting down, and its deadline has passed: what is
   still queued is dropped. */
static bool past_stop_deadline(perf__writer_t *w) {
  return perf__worker_stopping(w->worker) && perf__now_ns() >= w->stop_deadline_ns;
}

/* With the lock held: sleep until woken, or until the open batch is due
   (0: no batch open, no deadline). */
static void wait_for_work(perf__writer_t *w) {
  int64_t deadline = w->batches ? perf__batch_sink_deadline(w->batches) : 0;
  if (w->drop_dwarf_at && (!deadline || w->drop_dwarf_at < deadline)) deadline = w->drop_dwarf_at;
  perf__worker_wait(w->worker, deadline);
}

/* With the lock held: events were named and none came for DWARF_IDLE_NS. */
static bool dwarf_due(perf__writer_t *w) {
  return w->drop_dwarf_at && perf__now_ns() >= w->drop_dwarf_at;
}

/* The hang markers of processes that died hung, each reported once as a
   fatal hang. */
static void report_fatal_hangs(perf__writer_t *w) {
  Perf__V1__Batch **markers = NULL;
  size_t n = 0;
  if (w->data_dir.own.fd < 0) return; /* no data_dir yet: no marker either */
  int dfd = perf__dir_fd(&w->data_dir);
  if (dfd < 0 || perf__hang_marker_collect(dfd, w->cfg->data_dir, &markers, &n) != 0)
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
  if (w->cfg->sink == PERF_SINK_FILE) {
    /* The report first: it is the file sink's record (one write, durable
       at once); the batch record and its journal follow. */
    perf__strbuf_t b;
    perf__strbuf_init(&b, REPORT_MAX_BYTES);
    int err = perf__format_event(&b, ev, w->cfg);
    write_report(w, &b, err);
    perf__strbuf_free(&b);
  }
  int batched = w->batches ? perf__batch_sink_add(w->batches, ev) : PERF_E_UNSUPPORTED;
  count_batched(w, batched); /* http: batches only; none: counted only */
  perf__event_free(ev);
}

/* http sink: an event is written when its batch is in the spool (the
   batch sink counts it then, and its own drops); without a batch sink it
   is dropped here. */
static void count_batched(perf__writer_t *w, int batched) {
  (void)batched;
  if (w->cfg->sink == PERF_SINK_HTTP && !w->batches) PERF__COUNT(w->stats, events_dropped_sink, 1);
}

/* File sink: one event's report (or the error `err` formatting it) into
   the report file, counted. */
static void write_report(perf__writer_t *w, const perf__strbuf_t *b, int err) {
  if (w->sink.fd >= 0 && !perf__owned_fd_held(&w->sink)) {
    /* The app closed it and its number names another file now (the app's,
       or another part of the SDK's): forgotten, never written or closed;
       the report is opened again. */
    perf__owned_fd_forget(&w->sink);
  }
  if (!err && w->sink.fd < 0) {
    int dfd = perf__dir_fd(&w->sink_dir);
    int fd = dfd < 0 ? -1
                     : perf__openat_any(dfd, w->sink_name, O_WRONLY | O_APPEND | O_CREAT,
                                        PERF__FILE_MODE);
    if (fd < 0) err = PERF_E_SYSTEM;
    /* A forked child closes its copy; checked before each use. */
    perf__owned_fd_hold(&w->sink, fd);
  }
  /* One write per event on an O_APPEND descriptor: the report lands whole,
     and nothing is buffered in the process (flushed per event). */
  if (!err && perf__write_all(w->sink.fd, b->data, b->len) != 0) err = PERF_E_SYSTEM;
  if (err) {
    PERF__COUNT(w->stats, events_dropped_sink, 1);
    perf__log(PERF__LOG_WARN, "file sink %s: event not written (%s)", w->cfg->sink_path,
              err == PERF_E_SYSTEM ? strerror(errno) : perf_strerror(err));
    if (err == PERF_E_SYSTEM) perf__owned_fd_release(&w->sink); /* reopen next time (rotated) */
  } else {
    PERF__COUNT(w->stats, events_written, 1);
  }
}

static void handle_hang_post(perf__writer_t *w, perf__event_t *progress) {
  /* data_dir is made at the first marker (perf__dir_fd), and made again
     when it was deleted at run time; a failure is logged once. */
  int dfd =
      w->cfg->data_dir && (progress || w->marker.file.fd >= 0) ? perf__dir_fd(&w->data_dir) : -1;
  if (progress && dfd >= 0)
    perf__hang_marker_write(&w->marker, w->cfg, dfd, progress);
  else if (!progress)
    perf__hang_marker_clear(&w->marker, dfd);
  perf__event_free(progress);
}

/* On the app's thread, at init: the spool's directory (made), data_dir
   when it exists (made at the first hang marker otherwise) and the report
   file's directory, each opened and checked (sdk/base/dir_handle.h). */
static int open_dirs(perf__writer_t *w) {
  const perf__config_t *cfg = w->cfg;
  int err = perf__batch_sink_open_dir(cfg, &w->spool_root);
  if (!err && cfg->data_dir) {
    const unsigned flags = PERF__DIR_CREATE | PERF__DIR_TRUST;
    struct stat st;
    if (stat(cfg->data_dir, &st) == 0)
      err = perf__dir_open(&w->data_dir, cfg->data_dir, flags, "data_dir");
    else
      perf__dir_set(&w->data_dir, -1, cfg->data_dir, flags, "data_dir");
    if (err == PERF_E_SYSTEM) { /* not fatal: only hang markers live there */
      perf__dir_set(&w->data_dir, -1, cfg->data_dir, flags, "data_dir");
      err = PERF_OK;
    }
  }
  if (!err && cfg->sink == PERF_SINK_FILE) {
    char dir[PATH_MAX];
    const char *slash = strrchr(cfg->sink_path, '/');
    size_t n = slash ? (size_t)(slash - cfg->sink_path) : 0;
    snprintf(dir, sizeof dir, "%.*s", (int)n, cfg->sink_path);
    if (slash && n == 0) snprintf(dir, sizeof dir, "/");
    if (!slash) snprintf(dir, sizeof dir, ".");
    snprintf(w->sink_name, sizeof w->sink_name, "%s", slash ? slash + 1 : cfg->sink_path);
    err = perf__dir_open(&w->sink_dir, dir, 0, "sink_path: the report's directory");
  }
  return err;
}

static void free_writer(perf__writer_t *w) {
  if (w->hang_posted) perf__event_free(w->hang);
  perf__hang_marker_clear(&w->marker, w->marker.file.fd >= 0 ? perf__dir_fd(&w->data_dir) : -1);
  perf__hang_marker_free(&w->marker);
  perf__owned_fd_release(&w->sink);
  perf__dir_close(&w->spool_root); /* when the batch sink never took it */
  perf__dir_close(&w->data_dir);
  perf__dir_close(&w->sink_dir);
  free(w->ring);
  free(w);
}
