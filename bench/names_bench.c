/*
 * names_bench.c - what naming frames costs the writer thread: the same
 * events encoded into batches (sdk/pipeline/event_encode.c) three ways,
 * each in a fresh child process so that "cold" really is the first time:
 *
 *   addresses   symbolize off: module + address only (the baseline)
 *   symtab      function names from the symbol tables, demangled, no
 *               DWARF (the symbolizer's cap at 0)
 *   dwarf       names + inline chains + file:line from DWARF (the default)
 *
 * For each: the first encode of the events (cold: modules opened, DWARF
 * read, every pc named for the first time), then the same events again
 * with a new builder and encoder (warm: the symbolizer's per-address cache
 * answers), per event; the serialized and compressed batch; and what the
 * process gained in heap (mallinfo2) and resident memory, with the DWARF
 * bytes the symbolizer counted against its cap.
 *
 * The events: 20 hangs of 200 samples over 40 distinct stacks of 24
 * frames; 20 frames of each stack are pcs spread over the code of
 * names_bench_lib.so (C++ -O2 -g: templates, the standard containers and
 * algorithms inlined, lambdas), the outer 4 return addresses in 6 libc
 * functions (its DWARF from libc6-dbg when installed): 960 frames, about
 * 800 distinct pcs.
 *
 * Not a test: it prints figures and ratios against the baseline measured
 * in the same run, and exits 0 (non-zero only when it cannot run).
 *
 *   names_bench [--runs N]    (children per variant, default 5; medians)
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <link.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/pipeline/event_encode.h"
#include "sdk/sampler/modules.h"
#include "sdk/symbols/symbols.h"

#define EVENTS 20
#define SAMPLES 200
#define STACKS 40
#define DEPTH 24
#define LIB_FRAMES 20
#define WARM_REPEATS 5
#define BATCH_BYTES (32u << 20)

typedef enum { ADDRESSES, SYMTAB, DWARF, VARIANTS } variant_t;
static const char *const VARIANT_NAMES[VARIANTS] = {"addresses", "symtab", "dwarf"};

/* What one child measured. */
typedef struct result_s {
  double cold_us, warm_us;         /* per event */
  size_t raw_bytes, zstd_bytes;    /* the batch of all events */
  long heap_bytes, rss_bytes;      /* gained from before the first encode to the end */
  size_t dwarf_bytes, dwarf_opens; /* the symbolizer's count */
  size_t named, inline_frames;     /* pcs named; pcs with an inline chain */
} result_t;

typedef struct code_s {
  const char *want;
  uintptr_t start, end; /* the executable segment */
} code_t;

static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (uint32_t)(g_rng >> 11);
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int find_code(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  code_t *c = data;
  if (!info->dlpi_name || !strstr(info->dlpi_name, c->want)) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
      c->start = info->dlpi_addr + ph->p_vaddr;
      c->end = c->start + ph->p_memsz;
      return 1;
    }
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* The events                                                                */
/* ------------------------------------------------------------------------ */

static uintptr_t g_stacks[STACKS][DEPTH];

/* Deterministic stacks: 20 pcs spread over the library's code, then 4 of
   libc's (return addresses inside real functions). */
static void make_stacks(const code_t *lib) {
  static const char *const libc_fns[] = {
      "pthread_cond_wait", "pthread_mutex_lock", "read", "poll", "__libc_start_main", "clone"};
  uintptr_t libc[6];
  for (int i = 0; i < 6; i++) {
    void *p = dlsym(RTLD_DEFAULT, libc_fns[i]);
    libc[i] = p ? (uintptr_t)p + 24 : lib->start;
  }
  size_t span = lib->end - lib->start;
  for (int s = 0; s < STACKS; s++) {
    for (int f = 0; f < LIB_FRAMES; f++)
      g_stacks[s][f] = lib->start + (rnd() % span);
    for (int f = LIB_FRAMES; f < DEPTH; f++)
      g_stacks[s][f] = libc[(s + f) % 6];
  }
}

