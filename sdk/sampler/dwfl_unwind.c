/*
 * dwfl_unwind.c - the PERF_UNWIND_STACK_COPY back end (see dwfl_unwind.h).
 *
 * Owns one elfutils libdwfl session per module map: every module of the map is reported once
 * (files with dwfl_report_elf, in-memory images such as the vDSO with dwfl_report_module and a
 * find_elf callback that hands libdwfl an elf_memory() over a private copy of the image), and a
 * single pseudo thread is attached with dwfl_attach_state. Its callbacks never touch the live
 * process: registers come from the caller's copy and memory reads are served only from the
 * caller's stack copy, so a walk stops where the copy ends. Frames are found with the modules'
 * call-frame information (.eh_frame, else .debug_frame, else libdwfl's frame-pointer fallback).
 *
 * Runs on the thread that requested a capture, never in the signal handler: creating, unwinding
 * and freeing allocate, open files and take a mutex. A libdwfl session is not thread-safe, so the
 * calls on one unwinder are serialized by its mutex; separate unwinders are independent.
 */
#include "sdk/sampler/dwfl_unwind.h"

#include "sdk/sampler/arch.h"

#include <elf.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/log.h"
#include "sdk/base/proc_files.h"

/* A module without a file: the userdata of its Dwfl_Module, for find_elf. */
typedef struct mem_image_s {
  void *bytes; /* private copy of perf__module_t.image, handed to elf_memory() */
  size_t size;
} mem_image_t;

struct perf__dwfl_unwinder_s {
  Dwfl *dwfl;
  pthread_mutex_t lock; /* serializes perf__dwfl_unwind: the Dwfl is not thread-safe */
  pid_t tid;            /* the one pseudo thread's id (our pid: libdwfl wants tid > 0) */
  size_t nmods;         /* modules reported */
  mem_image_t *images;  /* one per in-memory module reported, room for all of the map */
  size_t nimages;
  /* The copy being unwound; set only for the duration of one perf__dwfl_unwind call. */
  const uint64_t *regs;
  uintptr_t stack_base;
  const unsigned char *stack;
  size_t stack_len;
};

/* The state of one walk, passed to frame_cb. */
typedef struct walk_s {
  const uint64_t *regs;
  uintptr_t *pcs;
  size_t max, n;
  perf__walk_status_t status; /* set when frame_cb ends the walk */
  bool have_sp;
  Dwarf_Word last_sp;
  Dwarf_Addr last_pc;
} walk_t;

static int report_module(perf__dwfl_unwinder_t *u, const perf__module_t *m);
static bool image_load_range(const void *image, size_t size, uint64_t *lo, uint64_t *hi);
static bool file_build_id_matches(int fd, const perf__module_t *m);
static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                    char **file_name, Elf **elfp);
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink_file,
                          GElf_Word debuglink_crc, char **debuginfo_file_name);
static pid_t next_thread(Dwfl *dwfl, void *dwfl_arg, void **thread_argp);
static bool get_thread(Dwfl *dwfl, pid_t tid, void *dwfl_arg, void **thread_argp);
static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *dwfl_arg);
static bool set_initial_registers(Dwfl_Thread *thread, void *thread_arg);
static int frame_cb(Dwfl_Frame *state, void *arg);

/* libdwfl keeps pointers to both tables for the life of the session. */
static const Dwfl_Callbacks k_offline_callbacks = {
    .find_elf = find_elf,
    .find_debuginfo = find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = NULL,
};

static const Dwfl_Thread_Callbacks k_thread_callbacks = {
    .next_thread = next_thread,
    .get_thread = get_thread,
    .memory_read = memory_read,
    .set_initial_registers = set_initial_registers,
    .detach = NULL,
    .thread_detach = NULL,
};

