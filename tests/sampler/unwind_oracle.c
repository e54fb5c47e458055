/*
 * unwind_oracle.c - the unwind validator (see unwind_oracle.h).
 *
 * Runs on the test's main thread. The child is forked from it, so the
 * child's only thread runs on the main thread's stack: the parent learns
 * that stack's top from its own /proc/self/maps, and its own compiled
 * unwind rules and module map hold for the child.
 */
#include "unwind_oracle.h"

#include <elf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "call_record.h"
#include "check.h"
#include "dwfl_reference.h"
#include "sdk/base/threads.h"
#include "sdk/sampler/modules.h"
#include "sdk/sampler/unwind_rules.h"

#define MAX_FRAMES 512
#define STACK_COPY_MAX (8u << 20)
#define REPORT_LIMIT 3 /* disagreements printed in full per kind */
#define EXCLUSION_KEYS 64
#define XSTATE_MAX 16384 /* x87, SSE, AVX, AVX-512 state (NT_X86_XSTATE) */

typedef struct {
  uintptr_t pcs[MAX_FRAMES];
  size_t n;
  perf__walk_status_t status; /* ours only */
} frames_t;

typedef enum { AGREED, DWFL_WRONG, FALLBACK, CFI_WRONG, TRUNCATED, WRONG, KINDS } kind_t;

static const char *const k_kind_names[KINDS] = {"agreed",    "libdwfl wrong", "no-CFI fallback",
                                                "CFI wrong", "truncated",     "WRONG"};
static const char *const k_class_names[ORACLE_CLASSES] = {"program", "libc", "libstdc++", "ld.so",
                                                          "other"};

/* Where excluded or failing stops were, summed for the figures. */
typedef struct {
  kind_t kind;
  char where[200];
  unsigned long count;
} exclusion_t;

typedef struct {
  const oracle_scenario_t *sc;
  oracle_tally_t *tally;
  pid_t pid;
  perf__modules_t *mods;
  dwfl_reference_t *ref;
  call_record_t *record;
  uintptr_t stack_hi;
  uint8_t *copy;
  uint8_t *xstate; /* the FPU and vector registers around an injected signal */
  uintptr_t restorer;
  struct user_regs_struct regs; /* at the current stop */
  int pending_signal;           /* to pass on the next resume */
  bool in_handler_entry;        /* this stop is a handler's entry: no signal can be injected */
  unsigned long steps;
} session_t;

/* For the whole test process (one case, usually one scenario). */
static unsigned g_printed[KINDS];
static exclusion_t g_exclusions[EXCLUSION_KEYS];
static size_t g_nexclusions;

static void session_open(session_t *s, const oracle_scenario_t *sc, oracle_tally_t *tally);
static void step_through(session_t *s);
static void session_close(session_t *s);
static pid_t launch_child(const oracle_scenario_t *sc);
static void first_stop(session_t *s);
static void step_once(session_t *s);
static bool inject_signal(session_t *s);
static void record_step(session_t *s, const struct user_regs_struct *prev);
static int wait_stop(pid_t pid);
static void read_regs(session_t *s);
static size_t copy_stack(session_t *s);
static void walk_ours(session_t *s, frames_t *out);
static bool read_copy(void *ctx, uintptr_t addr, uintptr_t *out);
static void check_stop(session_t *s, oracle_counts_t *by_class, uintptr_t class_pc, bool signal);
static kind_t classify(session_t *s, const frames_t *ours, const frames_t *ref,
                       const frames_t *truth);
static bool same_frames(const frames_t *a, const frames_t *b);
static size_t first_difference(const frames_t *a, const frames_t *b);
static const perf__unwind_row_t *frame_row(session_t *s, const frames_t *f, size_t k, bool *exact);
static oracle_class_t class_of(session_t *s, uintptr_t pc);
static void count(oracle_counts_t *c, kind_t kind);
static void note_exclusion(session_t *s, kind_t kind, const frames_t *wrong, const frames_t *truth,
                           uintptr_t class_pc, bool signal);
