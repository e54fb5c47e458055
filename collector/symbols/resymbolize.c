/*
 * resymbolize.c - the pending build-ids and the thread that finds their
 * debug files (see resymbolize.h), a perf__worker ("perf-resymbol") whose
 * lock guards the pending list and whose waits are on the monotonic clock.
 * libdebuginfod (elfutils, loaded on first use: debuginfod_api.c) does the
 * fetching; its own cache (DEBUGINFOD_CACHE_PATH) holds a copy too.
 */
#include "collector/symbols/resymbolize.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collector/base/log.h"
#include "collector/model/metrics.h"
#include "collector/symbols/debuginfod_api.h"
#include "collector/symbols/stack_rename.h"
#include "collector/symbols/symbol_files.h"
#include "perf_sdk.h"
#include "sdk/base/clock.h"
#include "sdk/base/worker.h"

#define MAX_PENDING 256
#define LOCAL_RECHECK_S 2.0 /* the symbols directory is looked at again after this */
#define FETCH_RETRY_FIRST_S 30.0
#define FETCH_RETRY_MAX_S 3600.0

typedef struct pending_s {
  char id[SYMBOL_ID_MAX_HEX + 1];
  uint64_t generation; /* bumped by each want: a rename after it is needed */
  double wanted_at, next_local, next_fetch, retry_s;
} pending_t;

struct resymbolizer_s {
  perf__worker_t *worker; /* the thread; its lock guards pending[] */
  symbolizer_t *symbols;
  const store_ops_t *ops;
  store_t *store;
  const debuginfod_api_t *api;   /* NULL: DEBUGINFOD_URLS unset or no libdebuginfod */
  debuginfod_client *debuginfod; /* NULL: the same */
  pending_t pending[MAX_PENDING];
  size_t n_pending;
};

static double monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int resymbolizer_apply(resymbolizer_t *r, const char *id, uint64_t *renamed) {
  char needle[SYMBOL_ID_MAX_HEX + 16];
  snprintf(needle, sizeof needle, "\"build_id\":\"%s\"", id); /* as jansson writes it */
  symbolizer_forget(r->symbols, id);
  store_renamer_t renamer = stack_renamer(r->symbols);
  uint64_t n = 0;
  int rc = r->ops->resymbolize(r->store, needle, &renamer, &n);
  if (rc == STORE_OK) metrics_stacks_resymbolized(n);
  if (rc == STORE_OK && n)
    collector_log("symbols %s: %llu stored stacks renamed\n", id, (unsigned long long)n);
  if (renamed) *renamed = n;
  return rc;
}

void resymbolizer_want(resymbolizer_t *r, const char *id) {
  double now = monotonic_s();
  perf__worker_lock(r->worker);
  pending_t *p = NULL, *oldest = NULL;
  for (size_t i = 0; i < r->n_pending && !p; i++) {
    if (strcmp(r->pending[i].id, id) == 0) p = &r->pending[i];
    if (!oldest || r->pending[i].wanted_at < oldest->wanted_at) oldest = &r->pending[i];
  }
  if (!p) {
    p = r->n_pending < MAX_PENDING ? &r->pending[r->n_pending++] : oldest;
    *p = (pending_t){.next_fetch = now, .retry_s = FETCH_RETRY_FIRST_S};
    snprintf(p->id, sizeof p->id, "%s", id);
  }
  p->generation++;
  p->wanted_at = now;
  p->next_local = now;
  perf__worker_notify_locked(r->worker);
  perf__worker_unlock(r->worker);
}

/* ---- the thread ----------------------------------------------------------- */

/* Non-zero cancels a transfer: the collector is stopping. */
static int fetch_progress(debuginfod_client *c, long a, long b) {
  (void)a, (void)b;
  resymbolizer_t *r = debuginfod_api()->get_user_data(c);
  return perf__worker_stopping(r->worker) ? 1 : 0;
}

/* Copy the open file in into the symbols directory as id's debug file. */
static bool install_copy(resymbolizer_t *r, const char *id, int in) {
  const char *dir = symbolizer_dir(r->symbols);
  char tmp[4096], reason[256] = "";
  int out = symbol_file_temp(dir, tmp, sizeof tmp);
  if (out < 0) return false;
  char buf[65536];
  ssize_t n;
  bool ok = lseek(in, 0, SEEK_SET) == 0; /* libdebuginfod's fd may be where it stopped writing */
  while (ok && (n = read(in, buf, sizeof buf)) != 0)
    ok = n > 0 && write(out, buf, (size_t)n) == n;
  bool replaced;
  unsigned status =
      ok ? symbol_file_install(dir, id, out, tmp, SYMBOL_KEEP, &replaced, reason, sizeof reason)
         : 500;
  if (!ok) unlink(tmp);
  close(out);
  if (status >= 400)
    collector_log("debuginfod %s: not installed: %s\n", id, reason[0] ? reason : "write failed");
  return status < 400;
}

