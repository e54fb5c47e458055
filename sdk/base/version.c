/*
 * version.c - perf_sdk_version, the version of the library answering.
 * Built into the front and the core alike; the front compares the core's
 * answer with its own before using the core (sdk/front/front.c).
 */
#include "perf_sdk.h"

/* A test-only build of the core defines another version to check that the
   front refuses it (tests/monitors/CMakeLists.txt). */
#ifndef PERF__VERSION_TEXT
#define PERF__VERSION_TEXT PERF_SDK_VERSION
#endif

const char *perf_sdk_version(void) {
  return PERF__VERSION_TEXT;
}
