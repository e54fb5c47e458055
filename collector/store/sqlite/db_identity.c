/*
 * db_identity.c - the database path against the files opened (see
 * db_identity.h).
 */
#include "collector/store/sqlite/db_identity.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "collector/base/log.h"

#define WATCHED 2 /* the database and its write-ahead log */
#define WHY_MAX (PATH_MAX + 256)

struct db_identity_s {
  size_t n;              /* files watched: 0 (in memory), 1 or 2 */
  char *path[WATCHED];   /* PATH, PATH-wal */
  dev_t dev[WATCHED];    /* as opened */
  ino_t ino[WATCHED];    /* as opened */
  atomic_bool lost;      /* latched; why[] is written before it is set */
  pthread_mutex_t latch; /* the first failure's writer */
  char why[WHY_MAX];
};

static char *joined(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  char *s = malloc(la + lb + 1);
  if (s) memcpy(s, a, la), memcpy(s + la, b, lb + 1);
  return s;
}

db_identity_t *db_identity_take(const char *path, char *why, size_t why_len) {
  db_identity_t *id = calloc(1, sizeof *id);
  if (!id) return snprintf(why, why_len, "out of memory"), NULL;
  pthread_mutex_init(&id->latch, NULL);
  if (path[0] == '\0' || strcmp(path, ":memory:") == 0) return id;
  static const char *const suffix[WATCHED] = {"", "-wal"};
  for (size_t i = 0; i < WATCHED; i++) {
    struct stat sb;
    if (!(id->path[i] = joined(path, suffix[i]))) {
      snprintf(why, why_len, "out of memory");
      db_identity_free(id);
      return NULL;
    }
    if (stat(id->path[i], &sb) != 0) {
      if (i > 0) break; /* no write-ahead log (not in WAL mode): the database alone */
      snprintf(why, why_len, "database %s: %s", path, strerror(errno));
      db_identity_free(id);
      return NULL;
    }
    id->dev[i] = sb.st_dev;
    id->ino[i] = sb.st_ino;
    id->n = i + 1;
  }
  return id;
}

/* The first difference found, said once; later failures keep its text.
   True for the caller that latched it. */
static bool latch(db_identity_t *id, const char *text) {
  bool first = false;
  pthread_mutex_lock(&id->latch);
  if (!atomic_load(&id->lost)) {
    first = true;
    snprintf(id->why, sizeof id->why, "%s", text);
    atomic_store(&id->lost, true);
    collector_log("%s (until then POST /v1/batches and /healthz answer 503)\n", text);
  }
  pthread_mutex_unlock(&id->latch);
  return first;
}

bool db_identity_check(db_identity_t *id, char *why, size_t why_len, bool *first) {
  *first = false;
  for (size_t i = 0; i < id->n && !atomic_load(&id->lost); i++) {
    const char *what = i == 0 ? "the database" : "the database's write-ahead log";
    char text[sizeof id->why];
    struct stat sb;
    if (stat(id->path[i], &sb) != 0)
      snprintf(text, sizeof text,
               "%s %s was deleted or moved away while open (%s); restart perf-collector", what,
               id->path[i], strerror(errno));
    else if (sb.st_dev != id->dev[i] || sb.st_ino != id->ino[i])
      snprintf(text, sizeof text,
               "%s %s was replaced by another file (inode %llu, opened as inode %llu); restart "
               "perf-collector",
               what, id->path[i], (unsigned long long)sb.st_ino, (unsigned long long)id->ino[i]);
    else
      continue;
    *first = latch(id, text);
  }
  if (!atomic_load(&id->lost)) return true;
  snprintf(why, why_len, "%s", id->why);
  return false;
}

void db_identity_free(db_identity_t *id) {
  if (!id) return;
  for (size_t i = 0; i < WATCHED; i++)
    free(id->path[i]);
  pthread_mutex_destroy(&id->latch);
  free(id);
}
