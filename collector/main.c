/*
 * main.c - perf-collector's entry point: the command line (getopt_long;
 * bad usage exits 2), the API keys, the store, the symbolizer and its
 * background thread, the HTTP server and the retention thread; then the main thread waits in
 * sigwait for SIGINT or SIGTERM and stops everything in reverse order (exit 0).
 *
 * Threads: main (this file), MHD's listening and worker threads
 * (server.c), the retention thread (retention.c), the resymbolizer's
 * thread (resymbolize.c). SIGINT, SIGTERM and
 * SIGPIPE are blocked before any thread starts, so only sigwait sees them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "collector/base/dir.h"
#include "collector/base/log.h"
#include "collector/http/apikeys.h"
#include "collector/http/options.h"
#include "collector/http/server.h"
#include "collector/store/retention.h"
#include "collector/store/store.h"
#include "collector/symbols/resymbolize.h"
#include "collector/symbols/symbolize.h"
#include <curl/curl.h>

#define EXIT_USAGE 2
#define SYMBOLS_CACHE_FILES 64 /* debug files kept open by the symbolizer */

static const char USAGE[] =
    "usage: perf-collector [options]\n"
    "Receives perf SDK batches (POST /v1/batches) and stores them in SQLite or PostgreSQL.\n"
    "  --listen HOST:PORT            IPv4 address or host name (its first IPv4 address)\n"
    "                                and port (default 127.0.0.1:4318)\n"
    "  --db PATH|URI                 SQLite database (default perf-collector.db), or a\n"
    "                                postgresql://user@host/dbname URI: PostgreSQL\n"
    "  --durability full|process     what a stored batch (200) survives: full (default): a\n"
    "                                power loss or OS crash too, one fsync per batch;\n"
    "                                process: the collector's death (kill -9), not the\n"
    "                                machine's (SQLite synchronous=FULL / NORMAL, WAL)\n"
    "  --api-keys-file PATH          accepted keys, one per line: KEY [SCOPE[,SCOPE...]],\n"
    "                                scopes ingest, read, symbols, admin (none: all); without\n"
    "                                it any key is accepted, only on a loopback address, and\n"
    "                                only for this collector's Host and Origin\n"
    "  --open-metrics                GET /metrics without a key (else: a read key)\n"
    "  --symbols-dir DIR             debug files by build-id, DIR/.build-id/xx/rest.debug\n"
    "                                (default: the db path + \".symbols\"); DEBUGINFOD_URLS\n"
    "                                set: missing ones are fetched from debuginfod\n"
    "  --max-symbols-bytes N         POST /v1/symbols body limit, 413 above (default 268435456)\n"
    "  --max-symbols-dir-bytes N     the symbols directory's quota, 507 above (default\n"
    "                                10737418240)\n"
    "  --retention-days N            delete data older than N days (default 30)\n"
    "  --retention-interval SECONDS  how often the retention job runs (default 3600)\n"
    "  --rollup-fold-interval SECONDS\n"
    "                                how often this collector folds the rollup rows\n"
    "                                batches appended into the rollups (default 1)\n"
    "  --max-read-rows N             rows one read of the API sums at most (rollups, events,\n"
    "                                batches); past it the answer says truncated (default\n"
    "                                100000)\n"
    "  --max-body-bytes N            compressed body limit, 413 above (default 4194304)\n"
    "  --max-decompressed-bytes N    decompressed batch limit, 413 above (default 16777216)\n"
    "  --rate-limit N                batches per second per API key, 0: off (default 10)\n"
    "  --rate-burst N                bucket size of the rate limit (default 2 x rate, >= 1)\n"
    "  --connection-timeout SECONDS  idle connections are closed (default 30)\n"
    "  --request-timeout SECONDS     a request's headers and body must arrive, and its answer\n"
    "                                be sent, within this (default 60); else it is closed\n"
    "  --threads N                   HTTP worker threads (default 4)\n"
    "  --max-connections N           concurrent connections (default 1024)\n"
    "  --max-connections-per-ip N    concurrent connections from one address (default 32)\n"
    "What one API key may create per window (429 + Retry-After above; 0: no bound):\n"
    "  --max-new-stacks N            stacks not stored before (default 20000)\n"
    "  --max-new-labels N            event labels and loop names not seen before\n"
    "                                (default 2000)\n"
    "  --max-new-versions N          app versions not seen before (default 200)\n"
    "  --max-new-tags N              resource tags (key=value) not seen before (default 2000)\n"
    "  --new-window SECONDS          the window, from a key's first new value (default 3600;\n"
    "                                0: no bounds)\n"
    "In-app frames (the app's own, which head a stack in the API and dashboard; repeatable):\n"
    "  --in-app-include RULE         frames of these modules are in-app: a path prefix\n"
    "                                (/opt/shop) or a file name glob (libshop*.so*); wins\n"
    "                                over every other rule\n"
    "  --in-app-exclude RULE         frames of these modules are not in-app (the same forms)\n"
    "                                Default: the executable and libraries outside /lib,\n"
    "                                /lib32, /lib64, /libx32, /usr/lib, /usr/lib32,\n"
    "                                /usr/lib64, /usr/libx32, except libperfsdk* and [vdso]\n"
    "Alerts (rules: POST /api/v1/alerts/rules with an admin key; docs/api.md \"Alerts\"):\n"
    "  --public-url URL              the dashboard's address as users reach it, for the\n"
    "                                alerts' links (default: none, no links)\n"
    "  --alert-allow HOST            a host a webhook URL may name (repeatable, at most 16;\n"
    "                                default: none, so no rule can be made)\n"
    "  --alert-rate N                alerts one rule sends a minute; past it they are stored\n"
    "                                as suppressed, not sent (default 10)\n"
    "  --alert-timeout SECONDS       one webhook POST's whole time (default 5)\n"
    "  --alert-retries N             POSTs after the first on a 5xx, 429 or no answer\n"
    "                                (default 3)\n"
    "  --alert-backoff-ms MS         the first retry's wait, doubled at each (default 1000)\n"
    "Limits of one batch (413 naming the limit above, unless it says cut):\n"
    "  --max-batch-strings N         string table entries (default 65536)\n"
    "  --max-batch-modules N         modules (default 4096)\n"
    "  --max-batch-functions N       functions (default 65536)\n"
    "  --max-batch-frames N          frames table entries (default 65536)\n"
    "  --max-batch-stacks N          stacks (default 16384)\n"
    "  --max-batch-events N          events (default 4096)\n"
    "  --max-event-samples N         samples, stack counts, threads per event (default 20000)\n"
    "  --max-stack-frames N          frames per stack; deeper stacks are cut, their root end\n"
    "                                replaced by a <truncated> frame (default 512)\n"
    "  --max-string-bytes N          longer strings are cut, ending in <truncated> (default 4096)\n"
    "  --max-decoded-bytes N         memory of the unpacked protobuf, estimated before\n"
    "                                unpacking (default 67108864)\n"
    "  --max-stack-text-bytes N      the stacks as stored text, estimated before building\n"
    "                                them (default 33554432)\n"
    "  --help                        this text\n"
    "  --version                     the version\n";