static void print_disagreement(session_t *s, kind_t kind, const frames_t *ours, const frames_t *ref,
                               const frames_t *truth);
static void describe_pc(session_t *s, uintptr_t pc, bool return_address, char *buf, size_t len);
static void describe_row(const perf__unwind_row_t *row, char *buf, size_t len);

void oracle_run(const oracle_scenario_t *sc, oracle_tally_t *tally) {
  session_t s;
  session_open(&s, sc, tally);
  if (sc->warm_up) sc->run(); /* the child inherits the bound PLT slots */
  s.pid = launch_child(sc);
  first_stop(&s);
  step_through(&s);
  session_close(&s);
}

double oracle_agreement(const oracle_counts_t *c) {
  unsigned long compared = c->checks - c->dwfl_wrong;
  return compared ? 100.0 * (double)c->agreed / (double)compared : 100.0;
}

void oracle_print(const char *title, const oracle_tally_t *t) {
  fprintf(stderr, "\nunwind validator: %s\n", title);
  fprintf(stderr, "  %-20s %9s %9s %8s | excluded: %9s | %9s %9s %9s %6s\n", "where (frame 0)",
          "stops", "agreed", "agree%", "dwfl-bad", "fallback", "truncated", "cfi-wrong", "wrong");
  for (int sig = 0; sig < 2; sig++) {
    for (int c = 0; c < ORACLE_CLASSES; c++) {
      const oracle_counts_t *n = sig ? &t->signals[c] : &t->steps[c];
      if (n->checks == 0) continue;
      char label[40];
      snprintf(label, sizeof label, "%s%s", sig ? "signal in " : "", k_class_names[c]);
      fprintf(stderr, "  %-20s %9lu %9lu %8.3f | %19lu | %9lu %9lu %9lu %6lu\n", label, n->checks,
              n->agreed, oracle_agreement(n), n->dwfl_wrong, n->fallback, n->truncated,
              n->cfi_wrong, n->wrong);
    }
  }
  if (t->budget_hits)
    fprintf(stderr, "  %lu scenario(s) cut at their step budget\n", t->budget_hits);
  if (t->injections_refused)
    fprintf(stderr, "  %lu stops took no injected signal (not signal-delivery stops)\n",
            t->injections_refused);
  if (g_nexclusions) fprintf(stderr, "  where the stops that did not agree were:\n");
  for (size_t i = 0; i < g_nexclusions; i++)
    fprintf(stderr, "    %-16s %7lu  %s\n", k_kind_names[g_exclusions[i].kind],
            g_exclusions[i].count, g_exclusions[i].where);
}

/* ---- the session -------------------------------------------------------- */

static void session_open(session_t *s, const oracle_scenario_t *sc, oracle_tally_t *tally) {
  *s = (session_t){.sc = sc, .tally = tally};
  s->mods = perf__modules_acquire();
  perf__modules_compile_all_rules(s->mods); /* the validator walks every module */
  s->record = malloc(sizeof *s->record);
  s->copy = malloc(STACK_COPY_MAX);
  s->xstate = malloc(XSTATE_MAX);
  CHECK(s->mods && s->record && s->copy && s->xstate);
  uintptr_t lo;
  CHECK(perf__stack_mapping((uintptr_t)__builtin_frame_address(0), &lo, &s->stack_hi) == 0);
  /* The handler, with SA_NODEFER so an injected signal that never runs its
     handler leaves the signal mask as it was. */
  struct sigaction sa = {.sa_handler = sc->handler, .sa_flags = SA_NODEFER}, old;
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0 && sigaction(SIGUSR1, NULL, &old) == 0);
  s->restorer = (uintptr_t)old.sa_restorer;
}

/* Check every stop (and a signal delivered at it) until the child reaches
   oracle_end or the scenario's budget is spent. */
