/*
 * upload_stall.h - telling the app, once, that batches have stopped
 * reaching the collector, and why: the collector down or unreachable, its
 * answer to the key (401/403), the URL (404), the batch size (413), a rate
 * limit (429), its own failures (5xx). One warning per episode: the next
 * one only after a batch reached the collector again and batches then
 * stopped again. Uploader thread only (no lock).
 */
#ifndef PERF_UPLOAD_STALL_H
#define PERF_UPLOAD_STALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "uploader/transport.h"

typedef struct perf__upload_stall_s {
  int64_t warn_after_ns; /* 0: never warn */
  int64_t since_ns;      /* the first failed attempt since a batch last arrived; 0: none */
  bool warned;           /* this episode's warning is said */
  long status;           /* the last failed attempt: its status (0: no response), */
  int rc;                /* the transport's return, */
  char reason[128];      /* and its reason (the server's body or the network error) */
} perf__upload_stall_t;

void perf__upload_stall_init(perf__upload_stall_t *s, unsigned warn_after_ms);

/* A batch reached the collector (2xx): the episode, if any, is over. */
void perf__upload_stall_arrived(perf__upload_stall_t *s);

/* An attempt failed (rc the transport's return, resp its answer). */
void perf__upload_stall_failed(perf__upload_stall_t *s, int64_t now_ns, int rc,
                               const perf__http_response_t *resp);

/* When the warning is due (monotonic ns), 0 when none is pending. */
int64_t perf__upload_stall_deadline(const perf__upload_stall_t *s);

/* At or past the deadline: write the warning for `url` into msg and mark
   it said (true); false when none is due. */
bool perf__upload_stall_due(perf__upload_stall_t *s, int64_t now_ns, const char *url, char *msg,
                            size_t len);

/* Why batches do not arrive and what to check, for the last failure:
   status 0 is a network error (rc PERF_E_TIMEOUT: a timeout), the reason
   the transport's text. Pure; tests call it too. */
void perf__upload_stall_why(long status, int rc, const char *reason, const char *url, char *out,
                            size_t len);

#endif
