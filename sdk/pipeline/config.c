/*
 * config.c - defaults, environment overrides and validation of the SDK
 * configuration (see config.h). Runs on the thread calling perf_sdk_init or
 * perf_sdk_config_init; reads the environment, touches no file.
 *
 * Every numeric field is described once in k_limits (name, offset, range);
 * defaults, PERF_SDK_<NAME> overrides and range checks all come from it.
 * A boolean field (0..1) takes the boolean spellings from the environment
 * (sdk/base/env_text.h). PERF_SDK_* names no part of the SDK reads are
 * config_env.c's.
 */
#include "sdk/pipeline/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sdk/base/env_text.h"
#include "sdk/base/log.h"
#include "sdk/pipeline/config_env.h"

#define MAX_TEXT_BYTES 128 /* app_name, app_version, environment */
#define MAX_PATH_BYTES 4096

typedef struct {
  const char *name;
  size_t offset;
  unsigned def, min, max;
  bool boolean; /* 0..1: the environment may also say true/false, yes/no, on/off */
} limit_t;

#define FIELD(name, def, min, max)                                                                 \
  { #name, offsetof(perf_sdk_config_t, name), def, min, max, false }
#define BOOL_FIELD(name, def)                                                                      \
  { #name, offsetof(perf_sdk_config_t, name), def, 0, 1, true }
/* clang-format off */
static const limit_t k_limits[] = {
    FIELD(hang_threshold_ms, 250, PERF__HANG_THRESHOLD_MIN_MS, PERF__HANG_THRESHOLD_MAX_MS),
    FIELD(hang_sample_interval_ms, 100, 5, 60000),
    FIELD(hang_max_samples, 20, 1, 200),
    FIELD(cpu_threshold_percent, 80, 1, 25600),
    FIELD(cpu_window_ms, 2000, 100, 600000),
    FIELD(cpu_sample_hz, 100, 1, 1000),
    FIELD(cpu_burst_ms, 1000, 10, 60000),
    FIELD(cpu_top_threads, 3, 1, 64),
    FIELD(cpu_cooldown_ms, 30000, 0, 3600000),
    FIELD(max_events_per_hour, 60, 1, 100000),
    FIELD(queue_capacity, 64, 1, 4096),
    FIELD(batch_max_bytes, 1048576, 16384, 16777216),
    FIELD(batch_max_delay_ms, 10000, 100, 3600000),
    FIELD(zstd_level, 3, 1, 19),
    BOOL_FIELD(symbolize, 1),
    FIELD(spool_max_bytes, 33554432, 65536, 4294967295u),
    FIELD(spool_max_files, 1000, 1, 65536),
    FIELD(spool_max_age_s, 604800, 0, 315360000),
    FIELD(connect_timeout_ms, 5000, 100, 120000),
    FIELD(request_timeout_ms, 30000, 100, 600000),
    FIELD(backoff_base_ms, 1000, 10, 600000),
    FIELD(backoff_cap_ms, 300000, 10, 86400000),
    FIELD(max_server_errors, 5, 1, 100),
    BOOL_FIELD(tls_verify, 1),
    FIELD(exit_timeout_ms, 300, 0, 60000),
    FIELD(upload_stall_warn_s, 60, 0, 86400),
    BOOL_FIELD(strict_env, 0),
    FIELD(cpu_profile_hz, 0, 0, 1000),
    FIELD(cpu_profile_budget_permille, 5, 1, 1000),
};
/* clang-format on */
#undef FIELD
#undef BOOL_FIELD
#define LIMIT_COUNT (sizeof k_limits / sizeof k_limits[0])

typedef struct {
  const char *name;
  size_t offset;
  size_t max_bytes;
  bool on_the_wire; /* sent in an HTTP header or the request URL: visible ASCII only */
} text_field_t;

#define TEXT(name, max, wire)                                                                      \
  { #name, offsetof(perf_sdk_config_t, name), max, wire }
static const text_field_t k_texts[] = {
    TEXT(app_name, MAX_TEXT_BYTES, false),      TEXT(app_version, MAX_TEXT_BYTES, false),
    TEXT(environment, MAX_TEXT_BYTES, false),   TEXT(sink_path, MAX_PATH_BYTES, false),
    TEXT(data_dir, MAX_PATH_BYTES, false),      TEXT(endpoint, MAX_PATH_BYTES, true),
    TEXT(api_key, MAX_PATH_BYTES, true),        TEXT(ca_bundle, MAX_PATH_BYTES, false),
    TEXT(upload_helper, MAX_PATH_BYTES, false),
};
#undef TEXT
#define TEXT_COUNT (sizeof k_texts / sizeof k_texts[0])

static unsigned *uint_at(perf_sdk_config_t *c, size_t offset);
static const char **text_at(perf_sdk_config_t *c, size_t offset);
static void env_name(const char *field, char *buf, size_t len);
static int apply_env(perf_sdk_config_t *c, char *tag_buf, size_t tag_buf_len, bool *disabled,
                     bool quiet);
static int env_strict(perf_sdk_config_t *c);
static int env_disabled(bool strict, bool quiet, bool *disabled);
static int env_limit(perf_sdk_config_t *c, const limit_t *f);
static int env_names(bool strict, bool quiet);
static int parse_env_tags(perf_sdk_config_t *c, char *buf, size_t len, const char *value);
static int validate(perf_sdk_config_t *c);
static int check_wire_text(const text_field_t *f, const char *source, const char *v);
static int copy_config(const perf_sdk_config_t *c, perf__config_t *out);
static char *dup_or_null(const char *s, int *err);
static char *default_data_dir(const char *app_name);

/* The layouts of perf_sdk_config_t apps may have been built with, oldest
   first: each one is the previous one with fields added at the end. A
   struct_size not in this list is refused. */
static const size_t k_layouts[] = {
    offsetof(perf_sdk_config_t, exit_timeout_ms),     /* 0.1.0: up to log_user */
    offsetof(perf_sdk_config_t, upload_helper),       /* 0.1.0 + exit_timeout_ms */
    offsetof(perf_sdk_config_t, upload_stall_warn_s), /* ... + upload_helper */
    offsetof(perf_sdk_config_t, cpu_profile_hz),      /* ... + upload_stall_warn_s, strict_env */
    sizeof(perf_sdk_config_t), /* ... + cpu_profile_hz, cpu_profile_budget_permille */
};
#define LAYOUT_COUNT (sizeof k_layouts / sizeof k_layouts[0])

void perf_sdk_config_init_sized(perf_sdk_config_t *cfg, size_t struct_size) {
  if (!cfg || struct_size < sizeof cfg->struct_size) return;
  /* An app newer than this library: its later fields are left as they
     are (perf_sdk_init refuses the config); only what both know is set. */
  size_t known = struct_size < sizeof *cfg ? struct_size : sizeof *cfg;
  perf_sdk_config_t c;
  memset(&c, 0, sizeof c);
  for (size_t i = 0; i < LIMIT_COUNT; i++)
    *uint_at(&c, k_limits[i].offset) = k_limits[i].def;
  c.app_version = "unknown";
  c.environment = "production";
  c.sink = PERF_SINK_NONE;
  c.struct_size = struct_size;
  memcpy(cfg, &c, known);
}

/* The app's config in this library's layout: the fields its layout has,
   the defaults for the ones added since. */
static int read_layout(const perf_sdk_config_t *in, perf_sdk_config_t *out) {
  size_t size = in->struct_size;
  bool known = false;
  for (size_t i = 0; i < LAYOUT_COUNT; i++)
    known = known || k_layouts[i] == size;
  if (!known) {
    if (size > sizeof *out)
      perf__log(PERF__LOG_ERROR,
                "struct_size %zu is larger than this library's perf_sdk_config_t (%zu): the app "
                "was built against a newer perf_sdk.h; link the library that came with it",
                size, sizeof *out);
    else
      perf__log(PERF__LOG_ERROR,
                "struct_size %zu is not a perf_sdk_config_t layout this library knows (%zu "
                "now): fill the config with perf_sdk_config_init",
                size, sizeof *out);
    return PERF_E_INVALID_CONFIG;
  }
  perf_sdk_config_init_sized(out, sizeof *out);
  memcpy(out, in, size);
  out->struct_size = sizeof *out;
  return PERF_OK;
}

int perf__config_resolve(const perf_sdk_config_t *in, perf__config_t *out, bool *disabled,
                         bool quiet_env) {
  memset(out, 0, sizeof *out);
  *disabled = false;
  /* The log callback is the app's, whatever the environment says: install
     it first so that configuration errors reach it (log_user and log_fn
     are in every layout). */
  perf__log_set(in->log_fn, in->log_user);
  perf_sdk_config_t c;
  int err = read_layout(in, &c);
  if (err) return err;
  char tag_buf[PERF_MAX_TAGS * 2 * (PERF_MAX_TAG_BYTES + 1)];
  err = apply_env(&c, tag_buf, sizeof tag_buf, disabled, quiet_env);
  if (err || *disabled) return err;
  if ((err = validate(&c)) != 0) return err;
  err = copy_config(&c, out);
  if (!err && out->sink == PERF_SINK_HTTP && !out->data_dir) {
    perf__log(PERF__LOG_ERROR, "data_dir is required with sink = http (the spool lives there); "
                               "set it, or HOME / XDG_STATE_HOME for the default");
    err = PERF_E_INVALID_CONFIG;
  }
  if (err) perf__config_free(out);
  return err;
}

void perf__config_env_warn(const perf_sdk_config_t *in) {
  /* strict_env (or an unparseable PERF_SDK_STRICT_ENV): said as errors.
     The field only where the app's layout has it (read_layout says what
     is wrong with another). */
  size_t has = offsetof(perf_sdk_config_t, strict_env) + sizeof in->strict_env;
  bool strict = in->struct_size >= has && in->struct_size <= sizeof *in && in->strict_env;
  const char *v = getenv("PERF_SDK_STRICT_ENV");
  if (v && *v && perf__bool_parse(v, &strict) != 0) return;
  if (strict) return;
  bool disabled = false;
  if (env_disabled(false, false, &disabled) != PERF_OK || disabled) return;
  env_names(false, false);
}

void perf__config_free(perf__config_t *cfg) {
  free(cfg->app_name);
  free(cfg->app_version);
  free(cfg->environment);
  for (size_t i = 0; i < cfg->tag_count; i++) {
    free(cfg->tags[i].key);
    free(cfg->tags[i].value);
  }
  free(cfg->sink_path);
  free(cfg->data_dir);
  free(cfg->endpoint);
  free(cfg->api_key);
  free(cfg->ca_bundle);
  free(cfg->upload_helper);
  memset(cfg, 0, sizeof *cfg);
}

static unsigned *uint_at(perf_sdk_config_t *c, size_t offset) {
  return (unsigned *)((char *)c + offset);
}

static const char **text_at(perf_sdk_config_t *c, size_t offset) {
  return (const char **)((char *)c + offset);
}

/* "hang_threshold_ms" -> "PERF_SDK_HANG_THRESHOLD_MS" */
static void env_name(const char *field, char *buf, size_t len) {
  size_t n = (size_t)snprintf(buf, len, "PERF_SDK_%s", field);
  for (size_t i = 0; i < n && i < len; i++)
    buf[i] = (char)toupper((unsigned char)buf[i]);
}

/* PERF_SDK_STRICT_ENV first (it says how to treat the rest), then
   PERF_SDK_DISABLED (a disabled SDK checks nothing else), then the rest. */
static int apply_env(perf_sdk_config_t *c, char *tag_buf, size_t tag_buf_len, bool *disabled,
                     bool quiet) {
  char name[64];
  const char *v;
  int err = env_strict(c);
  if (!err) err = env_disabled(c->strict_env, quiet, disabled);
  if (err || *disabled) return err;
  for (size_t i = 0; i < LIMIT_COUNT && !err; i++)
    err = env_limit(c, &k_limits[i]);
  if (!err) err = env_names(c->strict_env, quiet);
  if (err) return err;
  for (size_t i = 0; i < TEXT_COUNT; i++) {
    env_name(k_texts[i].name, name, sizeof name);
    if ((v = getenv(name)) == NULL) continue;
    if ((err = check_wire_text(&k_texts[i], name, v)) != 0) return err;
    *text_at(c, k_texts[i].offset) = v;
  }
  if ((v = getenv("PERF_SDK_SINK")) != NULL && *v) {
    if (strcmp(v, "none") == 0)
      c->sink = PERF_SINK_NONE;
    else if (strcmp(v, "file") == 0)
      c->sink = PERF_SINK_FILE;
    else if (strcmp(v, "http") == 0)
      c->sink = PERF_SINK_HTTP;
    else
      PERF__FAIL(PERF_E_INVALID_CONFIG, "PERF_SDK_SINK=%s: sink must be none, file or http", v);
  }
  if ((v = getenv("PERF_SDK_TAGS")) != NULL && *v)
    return parse_env_tags(c, tag_buf, tag_buf_len, v);
  return PERF_OK;
}

static const limit_t *limit_named(const char *field) {
  for (size_t i = 0; i < LIMIT_COUNT; i++)
    if (strcmp(k_limits[i].name, field) == 0) return &k_limits[i];
  return NULL;
}

static int env_strict(perf_sdk_config_t *c) {
  return env_limit(c, limit_named("strict_env"));
}

/* PERF_SDK_DISABLED: a boolean; another value is an error (strict) or
   logged, and the SDK stays on. */
static int env_disabled(bool strict, bool quiet, bool *disabled) {
  const char *v = getenv("PERF_SDK_DISABLED");
  if (!v || !*v) return PERF_OK;
  if (perf__bool_parse(v, disabled) == 0) return PERF_OK;
  if (strict)
    PERF__FAIL(
        PERF_E_INVALID_CONFIG,
        "PERF_SDK_DISABLED=%s: not a boolean (" PERF__BOOL_SPELLINGS "); strict_env refuses it", v);
  if (!quiet)
    perf__log(PERF__LOG_ERROR,
              "PERF_SDK_DISABLED=%s: not a boolean (" PERF__BOOL_SPELLINGS
              "); ignored: the SDK stays on",
              v);
  return PERF_OK;
}

/* PERF_SDK_<FIELD> of one numeric or boolean field. */
static int env_limit(perf_sdk_config_t *c, const limit_t *f) {
  char name[64];
  env_name(f->name, name, sizeof name);
  const char *v = getenv(name);
  if (!v || !*v) return PERF_OK;
  bool b;
  if (f->boolean && perf__bool_parse(v, &b) == 0) {
    *uint_at(c, f->offset) = b;
    return PERF_OK;
  }
  if (f->boolean)
    PERF__FAIL(PERF_E_INVALID_CONFIG, "%s=%s: %s must be a boolean (" PERF__BOOL_SPELLINGS ")",
               name, v, f->name);
  char *end;
  errno = 0;
  unsigned long n = strtoul(v, &end, 10);
  if (errno || *end || v[0] == '-' || n < f->min || n > f->max)
    PERF__FAIL(PERF_E_INVALID_CONFIG, "%s=%s: %s must be an integer in %u..%u", name, v, f->name,
               f->min, f->max);
  *uint_at(c, f->offset) = (unsigned)n;
  return PERF_OK;
}

/* The fields' variables known to config_env.c's check. */
static int env_names(bool strict, bool quiet) {
  char names[LIMIT_COUNT + TEXT_COUNT][64];
  const char *known[LIMIT_COUNT + TEXT_COUNT];
  for (size_t i = 0; i < LIMIT_COUNT; i++)
    env_name(k_limits[i].name, names[i], sizeof names[i]);
  for (size_t i = 0; i < TEXT_COUNT; i++)
    env_name(k_texts[i].name, names[LIMIT_COUNT + i], sizeof names[0]);
  for (size_t i = 0; i < LIMIT_COUNT + TEXT_COUNT; i++)
    known[i] = names[i];
  return perf__config_env_names_check(known, LIMIT_COUNT + TEXT_COUNT, strict, quiet);
}

/* PERF_SDK_TAGS="k1=v1,k2=v2" replaces the tags given in code. */
static int parse_env_tags(perf_sdk_config_t *c, char *buf, size_t len, const char *value) {
  if (strlen(value) >= len)
    PERF__FAIL(PERF_E_INVALID_CONFIG, "PERF_SDK_TAGS is too long (at most %d tags of %d bytes)",
               PERF_MAX_TAGS, PERF_MAX_TAG_BYTES);
  strcpy(buf, value);
  memset(c->tags, 0, sizeof c->tags);
  size_t n = 0;
  for (char *save = NULL, *item = strtok_r(buf, ",", &save); item;
       item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    if (!eq || eq == item || n == PERF_MAX_TAGS)
      PERF__FAIL(PERF_E_INVALID_CONFIG,
                 "PERF_SDK_TAGS: '%s' is not key=value, or more than %d tags", item, PERF_MAX_TAGS);
    *eq = '\0';
    c->tags[n].key = item;
    c->tags[n].value = eq + 1;
    n++;
  }
  return PERF_OK;
}

static int validate(perf_sdk_config_t *c) {
  for (size_t i = 0; i < LIMIT_COUNT; i++) {
    const limit_t *f = &k_limits[i];
    unsigned v = *uint_at(c, f->offset);
    if (v < f->min || v > f->max)
      PERF__FAIL(PERF_E_INVALID_CONFIG, "%s = %u: must be %u..%u", f->name, v, f->min, f->max);
  }
  for (size_t i = 0; i < TEXT_COUNT; i++) {
    const char *v = *text_at(c, k_texts[i].offset);
    if (v && strlen(v) > k_texts[i].max_bytes)
      PERF__FAIL(PERF_E_INVALID_CONFIG, "%s is %zu bytes long: at most %zu", k_texts[i].name,
                 strlen(v), k_texts[i].max_bytes);
    int err = check_wire_text(&k_texts[i], k_texts[i].name, v);
    if (err) return err;
  }
  if (c->sink != PERF_SINK_NONE && c->sink != PERF_SINK_FILE && c->sink != PERF_SINK_HTTP)
    PERF__FAIL(PERF_E_INVALID_CONFIG,
               "sink = %d: must be PERF_SINK_NONE, PERF_SINK_FILE or "
               "PERF_SINK_HTTP",
               (int)c->sink);
  if (c->sink == PERF_SINK_FILE && (!c->sink_path || !*c->sink_path))
    PERF__FAIL(PERF_E_INVALID_CONFIG, "sink_path is required with sink = file");
  if (c->sink == PERF_SINK_HTTP && (!c->endpoint || !*c->endpoint))
    PERF__FAIL(PERF_E_INVALID_CONFIG, "endpoint is required with sink = http");
  if (c->backoff_cap_ms < c->backoff_base_ms)
    PERF__FAIL(PERF_E_INVALID_CONFIG, "backoff_cap_ms = %u: must be at least backoff_base_ms (%u)",
               c->backoff_cap_ms, c->backoff_base_ms);
  if (c->hang_sample_interval_ms > c->hang_threshold_ms * 10u)
    PERF__FAIL(PERF_E_INVALID_CONFIG,
               "hang_sample_interval_ms = %u: must be at most 10 x hang_threshold_ms (%u)",
               c->hang_sample_interval_ms, c->hang_threshold_ms * 10u);
  for (size_t i = 0; i < PERF_MAX_TAGS && c->tags[i].key; i++) {
    const char *k = c->tags[i].key, *v = c->tags[i].value ? c->tags[i].value : "";
    if (!*k || strlen(k) > PERF_MAX_TAG_BYTES || strlen(v) > PERF_MAX_TAG_BYTES)
      PERF__FAIL(PERF_E_INVALID_CONFIG,
                 "tags[%zu]: key must be 1..%d bytes and value at most %d bytes", i,
                 PERF_MAX_TAG_BYTES, PERF_MAX_TAG_BYTES);
    /* The collector's filter is tag=key:value split at the first colon:
       a key holding one could never be matched by it. */
    if (strchr(k, ':'))
      PERF__FAIL(PERF_E_INVALID_CONFIG,
                 "tags[%zu] (key \"%s\"): a tag key may not contain ':' (the collector's "
                 "tag=key:value filter splits at the first colon; the value may hold colons)",
                 i, k);
  }
  return PERF_OK;
}

static int copy_config(const perf_sdk_config_t *c, perf__config_t *out) {
  int err = PERF_OK;
  char exe[PATH_MAX];
  const char *app = c->app_name;
  if (!app || !*app) { /* default: the executable's name */
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    const char *slash = strrchr(exe, '/');
    app = slash ? slash + 1 : (n > 0 ? exe : "app");
  }
  out->app_name = dup_or_null(app, &err);
  out->app_version =
      dup_or_null(c->app_version && *c->app_version ? c->app_version : "unknown", &err);
  out->environment =
      dup_or_null(c->environment && *c->environment ? c->environment : "production", &err);
  for (size_t i = 0; i < PERF_MAX_TAGS && c->tags[i].key; i++) {
    out->tags[i].key = dup_or_null(c->tags[i].key, &err);
    out->tags[i].value = dup_or_null(c->tags[i].value ? c->tags[i].value : "", &err);
    out->tag_count = i + 1;
  }
  out->sink = c->sink;
  out->sink_path = dup_or_null(c->sink_path, &err);
  /* NULL data_dir: the default location; "" (from the environment): none. */
  if (c->data_dir)
    out->data_dir = *c->data_dir ? dup_or_null(c->data_dir, &err) : NULL;
  else if (!err)
    out->data_dir = default_data_dir(out->app_name);
  out->endpoint = dup_or_null(c->endpoint, &err);
  out->api_key = dup_or_null(c->api_key, &err);
  out->hang_threshold_ms = c->hang_threshold_ms;
  out->hang_sample_interval_ms = c->hang_sample_interval_ms;
  out->hang_max_samples = c->hang_max_samples;
  out->cpu_threshold_percent = c->cpu_threshold_percent;
  out->cpu_window_ms = c->cpu_window_ms;
  out->cpu_sample_hz = c->cpu_sample_hz;
  out->cpu_burst_ms = c->cpu_burst_ms;
  out->cpu_top_threads = c->cpu_top_threads;
  out->cpu_cooldown_ms = c->cpu_cooldown_ms;
  out->cpu_profile_hz = c->cpu_profile_hz;
  out->cpu_profile_budget_permille = c->cpu_profile_budget_permille;
  out->max_events_per_hour = c->max_events_per_hour;
  out->queue_capacity = c->queue_capacity;
  out->batch_max_bytes = c->batch_max_bytes;
  out->batch_max_delay_ms = c->batch_max_delay_ms;
  out->zstd_level = c->zstd_level;
  out->symbolize = c->symbolize;
  out->spool_max_bytes = c->spool_max_bytes;
  out->spool_max_files = c->spool_max_files;
  out->spool_max_age_s = c->spool_max_age_s;
  out->connect_timeout_ms = c->connect_timeout_ms;
  out->request_timeout_ms = c->request_timeout_ms;
  out->backoff_base_ms = c->backoff_base_ms;
  out->backoff_cap_ms = c->backoff_cap_ms;
  out->max_server_errors = c->max_server_errors;
  out->exit_timeout_ms = c->exit_timeout_ms;
  out->tls_verify = c->tls_verify;
  out->upload_stall_warn_s = c->upload_stall_warn_s;
  out->ca_bundle = dup_or_null(c->ca_bundle, &err);
  out->upload_helper = dup_or_null(c->upload_helper, &err);
  out->log_fn = c->log_fn;
  out->log_user = c->log_user;
  return err;
}

static char *dup_or_null(const char *s, int *err) {
  if (!s) return NULL;
  char *d = strdup(s);
  if (!d) *err = PERF_E_NO_MEMORY;
  return d;
}

/* $XDG_STATE_HOME/perf-sdk/<app>, else $HOME/.local/state/perf-sdk/<app>;
   NULL when neither variable is set (no fatal-hang reports then). */
static char *default_data_dir(const char *app_name) {
  const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
  char buf[MAX_PATH_BYTES];
  if (xdg && *xdg)
    snprintf(buf, sizeof buf, "%s/perf-sdk/%s", xdg, app_name);
  else if (home && *home)
    snprintf(buf, sizeof buf, "%s/.local/state/perf-sdk/%s", home, app_name);
  else
    return NULL;
  return strdup(buf);
}

/* A value the uploader puts in an HTTP header (api_key) or the request
   URL (endpoint) must be visible ASCII: a CR or LF would end the header
   line and start one of the value's choosing, a space or a control
   character would break the request line. source names where the value
   came from (the field, or its PERF_SDK_* variable); the value itself is
   not logged (a key is a secret). */
static int check_wire_text(const text_field_t *f, const char *source, const char *v) {
  if (!f->on_the_wire || !v) return PERF_OK;
  for (size_t i = 0; v[i]; i++) {
    unsigned char b = (unsigned char)v[i];
    if (b < 0x21 || b > 0x7e)
      PERF__FAIL(PERF_E_INVALID_CONFIG,
                 "%s: byte %zu is 0x%02x: %s is sent in HTTP and may hold only visible ASCII "
                 "(no spaces, CR, LF or other control characters)",
                 source, i, b, f->name);
  }
  return PERF_OK;
}
