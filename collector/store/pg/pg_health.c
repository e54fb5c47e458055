/*
 * pg_health.c - the PostgreSQL backend's health check (GET /healthz,
 * see pg_store.h): a `SELECT 1` on a connection of its own, answered
 * within PG_HEALTH_TIMEOUT_MS, so a check never waits for the store's
 * connection (held through a long query or a batch) and a server that is
 * down, refuses the database or does not answer makes /healthz say so.
 * The connection is made again at the next check once lost.
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "collector/store/pg/pg_store.h"
#include "sdk/base/clock.h"

#define PG_HEALTH_TIMEOUT_MS 2000
#define PG_HEALTH_CONNECT_TIMEOUT "2" /* seconds (libpq's connect_timeout) */

/* libpq's message, its first line only (the rest repeats it or is a hint). */
static void say(char *why, size_t why_len, const char *what, const char *msg) {
  size_t n = strcspn(msg ? msg : "", "\n");
  snprintf(why, why_len, "database: %s: %.*s", what, (int)n, msg ? msg : "");
}

static PGconn *connect_health(const char *conninfo) {
  const char *keys[] = {"dbname", "connect_timeout", "application_name", NULL};
  const char *values[] = {conninfo, PG_HEALTH_CONNECT_TIMEOUT, "perf-collector health", NULL};
  return PQconnectdbParams(keys, values, 1);
}

/* One SELECT 1 on c within the deadline: 0, or -1 with *why said. */
static int select_one(PGconn *c, long long deadline, char *why, size_t why_len) {
  if (!PQsendQuery(c, "SELECT 1")) {
    say(why, why_len, "SELECT 1", PQerrorMessage(c));
    return -1;
  }
  int ok = -1;
  bool answered = false;
  for (;;) {
    while (!PQisBusy(c)) {
      PGresult *r = PQgetResult(c);
      if (!r) {
        if (!answered) say(why, why_len, "SELECT 1", "no result");
        return answered ? ok : -1;
      }
      answered = true;
      if (PQresultStatus(r) == PGRES_TUPLES_OK) {
        ok = 0;
      } else {
        say(why, why_len, "SELECT 1", PQresultErrorMessage(r));
      }
      PQclear(r);
    }
    long long left = deadline - perf__now_ns() / 1000000;
    struct pollfd pfd = {PQsocket(c), POLLIN, 0};
    int n = left > 0 ? poll(&pfd, 1, (int)left) : 0;
    if (n == 0) {
      snprintf(why, why_len, "database: no answer to SELECT 1 within %d ms", PG_HEALTH_TIMEOUT_MS);
      return -1;
    }
    if (n < 0 || !PQconsumeInput(c)) {
      say(why, why_len, "SELECT 1", PQerrorMessage(c));
      return -1;
    }
  }
}

int pg_health(store_t *st, char *why, size_t why_len) {
  if (why_len) why[0] = '\0';
  pthread_mutex_lock(&st->health_lock);
  long long deadline = perf__now_ns() / 1000000 + PG_HEALTH_TIMEOUT_MS;
  int rc = -1;
  for (int attempt = 0; attempt < 2 && rc != 0; attempt++) {
    if (!st->health || PQstatus(st->health) != CONNECTION_OK) {
      PQfinish(st->health);
      st->health = connect_health(st->conninfo);
      if (PQstatus(st->health) != CONNECTION_OK) {
        say(why, why_len, "connect", PQerrorMessage(st->health));
        break; /* a fresh connection failed: that is the answer */
      }
    }
    rc = select_one(st->health, deadline, why, why_len);
    if (rc != 0) { /* a lost connection is tried once more, a new one */
      PQfinish(st->health);
      st->health = NULL;
    }
  }
  pthread_mutex_unlock(&st->health_lock);
  return rc == 0 ? STORE_OK : STORE_ERROR;
}
