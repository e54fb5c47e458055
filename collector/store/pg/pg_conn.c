/*
 * pg_conn.c - the PostgreSQL backend's statement helpers (see
 * pg_store.h): parameters as text, array literals for unnest, one call
 * that runs a statement and reports its failure, a connection lost
 * between statements opened again, and a connection's store_t made and
 * released.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/base/log.h"
#include "collector/store/pg/pg_store.h"

#define TEXTOID 25
#define BYTEAOID 17

static _Thread_local char g_state[6];

static void grow_n(pg_params_t *p, int i) {
  if (i > p->n) p->n = i;
}

void pg_text(pg_params_t *p, int i, const char *text) {
  p->v[i - 1] = text;
  p->type[i - 1] = TEXTOID;
  p->fmt[i - 1] = 0;
  grow_n(p, i);
}

void pg_textn(pg_params_t *p, int i, const char *text, size_t len) {
  p->v[i - 1] = text;
  p->type[i - 1] = TEXTOID;
  p->fmt[i - 1] = 1; /* text's binary form: its bytes */
  p->len[i - 1] = (int)len;
  grow_n(p, i);
}

void pg_int(pg_params_t *p, int i, int64_t value) {
  snprintf(p->num[i - 1], sizeof p->num[i - 1], "%" PRId64, value);
  pg_text(p, i, p->num[i - 1]);
}

void pg_bytes(pg_params_t *p, int i, const void *bytes, size_t len) {
  p->v[i - 1] = bytes;
  p->type[i - 1] = BYTEAOID;
  p->fmt[i - 1] = 1;
  p->len[i - 1] = (int)len;
  grow_n(p, i);
}

void pg_own(pg_params_t *p, int i, char *text) {
  free(p->owned[i - 1]);
  p->owned[i - 1] = text;
  pg_text(p, i, text);
}

void pg_params_free(pg_params_t *p) {
  for (int i = 0; i < PG_MAX_PARAMS; i++) {
    free(p->owned[i]);
    p->owned[i] = NULL;
  }
}

static void array_put(pg_array_t *a, const char *s, size_t n) {
  if (a->failed) return;
  if (a->len + n + 2 > a->cap) {
    size_t cap = a->cap ? a->cap : 256;
    while (a->len + n + 2 > cap)
      cap *= 2;
    char *grown = realloc(a->buf, cap);
    if (!grown) {
      a->failed = true;
      return;
    }
    a->buf = grown;
    a->cap = cap;
  }
  memcpy(a->buf + a->len, s, n);
  a->len += n;
}

static void array_sep(pg_array_t *a) {
  array_put(a, a->len ? "," : "{", 1);
}

void pg_array_text(pg_array_t *a, const char *text) {
  array_sep(a);
  if (!text) {
    array_put(a, "NULL", 4);
    return;
  }
  array_put(a, "\"", 1);
  for (const char *c = text; *c;) {
    size_t run = strcspn(c, "\"\\"); /* copied as it is, up to a quote or a backslash */
    array_put(a, c, run);
    c += run;
    if (*c) {
      array_put(a, "\\", 1);
      array_put(a, c++, 1);
    }
  }
  array_put(a, "\"", 1);
}

void pg_array_int(pg_array_t *a, int64_t value) {
  char num[24];
  array_sep(a);
  array_put(a, num, (size_t)snprintf(num, sizeof num, "%" PRId64, value));
}

char *pg_array_end(pg_array_t *a) {
  if (!a->len) array_put(a, "{", 1);
  array_put(a, "}", 2); /* with the terminating NUL */
  if (a->failed) {
    free(a->buf);
    return NULL;
  }
  char *s = a->buf;
  *a = (pg_array_t){0};
  return s;
}

int pg_own_arrays(pg_params_t *p, int first, pg_array_t *a, int n) {
  int rc = 0;
  for (int i = 0; i < n; i++) {
    pg_own(p, first + i, pg_array_end(&a[i]));
    if (!p->v[first + i - 1]) rc = -1;
  }
  return rc;
}

/* The connection open again after it was lost (the server restarted, a
   proxy cut it): the next statement gets a fresh session. */
static void ensure_connected(store_t *st) {
  if (PQstatus(st->conn) == CONNECTION_OK) return;
  PQreset(st->conn);
  if (PQpipelineStatus(st->conn) != PQ_PIPELINE_OFF) PQexitPipelineMode(st->conn);
  st->n_pending = 0;
  st->n_prepared = 0;   /* gone with the session */
  st->known_epoch = -1; /* the server may have come back from a backup */
  if (PQstatus(st->conn) == CONNECTION_OK) pg_session_setup(st);
}

