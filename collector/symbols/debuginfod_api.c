/*
 * debuginfod_api.c - libdebuginfod loaded on first use (see
 * debuginfod_api.h).
 */
#include "collector/symbols/debuginfod_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

static debuginfod_api_t g_api;
static const debuginfod_api_t *g_loaded;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void *symbol(void *lib, const char *name, int *missing) {
  void *p = dlsym(lib, name);
  *missing |= p == NULL;
  return p;
}

static void load(void) {
  void *lib = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  int missing = 0;
  /* POSIX lets a data pointer from dlsym become a function pointer. */
  *(void **)&g_api.begin = symbol(lib, "debuginfod_begin", &missing);
  *(void **)&g_api.end = symbol(lib, "debuginfod_end", &missing);
  *(void **)&g_api.find_debuginfo = symbol(lib, "debuginfod_find_debuginfo", &missing);
  *(void **)&g_api.set_user_data = symbol(lib, "debuginfod_set_user_data", &missing);
  *(void **)&g_api.get_user_data = symbol(lib, "debuginfod_get_user_data", &missing);
  *(void **)&g_api.set_progressfn = symbol(lib, "debuginfod_set_progressfn", &missing);
  if (missing) {
    dlclose(lib);
    return;
  }
  g_loaded = &g_api; /* kept loaded for the life of the process */
}

const debuginfod_api_t *debuginfod_api(void) {
  pthread_once(&g_once, load);
  return g_loaded;
}