int perf__dwfl_unwinder_create(const perf__module_map_t *map, perf__dwfl_unwinder_t **out) {
  if (!out) return PERF_E_INVALID_ARGUMENT;
  *out = NULL;
  if (!map || (map->count > 0 && !map->modules)) return PERF_E_INVALID_ARGUMENT;

  perf__dwfl_unwinder_t *u = calloc(1, sizeof *u);
  if (!u) return PERF_E_NO_MEMORY;
  u->images = calloc(map->count > 0 ? map->count : 1, sizeof *u->images);
  if (!u->images || pthread_mutex_init(&u->lock, NULL) != 0) {
    free(u->images);
    free(u);
    return PERF_E_NO_MEMORY;
  }
  u->tid = getpid();

  int rc = PERF_OK;
  elf_version(EV_CURRENT);
  u->dwfl = dwfl_begin(&k_offline_callbacks);
  if (!u->dwfl) {
    perf__log(PERF__LOG_ERROR, "dwfl_begin: %s", dwfl_errmsg(-1));
    rc = PERF_E_NO_MEMORY;
    goto fail;
  }
  dwfl_report_begin(u->dwfl);
  for (size_t i = 0; i < map->count; i++) {
    rc = report_module(u, &map->modules[i]);
    if (rc < 0) goto fail;
  }
  rc = PERF_OK;
  if (dwfl_report_end(u->dwfl, NULL, NULL) != 0) {
    perf__log(PERF__LOG_ERROR, "dwfl_report_end: %s", dwfl_errmsg(-1));
    rc = PERF_E_SYSTEM;
    goto fail;
  }
  if (u->nmods == 0) {
    perf__log(PERF__LOG_ERROR, "stack-copy unwinder: none of %zu modules could be reported",
              map->count);
    rc = PERF_E_UNSUPPORTED;
    goto fail;
  }
  /* With a NULL Elf libdwfl takes the architecture from the first module it can open. This
     can be done once per Dwfl, so the session lives as long as the unwinder. */
  if (!dwfl_attach_state(u->dwfl, NULL, u->tid, &k_thread_callbacks, u)) {
    perf__log(PERF__LOG_ERROR, "dwfl_attach_state: %s", dwfl_errmsg(-1));
    rc = PERF_E_SYSTEM;
    goto fail;
  }
  *out = u;
  return PERF_OK;

fail:
  perf__dwfl_unwinder_free(u);
  return rc;
}

int perf__dwfl_unwind(perf__dwfl_unwinder_t *u, const uint64_t *regs, uintptr_t stack_base,
                      const void *stack, size_t stack_len, uintptr_t *pcs, size_t max,
                      size_t *count, perf__walk_status_t *status) {
  if (count) *count = 0;
  if (!u || !regs || !pcs || !count || max == 0 || (!stack && stack_len > 0)) {
    return PERF_E_INVALID_ARGUMENT;
  }
  /* A copy that would wrap around the address space is cut at its end. */
  if (stack_len > UINTPTR_MAX - stack_base) stack_len = UINTPTR_MAX - stack_base;

  walk_t w = {.regs = regs, .pcs = pcs, .max = max, .status = PERF__WALK_BAD_READ};
  pthread_mutex_lock(&u->lock);
  u->regs = regs;
  u->stack_base = stack_base;
  u->stack = stack;
  u->stack_len = stack_len;
  /* The end of the walk shows up as 0 (CFI says the return address is undefined), 1 (frame_cb
     stopped it and said why) or -1 (a read outside the copy, no rules for a pc); either way the
     frames gathered so far stand. */
  int rc = dwfl_getthread_frames(u->dwfl, u->tid, frame_cb, &w);
  if (rc == 0) w.status = PERF__WALK_COMPLETE;
  if (status) *status = w.status;
  const char *why = w.n == 0 && rc < 0 ? dwfl_errmsg(-1) : "no frame";
  u->regs = NULL;
  u->stack_base = 0;
  u->stack = NULL;
  u->stack_len = 0;
  pthread_mutex_unlock(&u->lock);

  *count = w.n;
  if (w.status == PERF__WALK_DEPTH) return PERF_E_TRUNCATED;
  if (w.n > 0) return PERF_OK;
  perf__log(PERF__LOG_WARN, "stack-copy unwind found no frame: %s", why);
  return PERF_E_SYSTEM;
}

void perf__dwfl_unwinder_free(perf__dwfl_unwinder_t *u) {
  if (!u) return;
  /* dwfl_end releases the Elf handles (including the elf_memory ones) before the images go. */
  if (u->dwfl) dwfl_end(u->dwfl);
  for (size_t i = 0; i < u->nimages; i++)
    free(u->images[i].bytes);
  free(u->images);
  pthread_mutex_destroy(&u->lock);
  free(u);
}