static void step_through(session_t *s) {
  while (s->regs.rip != (uintptr_t)&oracle_end) {
    if (s->steps == s->sc->max_steps) {
      s->tally->budget_hits++;
      return;
    }
    s->steps++;
    check_stop(s, s->tally->steps, s->regs.rip, false);
    if (s->sc->inject_signals && !s->in_handler_entry && !inject_signal(s))
      continue; /* the signal was not taken: the instruction ran instead */
    step_once(s);
  }
}

static void session_close(session_t *s) {
  kill(s->pid, SIGKILL);
  waitpid(s->pid, NULL, 0);
  dwfl_reference_close(s->ref);
  perf__modules_release(s->mods);
  signal(SIGUSR1, SIG_DFL);
  free(s->xstate);
  free(s->copy);
  free(s->record);
}

/* ---- the child ---------------------------------------------------------- */

static pid_t launch_child(const oracle_scenario_t *sc) {
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) _exit(2);
    oracle_begin();
    sc->run();
    oracle_end();
    _exit(0);
  }
  return pid;
}

/* The child's int3 in oracle_begin: sp points at oracle_begin's return
   address; the frames above it are taken from libdwfl, checked against
   ours, and are the start of the truth. */
static void first_stop(session_t *s) {
  CHECK_EQ_INT(wait_stop(s->pid), SIGTRAP);
  CHECK(ptrace(PTRACE_SETOPTIONS, s->pid, NULL, (void *)(long)PTRACE_O_EXITKILL) == 0);
  s->ref = dwfl_reference_open(s->pid);
  read_regs(s);
  frames_t ours, ref;
  walk_ours(s, &ours);
  ref.n = dwfl_reference_walk(s->ref, ref.pcs, MAX_FRAMES);
  if (!same_frames(&ours, &ref) || ours.status != PERF__WALK_COMPLETE) {
    print_disagreement(s, WRONG, &ours, &ref, &ref);
    CHECKF(0, "the validator's starting stack differs between libdwfl and us");
  }
  call_record_init(s->record, ref.pcs + 1, ref.n - 1, s->regs.rsp);
}

/* Run one instruction (or enter a signal handler) and record what it did. */
static void step_once(session_t *s) {
  struct user_regs_struct prev = s->regs;
  int passed = 0;
  for (;;) {
    passed = s->pending_signal;
    s->pending_signal = 0;
    CHECK(ptrace(PTRACE_SINGLESTEP, s->pid, NULL, (void *)(long)passed) == 0);
    int sig = wait_stop(s->pid);
    if (sig == SIGTRAP) break;
    s->pending_signal = sig; /* a signal on its way in: nothing ran, deliver it */
  }
  read_regs(s);
  s->in_handler_entry = passed == SIGUSR1;
  if (passed == SIGUSR1) {
    CHECKF(s->regs.rip == (uintptr_t)s->sc->handler, "signal delivered, but pc %#llx", s->regs.rip);
    call_record_signal(s->record, s->regs.rsp, s->restorer, prev.rip);
    return;
  }
  record_step(s, &prev);
}

/* Tell the call record what the instruction from `prev` to s->regs did. */
static void record_step(session_t *s, const struct user_regs_struct *prev) {
  copy_stack(s);
  uintptr_t top;
  memcpy(&top, s->copy, sizeof top);
  call_record_step(s->record, prev->rip, prev->rsp, s->regs.rip, s->regs.rsp, top);
}

/* Deliver SIGUSR1 at this stop, compare the stacks at the handler's first
   instruction (through the signal frame), then set the registers back: the
   handler never runs, the interrupted instruction runs next. Only a
   signal-delivery stop takes a signal; at any other (after a system call,
   say) the instruction just runs: false, and that step is recorded. */
