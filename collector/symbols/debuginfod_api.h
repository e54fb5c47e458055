/*
 * debuginfod_api.h - libdebuginfod (elfutils), loaded when it is first
 * needed (DEBUGINFOD_URLS set) instead of linked: the library brings
 * libcurl and its TLS stack, which a collector without debuginfod has no
 * use for (the same choice libdw makes). Any thread.
 */
#ifndef PERF_COLLECTOR_DEBUGINFOD_API_H
#define PERF_COLLECTOR_DEBUGINFOD_API_H

#include <elfutils/debuginfod.h>

typedef struct debuginfod_api_s {
  debuginfod_client *(*begin)(void);
  void (*end)(debuginfod_client *client);
  int (*find_debuginfo)(debuginfod_client *client, const unsigned char *build_id, int len,
                        char **path);
  void (*set_user_data)(debuginfod_client *client, void *data);
  void *(*get_user_data)(debuginfod_client *client);
  void (*set_progressfn)(debuginfod_client *client, debuginfod_progressfn_t fn);
} debuginfod_api_t;

/* The library's functions (libdebuginfod.so.1, loaded once); NULL when it
   is not installed or lacks one of them. */
const debuginfod_api_t *debuginfod_api(void);

#endif