/* Report one module to the session. Returns 0 when reported, 1 when skipped (the walk will
   simply stop in it), or PERF_E_NO_MEMORY. */
static int report_module(perf__dwfl_unwinder_t *u, const perf__module_t *m) {
  const char *name = m->path ? m->path : "[anonymous]";
  mem_image_t *img = NULL;
  Dwfl_Module *mod = NULL;

  if (m->image) {
    uint64_t lo, hi;
    if (m->image_size == 0 || !image_load_range(m->image, m->image_size, &lo, &hi)) {
      perf__log(PERF__LOG_DEBUG, "%s: not a usable in-memory ELF image", name);
      return 1;
    }
    /* elf_memory() may write to its buffer, and the module map owns the original. */
    img = &u->images[u->nimages];
    img->bytes = malloc(m->image_size);
    if (!img->bytes) return PERF_E_NO_MEMORY;
    memcpy(img->bytes, m->image, m->image_size);
    img->size = m->image_size;
    /* libdwfl derives the load bias as low address minus the first PT_LOAD's aligned vaddr,
       and asks find_elf for the Elf when it first needs it. */
    mod = dwfl_report_module(u->dwfl, name, m->bias + lo, m->bias + hi);
  } else {
    if (!m->path || m->path[0] != '/') {
      perf__log(PERF__LOG_DEBUG, "%s: no file to read call-frame information from", name);
      return 1;
    }
    int fd = perf__mapped_file_open(m->path, O_RDONLY);
    if (fd < 0) {
      perf__log(PERF__LOG_DEBUG, "%s: cannot open, not unwinding through it", name);
      return 1;
    }
    if (m->build_id_len > 0 && !file_build_id_matches(fd, m)) {
      perf__log(PERF__LOG_DEBUG, "%s: file on disk is not the loaded one (build-id)", name);
      close(fd);
      return 1;
    }
    /* base = load bias with add_p_vaddr: runtime address = p_vaddr + bias. The fd is the
       library's on success. */
    mod = dwfl_report_elf(u->dwfl, name, m->path, fd, m->bias, true);
    if (!mod) close(fd);
  }
  if (!mod) {
    perf__log(PERF__LOG_DEBUG, "%s: not reported to libdwfl: %s", name, dwfl_errmsg(-1));
    if (img) free(img->bytes);
    return 1;
  }
  if (img) {
    void **userdata = NULL;
    dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
    if (userdata) *userdata = img;
    u->nimages++;
  }
  u->nmods++;
  return 0;
}

/* The address range an in-memory ELF image occupies relative to its load bias, computed the way
   libdwfl does: from the first PT_LOAD's aligned vaddr to the end of the last PT_LOAD. */
static bool image_load_range(const void *image, size_t size, uint64_t *lo, uint64_t *hi) {
  Elf64_Ehdr eh;
  if (size < sizeof eh) return false;
  memcpy(&eh, image, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > size ||
      (size - eh.e_phoff) / sizeof(Elf64_Phdr) < eh.e_phnum) {
    return false;
  }
  bool first = true;
  *lo = *hi = 0;
  for (size_t i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    memcpy(&ph, (const unsigned char *)image + eh.e_phoff + i * sizeof ph, sizeof ph);
    if (ph.p_type != PT_LOAD) continue;
    if (first) *lo = ph.p_vaddr & -ph.p_align;
    first = false;
    if (ph.p_vaddr + ph.p_memsz > *hi) *hi = ph.p_vaddr + ph.p_memsz;
  }
  return !first && *hi > *lo;
}

/* True when the file behind fd carries the build-id the module map saw in memory. */
static bool file_build_id_matches(int fd, const perf__module_t *m) {
  Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  if (!elf) return false;
  const void *id = NULL;
  ssize_t len = dwelf_elf_gnu_build_id(elf, &id);
  bool same = len > 0 && (size_t)len == m->build_id_len && memcmp(id, m->build_id, len) == 0;
  elf_end(elf);
  return same;
}

/* Only modules reported without an Elf (in-memory images) get here: give libdwfl an Elf over
   our copy of the image. libdwfl owns the Elf handle (dwfl_end ends it); the bytes stay ours. */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                    char **file_name, Elf **elfp) {
  (void)mod;
  (void)modname;
  (void)base;
  (void)file_name;
  const mem_image_t *img = *userdata;
  *elfp = NULL;
  if (img) *elfp = elf_memory(img->bytes, img->size);
  return -1;
}