/* jit off: the collector's statements are short; a generic plan's cost
   estimate made PostgreSQL 15 JIT-compile the batch's rollup statement
   (about 200 ms for 5 ms of work) at every batch. */
int pg_session_setup(store_t *st) {
  const char *sql = st->durability == STORE_DURABLE_FULL
                        ? "SET client_min_messages = warning; SET jit = off;"
                          " SET synchronous_commit = on"
                        : "SET client_min_messages = warning; SET jit = off;"
                          " SET synchronous_commit = off";
  PGresult *r = PQexec(st->conn, sql);
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok) collector_log("postgresql session: %s", PQerrorMessage(st->conn));
  PQclear(r);
  return ok ? 0 : -1;
}

/* The name of sql's prepared statement with p's parameter count: its
   index in st->prepared, or n_prepared when it has none (*is_new: it is
   to be prepared under that name now, the table having room). */
static int prepared_index(store_t *st, const char *sql, const pg_params_t *p, bool *is_new) {
  int i = 0;
  while (i < st->n_prepared && (st->prepared[i] != sql || st->prepared_n[i] != p->n))
    i++;
  *is_new = i == st->n_prepared && i < PG_MAX_PREPARED;
  return i;
}

/* sql run with p as a prepared statement (prepared at its first use;
   PQexecParams when the table is full or the prepare failed). */
static PGresult *run_prepared(store_t *st, const char *sql, const pg_params_t *p) {
  bool is_new;
  int i = prepared_index(st, sql, p, &is_new);
  char name[16];
  snprintf(name, sizeof name, "s%d", i);
  if (is_new) {
    PGresult *r = PQprepare(st->conn, name, sql, p->n, p->type);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (ok) st->prepared_n[i] = p->n, st->prepared[st->n_prepared++] = sql;
  }
  if (i < st->n_prepared) return PQexecPrepared(st->conn, name, p->n, p->v, p->len, p->fmt, 0);
  return PQexecParams(st->conn, sql, p->n, p->type, p->v, p->len, p->fmt, 0);
}

/* A failed result's SQLSTATE kept (pg_last_state) and, unless it is a
   deadlock or a serialization failure (retried), reported. */
static void failed(store_t *st, const PGresult *r, const char *what) {
  const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  snprintf(g_state, sizeof g_state, "%s", state ? state : "");
  if (strcmp(g_state, "40P01") != 0 && strcmp(g_state, "40001") != 0) {
    const char *msg = PQresultErrorMessage(r);
    collector_log("postgresql %s: %s", what, msg && *msg ? msg : PQerrorMessage(st->conn));
  }
}

static const pg_params_t NO_PARAMS;

static int pipe_sync(store_t *st);

/* The connection in pipeline mode with room in the queue for a statement
   and its prepare (what is queued read first when it is full). 0, or -1
   (the queue's failure reported). */
static int pipe_ready(store_t *st) {
  if (PQpipelineStatus(st->conn) != PQ_PIPELINE_OFF && st->n_pending + 2 > PG_MAX_PENDING &&
      pipe_sync(st) != 0)
    return -1;
  if (PQpipelineStatus(st->conn) == PQ_PIPELINE_OFF) {
    ensure_connected(st);
    if (!PQenterPipelineMode(st->conn)) return -1;
  }
  return 0;
}

/* sql queued in the pipeline (prepared in it at its first use), its rows
   for *into (NULL: none kept). 0, or -1 when it could not be: the queue
   read and the pipeline left. */
static int pipe_send(store_t *st, const char *sql, const pg_params_t *p, const char *what,
                     PGresult **into) {
  if (pipe_ready(st) != 0) return -1;
  if (!p) p = &NO_PARAMS;
  bool is_new;
  int i = prepared_index(st, sql, p, &is_new);
  char name[16];
  snprintf(name, sizeof name, "s%d", i);
  int ok = 1;
  if (is_new) {
    ok = PQsendPrepare(st->conn, name, sql, p->n, p->type);
    if (ok) {
      st->prepared_n[i] = p->n, st->prepared[st->n_prepared++] = sql;
      st->pending[st->n_pending++] = (pg_pending_t){what, i, NULL};
    }
  }
  if (ok && i < st->n_prepared)
    ok = PQsendQueryPrepared(st->conn, name, p->n, p->v, p->len, p->fmt, 0);
  else if (ok)
    ok = PQsendQueryParams(st->conn, sql, p->n, p->type, p->v, p->len, p->fmt, 0);
  if (into) *into = NULL;
  if (ok) st->pending[st->n_pending++] = (pg_pending_t){what, -1, into};
  if (!ok) pipe_sync(st);
  return ok ? 0 : -1;
}

/* The pipeline's results read up to its sync point: 0 when every queued
   statement succeeded, else -1 with the first failure reported (those
   after it were not run). The rows of those queued with a place for
   them left there when all succeeded. The connection leaves pipeline
   mode. */
