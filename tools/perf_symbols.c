/*
 * perf_symbols.c - perf-symbols: finds the ELF files of a build (the
 * directories and files given, walked without following symbolic links),
 * reads each one's GNU build-id (libelf, libdwelf) and uploads its debug
 * information to a perf-collector (POST /v1/symbols/<build-id>, a key with
 * the symbols scope), skipping the build-ids the collector has already
 * (GET /v1/symbols/<build-id>: 200) and the ones met before in this run.
 * Only executables and shared objects count: object files (.o), archives
 * and cores are passed over, as files that are not ELF are.
 *
 * What is uploaded is the file itself when it carries DWARF (.debug_info);
 * a stripped file is uploaded through its separate debug file when
 * --debug-dir is given (found as gdb finds it: <dir>/.build-id/xx/rest.debug,
 * then its .gnu_debuglink; /usr/lib/debug is searched too). Exit codes:
 * 0 every file with a build-id and debug information is on the collector,
 * 1 some file could not be read or uploaded (each one named on stderr),
 * 2 bad usage, 3 the collector refused the key (401/403) or did not answer:
 * nothing more is tried then. Single-threaded.
 */
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <gelf.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "sdk/base/hex.h"
#include "sdk/symbols/debug_file.h"
#include "sdk/symbols/dwarf_chain.h"
#include "tools/symbols_http.h"

#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define EXIT_REFUSED 3
#define BUILD_ID_MAX 40 /* bytes; the collector takes up to 80 hex digits */

static const char USAGE[] =
    "usage: perf-symbols --url URL [options] PATH...\n"
    "Uploads the debug information of the ELF files under each PATH (directories are\n"
    "walked, symbolic links not followed) to perf-collector, by GNU build-id, skipping\n"
    "the build-ids the collector has already.\n"
    "  --url URL         the collector, e.g. http://127.0.0.1:4318\n"
    "  --key KEY         an API key with the symbols scope (default: $PERF_SYMBOLS_KEY)\n"
    "  --debug-dir DIR   a stripped file is uploaded through its separate debug file,\n"
    "                    found under DIR/.build-id/xx/rest.debug or by its\n"
    "                    .gnu_debuglink (repeatable; /usr/lib/debug is searched too)\n"
    "  --replace         send every file, replacing a different one the collector has\n"
    "                    for its build-id (a wrong file uploaded before)\n"
    "  --dry-run         say what would be uploaded; send nothing (no --url needed)\n"
    "  --help            this text\n"
    "  --version         the version\n"
    "Exit: 0 done, 1 a file failed (named on stderr), 2 usage, 3 the collector refused\n"
    "the key or did not answer.\n";

typedef struct run_s {
  symbols_client_t *client; /* NULL: --dry-run */
  char *debug_dirs;         /* colon-separated, NULL: none given */
  char **seen_ids;          /* build-ids handled in this run, and their files */
  char **seen_paths;
  size_t n_seen;
  unsigned uploaded, present, duplicates, skipped, failed;
  bool refused; /* 401/403 or no answer: stop */
  bool replace; /* --replace: no lookup, POST ?replace=1 */
} run_t;

/* What one ELF file is: linked or not, its build-id, whether it carries DWARF. */
typedef struct elf_facts_s {
  bool linked; /* an executable or shared object (not a .o, not a core) */
  uint8_t id[BUILD_ID_MAX];
  size_t id_len; /* 0: no GNU build-id */
  char id_hex[2 * BUILD_ID_MAX + 1];
  bool has_dwarf;
} elf_facts_t;

static bool is_elf_file(const char *path) {
  unsigned char magic[4];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool elf = read(fd, magic, sizeof magic) == sizeof magic && memcmp(magic, ELFMAG, SELFMAG) == 0;
  close(fd);
  return elf;
}

static void read_facts(Elf *elf, elf_facts_t *f) {
  memset(f, 0, sizeof *f);
  GElf_Ehdr eh;
  f->linked = gelf_getehdr(elf, &eh) && (eh.e_type == ET_EXEC || eh.e_type == ET_DYN);
  const void *id;
  ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
  if (n > 0 && n <= BUILD_ID_MAX) {
    memcpy(f->id, id, (size_t)n);
    f->id_len = (size_t)n;
    perf__hex_encode(f->id, f->id_len, f->id_hex);
  }
  f->has_dwarf = perf__sym_elf_has_dwarf(elf);
}

/* The file at path's build-id and DWARF; for a stripped one, its separate
   debug file into debug_path (when --debug-dir was given and one is
   found). false (with a message) when the file cannot be read as ELF. */