enum long_only {
  OPT_LISTEN = 256,
  OPT_DB,
  OPT_DURABILITY,
  OPT_KEYS,
  OPT_SYMBOLS,
  OPT_RETENTION_DAYS,
  OPT_RETENTION_INTERVAL,
  OPT_FOLD_INTERVAL,
  OPT_MAX_READ_ROWS,
  OPT_MAX_BODY,
  OPT_MAX_DECOMPRESSED,
  OPT_RATE_LIMIT,
  OPT_RATE_BURST,
  OPT_TIMEOUT,
  OPT_THREADS,
  OPT_MAX_CONNECTIONS,
  OPT_MAX_SYMBOLS,
  OPT_MAX_SYMBOLS_DIR,
  OPT_REQUEST_TIMEOUT,
  OPT_MAX_PER_IP,
  OPT_OPEN_METRICS,
  OPT_IN_APP_INCLUDE,
  OPT_IN_APP_EXCLUDE,
  OPT_NEW_WINDOW,
  OPT_PUBLIC_URL,
  OPT_ALERT_ALLOW,
  OPT_ALERT_RATE,
  OPT_ALERT_TIMEOUT,
  OPT_ALERT_RETRIES,
  OPT_ALERT_BACKOFF,
  OPT_MAX_NEW_FIRST, /* --max-new-<noun>: OPT_MAX_NEW_FIRST + key_bound_kind */
  OPT_HELP = OPT_MAX_NEW_FIRST + KEY_BOUND_COUNT,
  OPT_VERSION,
  OPT_LIMIT_FIRST, /* the batch limits: LIMIT_OPTIONS[i] is OPT_LIMIT_FIRST + i */
};

