/*
 * frames.h - a stored stack's frames as the read-only API shows them:
 * expanded (inline frames and the end marker are frames), each named by
 * its label (frame_json.h), the app's frames marked (headline.h).
 */
#ifndef PERF_COLLECTOR_API_FRAMES_H
#define PERF_COLLECTOR_API_FRAMES_H

#include <jansson.h>

/* A frame object (frame_json.h) to its name in the exports: its label (the
   function, "<function> [inline]", else "module-basename+0xaddr"). A new
   reference (the caller decrefs); NULL when out of memory. */
json_t *query_frame_name(const json_t *frame);

/* The names of a stored frames array, expanded, innermost first (a JSON
   array of strings); NULL on failure. */
json_t *query_frame_names(const char *frames_json);

/* The names of a stored frames array, expanded, innermost first, and
   whether each is the app's (in_app.h): a JSON array of strings and one of
   booleans, new references; -1 on failure (both NULL). */
int query_frame_names_in_app(const char *frames_json, json_t **names, json_t **in_app);

/* A stored frames array as shown (frame_json_expand) with the in_app
   marks; NULL on failure. */
json_t *query_frames_shown(const char *frames_json);

#endif