static bool inspect(const run_t *run, const char *path, elf_facts_t *f, char *debug_path,
                    size_t cap) {
  debug_path[0] = '\0';
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
  if (!elf || elf_kind(elf) != ELF_K_ELF) {
    fprintf(stderr, "perf-symbols: %s: not a readable ELF file: %s\n", path,
            fd < 0 ? strerror(errno) : elf_errmsg(-1));
    if (elf) elf_end(elf);
    if (fd >= 0) close(fd);
    return false;
  }
  read_facts(elf, f);
  if (f->linked && !f->has_dwarf && f->id_len && run->debug_dirs &&
      perf__sym_find_debug_file(path, elf, f->id, f->id_len, run->debug_dirs, debug_path, cap,
                                NULL)) {
    int dfd = open(debug_path, O_RDONLY | O_CLOEXEC);
    Elf *debug = dfd >= 0 ? elf_begin(dfd, ELF_C_READ, NULL) : NULL;
    if (!debug || !perf__sym_elf_has_dwarf(debug)) debug_path[0] = '\0';
    if (debug) elf_end(debug);
    if (dfd >= 0) close(dfd);
  }
  elf_end(elf);
  close(fd);
  return true;
}

/* The file that handled this build-id before in this run, or NULL (then
   the id is recorded for path). */
static const char *seen_before(run_t *run, const char *id_hex, const char *path) {
  for (size_t i = 0; i < run->n_seen; i++)
    if (strcmp(run->seen_ids[i], id_hex) == 0) return run->seen_paths[i];
  char **ids = realloc(run->seen_ids, (run->n_seen + 1) * sizeof *ids);
  if (ids) run->seen_ids = ids;
  char **paths = realloc(run->seen_paths, (run->n_seen + 1) * sizeof *paths);
  if (paths) run->seen_paths = paths;
  if (ids && paths && (ids[run->n_seen] = strdup(id_hex))) {
    if ((paths[run->n_seen] = strdup(path)))
      run->n_seen++;
    else
      free(ids[run->n_seen]);
  }
  return NULL;
}

/* A status that says the key (or the collector) will refuse everything. */
static bool refusal(run_t *run, long status, const char *path, const char *id, const char *reply) {
  if (status != 0 && status != 401 && status != 403) return false;
  if (status == 0)
    fprintf(stderr, "perf-symbols: %s (build-id %s): no answer from the collector: %s\n", path, id,
            reply);
  else
    fprintf(stderr, "perf-symbols: %s (build-id %s): the collector refused the key: %ld %s\n", path,
            id, status, reply);
  run->refused = true;
  return true;
}

/* Ask, then upload when the collector has no file for the id. */
static void send_debug_info(run_t *run, const char *path, const char *id, const char *upload) {
  char reply[SYMBOLS_REPLY_MAX];
  long status = run->replace ? 404 : symbols_client_lookup(run->client, id, reply);
  if (refusal(run, status, path, id, reply)) return;
  if (status == 200) {
    printf("present  %s (build-id %s): the collector has it\n", path, id);
    run->present++;
    return;
  }
  if (status != 404) {
    fprintf(stderr, "perf-symbols: %s (build-id %s): GET /v1/symbols answered %ld: %s\n", path, id,
            status, reply);
    run->failed++;
    return;
  }
  status = symbols_client_upload(run->client, id, upload, run->replace, reply);
  if (refusal(run, status, path, id, reply)) return;
  if (status == 200 || status == 201) {
    printf("uploaded %s (build-id %s%s%s): %s\n", path, id, upload != path ? ", from " : "",
           upload != path ? upload : "", reply);
    run->uploaded++;
    return;
  }
  fprintf(stderr, "perf-symbols: %s (build-id %s): upload of %s answered %ld: %s\n", path, id,
          upload, status, reply);
  run->failed++;
}

/* One regular file met by the walk, or named on the command line (named:
   a file given that is not ELF, an object file or a core is said and,
   not being ELF, fails the run; in a directory they are passed over
   silently, as a build directory holds many). */
static void handle_file(run_t *run, const char *path, bool named) {
  if (!is_elf_file(path)) {
    if (!named) return;
    fprintf(stderr,
            "perf-symbols: %s: not an ELF file (give executables, shared objects or their "
            "directories)\n",
            path);
    run->failed++;
    return;
  }
  elf_facts_t f;
  char debug_path[PATH_MAX];
  if (!inspect(run, path, &f, debug_path, sizeof debug_path)) {
    run->failed++;
    return;
  }
  if (!f.linked) { /* object files and cores: never a running module */
    if (named) printf("skipped  %s: not an executable or shared object\n", path);
    run->skipped += named;
    return;
  }
  if (!f.id_len) {
    printf("skipped  %s: no GNU build-id (link with -Wl,--build-id)\n", path);
    run->skipped++;
    return;
  }
  const char *upload = f.has_dwarf ? path : debug_path[0] ? debug_path : NULL;
  if (!upload) {
    printf("skipped  %s (build-id %s): no debug information%s\n", path, f.id_hex,
           run->debug_dirs ? " and no separate debug file found"
                           : " (--debug-dir finds separate ones)");
    run->skipped++;
    return;
  }
  const char *first = seen_before(run, f.id_hex, path);
  if (first) {
    printf("same     %s (build-id %s): as %s\n", path, f.id_hex, first);
    run->duplicates++;
    return;
  }
  if (!run->client) {
    printf("would    %s (build-id %s): upload %s\n", path, f.id_hex, upload);
    return;
  }
  send_debug_info(run, path, f.id_hex, upload);
}