/* The batch limits' flags, their fields and ranges (batch_limits.h). */
static const struct {
  const char *name;
  size_t offset;
  unsigned long long min, max;
} LIMIT_OPTIONS[] = {
    {"max-batch-strings", offsetof(batch_limits_t, strings), 1, 1u << 24},
    {"max-batch-modules", offsetof(batch_limits_t, modules), 1, 1u << 24},
    {"max-batch-functions", offsetof(batch_limits_t, functions), 1, 1u << 24},
    {"max-batch-frames", offsetof(batch_limits_t, frames), 1, 1u << 24},
    {"max-batch-stacks", offsetof(batch_limits_t, stacks), 1, 1u << 24},
    {"max-batch-events", offsetof(batch_limits_t, events), 1, 1u << 24},
    {"max-event-samples", offsetof(batch_limits_t, event_samples), 1, 1u << 24},
    {"max-stack-frames", offsetof(batch_limits_t, stack_frames), 2, 1u << 20},
    {"max-string-bytes", offsetof(batch_limits_t, string_bytes), 64, 1u << 24},
    {"max-decoded-bytes", offsetof(batch_limits_t, decoded_bytes), 1u << 20, 1ull << 34},
    {"max-stack-text-bytes", offsetof(batch_limits_t, text_bytes), 1u << 20, 1ull << 34},
};
#define N_LIMIT_OPTIONS (sizeof LIMIT_OPTIONS / sizeof LIMIT_OPTIONS[0])

static struct option LONGOPTS[N_LIMIT_OPTIONS + 48] = {
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"db", required_argument, NULL, OPT_DB},
    {"durability", required_argument, NULL, OPT_DURABILITY},
    {"api-keys-file", required_argument, NULL, OPT_KEYS},
    {"symbols-dir", required_argument, NULL, OPT_SYMBOLS},
    {"retention-days", required_argument, NULL, OPT_RETENTION_DAYS},
    {"retention-interval", required_argument, NULL, OPT_RETENTION_INTERVAL},
    {"rollup-fold-interval", required_argument, NULL, OPT_FOLD_INTERVAL},
    {"max-read-rows", required_argument, NULL, OPT_MAX_READ_ROWS},
    {"max-body-bytes", required_argument, NULL, OPT_MAX_BODY},
    {"max-decompressed-bytes", required_argument, NULL, OPT_MAX_DECOMPRESSED},
    {"rate-limit", required_argument, NULL, OPT_RATE_LIMIT},
    {"rate-burst", required_argument, NULL, OPT_RATE_BURST},
    {"connection-timeout", required_argument, NULL, OPT_TIMEOUT},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
    {"max-symbols-bytes", required_argument, NULL, OPT_MAX_SYMBOLS},
    {"max-symbols-dir-bytes", required_argument, NULL, OPT_MAX_SYMBOLS_DIR},
    {"request-timeout", required_argument, NULL, OPT_REQUEST_TIMEOUT},
    {"max-connections-per-ip", required_argument, NULL, OPT_MAX_PER_IP},
    {"open-metrics", no_argument, NULL, OPT_OPEN_METRICS},
    {"in-app-include", required_argument, NULL, OPT_IN_APP_INCLUDE},
    {"public-url", required_argument, NULL, OPT_PUBLIC_URL},
    {"alert-allow", required_argument, NULL, OPT_ALERT_ALLOW},
    {"alert-rate", required_argument, NULL, OPT_ALERT_RATE},
    {"alert-timeout", required_argument, NULL, OPT_ALERT_TIMEOUT},
    {"alert-retries", required_argument, NULL, OPT_ALERT_RETRIES},
    {"alert-backoff-ms", required_argument, NULL, OPT_ALERT_BACKOFF},
    {"in-app-exclude", required_argument, NULL, OPT_IN_APP_EXCLUDE},
    {"new-window", required_argument, NULL, OPT_NEW_WINDOW},
    {"max-new-stacks", required_argument, NULL, OPT_MAX_NEW_FIRST + KEY_BOUND_STACKS},
    {"max-new-labels", required_argument, NULL, OPT_MAX_NEW_FIRST + KEY_BOUND_LABELS},
    {"max-new-versions", required_argument, NULL, OPT_MAX_NEW_FIRST + KEY_BOUND_VERSIONS},
    {"max-new-tags", required_argument, NULL, OPT_MAX_NEW_FIRST + KEY_BOUND_TAGS},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
};