static int pipe_sync(store_t *st) {
  bool lost = !PQpipelineSync(st->conn), any_failed = false;
  for (int k = 0; !lost && k < st->n_pending; k++) {
    const pg_pending_t *q = &st->pending[k];
    PGresult *r = PQgetResult(st->conn);
    ExecStatusType s = PQresultStatus(r);
    if (!r) {
      lost = true; /* no result at all: the connection is gone */
    } else if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) {
      if (q->into) *q->into = r, r = NULL;
    } else {
      if (q->prepare >= 0) st->prepared[q->prepare] = NULL; /* never matches again */
      if (!any_failed) failed(st, r, q->what);              /* the rest were aborted by it */
      any_failed = true;
    }
    PQclear(r);
    if (!lost && PQgetResult(st->conn) != NULL) lost = true; /* each ends with a NULL */
  }
  if (!lost) {
    PGresult *r = PQgetResult(st->conn);
    lost = PQresultStatus(r) != PGRES_PIPELINE_SYNC;
    PQclear(r);
  }
  if (lost && !any_failed) collector_log("postgresql: %s", PQerrorMessage(st->conn));
  if (!PQexitPipelineMode(st->conn)) lost = true;
  for (int k = 0; (lost || any_failed) && k < st->n_pending; k++)
    if (st->pending[k].into) {
      PQclear(*st->pending[k].into);
      *st->pending[k].into = NULL;
    }
  st->n_pending = 0;
  return lost || any_failed ? -1 : 0;
}

PGresult *pg_run(store_t *st, const char *sql, const pg_params_t *p, const char *what) {
  g_state[0] = '\0';
  if (st->pipelined) {
    /* Queued behind the writes before it: one round trip for them all. */
    PGresult *r = NULL;
    return pipe_send(st, sql, p, what, &r) == 0 && pipe_sync(st) == 0 ? r : NULL;
  }
  ensure_connected(st);
  /* Without parameters: PQexec, which also runs several statements (a
     migration). */
  PGresult *r = p ? run_prepared(st, sql, p) : PQexec(st->conn, sql);
  ExecStatusType s = PQresultStatus(r);
  if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) return r;
  failed(st, r, what);
  PQclear(r);
  return NULL;
}

int pg_do(store_t *st, const char *sql, const pg_params_t *p, const char *what) {
  if (st->pipelined) return pipe_send(st, sql, p, what, NULL);
  PGresult *r = pg_run(st, sql, p, what);
  PQclear(r);
  return r ? 0 : -1;
}

void pg_pipeline_begin(store_t *st) {
  st->pipelined = true;
}

int pg_pipeline_end(store_t *st) {
  st->pipelined = false;
  if (PQpipelineStatus(st->conn) == PQ_PIPELINE_OFF) return 0;
  return pipe_sync(st);
}

int pg_queue_read(store_t *st, const char *sql, const pg_params_t *p, const char *what,
                  PGresult **into) {
  g_state[0] = '\0';
  return st->pipelined ? pipe_send(st, sql, p, what, into) : -1;
}

int pg_pipeline_sync(store_t *st) {
  return PQpipelineStatus(st->conn) == PQ_PIPELINE_OFF ? 0 : pipe_sync(st);
}

const char *pg_last_state(store_t *st) {
  (void)st;
  return g_state;
}

int64_t pg_i64(const PGresult *r, int row, int col) {
  if (PQgetisnull(r, row, col)) return 0;
  return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

const char *pg_str(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? NULL : PQgetvalue(r, row, col);
}

void pg_disconnect(store_t *st) {
  if (!st) return;
  PQfinish(st->conn);
  PQfinish(st->health);
  store_known_free(st->known_stacks);
  store_known_free(st->known_groups);
  pthread_mutex_destroy(&st->lock);
  pthread_mutex_destroy(&st->health_lock);
  free(st->conninfo);
  free(st);
}

store_t *pg_connect(const char *conninfo, store_durability_t durability) {
  store_t *st = calloc(1, sizeof *st);
  if (!st || !(st->conninfo = strdup(conninfo))) {
    free(st);
    return NULL;
  }
  pthread_mutex_init(&st->lock, NULL);
  pthread_mutex_init(&st->health_lock, NULL);
  st->durability = durability;
  st->known_epoch = -1;
  st->conn = PQconnectdb(conninfo);
  if (PQstatus(st->conn) != CONNECTION_OK) {
    collector_log("postgresql connect: %s", PQerrorMessage(st->conn));
    pg_disconnect(st);
    return NULL;
  }
  if (pg_session_setup(st) != 0) {
    pg_disconnect(st);
    return NULL;
  }
  return st;
}
