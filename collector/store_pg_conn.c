/*
 * store_pg_conn.c - the PostgreSQL backend's statement helpers (see
 * store_pg.h): parameters as text, array literals for unnest, one call
 * that runs a statement and reports its failure, a connection lost
 * between statements opened again.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_pg.h"

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
  for (const char *c = text; *c; c++) {
    if (*c == '"' || *c == '\\') array_put(a, "\\", 1);
    array_put(a, c, 1);
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

/* The connection open again after it was lost (the server restarted, a
   proxy cut it): the next statement gets a fresh session. */
static void ensure_connected(store_t *st) {
  if (PQstatus(st->conn) == CONNECTION_OK) return;
  PQreset(st->conn);
  st->n_prepared = 0; /* gone with the session */
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
  if (!ok) fprintf(stderr, "perf-collector: postgresql session: %s", PQerrorMessage(st->conn));
  PQclear(r);
  return ok ? 0 : -1;
}

/* sql run with p as a prepared statement (prepared at its first use;
   PQexecParams when the table is full or the prepare failed). */
static PGresult *run_prepared(store_t *st, const char *sql, const pg_params_t *p) {
  int i = 0;
  while (i < st->n_prepared && (st->prepared[i] != sql || st->prepared_n[i] != p->n))
    i++;
  char name[16];
  snprintf(name, sizeof name, "s%d", i);
  if (i == st->n_prepared && i < PG_MAX_PREPARED) {
    PGresult *r = PQprepare(st->conn, name, sql, p->n, p->type);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (ok) st->prepared_n[i] = p->n, st->prepared[st->n_prepared++] = sql;
  }
  if (i < st->n_prepared) return PQexecPrepared(st->conn, name, p->n, p->v, p->len, p->fmt, 0);
  return PQexecParams(st->conn, sql, p->n, p->type, p->v, p->len, p->fmt, 0);
}

PGresult *pg_run(store_t *st, const char *sql, const pg_params_t *p, const char *what) {
  g_state[0] = '\0';
  ensure_connected(st);
  /* Without parameters: PQexec, which also runs several statements (a
     migration). */
  PGresult *r = p ? run_prepared(st, sql, p) : PQexec(st->conn, sql);
  ExecStatusType s = PQresultStatus(r);
  if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) return r;
  const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  snprintf(g_state, sizeof g_state, "%s", state ? state : "");
  /* A duplicate or a retried deadlock is not worth a line on stderr. */
  if (strcmp(g_state, "40P01") != 0 && strcmp(g_state, "40001") != 0)
    fprintf(stderr, "perf-collector: postgresql %s: %s", what, PQerrorMessage(st->conn));
  PQclear(r);
  return NULL;
}

int pg_do(store_t *st, const char *sql, const pg_params_t *p, const char *what) {
  PGresult *r = pg_run(st, sql, p, what);
  PQclear(r);
  return r ? 0 : -1;
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