/* LONGOPTS' tail: the limits' flags after the fixed ones. */
static void add_limit_options(void) {
  size_t n = 0;
  while (LONGOPTS[n].name)
    n++;
  for (size_t i = 0; i < N_LIMIT_OPTIONS; i++)
    LONGOPTS[n + i] =
        (struct option){LIMIT_OPTIONS[i].name, required_argument, NULL, OPT_LIMIT_FIRST + (int)i};
}

static int usage_error(const char *fmt, const char *what) {
  fprintf(stderr, "perf-collector: ");
  fprintf(stderr, fmt, what);
  fprintf(stderr, "\ntry 'perf-collector --help'\n");
  return EXIT_USAGE;
}

/* A decimal integer in [min, max]; false otherwise. */
static bool parse_ulong(const char *text, unsigned long long min, unsigned long long max,
                        unsigned long long *out) {
  char *end;
  errno = 0;
  if (!*text || *text == '-') return false;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno || *end || v < min || v > max) return false;
  *out = v;
  return true;
}

/* --listen HOST:PORT: an IPv4 address, or a host name resolved to its
   first IPv4 address (localhost: 127.0.0.1). False with *why said. */
static bool parse_listen(const char *text, collector_options_t *o, char *why, size_t size) {
  char host[256];
  const char *colon = strrchr(text, ':');
  unsigned long long port;
  if (!colon || colon == text || (size_t)(colon - text) >= sizeof host ||
      !parse_ulong(colon + 1, 1, 65535, &port)) {
    snprintf(why, size, "'%s' is not HOST:PORT (an IPv4 address or host name, a port 1-65535)",
             text);
    return false;
  }
  memcpy(host, text, (size_t)(colon - text));
  host[colon - text] = '\0';
  memset(&o->listen, 0, sizeof o->listen);
  o->listen.sin_family = AF_INET;
  o->listen.sin_port = htons((uint16_t)port);
  o->listen_text = text;
  if (inet_pton(AF_INET, host, &o->listen.sin_addr) == 1) return true;
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *found = NULL;
  int rc = getaddrinfo(host, NULL, &hints, &found);
  if (rc != 0 || !found) {
    snprintf(why, size, "host '%s' has no IPv4 address (%s)", host,
             rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    return false;
  }
  o->listen.sin_addr = ((const struct sockaddr_in *)found->ai_addr)->sin_addr;
  freeaddrinfo(found);
  return true;
}

static void set_defaults(collector_options_t *o) {
  memset(o, 0, sizeof *o);
  char why[256];
  parse_listen("127.0.0.1:4318", o, why, sizeof why);
  o->db_path = "perf-collector.db";
  o->durability = STORE_DURABLE_FULL;
  o->retention_days = 30;
  o->retention_interval_s = 3600;
  o->fold_interval_s = STORE_FOLD_INTERVAL_S;
  o->max_read_rows = STORE_READ_ROWS_MAX;
  o->max_body_bytes = 4u << 20;
  o->max_decompressed_bytes = 16u << 20;
  o->rate_limit = 10;
  o->rate_burst = -1; /* 2 x rate */
  o->connection_timeout_s = 30;
  o->request_timeout_s = 60;
  o->threads = 4;
  o->max_connections = 1024;
  o->max_connections_per_ip = 32;
  o->max_symbols_dir_bytes = 10ull << 30;
  o->max_symbols_bytes = 256u << 20;
  batch_limits_default(&o->limits);
  key_bounds_default(&o->key_bounds);
  alert_config_default(&o->alerts);
}

/* One numeric option into its field; false when out of range. */
static bool numeric_option(int opt, const char *arg, collector_options_t *o) {
  unsigned long long v;
  switch (opt) {
  case OPT_RETENTION_DAYS: return parse_ulong(arg, 1, 36500, &v) && (o->retention_days = v, 1);
  case OPT_RETENTION_INTERVAL:
    return parse_ulong(arg, 1, 86400 * 7, &v) && (o->retention_interval_s = v, 1);
  case OPT_FOLD_INTERVAL: return parse_ulong(arg, 1, 86400, &v) && (o->fold_interval_s = v, 1);
  case OPT_MAX_READ_ROWS: return parse_ulong(arg, 100, 1000000000, &v) && (o->max_read_rows = v, 1);
  case OPT_MAX_BODY: return parse_ulong(arg, 1024, 1ull << 30, &v) && (o->max_body_bytes = v, 1);
  case OPT_MAX_DECOMPRESSED:
    return parse_ulong(arg, 1024, 1ull << 30, &v) && (o->max_decompressed_bytes = v, 1);
  case OPT_RATE_LIMIT: return parse_ulong(arg, 0, 1000000, &v) && (o->rate_limit = (double)v, 1);
  case OPT_RATE_BURST: return parse_ulong(arg, 1, 1000000, &v) && (o->rate_burst = (double)v, 1);
  case OPT_TIMEOUT: return parse_ulong(arg, 1, 3600, &v) && (o->connection_timeout_s = v, 1);
  case OPT_THREADS: return parse_ulong(arg, 1, 256, &v) && (o->threads = v, 1);
  case OPT_MAX_CONNECTIONS: return parse_ulong(arg, 1, 65536, &v) && (o->max_connections = v, 1);
  case OPT_MAX_SYMBOLS:
    return parse_ulong(arg, 1024, 1ull << 34, &v) && (o->max_symbols_bytes = v, 1);
  case OPT_MAX_SYMBOLS_DIR:
    return parse_ulong(arg, 0, 1ull << 50, &v) && (o->max_symbols_dir_bytes = v, 1);
  case OPT_REQUEST_TIMEOUT: return parse_ulong(arg, 1, 86400, &v) && (o->request_timeout_s = v, 1);
  case OPT_MAX_PER_IP: return parse_ulong(arg, 1, 65536, &v) && (o->max_connections_per_ip = v, 1);
  case OPT_ALERT_RATE: return parse_ulong(arg, 1, 100000, &v) && (o->alerts.per_minute = v, 1);
  case OPT_ALERT_TIMEOUT: return parse_ulong(arg, 1, 300, &v) && (o->alerts.timeout_s = v, 1);
  case OPT_ALERT_RETRIES: return parse_ulong(arg, 0, 20, &v) && (o->alerts.retries = v, 1);
  case OPT_ALERT_BACKOFF: return parse_ulong(arg, 1, 600000, &v) && (o->alerts.backoff_ms = v, 1);
  case OPT_NEW_WINDOW:
    return parse_ulong(arg, 0, 86400 * 7, &v) && (o->key_bounds.window_s = (unsigned)v, 1);
  default: break;
  }
  if (opt >= OPT_MAX_NEW_FIRST && opt < OPT_MAX_NEW_FIRST + KEY_BOUND_COUNT)
    return parse_ulong(arg, 0, 1ull << 32, &v) &&
           (o->key_bounds.max_new[opt - OPT_MAX_NEW_FIRST] = v, 1);
  size_t i = (size_t)(opt - OPT_LIMIT_FIRST);
  if (opt < OPT_LIMIT_FIRST || i >= N_LIMIT_OPTIONS ||
      !parse_ulong(arg, LIMIT_OPTIONS[i].min, LIMIT_OPTIONS[i].max, &v))
    return false;
  *(size_t *)((char *)&o->limits + LIMIT_OPTIONS[i].offset) = (size_t)v;
  return true;
}

/* 0 to run, EXIT_SUCCESS + 1 after --help, EXIT_USAGE + 1 on bad usage. */
static int parse_args(int argc, char **argv, collector_options_t *o) {
  set_defaults(o);
  add_limit_options();
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":h", LONGOPTS, NULL)) != -1) {
    switch (c) {
    case 'h':
    case OPT_HELP: fputs(USAGE, stdout); return EXIT_SUCCESS + 1;
    case OPT_VERSION: puts("perf-collector " PERF_PROJECT_VERSION); return EXIT_SUCCESS + 1;
    case OPT_LISTEN: {
      char why[512];
      if (!parse_listen(optarg, o, why, sizeof why)) return usage_error("--listen: %s", why) + 1;
      break;
    }
    case OPT_DB: o->db_path = optarg; break;
    case OPT_DURABILITY:
      if (strcmp(optarg, "full") == 0)
        o->durability = STORE_DURABLE_FULL;
      else if (strcmp(optarg, "process") == 0)
        o->durability = STORE_DURABLE_PROCESS;
      else
        return usage_error("--durability: '%s' is not full or process", optarg) + 1;
      break;
    case OPT_KEYS: o->api_keys_file = optarg; break;
    case OPT_SYMBOLS: o->symbols_dir = optarg; break;
    case OPT_OPEN_METRICS: o->open_metrics = true; break;
    case OPT_PUBLIC_URL:
      if (strncmp(optarg, "http://", 7) != 0 && strncmp(optarg, "https://", 8) != 0)
        return usage_error("--public-url: '%s' is not an http:// or https:// URL", optarg) + 1;
      o->alerts.public_url = optarg;
      break;
    case OPT_ALERT_ALLOW:
      if (!*optarg || strchr(optarg, '/') || strchr(optarg, ':'))
        return usage_error("--alert-allow: '%s' is not a host name or IPv4 address", optarg) + 1;
      if (o->alerts.n_allow == ALERT_ALLOW_MAX)
        return usage_error("--alert-allow: more than %s hosts", STORE_STR(ALERT_ALLOW_MAX)) + 1;
      o->alerts.allow[o->alerts.n_allow++] = optarg;
      break;
    case OPT_IN_APP_INCLUDE:
    case OPT_IN_APP_EXCLUDE: {
      char why[200];
      bool include = c == OPT_IN_APP_INCLUDE;
      if (in_app_rule_add(&o->in_app, include, optarg, why, sizeof why) != 0)
        return usage_error(include ? "--in-app-include: %s" : "--in-app-exclude: %s", why) + 1;
      break;
    }
    case ':': return usage_error("%s needs a value", argv[optind - 1]) + 1;
    case '?': return usage_error("unknown option '%s'", argv[optind - 1]) + 1;
    default:
      if (!numeric_option(c, optarg, o))
        return usage_error("%s: value out of range or not a number", argv[optind - 2]) + 1;
    }
  }
  if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]) + 1;
  if (o->rate_burst < 0) o->rate_burst = o->rate_limit * 2 < 1 ? 1 : o->rate_limit * 2;
  const char *why = NULL;
  const store_backend_t *backend = store_backend_for(o->db_path, &why);
  if (!backend) return usage_error("--db: %s", why) + 1;
  if (!o->symbols_dir && backend->schemes) {
    o->symbols_dir = "perf-collector.symbols"; /* collectors on one database: share one */
  } else if (!o->symbols_dir) {
    static char dir[4096];
    if (snprintf(dir, sizeof dir, "%s.symbols", o->db_path) >= (int)sizeof dir)
      return usage_error("--db: '%s' is too long", o->db_path) + 1;
    o->symbols_dir = dir;
  }
  return 0;
}

