/*
 * in_app.c - the app's own frames (see in_app.h). The rules are written
 * once by main before the server's threads start, then only read.
 */
#include "collector/model/in_app.h"

#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

static in_app_rules_t g_rules;

static const char *const SYSTEM_DIRS[] = {IN_APP_SYSTEM_DIRS};

int in_app_rule_add(in_app_rules_t *r, bool include, const char *value, char *why,
                    size_t why_size) {
  size_t *n = include ? &r->n_include : &r->n_exclude;
  const char *problem = NULL;
  if (!value || !*value)
    problem = "empty (a path prefix such as /opt/shop, or a file name glob such as libshop*.so*)";
  else if (strlen(value) > IN_APP_MAX_RULE_BYTES)
    problem = "longer than 1024 bytes";
  else if (value[0] != '/' && strchr(value, '/'))
    problem = "a path must start with '/' (a prefix such as /opt/shop); a value without '/' is "
              "a file name glob (libshop*.so*)";
  else if (*n == IN_APP_MAX_RULES)
    problem = "more than 64 rules";
  _Static_assert(IN_APP_MAX_RULES == 64 && IN_APP_MAX_RULE_BYTES == 1024, "the messages say so");
  if (problem) {
    const char *v = value ? value : "";
    snprintf(why, why_size, "'%.80s%s': %s", v, strlen(v) > 80 ? "..." : "", problem);
    return -1;
  }
  (include ? r->include : r->exclude)[(*n)++] = value;
  return 0;
}

/* path is prefix or below it (a whole component: "/opt/a" is no prefix
   of "/opt/ab"). */
static bool under(const char *path, const char *prefix) {
  size_t n = strlen(prefix);
  if (strncmp(path, prefix, n) != 0) return false;
  return path[n] == '\0' || path[n] == '/' || (n && prefix[n - 1] == '/');
}

static bool rule_matches(const char *rule, const char *path, const char *base) {
  if (rule[0] == '/') return under(path, rule);
  return fnmatch(rule, base, 0) == 0;
}

static bool any_matches(const char *const *rules, size_t n, const char *path, const char *base) {
  for (size_t i = 0; i < n; i++)
    if (rule_matches(rules[i], path, base)) return true;
  return false;
}

bool in_app_judge(const in_app_rules_t *r, const char *path, bool executable) {
  if (!path || !*path || path[0] == '[' || strcmp(path, "??") == 0) return false;
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  if (r && any_matches(r->include, r->n_include, path, base)) return true;
  if (r && any_matches(r->exclude, r->n_exclude, path, base)) return false;
  if (strncmp(base, "libperfsdk", 10) == 0) return false;
  if (executable) return true;
  for (size_t i = 0; i < sizeof SYSTEM_DIRS / sizeof SYSTEM_DIRS[0]; i++)
    if (under(path, SYSTEM_DIRS[i])) return false;
  return slash != NULL;
}

void in_app_configure(const in_app_rules_t *r) {
  if (r)
    g_rules = *r;
  else
    memset(&g_rules, 0, sizeof g_rules);
}

bool in_app_frame(const json_t *frame) {
  return in_app_judge(&g_rules, json_string_value(json_object_get(frame, "module")),
                      json_is_true(json_object_get(frame, "executable")));
}
