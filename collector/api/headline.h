/*
 * headline.h - what a person reads first about a stack: its innermost
 * in-app frame (in_app.h), with its innermost frame beside it. A hang in
 * read() on a pipe called from reload_config() reads "reload_config",
 * beside it "__GI___libc_read [inline]"; a stack whose innermost frame is
 * in-app is headed by it; one without any in-app frame by its innermost.
 *
 * Groups (top-stacks, versions/compare) keep only their frames' names:
 * their modules come from a stored stack of the group (store_ops_t
 * group_stacks) whose frames end in the group's names (root end first: a
 * hang group's names are the root part its samples share), else, name by
 * name, from any frame of those stacks with the same name; a name found in
 * none is not in-app. Runs on the request's thread.
 */
#ifndef PERF_COLLECTOR_HEADLINE_H
#define PERF_COLLECTOR_HEADLINE_H

#include <jansson.h>

#include "collector/store/store.h"

/* Head each object of the array objects (top-stacks' stacks,
   versions/compare's groups): its signature is its member sig_key, its
   names its "frames" (strings, innermost first); it gets, added, "in_app"
   (an array of booleans parallel to the names) and "headline":
     {"function", "module", "in_app_index", "innermost": {"function", "module"}}
   function is the innermost in-app frame's name, in_app_index its index in
   the names (null when no frame is in-app: then function is the innermost
   frame's name), module the stored path of its frame (null when unknown);
   the headline is null for no names. Reads the groups' stacks from the
   store. 0, or -1 when the store failed or memory ran out. */
int headline_objects(const store_ops_t *ops, store_t *store, json_t *objects, const char *sig_key);

/* Each shown frame object (frame_json_expand's) gets "in_app": true or
   false. 0, or -1 when out of memory. */
int headline_mark_frames(json_t *shown);

#endif