/* Every connection is a descriptor: raise the soft limit towards what
   --max-connections needs (plus the database, symbol files, listening
   socket); when the hard limit is lower, fewer connections are accepted
   and that is said. */
#define FDS_BESIDE_CONNECTIONS 128

static void fit_descriptors(collector_options_t *o) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  rlim_t want = (rlim_t)o->max_connections + FDS_BESIDE_CONNECTIONS;
  if (rl.rlim_cur < want) {
    rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur >= want) return;
  unsigned fit = rl.rlim_cur > 2 * FDS_BESIDE_CONNECTIONS
                     ? (unsigned)(rl.rlim_cur - FDS_BESIDE_CONNECTIONS)
                     : 64;
  collector_log("--max-connections %u needs %llu descriptors, the limit is %llu: "
                "accepting %u connections\n",
                o->max_connections, (unsigned long long)want, (unsigned long long)rl.rlim_cur, fit);
  o->max_connections = fit;
}

static bool loopback(const collector_options_t *o) {
  return (ntohl(o->listen.sin_addr.s_addr) >> 24) == 127;
}

/* Load the keys, or accept open mode on loopback; EXIT_USAGE otherwise. */
static int setup_keys(const collector_options_t *o, apikeys_t *keys, const apikeys_t **active) {
  *active = NULL;
  if (o->api_keys_file) {
    if (apikeys_load(o->api_keys_file, keys) != 0) return EXIT_USAGE;
    *active = keys;
    return 0;
  }
  if (!loopback(o)) {
    fprintf(stderr,
            "perf-collector: --api-keys-file is required when listening on a "
            "non-loopback address (%s)\n",
            o->listen_text);
    return EXIT_USAGE;
  }
  collector_log("no --api-keys-file: accepting any API key (loopback only; "
                "only requests whose Host and Origin name this collector)\n");
  return 0;
}