static int by_name(const FTSENT **a, const FTSENT **b) {
  return strcmp((*a)->fts_name, (*b)->fts_name);
}

/* Every regular file under the paths, in name order. */
static void walk(run_t *run, char *const *paths) {
  FTS *fts = fts_open(paths, FTS_PHYSICAL | FTS_NOCHDIR, by_name);
  if (!fts) {
    fprintf(stderr, "perf-symbols: %s\n", strerror(errno));
    run->failed++;
    return;
  }
  for (FTSENT *e = fts_read(fts); e && !run->refused; e = fts_read(fts)) {
    if (e->fts_info == FTS_F) {
      handle_file(run, e->fts_path, e->fts_level == FTS_ROOTLEVEL);
    } else if (e->fts_info == FTS_ERR || e->fts_info == FTS_DNR || e->fts_info == FTS_NS) {
      fprintf(stderr, "perf-symbols: %s: %s\n", e->fts_path, strerror(e->fts_errno));
      run->failed++;
    }
  }
  fts_close(fts);
}

/* dir appended to the colon-separated list; false when out of memory. */
static bool add_debug_dir(run_t *run, const char *dir) {
  size_t old = run->debug_dirs ? strlen(run->debug_dirs) : 0;
  char *list = realloc(run->debug_dirs, old + strlen(dir) + 2);
  if (!list) return false;
  if (old)
    sprintf(list + old, ":%s", dir);
  else
    strcpy(list, dir);
  run->debug_dirs = list;
  return true;
}

static int usage_error(const char *what) {
  fprintf(stderr, "perf-symbols: %s\n%s", what, USAGE);
  return EXIT_USAGE;
}

/* A value sent in an HTTP header or the request URL (the key, the URL):
   NULL when it holds only visible ASCII, else the problem (a CR or LF
   would end the header line and start one of the value's choosing). The
   value itself is not shown: a key is a secret. */
static const char *http_text_problem(const char *name, const char *v) {
  static char why[160];
  for (size_t i = 0; v && v[i]; i++) {
    unsigned char b = (unsigned char)v[i];
    if (b < 0x21 || b > 0x7e) {
      snprintf(why, sizeof why,
               "%s: byte %zu is 0x%02x: it is sent in HTTP and may hold only visible ASCII", name,
               i, b);
      return why;
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  static const struct option LONGOPTS[] = {
      {"url", required_argument, NULL, 'u'},       {"key", required_argument, NULL, 'k'},
      {"debug-dir", required_argument, NULL, 'd'}, {"dry-run", no_argument, NULL, 'n'},
      {"replace", no_argument, NULL, 'r'},         {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},         {NULL, 0, NULL, 0}};
  run_t run = {0};
  const char *url = NULL, *key = getenv("PERF_SYMBOLS_KEY");
  bool dry_run = false;
  for (int opt; (opt = getopt_long(argc, argv, "", LONGOPTS, NULL)) != -1;) {
    if (opt == 'u')
      url = optarg;
    else if (opt == 'k')
      key = optarg;
    else if (opt == 'n')
      dry_run = true;
    else if (opt == 'r')
      run.replace = true;
    else if (opt == 'd' && !add_debug_dir(&run, optarg))
      return usage_error("out of memory");
    else if (opt == 'h')
      return fputs(USAGE, stdout), 0;
    else if (opt == 'V')
      return puts("perf-symbols " PERF_PROJECT_VERSION), 0;
    else if (opt != 'd')
      return fputs(USAGE, stderr), EXIT_USAGE;
  }
  if (optind == argc) return usage_error("no PATH given");
  if (!dry_run && !url) return usage_error("--url is required (or --dry-run)");
  const char *problem = http_text_problem("--key (or PERF_SYMBOLS_KEY)", key);
  if (problem || (problem = http_text_problem("--url", url)) != NULL) return usage_error(problem);
  if (elf_version(EV_CURRENT) == EV_NONE) return usage_error("libelf is too old");
  if (!dry_run) {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
        !(run.client = symbols_client_new(url, key && *key ? key : NULL))) {
      fprintf(stderr, "perf-symbols: libcurl could not start\n");
      return EXIT_FAILED;
    }
  }
  walk(&run, argv + optind);
  printf("perf-symbols: %u uploaded, %u already on the collector, %u duplicates, %u skipped, %u "
         "failed\n",
         run.uploaded, run.present, run.duplicates, run.skipped, run.failed);
  symbols_client_free(run.client);
  for (size_t i = 0; i < run.n_seen; i++)
    free(run.seen_ids[i]), free(run.seen_paths[i]);
  free(run.seen_ids);
  free(run.seen_paths);
  free(run.debug_dirs);
  if (!dry_run) curl_global_cleanup();
  return run.refused ? EXIT_REFUSED : run.failed ? EXIT_FAILED : 0;
}
