/*
 * in_app.h - which frames are the app's own ("in-app", as Sentry calls
 * them): the frames a person reading a hang wants named first, rather than
 * libc's read() or GLib's dispatch that called into the app.
 *
 * A frame is judged by its module, as stored (frame_json.h: "module", the
 * path the SDK sent, and "executable", the wire's Module.executable), in
 * this order:
 *   1. no module file ("??", "", the vDSO "[vdso]"): never in-app;
 *   2. a --in-app-include rule matches: in-app;
 *   3. a --in-app-exclude rule matches: not in-app;
 *   4. the SDK's own libraries (basename libperfsdk*): not in-app;
 *   5. the process's executable (marked by the SDK): in-app;
 *   6. under a system library directory (IN_APP_SYSTEM_DIRS, everything
 *      below them: multiarch and plugin directories too): not in-app;
 *   7. a module known by file name only (no '/': frames recovered from a
 *      previous run's text by older SDKs): not in-app (its directory is
 *      unknown; a basename rule can include it);
 *   8. any other path (the build tree, /opt, /usr/local/lib, $HOME): in-app.
 * A rule is a path prefix when it starts with '/' (the path itself or
 * anything under it: "/opt/shop" matches "/opt/shop/lib/x.so", not
 * "/opt/shopping/x.so"), else a glob on the module's file name
 * (fnmatch(3): "libshop*.so*").
 *
 * Nothing in-app is stored: answers judge the stored module paths with the
 * rules of the running collector, so rules changed at a restart apply to
 * every stored stack at once. The rules are set once by main before the
 * server starts (in_app_configure) and read-only after: any thread.
 */
#ifndef PERF_COLLECTOR_IN_APP_H
#define PERF_COLLECTOR_IN_APP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define IN_APP_MAX_RULES 64 /* of each kind */
#define IN_APP_MAX_RULE_BYTES 1024

/* The system library directories of rule 6 (and everything under them). */
#define IN_APP_SYSTEM_DIRS                                                                         \
  "/lib", "/lib32", "/lib64", "/libx32", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32"

typedef struct in_app_rules_s {
  const char *include[IN_APP_MAX_RULES]; /* the strings must outlive the rules */
  size_t n_include;
  const char *exclude[IN_APP_MAX_RULES];
  size_t n_exclude;
} in_app_rules_t;

/* Add a rule's text (the value of --in-app-include or --in-app-exclude);
   0, or -1 with why (naming what is wrong with it, not the flag) when it is
   empty, longer than IN_APP_MAX_RULE_BYTES, holds a '/' without starting
   with one, or is one rule too many. */
int in_app_rule_add(in_app_rules_t *r, bool include, const char *value, char *why, size_t why_size);

/* Whether a module is the app's under rules r (NULL: none): path as the
   SDK sent it (NULL: no module), executable as it marked it. Pure. */
bool in_app_judge(const in_app_rules_t *r, const char *path, bool executable);

/* The rules every answer uses from now on (copied; NULL: none). main
   calls it once, before any thread reads them. */
void in_app_configure(const in_app_rules_t *r);

/* in_app_judge with the configured rules for a stored or shown frame
   object (frame_json.h): its "module" and "executable". The end marker
   (no module) is never in-app. */
bool in_app_frame(const json_t *frame);

#endif