static perf__event_t **make_events(perf__modules_t *mods) {
  static perf__event_t *events[EVENTS];
  uint64_t saved = g_rng;
  for (int e = 0; e < EVENTS; e++) {
    perf__event_t *ev = perf__event_new(PERF__EVENT_HANG, mods);
    if (!ev) exit(2);
    ev->tid = 4242;
    ev->start_wall_ns = 1795000000000000000LL + e;
    ev->start_mono_ns = 1000000000LL * (e + 1);
    ev->duration_ns = 500000000;
    perf__event_set_thread(ev, ev->tid, "bench-main", -1);
    for (int i = 0; i < SAMPLES; i++) {
      int s = (int)(rnd() % STACKS);
      if (perf__event_add_sample(ev, ev->tid, ev->start_mono_ns + i * 1000000LL, g_stacks[s], DEPTH,
                                 PERF__STACK_END_COMPLETE) != 0)
        exit(2);
    }
    perf__event_finish(ev);
    events[e] = ev;
  }
  g_rng = saved;
  return events;
}

/* ------------------------------------------------------------------------ */
/* One child                                                                 */
/* ------------------------------------------------------------------------ */

static long heap_now(void) {
  struct mallinfo2 mi = mallinfo2();
  return (long)(mi.uordblks + mi.hblkhd);
}

static long rss_now(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f && fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  if (f) fclose(f);
  return resident * sysconf(_SC_PAGESIZE);
}

/* Encode every event into one batch; returns the microseconds taken. */
static double encode_all(perf__event_t **events, bool symbolize, result_t *r) {
  perf__batch_resource_t res;
  memset(&res, 0, sizeof res);
  res.app_name = "names-bench";
  res.app_version = "1";
  res.environment = "bench";
  perf__batch_options_t o;
  perf__batch_options_init(&o);
  o.symbolize = symbolize;
  o.max_bytes = BATCH_BYTES;
  perf__batch_builder_t *b = NULL;
  perf__event_encoder_t *enc = perf__event_encoder_new();
  if (perf__batch_builder_new(&res, &o, &b) != 0 || !enc) exit(2);
  double t0 = now_us();
  for (int e = 0; e < EVENTS; e++)
    if (perf__event_encode(enc, b, events[e]) != 0) exit(3);
  r->raw_bytes = perf__batch_encoded_size(b);
  uint8_t *out = NULL;
  size_t len = 0;
  if (perf__batch_finish(b, NULL, &out, &len, NULL) != 0) exit(3);
  double t = now_us() - t0;
  r->zstd_bytes = len;
  free(out);
  perf__event_encoder_free(enc);
  perf__batch_free(b);
  return t;
}

/* How many distinct pcs got a name, and an inline chain. */
static void count_names(perf__modules_t *mods, result_t *r) {
  for (int s = 0; s < STACKS; s++)
    for (int f = 0; f < DEPTH; f++) {
      perf__frame_info_t fi;
      perf__modules_symbolize(mods, g_stacks[s][f], f > 0, &fi);
      r->named += fi.sym.count > 0;
      r->inline_frames += fi.sym.count > 1;
    }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void child(variant_t v, int fd) {
  if (v == SYMTAB) perf__symbols_set_cap(0);
  perf__modules_t *mods = perf__modules_acquire();
  if (!mods) exit(2);
  perf__event_t **events = make_events(mods);
  result_t r;
  memset(&r, 0, sizeof r);
  long heap0 = heap_now(), rss0 = rss_now();
  r.cold_us = encode_all(events, v != ADDRESSES, &r) / EVENTS;
  double warm[WARM_REPEATS];
  for (int i = 0; i < WARM_REPEATS; i++)
    warm[i] = encode_all(events, v != ADDRESSES, &r) / EVENTS;
  qsort(warm, WARM_REPEATS, sizeof warm[0], cmp_double);
  r.warm_us = warm[WARM_REPEATS / 2];
  r.heap_bytes = heap_now() - heap0;
  r.rss_bytes = rss_now() - rss0;
  perf__symbols_stats_t st;
  perf__symbols_stats(&st);
  r.dwarf_bytes = st.dwarf_bytes;
  r.dwarf_opens = st.dwarf_opens;
  if (v != ADDRESSES) count_names(mods, &r);
  if (write(fd, &r, sizeof r) != (ssize_t)sizeof r) exit(4);
  exit(0);
}

static bool run_child(variant_t v, result_t *out) {
  int p[2];
  if (pipe(p) != 0) return false;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    child(v, p[1]);
  }
  close(p[1]);
  ssize_t n = read(p[0], out, sizeof *out);
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return n == (ssize_t)sizeof *out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* ------------------------------------------------------------------------ */
/* Report                                                                    */
/* ------------------------------------------------------------------------ */

/* The median child by cold time (its other figures go with it). */
static result_t median_of(result_t *runs, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && runs[j].cold_us < runs[j - 1].cold_us; j--) {
      result_t t = runs[j];
      runs[j] = runs[j - 1];
      runs[j - 1] = t;
    }
  result_t m = runs[n / 2];
  double warm[64];
  for (int i = 0; i < n && i < 64; i++)
    warm[i] = runs[i].warm_us;
  qsort(warm, (size_t)n, sizeof warm[0], cmp_double);
  m.warm_us = warm[n / 2];
  return m;
}