static void wait_for_stop_signal(const sigset_t *set) {
  int sig = 0;
  while (sigwait(set, &sig) == 0 && sig != SIGINT && sig != SIGTERM) {
  }
  collector_log("%s, stopping", strsignal(sig));
}

/* The symbols directory made when missing (its parent existing); one that
   cannot be made stops the start, one this user may not write is said:
   uploads and debuginfod's downloads would fail, its files are read. */
#define SYMBOLS_DIR_MODE 0755

static bool prepare_symbols_dir(const char *dir) {
  char why[4200];
  enum collector_dir_result r =
      collector_dir_prepare(dir, "symbols directory", SYMBOLS_DIR_MODE, why, sizeof why);
  if (r == COLLECTOR_DIR_NOT_WRITABLE)
    collector_log("%s (debug files are read from it; POST /v1/symbols and debuginfod's "
                  "downloads fail)",
                  why);
  else if (r != COLLECTOR_DIR_READY)
    collector_log("%s", why);
  return r != COLLECTOR_DIR_MISSING;
}

/* Store, symbolizer, server and retention job until SIGINT/SIGTERM. */
static int serve(const collector_options_t *o, const apikeys_t *keys, const sigset_t *stop_set) {
  const char *why = NULL;
  const store_backend_t *backend = store_backend_for(o->db_path, &why);
  if (!backend) return EXIT_FAILURE; /* parse_options said why */
  const store_ops_t *ops = backend->ops;
  store_t *store = NULL;
  store_config_t config = {o->durability, o->fold_interval_s, o->max_read_rows};
  if (ops->open(o->db_path, &config, &store) != STORE_OK) return EXIT_FAILURE;
  if (!prepare_symbols_dir(o->symbols_dir)) {
    ops->close(store);
    return EXIT_FAILURE;
  }
  in_app_configure(&o->in_app); /* before any thread answers a request */
  symbolizer_t *symbols = symbolizer_new(o->symbols_dir, SYMBOLS_CACHE_FILES);
  resymbolizer_t *resym = symbols ? resymbolizer_start(symbols, ops, store) : NULL;
  server_t *srv = resym ? server_start(o, keys, ops, store, symbols, resym) : NULL;
  retention_t *ret =
      srv ? retention_start(ops, store, o->retention_days, o->retention_interval_s) : NULL;
  int rc = EXIT_FAILURE;
  if (ret) {
    char addr[INET_ADDRSTRLEN] = "?", resolved[INET_ADDRSTRLEN + 16] = "";
    inet_ntop(AF_INET, &o->listen.sin_addr, addr, sizeof addr);
    if (strncmp(o->listen_text, addr, strlen(addr)) != 0) /* a host name: its address too */
      snprintf(resolved, sizeof resolved, " (%s:%u)", addr, ntohs(o->listen.sin_port));
    collector_log("listening on %s%s, store %s (%s, durability %s), symbols %s", o->listen_text,
                  resolved, backend->schemes ? "(URI)" : o->db_path, ops->name,
                  o->durability == STORE_DURABLE_FULL ? "full" : "process", o->symbols_dir);
    wait_for_stop_signal(stop_set);
    rc = EXIT_SUCCESS;
  }
  retention_stop(ret);
  server_stop(srv);
  resymbolizer_stop(resym);
  symbolizer_free(symbols);
  ops->close(store);
  return rc;
}

int main(int argc, char **argv) {
  collector_options_t opts;
  int parsed = parse_args(argc, argv, &opts);
  if (parsed) return parsed - 1;
  sigset_t stop_set;
  sigemptyset(&stop_set);
  sigaddset(&stop_set, SIGINT);
  sigaddset(&stop_set, SIGTERM);
  sigaddset(&stop_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
  curl_global_init(CURL_GLOBAL_DEFAULT); /* before any thread: the alerts' webhooks */
  fit_descriptors(&opts);
  apikeys_t keys;
  const apikeys_t *active;
  int rc = setup_keys(&opts, &keys, &active);
  if (rc) return rc;
  rc = serve(&opts, active, &stop_set);
  if (active) apikeys_free(&keys);
  return rc;
}
