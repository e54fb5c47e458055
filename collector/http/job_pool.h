/*
 * job_pool.h - a fixed set of threads taking jobs off libmicrohttpd's
 * workers from one bounded queue. A request whose work may wait for the
 * store is handed here with its connection suspended; a pool thread runs
 * the job and resumes the connection, whose MHD worker then sends the
 * answer. MHD's workers thus never wait for the store: /healthz, the
 * header checks and every other connection are served while the store is
 * slow or locked. The server runs two pools (server.c): "perf-ingest"
 * stores batches, "perf-read" answers the API, the exports and /metrics.
 * At most `threads` jobs of a pool run at once; at most max_waiting wait
 * for a thread, beyond that a request is refused at once (server.c: 503,
 * busy) rather than held in memory.
 *
 * Threads: submit and load from MHD's workers; jobs run on the pool's
 * threads (named at start); start and stop from the owner (server.c). The
 * pool's threads are plain pthreads: --threads may pass the perf__worker
 * registry's size.
 */
#ifndef PERF_COLLECTOR_JOB_POOL_H
#define PERF_COLLECTOR_JOB_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct job_pool_s job_pool_t;

/* A job, owned by its submitter (the request's state); the pool links it
   while it waits. run is called once, on a pool thread; cancelled when the
   pool stopped before the job started (the job answers without doing its
   work). */
typedef struct job_s {
  void (*run)(struct job_s *job, bool cancelled);
  struct job_s *next; /* the pool's */
} job_t;

/* What the pool is doing now (for GET /healthz and a busy answer). */
typedef struct job_load_s {
  size_t running, waiting;
  int64_t oldest_running_ns; /* how long the longest running job has run; 0: none */
  bool stopping;             /* closed: every job is refused */
} job_load_t;

/* threads running jobs, each named `name` (at most 15 bytes), max_waiting
   queued at most. NULL on failure. */
job_pool_t *job_pool_start(const char *name, unsigned threads, size_t max_waiting);

/* Queue job: true, or false when max_waiting jobs wait already or the
   pool is stopping (job->run is then not called). A job queued is
   outstanding until job_pool_release (its answer was sent, or its
   connection closed). */
bool job_pool_submit(job_pool_t *p, job_t *job);
void job_pool_release(job_pool_t *p);

void job_pool_load(job_pool_t *p, job_load_t *out);

/* Refuse new jobs from now on (a stop's first step: the server closes
   both pools before it waits for either). NULL: no-op. */
void job_pool_close(job_pool_t *p);

/* Refuse new jobs, let the running ones finish, run the waiting ones
   cancelled and join the threads; then wait until every job was released
   (its answer sent by its MHD worker), at most answer_wait_ns. submit,
   release and load stay safe to call (a job is refused) until
   job_pool_free. NULL: no-op. */
void job_pool_stop(job_pool_t *p, int64_t answer_wait_ns);

/* Free a stopped pool (once nothing calls it any more). NULL: no-op. */
void job_pool_free(job_pool_t *p);

#endif
