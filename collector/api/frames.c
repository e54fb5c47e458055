/*
 * frames.c - stored frames as the API shows them (see frames.h).
 */
#include "collector/api/frames.h"

#include <stdbool.h>

#include "collector/api/headline.h"
#include "collector/model/frame_json.h"

json_t *query_frame_name(const json_t *frame) {
  char text[FRAME_LABEL_MAX];
  frame_json_label(frame, text);
  return json_string(text);
}

json_t *query_frame_names(const char *frames_json) {
  json_t *frames = json_loads(frames_json, 0, NULL);
  json_t *names = frames ? frame_json_labels(frames) : NULL;
  json_decref(frames);
  return names;
}

int query_frame_names_in_app(const char *frames_json, json_t **names, json_t **in_app) {
  *names = json_array();
  *in_app = json_array();
  json_t *shown = query_frames_shown(frames_json);
  bool ok = shown && *names && *in_app;
  size_t i;
  json_t *f;
  json_array_foreach(shown, i, f) {
    if (!ok) break;
    ok = json_array_append_new(*names, query_frame_name(f)) == 0 &&
         json_array_append(*in_app, json_object_get(f, "in_app")) == 0;
  }
  json_decref(shown);
  if (ok) return 0;
  json_decref(*names), json_decref(*in_app);
  *names = *in_app = NULL;
  return -1;
}

/* A stored frames array as shown (frame_json_expand); NULL on failure. */
json_t *query_frames_shown(const char *frames_json) {
  json_t *frames = json_loads(frames_json, 0, NULL);
  json_t *shown = frames ? frame_json_expand(frames) : NULL;
  json_decref(frames);
  if (shown && headline_mark_frames(shown) != 0) json_decref(shown), shown = NULL;
  return shown;
}
