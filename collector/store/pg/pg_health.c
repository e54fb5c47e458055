/*
 * pg_health.c - the PostgreSQL backend's health check (GET /healthz,
 * see pg_store.h): a `SELECT 1` on a connection of its own, answered
 * within PG_HEALTH_TIMEOUT_MS, so a check never waits for the store's
 * connection (held through a long query or a batch) and a server that is
 * down, refuses the database or does not answer makes /healthz say so
 * ("unavailable: ..."); then whether a batch could take its lock on the
 * batches table within PG_HEALTH_LOCK_WAIT_MS ("locked: ..." when another
 * session holds a conflicting lock). The connection is made again at the
 * next check once lost.
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "collector/store/pg/pg_store.h"
#include "sdk/base/clock.h"

#define PG_HEALTH_TIMEOUT_MS 2000
#define PG_HEALTH_CONNECT_TIMEOUT "2" /* seconds (libpq's connect_timeout) */
#define PG_HEALTH_LOCK_WAIT_MS 500
#define PG_HEALTH_LOCK_WAIT_TEXT "'500ms'" /* the same, as SET lock_timeout takes it */

/* libpq's message, its first line only (the rest repeats it or is a hint). */
static void say(char *why, size_t why_len, const char *what, const char *msg) {
  size_t n = strcspn(msg ? msg : "", "\n");
  snprintf(why, why_len, "unavailable: database: %s: %.*s", what, (int)n, msg ? msg : "");
}

static PGconn *connect_health(const char *conninfo) {
  const char *keys[] = {"dbname", "connect_timeout", "application_name", NULL};
  const char *values[] = {conninfo, PG_HEALTH_CONNECT_TIMEOUT, "perf-collector health", NULL};
  return PQconnectdbParams(keys, values, 1);
}

/* sql (one or more statements) on c within the deadline: 0 when every
   statement succeeded; -1 with *why said and, when the server answered
   with an error, its SQLSTATE in state ("" otherwise). */
static int run_within(PGconn *c, const char *sql, long long deadline, char *why, size_t why_len,
                      char state[6]) {
  state[0] = '\0';
  if (!PQsendQuery(c, sql)) {
    say(why, why_len, sql, PQerrorMessage(c));
    return -1;
  }
  int ok = 0;
  for (;;) {
    while (!PQisBusy(c)) {
      PGresult *r = PQgetResult(c);
      if (!r) return ok;
      ExecStatusType st = PQresultStatus(r);
      if (ok == 0 && st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
        const char *code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        snprintf(state, 6, "%s", code ? code : "");
        say(why, why_len, sql, PQresultErrorMessage(r));
        ok = -1;
      }
      PQclear(r);
    }
    long long left = deadline - perf__now_ns() / 1000000;
    struct pollfd pfd = {PQsocket(c), POLLIN, 0};
    int n = left > 0 ? poll(&pfd, 1, (int)left) : 0;
    if (n == 0) {
      snprintf(why, why_len, "unavailable: database: no answer to %s within %d ms", sql,
               PG_HEALTH_TIMEOUT_MS);
      return -1;
    }
    if (n < 0 || !PQconsumeInput(c)) {
      say(why, why_len, sql, PQerrorMessage(c));
      return -1;
    }
  }
}

/* Whether a batch could take its locks now: ROW EXCLUSIVE on batches (what
   an INSERT takes; batches never conflict with each other) within
   PG_HEALTH_LOCK_WAIT_MS. Another session's LOCK TABLE, or a migration,
   makes it "locked". 0, 1 locked (why said), -1 the query failed. */
static int lock_probe(PGconn *c, long long deadline, char *why, size_t why_len) {
  static const char SQL[] = "BEGIN; SET LOCAL lock_timeout = " PG_HEALTH_LOCK_WAIT_TEXT
                            "; LOCK TABLE batches IN ROW EXCLUSIVE MODE; ROLLBACK";
  char state[6], ignored[8];
  int rc = run_within(c, SQL, deadline, why, why_len, state);
  if (rc == 0) return 0;
  if (strcmp(state, "55P03") != 0) return -1; /* not lock_not_available */
  if (run_within(c, "ROLLBACK", deadline, ignored, sizeof ignored, state) != 0) return -1;
  snprintf(why, why_len,
           "locked: database: table batches is locked by another session (no ROW EXCLUSIVE "
           "lock within %d ms: batches wait)",
           PG_HEALTH_LOCK_WAIT_MS);
  return 1;
}

int pg_health(store_t *st, char *why, size_t why_len) {
  if (why_len) why[0] = '\0';
  pthread_mutex_lock(&st->health_lock);
  long long deadline = perf__now_ns() / 1000000 + PG_HEALTH_TIMEOUT_MS;
  int rc = -1;
  char state[6];
  for (int attempt = 0; attempt < 2 && rc != 0; attempt++) {
    if (!st->health || PQstatus(st->health) != CONNECTION_OK) {
      PQfinish(st->health);
      st->health = connect_health(st->conninfo);
      if (PQstatus(st->health) != CONNECTION_OK) {
        say(why, why_len, "connect", PQerrorMessage(st->health));
        break; /* a fresh connection failed: that is the answer */
      }
    }
    rc = run_within(st->health, "SELECT 1", deadline, why, why_len, state);
    if (rc != 0) { /* a lost connection is tried once more, a new one */
      PQfinish(st->health);
      st->health = NULL;
    }
  }
  if (rc == 0 && (rc = lock_probe(st->health, deadline, why, why_len)) < 0) {
    PQfinish(st->health); /* its state is unknown: a new one next time */
    st->health = NULL;
  }
  pthread_mutex_unlock(&st->health_lock);
  return rc == 0 ? STORE_OK : STORE_ERROR;
}
