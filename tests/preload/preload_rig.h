/*
 * preload_rig.h - what the preload tests share: programs started under the
 * real perf-run (their output in a file, killed at exit if a check failed
 * first), the test's directory and files in it, the file sink's report
 * polled for its events, and loopback sockets to the servers.
 * Failures exit through check.h.
 */
#ifndef PERF_TEST_PRELOAD_RIG_H
#define PERF_TEST_PRELOAD_RIG_H

#include <stdbool.h>
#include <sys/types.h>

#include "sdk_report.h"

#define RIG_START_MS 20000 /* a program up and answering, on a loaded machine */
#define RIG_EVENT_MS 20000 /* an event in the report after its hang ended */
#define RIG_EXIT_MS 20000
#define RIG_WAITS_TO_REGISTER 3 /* PERF__PRELOAD_WAITS_TO_REGISTER, sdk/preload/preload.h */

/* The test's temporary directory (made at the first call, removed at exit). */
const char *rig_dir(void);

/* <rig_dir()>/name; lives as long as the process. */
char *rig_path(const char *name);

/* Start argv with `env` (NAME=VALUE..., NULL-terminated) added, its stdout
   and stderr into `out`. With `own_group` the program leads a process
   group of its own and the whole group is killed at exit (a server's
   forked workers with it). Under the sanitizers the ASan runtime is
   preloaded first: an uninstrumented program loading the instrumented
   library needs it. */
pid_t rig_start(char *const argv[], const char *const *env, const char *out, bool own_group);

/* Kill pid (and its group when it leads one) at exit if it is still there. */
void rig_note_child(pid_t pid);

/* The exit status of pid (128 + signal when killed), waiting at most ms
   (then SIGKILL and a failure). */
int rig_wait_exit(pid_t pid, int ms);

/* The program is installed; else the case is skipped (false), or fails
   where CI is set. */
bool rig_have_program(const char *path);

/* The report once it holds `want` events of `kind` (or RIG_EVENT_MS
   passed); malloc'd, "" when there is none. */
char *rig_report_with(const char *report, const char *kind, size_t want);

/* The event's duration within 10% of what the client measured. */
void rig_expect_duration_near(const event_t *ev, long long client_ms);

/* A TCP port free on 127.0.0.1 now. */
int rig_free_port(void);

/* A connection to 127.0.0.1:port with a 30 s receive timeout, or -1. */
int rig_connect(int port);

/* Connected once pid answers on port (RIG_START_MS; its early exit fails). */
int rig_connect_when_up(int port, pid_t pid);

/* Send `request`, read until the reply ends with `end`; the reply (a static
   buffer, valid until the next call). */
char *rig_ask(int fd, const char *request, const char *end);

#endif
