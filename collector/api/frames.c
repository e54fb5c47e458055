/*
 * frames.c - stored frames as the API shows them (see frames.h).
 */
#include "collector/api/frames.h"

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

/* A stored frames array as shown (frame_json_expand); NULL on failure. */
json_t *query_frames_shown(const char *frames_json) {
  json_t *frames = json_loads(frames_json, 0, NULL);
  json_t *shown = frames ? frame_json_expand(frames) : NULL;
  json_decref(frames);
  if (shown && headline_mark_frames(shown) != 0) json_decref(shown), shown = NULL;
  return shown;
}