/* Separate debug files, for .debug_frame when .eh_frame has no rule for a pc. For a module with
   a GNU build-id, dwfl_standard_find_debuginfo would end its search in debuginfod: dlopen()ing
   libdebuginfod and libcurl into the app (which also makes the module map stale) and, with
   DEBUGINFOD_URLS set, downloading on the requesting thread. So such modules are looked up in
   the local build-id directories only; without a build-id the standard search (.gnu_debuglink
   next to the file and under /usr/lib/debug) has nothing to ask debuginfod with. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink_file,
                          GElf_Word debuglink_crc, char **debuginfo_file_name) {
  const unsigned char *bits = NULL;
  GElf_Addr bits_vaddr = 0;
  if (dwfl_module_build_id(mod, &bits, &bits_vaddr) > 0) {
    return dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                        debuglink_crc, debuginfo_file_name);
  }
  return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                      debuglink_crc, debuginfo_file_name);
}

/* One pseudo thread: *thread_argp starts NULL, so the second call ends the list. */
static pid_t next_thread(Dwfl *dwfl, void *dwfl_arg, void **thread_argp) {
  (void)dwfl;
  if (*thread_argp) return 0;
  *thread_argp = dwfl_arg;
  return ((const perf__dwfl_unwinder_t *)dwfl_arg)->tid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *dwfl_arg, void **thread_argp) {
  (void)dwfl;
  if (tid != ((const perf__dwfl_unwinder_t *)dwfl_arg)->tid) return false;
  *thread_argp = dwfl_arg;
  return true;
}

/* Serve 8-byte reads from the stack copy only; anything outside it fails. */
static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *dwfl_arg) {
  (void)dwfl;
  const perf__dwfl_unwinder_t *u = dwfl_arg;
  if (!u->stack || addr < u->stack_base) return false;
  Dwarf_Addr off = addr - u->stack_base;
  if (off > u->stack_len || u->stack_len - off < sizeof *result) return false;
  memcpy(result, u->stack + off, sizeof *result);
  return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *thread_arg) {
  const perf__dwfl_unwinder_t *u = thread_arg;
  if (!u->regs) return false;
  /* The architecture's DWARF registers (sdk/sampler/arch.h). x86_64's pc
     is among them (libdwfl takes the initial pc from it); aarch64's is
     not a DWARF register and is set apart. */
  if (!dwfl_thread_state_registers(thread, 0, perf__arch.dwarf_nregs, u->regs)) return false;
  if (perf__arch.dwarf_pc >= perf__arch.dwarf_nregs)
    dwfl_thread_state_register_pc(thread, u->regs[perf__arch.dwarf_pc]);
  return true;
}

/* Record one frame. pcs[0] is the interrupted pc as is; the others are the raw return addresses
   libdwfl unwound (not minus one). Stops on a pc of 0 or a stack pointer that goes back down,
   which only a bogus frame-pointer fallback produces, rather than emit a loop of frames. */
static int frame_cb(Dwfl_Frame *state, void *arg) {
  walk_t *w = arg;
  Dwarf_Addr pc;
  if (!dwfl_frame_pc(state, &pc, NULL)) return DWARF_CB_ABORT;
  Dwarf_Word sp = 0;
  bool have_sp = dwfl_frame_reg(state, perf__arch.dwarf_sp, &sp) == 0;
  if (w->n == 0) {
    pc = w->regs[perf__arch.dwarf_pc];
  } else if (pc == 0) {
    w->status = PERF__WALK_COMPLETE;
    return DWARF_CB_ABORT;
  } else if (have_sp && w->have_sp && (sp < w->last_sp || (sp == w->last_sp && pc == w->last_pc))) {
    w->status = PERF__WALK_NOT_ASCENDING;
    return DWARF_CB_ABORT;
  }
  if (w->n == w->max) {
    w->status = PERF__WALK_DEPTH;
    return DWARF_CB_ABORT;
  }
  w->pcs[w->n++] = (uintptr_t)pc;
  w->have_sp = have_sp;
  w->last_sp = sp;
  w->last_pc = pc;
  return DWARF_CB_OK;
}
