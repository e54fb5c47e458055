/*
 * ingest_pool.h - the threads that store batches, off libmicrohttpd's
 * workers. A batch whose body is whole is handed here with its connection
 * suspended; a pool thread runs the job (decode, store) and resumes the
 * connection, whose MHD worker then sends the answer. MHD's workers thus
 * never wait for the store: /healthz, the API and every other connection
 * are served while the store is slow or locked. At most --threads jobs run
 * at once (the store's concurrency, as when MHD's workers stored batches);
 * at most max_waiting wait for a thread, beyond that a batch is refused at
 * once (server.c: 503, busy) rather than held in memory.
 *
 * Threads: submit and load from MHD's workers; jobs run on the pool's
 * threads ("perf-ingest"); start and stop from the owner (server.c). The
 * pool's threads are plain pthreads: --threads may pass the perf__worker
 * registry's size.
 */
#ifndef PERF_COLLECTOR_INGEST_POOL_H
#define PERF_COLLECTOR_INGEST_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ingest_pool_s ingest_pool_t;

/* A job, owned by its submitter (the request's state); the pool links it
   while it waits. run is called once, on a pool thread; cancelled when the
   pool stopped before the job started (the job answers without storing). */
typedef struct ingest_job_s {
  void (*run)(struct ingest_job_s *job, bool cancelled);
  struct ingest_job_s *next; /* the pool's */
} ingest_job_t;

/* What the pool is doing now (for GET /healthz). */
typedef struct ingest_load_s {
  size_t running, waiting;
  int64_t oldest_running_ns; /* how long the longest running job has run; 0: none */
} ingest_load_t;

/* threads running jobs, max_waiting queued at most. NULL on failure. */
ingest_pool_t *ingest_pool_start(unsigned threads, size_t max_waiting);

/* Queue job: true, or false when max_waiting jobs wait already or the
   pool is stopping (job->run is then not called). A job queued is
   outstanding until ingest_pool_release (its answer was sent, or its
   connection closed). */
bool ingest_pool_submit(ingest_pool_t *p, ingest_job_t *job);
void ingest_pool_release(ingest_pool_t *p);

void ingest_pool_load(ingest_pool_t *p, ingest_load_t *out);

/* Refuse new jobs, let the running ones finish, run the waiting ones
   cancelled and join the threads; then wait until every job was released
   (its answer sent by its MHD worker), at most answer_wait_ns. submit,
   release and load stay safe to call (a job is refused) until
   ingest_pool_free. NULL: no-op. */
void ingest_pool_stop(ingest_pool_t *p, int64_t answer_wait_ns);

/* Free a stopped pool (once nothing calls it any more). NULL: no-op. */
void ingest_pool_free(ingest_pool_t *p);

#endif