static void report(const result_t *r) {
  const result_t *base = &r[ADDRESSES];
  printf("\n%-10s %11s %8s %11s %8s %11s %11s %11s %11s %9s\n", "variant", "cold us/ev", "x base",
         "warm us/ev", "x base", "raw bytes", "zstd bytes", "heap +KiB", "rss +KiB", "dwarf KiB");
  for (int v = 0; v < VARIANTS; v++)
    printf("%-10s %11.1f %8.2f %11.1f %8.2f %11zu %11zu %11ld %11ld %9zu\n", VARIANT_NAMES[v],
           r[v].cold_us, r[v].cold_us / base->cold_us, r[v].warm_us, r[v].warm_us / base->warm_us,
           r[v].raw_bytes, r[v].zstd_bytes, r[v].heap_bytes / 1024, r[v].rss_bytes / 1024,
           r[v].dwarf_bytes / 1024);
  printf("\nnamed pcs: symtab %zu, dwarf %zu of %d frames; with an inline chain: %zu; DWARF "
         "opened %zu times\n",
         r[SYMTAB].named, r[DWARF].named, STACKS * DEPTH, r[DWARF].inline_frames,
         r[DWARF].dwarf_opens);
  printf("dwarf against symtab: cold %.2fx, warm %.2fx, compressed batch %.2fx, heap +%ld KiB\n",
         r[DWARF].cold_us / r[SYMTAB].cold_us, r[DWARF].warm_us / r[SYMTAB].warm_us,
         (double)r[DWARF].zstd_bytes / (double)r[SYMTAB].zstd_bytes,
         (r[DWARF].heap_bytes - r[SYMTAB].heap_bytes) / 1024);
}

int main(int argc, char **argv) {
  int runs = 5;
  if (argc == 3 && strcmp(argv[1], "--runs") == 0) runs = atoi(argv[2]);
  if (runs < 1 || runs > 64) {
    fprintf(stderr, "usage: names_bench [--runs N]  (1..64)\n");
    return 2;
  }
  if (!dlopen(NAMES_BENCH_LIB, RTLD_NOW)) {
    fprintf(stderr, "names_bench: %s\n", dlerror());
    return 1;
  }
  code_t lib = {"names_bench_lib", 0, 0};
  dl_iterate_phdr(find_code, &lib);
  if (!lib.start) return 1;
  make_stacks(&lib);
  printf("names_bench: %d events x %d samples over %d stacks of %d frames (%d in "
         "names_bench_lib.so, %zu KiB of code), %d children per variant\n",
         EVENTS, SAMPLES, STACKS, DEPTH, LIB_FRAMES, (size_t)(lib.end - lib.start) / 1024, runs);
  result_t median[VARIANTS];
  for (int v = 0; v < VARIANTS; v++) {
    result_t all[64];
    for (int i = 0; i < runs; i++)
      if (!run_child((variant_t)v, &all[i])) {
        fprintf(stderr, "names_bench: the %s child failed\n", VARIANT_NAMES[v]);
        return 1;
      }
    median[v] = median_of(all, runs);
  }
  report(median);
  return 0;
}
