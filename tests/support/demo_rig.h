/*
 * demo_rig.h - the real demo app (samples/demo_app, or a build of it)
 * uploading to a perf-collector started with collector_rig.h: what the
 * end-to-end, dashboard and symbolization tests fill the collector with.
 * The demo's hang: load_user_profile -> parse_profile_blob ->
 * checksum_profile_slowly (~1 s on the loop thread); its CPU burst:
 * resize_images -> apply_filter -> convolve_kernel on "image-worker".
 */
#ifndef PERF_TEST_DEMO_RIG_H
#define PERF_TEST_DEMO_RIG_H

#include <stddef.h>

#include "collector_rig.h"

/* Run the demo at path with its uploader pointed at c (PERF_SDK_SINK=http,
   ENDPOINT, API_KEY=GOOD_KEY, DATA_DIR=<dir>/sdk) and wait for its exit 0 (120 s). Its
   output goes to <dir>/demo_app.out and then to stderr. Returns the hang
   duration the demo printed itself (ms). */
long demo_run_uploading(const collector_t *c, const char *path, const char *dir);

/* Events of kind ("hang", "cpu") the collector has from demo_app. */
size_t demo_events_stored(const collector_t *c, const char *kind);

/* Poll until c has stored the demo's hang and cpu events (60 s). */
void demo_wait_stored(const collector_t *c);

#endif
