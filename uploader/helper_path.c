/*
 * helper_path.c - which upload helper the http sink uses (see transport.h).
 * The helper is installed with the library, as perfsdk/perf-upload in the
 * library's own directory (in the build tree too), so a shared library
 * finds the one of its own version wherever it was installed; a program
 * linking the static library looks in the install's library directory.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/log.h"
#include "uploader/transport.h"

#define HELPER_NAME "perfsdk/perf-upload"

static bool executable(const char *path) {
  return access(path, X_OK) == 0;
}

int perf__upload_helper_find(const char *configured, char *out, size_t out_len) {
  if (configured) {
    if (!*configured || strcmp(configured, "off") == 0) return PERF_E_UNSUPPORTED;
    bool fits = (size_t)snprintf(out, out_len, "%s", configured) < out_len;
    if (!fits || !executable(out)) {
      int e = fits ? errno : ENAMETOOLONG;
      PERF__FAIL(PERF_E_INVALID_CONFIG, "upload_helper: %s is not an executable file: %s",
                 configured, strerror(e));
    }
    return PERF_OK;
  }
  Dl_info info;
  if (dladdr((void *)&perf__upload_helper_find, &info) && info.dli_fname) {
    const char *slash = strrchr(info.dli_fname, '/');
    int dir = slash ? (int)(slash - info.dli_fname) : 0;
    if ((size_t)snprintf(out, out_len, "%.*s/" HELPER_NAME, dir, info.dli_fname) < out_len &&
        slash && executable(out))
      return PERF_OK;
  }
#ifdef PERF_INSTALLED_LIBDIR
  if ((size_t)snprintf(out, out_len, "%s/" HELPER_NAME, PERF_INSTALLED_LIBDIR) < out_len &&
      executable(out))
    return PERF_OK;
#endif
  return PERF_E_UNSUPPORTED;
}