static bool inject_signal(session_t *s) {
  struct user_regs_struct saved = s->regs;
  /* Delivery resets the FPU and vector registers for the handler. */
  struct iovec xstate = {s->xstate, XSTATE_MAX};
  CHECK(ptrace(PTRACE_GETREGSET, s->pid, (void *)NT_X86_XSTATE, &xstate) == 0);
  CHECK(ptrace(PTRACE_SINGLESTEP, s->pid, NULL, (void *)(long)SIGUSR1) == 0);
  CHECK_EQ_INT(wait_stop(s->pid), SIGTRAP);
  read_regs(s);
  if (s->regs.rip != (uintptr_t)s->sc->handler) {
    s->tally->injections_refused++;
    record_step(s, &saved);
    return false;
  }
  call_record_signal(s->record, s->regs.rsp, s->restorer, saved.rip);
  check_stop(s, s->tally->signals, saved.rip, true);
  CHECK(ptrace(PTRACE_SETREGS, s->pid, NULL, &saved) == 0);
  CHECK(ptrace(PTRACE_SETREGSET, s->pid, (void *)NT_X86_XSTATE, &xstate) == 0);
  s->regs = saved;
  call_record_pop_to(s->record, saved.rsp);
  return true;
}

/* The signal of the child's next ptrace stop; fails on anything else. */
static int wait_stop(pid_t pid) {
  int status;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECKF(WIFSTOPPED(status), "validator child ended (status %#x)", status);
  return WSTOPSIG(status);
}

static void read_regs(session_t *s) {
  CHECK(ptrace(PTRACE_GETREGS, s->pid, NULL, &s->regs) == 0);
}

/* The child's stack [sp, top) into s->copy. */
static size_t copy_stack(session_t *s) {
  uintptr_t sp = s->regs.rsp;
  CHECKF(sp < s->stack_hi && s->stack_hi - sp <= STACK_COPY_MAX, "child sp %#lx off the stack",
         (unsigned long)sp);
  size_t len = s->stack_hi - sp;
  struct iovec local = {s->copy, len}, remote = {(void *)sp, len};
  CHECK(process_vm_readv(s->pid, &local, 1, &remote, 1, 0) == (ssize_t)len);
  return len;
}

/* ---- the comparison ----------------------------------------------------- */

static void walk_ours(session_t *s, frames_t *out) {
  size_t len = copy_stack(s);
  perf__unwind_regs_t regs = {
      .pc = s->regs.rip, .sp = s->regs.rsp, .fp = s->regs.rbp, .bx = s->regs.rbx};
  perf__stack_window_t w = {s->regs.rsp, s->regs.rsp + len, s->copy};
  out->n = perf__unwind_walk(s->mods->unwind, 1, regs, w, out->pcs, MAX_FRAMES, &out->status);
}

/* A word of the child's stack from the copy walk_ours made at this stop. */
static bool read_copy(void *ctx, uintptr_t addr, uintptr_t *out) {
  session_t *s = ctx;
  if (addr < s->regs.rsp || addr > s->stack_hi - sizeof *out) return false;
  memcpy(out, s->copy + (addr - s->regs.rsp), sizeof *out);
  return true;
}

/* Compare the three stacks at the current stop; count under class_pc's
   module (the interrupted pc's when `signal`). */
static void check_stop(session_t *s, oracle_counts_t *by_class, uintptr_t class_pc, bool signal) {
  frames_t ours, ref, truth;
  walk_ours(s, &ours);
  ref.n = dwfl_reference_walk(s->ref, ref.pcs, MAX_FRAMES);
  truth.n = call_record_stack(s->record, s->regs.rip, read_copy, s, truth.pcs, MAX_FRAMES);
  kind_t kind = classify(s, &ours, &ref, &truth);
  count(&by_class[class_of(s, class_pc)], kind);
  if (kind == AGREED) return;
  note_exclusion(s, kind, kind == DWFL_WRONG ? &ref : &ours, &truth, class_pc, signal);
  if (g_printed[kind]++ < REPORT_LIMIT) print_disagreement(s, kind, &ours, &ref, &truth);
}