/* Fetch id from debuginfod into the symbols directory. Collectors sharing
   a database and a symbols directory fetch a build-id once: the fetch is a
   claimed job (store_ops_t.claim_job); one that finds it claimed leaves it
   to the other and finds the file at its next local look; one that claims
   it looks again first (another may have just installed it). A database
   that cannot say fetches anyway. */
static bool fetch(resymbolizer_t *r, const char *id) {
  char job[16 + SYMBOL_ID_MAX_HEX];
  snprintf(job, sizeof job, "debuginfod:%s", id);
  int claimed = r->ops->claim_job ? r->ops->claim_job(r->store, job) : 1;
  if (claimed == 0) {
    metrics_debuginfod_deferred();
    return false;
  }
  symbolizer_forget(r->symbols, id);
  if (symbolizer_available(r->symbols, id)) {
    if (claimed > 0 && r->ops->release_job) r->ops->release_job(r->store, job);
    return true;
  }
  char *path = NULL;
  int fd = r->api->find_debuginfo(r->debuginfod, (const unsigned char *)id, 0, &path);
  bool ok = false;
  if (fd < 0) {
    collector_log("debuginfod %s: %s\n", id, strerror(-fd));
  } else {
    ok = install_copy(r, id, fd);
    close(fd);
    free(path);
    if (ok) symbolizer_forget(r->symbols, id); /* it may remember the file missing */
  }
  if (claimed > 0 && r->ops->release_job) r->ops->release_job(r->store, job);
  return ok;
}

/* The first entry with something to do now (copied into *out); false when
   there is none. The lock is held. */
static bool next_due(resymbolizer_t *r, double now, pending_t *out, bool *do_fetch) {
  for (size_t i = 0; i < r->n_pending; i++) {
    pending_t *p = &r->pending[i];
    *do_fetch = r->debuginfod && now >= p->next_fetch;
    if (now >= p->next_local || *do_fetch) {
      p->next_local = now + LOCAL_RECHECK_S;
      if (*do_fetch) {
        p->next_fetch = now + p->retry_s;
        p->retry_s = p->retry_s * 2 > FETCH_RETRY_MAX_S ? FETCH_RETRY_MAX_S : p->retry_s * 2;
      }
      *out = *p;
      return true;
    }
  }
  return false;
}

/* Done with id: drop it unless wanted again meanwhile. The lock is held. */
static void done_with(resymbolizer_t *r, const pending_t *was) {
  for (size_t i = 0; i < r->n_pending; i++)
    if (strcmp(r->pending[i].id, was->id) == 0) {
      if (r->pending[i].generation == was->generation) r->pending[i] = r->pending[--r->n_pending];
      return;
    }
}

static void run(perf__worker_t *worker, void *arg) {
  resymbolizer_t *r = arg;
  perf__worker_lock(worker);
  while (!perf__worker_stopping(worker)) {
    pending_t job;
    bool do_fetch;
    if (!next_due(r, monotonic_s(), &job, &do_fetch)) {
      perf__worker_wait(worker, perf__now_ns() + 1000000000); /* or a want */
      continue;
    }
    perf__worker_unlock(worker);
    bool found = symbolizer_available(r->symbols, job.id) ||
                 (do_fetch && fetch(r, job.id) && symbolizer_available(r->symbols, job.id));
    bool renamed = found && resymbolizer_apply(r, job.id, NULL) == STORE_OK;
    perf__worker_lock(worker);
    if (renamed) done_with(r, &job);
  }
  perf__worker_unlock(worker);
}

resymbolizer_t *resymbolizer_start(symbolizer_t *symbols, const store_ops_t *ops, store_t *store) {
  resymbolizer_t *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->symbols = symbols;
  r->ops = ops;
  r->store = store;
  const char *urls = getenv("DEBUGINFOD_URLS");
  if (urls && *urls && !(r->api = debuginfod_api()))
    collector_log("DEBUGINFOD_URLS is set but libdebuginfod.so.1 cannot be "
                  "loaded: missing symbols are not fetched\n");
  if (r->api && (r->debuginfod = r->api->begin()) != NULL) {
    r->api->set_user_data(r->debuginfod, r);
    r->api->set_progressfn(r->debuginfod, fetch_progress);
    collector_log("missing symbols are fetched from debuginfod (%s)\n", urls);
  }
  if (perf__worker_start("perf-resymbol", run, r, &r->worker) != PERF_OK) {
    if (r->debuginfod) r->api->end(r->debuginfod);
    free(r);
    return NULL;
  }
  return r;
}

void resymbolizer_stop(resymbolizer_t *r) {
  if (!r) return;
  perf__worker_stop(r->worker, 0); /* a fetch in progress sees the stop and gives up */
  if (r->debuginfod) r->api->end(r->debuginfod);
  free(r);
}