static kind_t classify(session_t *s, const frames_t *ours, const frames_t *ref,
                       const frames_t *truth) {
  bool ours_true = same_frames(ours, truth);
  if (ours_true) return same_frames(ref, truth) ? AGREED : DWFL_WRONG;
  size_t d = first_difference(ours, truth);
  bool exact;
  if (d > 0 && d <= ours->n) {
    const perf__unwind_row_t *row = frame_row(s, ours, d - 1, &exact);
    if (!row || row->cfa_kind == PERF__CFA_UNKNOWN) return FALLBACK;
  }
  if (same_frames(ours, ref)) return CFI_WRONG;
  if (d == ours->n && ours->status != PERF__WALK_COMPLETE) return TRUNCATED;
  return WRONG;
}

static bool same_frames(const frames_t *a, const frames_t *b) {
  return a->n == b->n && first_difference(a, b) == a->n;
}

static size_t first_difference(const frames_t *a, const frames_t *b) {
  size_t k = 0;
  while (k < a->n && k < b->n && a->pcs[k] == b->pcs[k])
    k++;
  return k;
}

/* The row our walk used for frame k of `f` (NULL: none), looked up as the
   walker does: the exact pc for frame 0 and above a signal frame (then
   *exact is set), else the return address - 1. */
static const perf__unwind_row_t *frame_row(session_t *s, const frames_t *f, size_t k, bool *exact) {
  const perf__unwind_row_t *row = NULL;
  *exact = true;
  for (size_t i = 0; i <= k; i++) {
    if (i > 0) *exact = row && row->cfa_kind == PERF__CFA_SIGNAL;
    uintptr_t lookup = *exact ? f->pcs[i] : f->pcs[i] - 1;
    const perf__module_t *m = perf__module_map_find(s->mods->map, lookup);
    const perf__unwind_table_t *t = m ? s->mods->unwind->tables[m - s->mods->map->modules] : NULL;
    row = t ? perf__unwind_table_find(t, lookup - m->bias) : NULL;
  }
  return row;
}

static oracle_class_t class_of(session_t *s, uintptr_t pc) {
  const perf__module_t *m = perf__module_map_find(s->mods->map, pc);
  if (!m) return ORACLE_OTHER;
  if (m == perf__module_map_find(s->mods->map, (uintptr_t)&oracle_begin)) return ORACLE_PROGRAM;
  if (strncmp(m->basename, "libc.so", 7) == 0) return ORACLE_LIBC;
  if (strncmp(m->basename, "libstdc++.so", 12) == 0) return ORACLE_LIBSTDCXX;
  if (strncmp(m->basename, "ld-linux", 8) == 0) return ORACLE_LD;
  return ORACLE_OTHER;
}

static void count(oracle_counts_t *c, kind_t kind) {
  c->checks++;
  switch (kind) {
  case AGREED: c->agreed++; break;
  case DWFL_WRONG: c->dwfl_wrong++; break;
  case FALLBACK: c->fallback++; break;
  case CFI_WRONG: c->cfi_wrong++; break;
  case TRUNCATED: c->truncated++; break;
  default: c->wrong++; break;
  }
}

/* Sum the stop under "where it was (frame 0, or the interrupted pc of a
   signal), and the frame after which the wrong stack (ours, or libdwfl's
   when only it is wrong) left the truth". */
static void note_exclusion(session_t *s, kind_t kind, const frames_t *wrong, const frames_t *truth,
                           uintptr_t class_pc, bool signal) {
  char f0[72], fd[72], where[sizeof g_exclusions[0].where];
  size_t d = first_difference(wrong, truth);
  describe_pc(s, class_pc, false, f0, sizeof f0);
  bool exact;
  if (d > 0 && d < truth->n) {
    frame_row(s, truth, d - 1, &exact);
    describe_pc(s, truth->pcs[d - 1], !exact, fd, sizeof fd);
  } else {
    snprintf(fd, sizeof fd, "-");
  }
  /* Offsets would make every stop its own key: keep module!symbol only. */
  f0[strcspn(f0, "+")] = '\0';
  fd[strcspn(fd, "+")] = '\0';
  snprintf(where, sizeof where, "%s %s; frames differ after #%zu %s",
           signal ? "signal at" : "pc in", f0, d ? d - 1 : 0, fd);
  for (size_t i = 0; i < g_nexclusions; i++) {
    if (g_exclusions[i].kind == kind && strcmp(g_exclusions[i].where, where) == 0) {
      g_exclusions[i].count++;
      return;
    }
  }
  if (g_nexclusions == EXCLUSION_KEYS) return;
  exclusion_t *e = &g_exclusions[g_nexclusions++];
  e->kind = kind;
  snprintf(e->where, sizeof e->where, "%s", where);
  e->count = 1;
}

/* ---- diagnostics -------------------------------------------------------- */

static void print_disagreement(session_t *s, kind_t kind, const frames_t *ours, const frames_t *ref,
                               const frames_t *truth) {
  char pc[128];
  describe_pc(s, s->regs.rip, false, pc, sizeof pc);
  fprintf(stderr, "\n%s: scenario %s, step %lu, pc %s, our walk ended: %s\n", k_kind_names[kind],
          s->sc->name, s->steps, pc, perf__walk_status_name(ours->status));
  size_t n = ours->n > ref->n ? ours->n : ref->n;
  if (truth->n > n) n = truth->n;
  for (size_t k = 0; k < n; k++) {
    char o[128] = "-", r[32] = "-", t[32] = "-", row[96] = "";
    if (k < ours->n) {
      bool exact;
      const perf__unwind_row_t *r_k = frame_row(s, ours, k, &exact);
      describe_pc(s, ours->pcs[k], !exact, o, sizeof o);
      describe_row(r_k, row, sizeof row);
    }
    if (k < ref->n)
      snprintf(r, sizeof r, "%s%#lx", ref->pcs[k] == (k < ours->n ? ours->pcs[k] : 0) ? "" : "*",
               (unsigned long)ref->pcs[k]);
    if (k < truth->n)
      snprintf(t, sizeof t, "%s%#lx", truth->pcs[k] == (k < ours->n ? ours->pcs[k] : 0) ? "" : "*",
               (unsigned long)truth->pcs[k]);
    fprintf(stderr, "  #%-3zu ours %-56s %-28s libdwfl %-17s truth %s\n", k, o, row, r, t);
  }
}

/* "module+0xrel (symbol+0xoff)" */
static void describe_pc(session_t *s, uintptr_t pc, bool return_address, char *buf, size_t len) {
  perf__frame_info_t fi;
  perf__modules_symbolize(s->mods, pc, return_address, &fi);
  const char *symbol = perf__frame_symbol(&fi);
  snprintf(buf, len, "%s!%s+%#lx [%s+%#lx]", fi.module, symbol ? symbol : "??",
           (unsigned long)fi.sym.offset, fi.module, (unsigned long)fi.module_rel);
}

static void describe_row(const perf__unwind_row_t *row, char *buf, size_t len) {
  static const char *const cfa[] = {"unknown (fp)", "rsp",       "rbp", "plt",
                                    "signal",       "outermost", "rbx"};
  static const char *const rule[] = {"same", "at cfa", "lost"};
  if (!row) {
    snprintf(buf, len, "row: none (fp)");
  } else if (row->cfa_kind == PERF__CFA_RSP || row->cfa_kind == PERF__CFA_RBP ||
             row->cfa_kind == PERF__CFA_RBX) {
    snprintf(buf, len, "row %#x: cfa=%s%+d rbp=%s%+d rbx=%s%+d", row->pc, cfa[row->cfa_kind],
             row->cfa_off, rule[row->rbp_rule], row->rbp_off, rule[row->rbx_rule],
             8 * row->rbx_off8);
  } else {
    snprintf(buf, len, "row %#x: %s", row->pc, row->cfa_kind < 7 ? cfa[row->cfa_kind] : "?");
  }
}
