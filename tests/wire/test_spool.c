/*
 * test_spool.c - the disk spool (sdk/spool.c), its I/O seam (sdk/spool_io.c)
 * and CRC-32C (sdk/crc32c.c), against real files in a temporary directory
 * under /tmp that the test removes at exit.
 *
 * Each case runs in its own process: `test_spool <case>`. The kill -9 and
 * two-process cases re-execute this program as a child
 * (`test_spool child_... <dir> <arg>`) that reports over a pipe on its
 * stdout and is killed with SIGKILL.
 *
 * Failures come from the spool's I/O seam (fail the Nth write, fsync or
 * rename, as SQLite's fault injection does) and from the system: a 256 KiB
 * tmpfs (when this process may mount one) and RLIMIT_FSIZE. Random choices
 * come from fixed seeds (SPOOL_TEST_SEED overrides the kill -9 test's); the
 * only sleep is the kill -9 test's random delay before the kill, which is
 * the point of that test. The clock for max_age_s is the seam's, moved by
 * hand.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "perf_sdk.h"
#include "sdk/base/crc32c.h"
#include "sdk/base/log.h"
#include "sdk/wire/spool.h"
#include "sdk/wire/spool_io.h"
#include "tempdir.h"
#include "test_util.h"

#define PATH_LEN 1024
#define WAIT_MS 15000 /* every wait for a child gives up after this */
#define BIG_BYTES (64ull << 20)
#define HDR PERF__SPOOL_HEADER_SIZE
#define SEC 1000000000LL

static int g_argc;
static char **g_argv;

/* ---- randomness ----------------------------------------------- */

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* ---- batches: id = (tag, n), payload derived from the id ----------------- */

static void make_id(uint64_t tag, uint64_t n, uint8_t id[16]) {
  for (int i = 0; i < 8; i++) {
    id[i] = (uint8_t)(tag >> (8 * i));
    id[8 + i] = (uint8_t)(n >> (8 * i));
  }
}

static uint64_t le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static uint64_t id_tag(const uint8_t id[16]) {
  return le64(id);
}

static uint64_t id_n(const uint8_t id[16]) {
  return le64(id + 8);
}

static void fill_payload(const uint8_t id[16], uint8_t *buf, size_t len) {
  uint64_t s = id_tag(id) * 1000003u ^ id_n(id);
  for (size_t i = 0; i < len; i++)
    buf[i] = (uint8_t)splitmix(&s);
}

static bool payload_matches(const uint8_t id[16], const uint8_t *buf, size_t len) {
  uint64_t s = id_tag(id) * 1000003u ^ id_n(id);
  for (size_t i = 0; i < len; i++)
    if (buf[i] != (uint8_t)splitmix(&s)) return false;
  return true;
}

/* ---- the temporary directory --------------------------------------------- */

static char g_dir[PATH_LEN];   /* the test's directory */
static char g_root[PATH_LEN];  /* the spool root: <dir>/spool, or on the tmpfs */
static char g_mount[PATH_LEN]; /* a tmpfs mounted here, unmounted at exit */
static pid_t g_mount_owner;

/* Registered after tempdir_make's removal, so it runs before it. */
static void unmount_tmpfs(void) {
  if (g_mount[0] && g_mount_owner == getpid()) umount2(g_mount, MNT_DETACH);
}

static void use_dir(const char *dir) {
  int n = snprintf(g_dir, sizeof g_dir, "%s", dir);
  CHECK(n > 0 && n < (int)sizeof g_dir);
  n = snprintf(g_root, sizeof g_root, "%s/spool", dir);
  CHECK(n > 0 && n < (int)sizeof g_root);
}

static void make_dir(void) {
  use_dir(tempdir_make("test_spool"));
}

static void path_in(char *out, const char *dir, const char *name) {
  int n = snprintf(out, PATH_LEN, "%s/%s", dir, name);
  CHECK(n > 0 && n < PATH_LEN);
}

static bool ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

typedef struct dir_count_s {
  size_t batches, tmps, others;
  uint64_t bytes; /* of the batches */
} dir_count_t;

/* What a spool directory holds (LOCK, quarantine/ and subdirectories apart). */
static dir_count_t count_dir(const char *dir) {
  dir_count_t c = {0};
  DIR *d = opendir(dir);
  CHECKF(d != NULL, "%s: %s", dir, strerror(errno));
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    char path[PATH_LEN];
    struct stat st;
    path_in(path, dir, de->d_name);
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || strcmp(de->d_name, "LOCK") == 0) continue;
    if (ends_with(de->d_name, ".batch")) {
      c.batches++;
      c.bytes += (uint64_t)st.st_size;
    } else if (ends_with(de->d_name, ".tmp")) {
      c.tmps++;
    } else {
      c.others++;
    }
  }
  closedir(d);
  return c;
}

/* Files in <root>/quarantine whose name ends with suffix ("" = all). */
static size_t count_quarantine(const char *suffix) {
  char q[PATH_LEN];
  path_in(q, g_root, "quarantine");
  DIR *d = opendir(q);
  if (!d) return 0;
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    if (de->d_name[0] != '.' && ends_with(de->d_name, suffix)) n++;
  closedir(d);
  return n;
}

static bool exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

/* ---- the I/O seam with fault injection and a hand-moved clock ------------- */

enum { OP_NONE, OP_CREATE, OP_WRITE, OP_FSYNC, OP_RENAME };

typedef struct fault_s {
  int op;  /* the operation to fail ... */
  int nth; /* ... on its nth call after arming (1 = the next one) */
  int err; /* with this errno */
  int calls;
  bool short_write;     /* the failing write first writes half of its bytes */
  bool fail_next_write; /* (its second half then fails) */
  bool fake_clock;
  int64_t clock_ns; /* the wall clock */
  int64_t boot_ns;  /* the boot clock (CLOCK_BOOTTIME) */
  bool skip_fsync;  /* fsync does nothing (a fast writer) */
} fault_t;

static fault_t g_fault;

static void arm_fault(int op, int nth, int err) {
  g_fault.op = op;
  g_fault.nth = nth;
  g_fault.err = err;
  g_fault.calls = 0;
  g_fault.fail_next_write = false;
}

static bool fault_hit(fault_t *f, int op) {
  return f->op == op && ++f->calls == f->nth;
}

static int f_open(void *ctx, int dirfd, const char *name, int flags, mode_t mode) {
  fault_t *f = ctx;
  if ((flags & O_CREAT) && fault_hit(f, OP_CREATE)) {
    errno = f->err;
    return -1;
  }
  return perf__spool_io_posix()->open(NULL, dirfd, name, flags, mode);
}

static int f_close(void *ctx, int fd) {
  (void)ctx;
  return perf__spool_io_posix()->close(NULL, fd);
}

static ssize_t f_write(void *ctx, int fd, const void *buf, size_t len) {
  fault_t *f = ctx;
  if (f->fail_next_write) {
    f->fail_next_write = false;
    errno = f->err;
    return -1;
  }
  if (fault_hit(f, OP_WRITE)) {
    if (!f->short_write || len < 2) {
      errno = f->err;
      return -1;
    }
    f->fail_next_write = true;
    len /= 2;
  }
  return perf__spool_io_posix()->write(NULL, fd, buf, len);
}

static ssize_t f_pread(void *ctx, int fd, void *buf, size_t len, off_t off) {
  (void)ctx;
  return perf__spool_io_posix()->pread(NULL, fd, buf, len, off);
}

static int f_fsync(void *ctx, int fd) {
  fault_t *f = ctx;
  if (fault_hit(f, OP_FSYNC)) {
    errno = f->err;
    return -1;
  }
  return f->skip_fsync ? 0 : perf__spool_io_posix()->fsync(NULL, fd);
}

static int f_rename(void *ctx, int from_dirfd, const char *from, int to_dirfd, const char *to) {
  fault_t *f = ctx;
  if (fault_hit(f, OP_RENAME)) {
    errno = f->err;
    return -1;
  }
  return perf__spool_io_posix()->rename(NULL, from_dirfd, from, to_dirfd, to);
}

static int f_unlink(void *ctx, int dirfd, const char *name) {
  (void)ctx;
  return perf__spool_io_posix()->unlink(NULL, dirfd, name);
}

static int64_t f_wall_ns(void *ctx) {
  fault_t *f = ctx;
  return f->fake_clock ? f->clock_ns : perf__spool_io_posix()->wall_ns(NULL);
}

static int64_t f_boot_ns(void *ctx) {
  fault_t *f = ctx;
  return f->fake_clock ? f->boot_ns : perf__spool_io_posix()->boot_ns(NULL);
}

/* Both clocks moved by the same amount from (wall0, boot0): no jump. */
static void clocks_at(int64_t wall0, int64_t boot0, int64_t after_ns) {
  g_fault.fake_clock = true;
  g_fault.clock_ns = wall0 + after_ns;
  g_fault.boot_ns = boot0 + after_ns;
}

static const perf__spool_io_t g_test_io = {
    .ctx = &g_fault,
    .open = f_open,
    .close = f_close,
    .write = f_write,
    .pread = f_pread,
    .fsync = f_fsync,
    .rename = f_rename,
    .unlink = f_unlink,
    .wall_ns = f_wall_ns,
    .boot_ns = f_boot_ns,
};

/* ---- spool helpers ------------------------------------------------------- */

static atomic_int g_warnings;

static void count_log(perf_log_level_t level, const char *message, void *user) {
  (void)message, (void)user;
  if (level >= PERF_LOG_WARN) atomic_fetch_add(&g_warnings, 1);
}

static perf__spool_t *open_spool_io(uint64_t max_bytes, uint32_t max_files, uint32_t max_age_s,
                                    const perf__spool_io_t *io) {
  perf__spool_options_t o = {.dir = g_root,
                             .max_bytes = max_bytes,
                             .max_files = max_files,
                             .max_age_s = max_age_s,
                             .io = io};
  perf__spool_t *sp = NULL;
  int err = perf__spool_open(&o, &sp);
  CHECKF(err == PERF_OK, "open %s: %s (%d)", g_root, perf_strerror(err), err);
  return sp;
}

static perf__spool_t *open_spool(uint64_t max_bytes, uint32_t max_files, uint32_t max_age_s) {
  return open_spool_io(max_bytes, max_files, max_age_s, &g_test_io);
}

static int try_put(perf__spool_t *sp, uint64_t tag, uint64_t n, size_t len, uint64_t *seq) {
  static uint8_t buf[1 << 20];
  CHECK(len <= sizeof buf);
  uint8_t id[16];
  make_id(tag, n, id);
  fill_payload(id, buf, len);
  return perf__spool_put(sp, id, buf, len, seq);
}

static uint64_t put(perf__spool_t *sp, uint64_t tag, uint64_t n, size_t len) {
  uint64_t seq = 0;
  int err = try_put(sp, tag, n, len, &seq);
  CHECKF(err == PERF_OK, "put (%" PRIu64 ", %" PRIu64 ") of %zu bytes: %s (%d)", tag, n, len,
         perf_strerror(err), err);
  return seq;
}

static perf__spool_stats_t stats(perf__spool_t *sp) {
  perf__spool_stats_t st;
  perf__spool_stats(sp, &st);
  return st;
}

typedef struct got_s {
  uint64_t seq, tag, n;
} got_t;

/* Send everything like the uploader does: peek, read (payload checked
   against its id), remove. Returns how many were delivered into out[];
   *corrupt counts reads that found a bad file. */
static size_t drain(perf__spool_t *sp, got_t *out, size_t max, size_t *corrupt) {
  size_t n = 0;
  for (;;) {
    perf__spool_entry_t e;
    int err = perf__spool_peek_oldest(sp, &e);
    if (err == PERF__E_SPOOL_EMPTY) break;
    CHECK_EQ_INT(err, PERF_OK);
    uint8_t *payload = NULL;
    size_t len = 0;
    err = perf__spool_read(sp, &e, &payload, &len);
    if (err == PERF__E_SPOOL_CORRUPT) {
      CHECK(corrupt != NULL);
      (*corrupt)++;
      CHECK_EQ_INT(perf__spool_remove(sp, &e), PERF__E_SPOOL_GONE);
      continue;
    }
    CHECKF(err == PERF_OK, "read %s: %d", e.path, err);
    CHECK(payload != NULL);
    CHECK_EQ_INT(len, e.payload_len);
    CHECKF(payload_matches(e.id, payload, len), "payload of %s", e.path);
    free(payload);
    CHECK_EQ_INT(perf__spool_remove(sp, &e), PERF_OK);
    CHECK(n < max);
    out[n++] = (got_t){e.seq, id_tag(e.id), id_n(e.id)};
  }
  return n;
}

/* ---- child processes ----------------------------------------------------- */

/* This program again as `test_spool <child_case> <dir> <arg>`, its stdout a
   pipe we read (*out_rd) and its stdin a pipe we never write (*in_wr, so it
   can block on it); killed if the test dies first. */
static pid_t spawn_self(const char *child_case, const char *arg, int *out_rd, int *in_wr) {
  int out[2], in[2];
  CHECK(pipe2(out, O_CLOEXEC) == 0 && pipe2(in, O_CLOEXEC) == 0);
  pid_t parent = getpid();
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    if (dup2(out[1], 1) < 0 || dup2(in[0], 0) < 0) _exit(125);
    char *argv[] = {g_argv[0], (char *)child_case, g_dir, (char *)arg, NULL};
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  close(out[1]);
  close(in[0]);
  *out_rd = out[0];
  *in_wr = in[1];
  return pid;
}

typedef struct reader_s {
  int fd;
  char buf[8192];
  size_t len;
  bool eof;
} reader_t;

/* One line (without '\n') into line: 1; 0 when the deadline passed first;
   -1 at end of file. */
static int read_line(reader_t *r, char *line, size_t cap, int64_t deadline) {
  for (;;) {
    char *nl = memchr(r->buf, '\n', r->len);
    if (nl) {
      size_t n = (size_t)(nl - r->buf);
      CHECK(n < cap);
      memcpy(line, r->buf, n);
      line[n] = '\0';
      memmove(r->buf, nl + 1, r->len - n - 1);
      r->len -= n + 1;
      return 1;
    }
    if (r->eof) return -1;
    int64_t left = deadline - now_ns();
    if (left <= 0) return 0;
    struct pollfd p = {.fd = r->fd, .events = POLLIN};
    int ready = poll(&p, 1, (int)((left + 999999) / 1000000));
    if (ready < 0 && errno == EINTR) continue;
    CHECK(ready >= 0);
    if (ready == 0) continue;
    CHECK(r->len < sizeof r->buf);
    ssize_t got = read(r->fd, r->buf + r->len, sizeof r->buf - r->len);
    if (got < 0 && errno == EINTR) continue;
    CHECK(got >= 0);
    if (got == 0) r->eof = true;
    r->len += (size_t)got;
  }
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  CHECK(n > 0 && n < (int)sizeof line);
  CHECK(write(1, line, (size_t)n) == n); /* one write: a line is whole or absent */
}

static void kill_child(pid_t pid) {
  CHECK(kill(pid, SIGKILL) == 0);
  int status;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child %d ended with status 0x%x",
         (int)pid, status);
}

/* ---- cases: CRC-32C ------------------------------------------------------ */

static void case_crc32c(void) {
  static const struct {
    const char *text;
    uint32_t crc;
  } vectors[] = {{"", 0}, {"a", 0xC1D04330}, {"123456789", 0xE3069283}};
  for (size_t i = 0; i < ARRAY_LEN(vectors); i++) {
    size_t len = strlen(vectors[i].text);
    CHECK_EQ_INT(perf__crc32c(0, vectors[i].text, len), vectors[i].crc);
    CHECK_EQ_INT(perf__crc32c_sw(0, vectors[i].text, len), vectors[i].crc);
  }
  /* RFC 3720 (iSCSI) B.4: 32 bytes of zeros, ones, ascending, descending. */
  uint8_t b[32];
  memset(b, 0, 32);
  CHECK_EQ_INT(perf__crc32c(0, b, 32), 0x8A9136AA);
  memset(b, 0xff, 32);
  CHECK_EQ_INT(perf__crc32c(0, b, 32), 0x62A8AB43);
  for (int i = 0; i < 32; i++)
    b[i] = (uint8_t)i;
  CHECK_EQ_INT(perf__crc32c(0, b, 32), 0x46DD794E);
  CHECK_EQ_INT(perf__crc32c_sw(0, b, 32), 0x46DD794E);
  for (int i = 0; i < 32; i++)
    b[i] = (uint8_t)(31 - i);
  CHECK_EQ_INT(perf__crc32c(0, b, 32), 0x113FDB5C);
  /* Chaining, and both implementations at every length and alignment. */
  CHECK_EQ_INT(perf__crc32c(perf__crc32c(0, "1234", 4), "56789", 5), 0xE3069283);
  static uint8_t buf[4096 + 16];
  uint64_t s = 42;
  for (size_t i = 0; i < sizeof buf; i++)
    buf[i] = (uint8_t)splitmix(&s);
  for (size_t off = 0; off < 16; off++)
    for (size_t len = 0; len < 300; len++)
      CHECK_EQ_INT(perf__crc32c(0, buf + off, len), perf__crc32c_sw(0, buf + off, len));
  CHECK_EQ_INT(perf__crc32c(0, buf, 4096), perf__crc32c_sw(0, buf, 4096));
  printf("crc32c: %s\n", perf__crc32c_hw() ? "SSE4.2 instruction" : "slicing-by-8 tables");
}

/* ---- cases: round trip --------------------------------------------------- */

static void case_round_trip(void) {
  make_dir();
  perf__spool_t *sp = open_spool(BIG_BYTES, 100, 0);
  CHECK(strcmp(perf__spool_dir(sp), g_root) == 0);
  size_t lens[] = {100, 0, 5000, 1, 70000};
  uint64_t seqs[8], bytes = 0;
  for (int i = 0; i < 5; i++) {
    seqs[i] = put(sp, 1, (uint64_t)i, lens[i]);
    bytes += HDR + lens[i];
    if (i > 0) CHECK(seqs[i] > seqs[i - 1]);
  }
  perf__spool_stats_t st = stats(sp);
  CHECK_EQ_INT(st.files, 5);
  CHECK_EQ_INT(st.bytes, bytes);
  CHECK_EQ_INT(st.written, 5);
  dir_count_t c = count_dir(g_root);
  CHECK_EQ_INT(c.batches, 5);
  CHECK_EQ_INT(c.bytes, bytes);
  CHECK_EQ_INT(c.tmps, 0);

  /* The two oldest are sent; the others wait for the next run. */
  for (int i = 0; i < 2; i++) {
    perf__spool_entry_t e;
    CHECK_EQ_INT(perf__spool_peek_oldest(sp, &e), PERF_OK);
    CHECK_EQ_INT(e.seq, seqs[i]);
    CHECK_EQ_INT(id_n(e.id), i);
    CHECK_EQ_INT(e.size, HDR + lens[i]);
    uint8_t *payload;
    size_t len;
    CHECK_EQ_INT(perf__spool_read(sp, &e, &payload, &len), PERF_OK);
    CHECK(payload != NULL);
    CHECK_EQ_INT(len, lens[i]);
    CHECK(payload_matches(e.id, payload, len));
    free(payload);
    CHECK_EQ_INT(perf__spool_remove(sp, &e), PERF_OK);
    CHECK_EQ_INT(perf__spool_remove(sp, &e), PERF__E_SPOOL_GONE);
    CHECK_EQ_INT(perf__spool_read(sp, &e, &payload, &len), PERF__E_SPOOL_GONE);
    CHECK(!exists(e.path));
  }
  perf__spool_close(sp);

  sp = open_spool(BIG_BYTES, 100, 0);
  st = stats(sp);
  CHECK_EQ_INT(st.files, 3);
  CHECK_EQ_INT(st.adopted, 3);
  CHECK_EQ_INT(st.written, 0);
  for (int i = 5; i < 8; i++) {
    seqs[i] = put(sp, 1, (uint64_t)i, 10);
    CHECK(seqs[i] > seqs[i - 1]); /* the order survives the restart */
  }
  got_t got[16];
  size_t n = drain(sp, got, ARRAY_LEN(got), NULL);
  CHECK_EQ_INT(n, 6);
  for (size_t i = 0; i < n; i++) {
    CHECK_EQ_INT(got[i].n, i + 2);
    CHECK_EQ_INT(got[i].seq, seqs[i + 2]);
  }
  perf__spool_entry_t e;
  CHECK_EQ_INT(perf__spool_peek_oldest(sp, &e), PERF__E_SPOOL_EMPTY);

  /* A batch the collector refuses for good goes to quarantine/. */
  uint64_t seq = put(sp, 1, 99, 10);
  CHECK_EQ_INT(perf__spool_peek_oldest(sp, &e), PERF_OK);
  CHECK_EQ_INT(e.seq, seq);
  CHECK_EQ_INT(perf__spool_quarantine(sp, &e, "http 400"), PERF_OK);
  CHECK_EQ_INT(perf__spool_quarantine(sp, &e, "http 400"), PERF__E_SPOOL_GONE);
  st = stats(sp);
  CHECK_EQ_INT(st.quarantined_rejected, 1);
  CHECK_EQ_INT(st.quarantined_corrupt, 0);
  CHECK_EQ_INT(st.files, 0);
  CHECK_EQ_INT(st.bytes, 0);
  CHECK_EQ_INT(count_quarantine(".batch.http_400"), 1);
  c = count_dir(g_root);
  CHECK_EQ_INT(c.batches + c.tmps + c.others, 0);
  perf__spool_close(sp);
}

static void case_bad_arguments(void) {
  make_dir();
  perf__spool_options_t good = {.dir = g_root, .max_bytes = 4096, .max_files = 4};
  perf__spool_t *sp = NULL;
  perf__spool_options_t o = good;
  CHECK_EQ_INT(perf__spool_open(NULL, &sp), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__spool_open(&o, NULL), PERF_E_INVALID_ARGUMENT);
  o.dir = "";
  CHECK_EQ_INT(perf__spool_open(&o, &sp), PERF_E_INVALID_ARGUMENT);
  o = good;
  o.max_bytes = HDR;
  CHECK_EQ_INT(perf__spool_open(&o, &sp), PERF_E_INVALID_ARGUMENT);
  o = good;
  o.max_files = 0;
  CHECK_EQ_INT(perf__spool_open(&o, &sp), PERF_E_INVALID_ARGUMENT);
  o.max_files = PERF__SPOOL_MAX_FILES_LIMIT + 1;
  CHECK_EQ_INT(perf__spool_open(&o, &sp), PERF_E_INVALID_ARGUMENT);
  o = good;
  o.max_age_s = UINT32_MAX;
  CHECK_EQ_INT(perf__spool_open(&o, &sp), PERF_E_INVALID_ARGUMENT);
  perf__spool_io_t broken = g_test_io;
  broken.fsync = NULL;
  o = good;
  o.io = &broken;
  CHECK_EQ_INT(perf__spool_open(&o, &sp), PERF_E_INVALID_ARGUMENT);
  CHECK(sp == NULL);
  /* A root that cannot be created. */
  char file[PATH_LEN], below[PATH_LEN];
  path_in(file, g_dir, "file");
  path_in(below, file, "spool");
  FILE *f = fopen(file, "w");
  CHECK(f != NULL);
  fclose(f);
  o = good;
  o.dir = below;
  CHECK_EQ_INT(perf__spool_open(&o, &sp), PERF_E_SYSTEM);
  CHECK(sp == NULL);

  sp = open_spool(4096, 4, 0);
  uint8_t id[16] = {0};
  CHECK_EQ_INT(perf__spool_put(NULL, id, "x", 1, NULL), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__spool_put(sp, NULL, "x", 1, NULL), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__spool_put(sp, id, NULL, 1, NULL), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__spool_put(sp, id, NULL, 0, NULL), PERF_OK); /* an empty batch */
  perf__spool_entry_t e;
  CHECK_EQ_INT(perf__spool_peek_oldest(NULL, &e), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__spool_peek_oldest(sp, NULL), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__spool_peek_oldest(sp, &e), PERF_OK);
  uint8_t *payload;
  size_t len;
  CHECK_EQ_INT(perf__spool_read(sp, &e, NULL, &len), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__spool_read(sp, &e, &payload, &len), PERF_OK);
  CHECK(payload != NULL);
  CHECK_EQ_INT(len, 0);
  free(payload);
  CHECK_EQ_INT(perf__spool_remove(NULL, &e), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__spool_quarantine(sp, NULL, "x"), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__spool_remove(sp, &e), PERF_OK);
  perf__spool_stats(NULL, NULL);
  perf__spool_close(NULL);
  perf__spool_close(sp);
}

/* ---- cases: bounds ------------------------------------------------------- */

/* A model of the spool's queue: what must remain after each put. */
typedef struct model_s {
  uint64_t n[4096];
  uint64_t size[4096];
  size_t head, count;
  uint64_t bytes, evicted;
} model_t;

static void model_put(model_t *m, uint64_t n, uint64_t size, uint64_t max_bytes, size_t max_files) {
  while (m->count > 0 && (m->count + 1 > max_files || m->bytes + size > max_bytes)) {
    m->bytes -= m->size[m->head];
    m->head++;
    m->count--;
    m->evicted++;
  }
  size_t at = m->head + m->count++;
  CHECK(at < ARRAY_LEN(m->n));
  m->n[at] = n;
  m->size[at] = size;
  m->bytes += size;
}

/* After every put of a burst: the bounds hold on disk, and the counters and
   the queue are exactly the model's (the oldest evicted first). */
static void quota_burst(uint64_t max_bytes, uint32_t max_files, size_t puts, size_t max_len,
                        uint64_t seed) {
  static model_t m;
  memset(&m, 0, sizeof m);
  perf__spool_t *sp = open_spool(max_bytes, max_files, 0);
  for (size_t i = 0; i < puts; i++) {
    size_t len = (size_t)(splitmix(&seed) % (max_len + 1));
    put(sp, 7, i, len);
    model_put(&m, i, HDR + len, max_bytes, max_files);
    dir_count_t c = count_dir(g_root);
    CHECKF(c.batches <= max_files && c.bytes <= max_bytes,
           "after put %zu: %zu files, %" PRIu64 " bytes on disk", i, c.batches, c.bytes);
    CHECK_EQ_INT(c.tmps, 0);
    perf__spool_stats_t st = stats(sp);
    CHECK_EQ_INT(st.files, m.count);
    CHECK_EQ_INT(st.bytes, m.bytes);
    CHECK_EQ_INT(c.batches, m.count);
    CHECK_EQ_INT(c.bytes, m.bytes);
    CHECK_EQ_INT(st.evicted_quota, m.evicted);
    CHECK_EQ_INT(st.written, i + 1);
  }
  perf__spool_close(sp);

  /* Right after a restart: the same files and bytes, all adopted. */
  sp = open_spool(max_bytes, max_files, 0);
  perf__spool_stats_t st = stats(sp);
  CHECK_EQ_INT(st.files, m.count);
  CHECK_EQ_INT(st.bytes, m.bytes);
  CHECK_EQ_INT(st.adopted, m.count);
  CHECK_EQ_INT(st.written + st.evicted_quota + st.quarantined_corrupt + st.write_failed, 0);
  static got_t got[4096];
  size_t n = drain(sp, got, ARRAY_LEN(got), NULL);
  CHECK_EQ_INT(n, m.count);
  for (size_t i = 0; i < n; i++)
    CHECK_EQ_INT(got[i].n, m.n[m.head + i]);
  perf__spool_close(sp);
}

static void case_quota_files(void) {
  make_dir();
  quota_burst(BIG_BYTES, 5, 40, 300, 1);
}

static void case_quota_bytes(void) {
  make_dir();
  quota_burst(8192, 1000, 200, 3000, 2);
}

static void case_quota_both(void) {
  make_dir();
  quota_burst(20000, 7, 300, 4000, 3);
}

static void case_quota_age(void) {
  make_dir();
  int64_t t0 = 1700000000 * SEC, b0 = 1000 * SEC;
  clocks_at(t0, b0, 0);
  perf__spool_t *sp = open_spool(BIG_BYTES, 100, 10);
  put(sp, 3, 0, 10); /* t0 */
  clocks_at(t0, b0, 3 * SEC);
  put(sp, 3, 1, 10);
  clocks_at(t0, b0, 6 * SEC);
  put(sp, 3, 2, 10);
  clocks_at(t0, b0, 10 * SEC); /* exactly 10 s old: kept */
  put(sp, 3, 3, 10);
  CHECK_EQ_INT(stats(sp).evicted_quota, 0);
  clocks_at(t0, b0, 10 * SEC + 1); /* older than 10 s: evicted by the put */
  put(sp, 3, 4, 10);
  perf__spool_stats_t st = stats(sp);
  CHECK_EQ_INT(st.evicted_quota, 1);
  CHECK_EQ_INT(st.files, 4);
  CHECK_EQ_INT(count_dir(g_root).batches, 4);
  clocks_at(t0, b0, 13 * SEC + 1); /* ... and by a peek */
  perf__spool_entry_t e;
  CHECK_EQ_INT(perf__spool_peek_oldest(sp, &e), PERF_OK);
  CHECK_EQ_INT(id_n(e.id), 2);
  CHECK_EQ_INT(e.created_unix_ns, t0 + 6 * SEC);
  CHECK_EQ_INT(stats(sp).evicted_quota, 2);
  CHECK_EQ_INT(count_dir(g_root).batches, 3);
  perf__spool_close(sp);

  /* At open: 2 and 3 are too old by now, 4 is not. */
  clocks_at(t0, b0, 20 * SEC + 1);
  sp = open_spool(BIG_BYTES, 100, 10);
  st = stats(sp);
  CHECK_EQ_INT(st.adopted, 3);
  CHECK_EQ_INT(st.evicted_quota, 2);
  CHECK_EQ_INT(st.files, 1);
  CHECK_EQ_INT(count_dir(g_root).batches, 1);
  got_t got[4];
  CHECK_EQ_INT(drain(sp, got, ARRAY_LEN(got), NULL), 1);
  CHECK_EQ_INT(got[0].n, 4);
  perf__spool_close(sp);
}

/* A wall clock corrected by days (forward, then back) while the spool runs
   and across a restart in the same boot: ages follow the boot clock, so
   nothing is evicted for it. */
static void case_age_wall_clock_jumps(void) {
  make_dir();
  int64_t t0 = 1700000000 * SEC, b0 = 1000 * SEC, day = 86400 * SEC;
  clocks_at(t0, b0, 0);
  perf__spool_t *sp = open_spool(BIG_BYTES, 100, 3600); /* max age 1 h */
  for (uint64_t i = 0; i < 3; i++)
    put(sp, 3, i, 10);
  g_fault.clock_ns = t0 + 8 * day; /* the device's clock corrected by 8 days */
  g_fault.boot_ns = b0 + SEC;
  put(sp, 3, 3, 10);
  perf__spool_entry_t e;
  CHECK_EQ_INT(perf__spool_peek_oldest(sp, &e), PERF_OK);
  CHECK_EQ_INT(id_n(e.id), 0);
  g_fault.clock_ns = t0 - 8 * day; /* and back, past where it began */
  g_fault.boot_ns = b0 + 2 * SEC;
  put(sp, 3, 4, 10);
  CHECK_EQ_INT(stats(sp).evicted_quota, 0);
  perf__spool_close(sp);
  g_fault.clock_ns = t0 + 30 * day; /* restart: same boot, another wall clock */
  g_fault.boot_ns = b0 + 3 * SEC;
  sp = open_spool(BIG_BYTES, 100, 3600);
  CHECK_EQ_INT(stats(sp).evicted_quota, 0);
  CHECK_EQ_INT(stats(sp).files, 5);
  /* An hour of boot clock later, they are an hour old: evicted. */
  g_fault.boot_ns = b0 + 3600 * SEC + 3 * SEC;
  CHECK_EQ_INT(perf__spool_peek_oldest(sp, &e), PERF__E_SPOOL_EMPTY);
  CHECK_EQ_INT(stats(sp).evicted_quota, 5);
  perf__spool_close(sp);
}

/* The headers of the batches in g_root as an earlier boot (or an earlier
   version) left them: boot tag and boot time 0, the header's CRC redone. */
static void forget_boot_of_batches(void) {
  DIR *d = opendir(g_root);
  CHECK(d != NULL);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!ends_with(de->d_name, ".batch")) continue;
    char path[PATH_LEN];
    path_in(path, g_root, de->d_name);
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    uint8_t h[64];
    CHECK(pread(fd, h, 64, 0) == 64);
    memset(h + 48, 0, 12);
    uint32_t crc = perf__crc32c(0, h, 60);
    for (int i = 0; i < 4; i++)
      h[60 + i] = (uint8_t)(crc >> (8 * i));
    CHECK(pwrite(fd, h, 64, 0) == 64);
    close(fd);
  }
  closedir(d);
}

/* Batches of an earlier boot are dated by the wall clock at open, once: one
   dated in the future counts as new (age 0) and then ages on the boot
   clock; a batch is at least as old as one written after it. */
static void case_age_earlier_boot(void) {
  make_dir();
  int64_t t0 = 1700000000 * SEC, b0 = 1000 * SEC, year = 366 * 86400 * SEC;
  clocks_at(t0 + year, b0, 0); /* written while the clock was a year ahead */
  perf__spool_t *sp = open_spool(BIG_BYTES, 100, 10);
  put(sp, 3, 0, 10);
  perf__spool_close(sp);
  forget_boot_of_batches();
  clocks_at(t0, 5 * SEC, 0); /* a new boot: its clock starts again */
  sp = open_spool(BIG_BYTES, 100, 10);
  CHECK_EQ_INT(stats(sp).evicted_quota, 0);
  CHECK_EQ_INT(stats(sp).files, 1);
  g_fault.clock_ns = t0 - 365 * 86400 * SEC; /* wall clock jumps: no matter */
  g_fault.boot_ns = 5 * SEC + 10 * SEC;      /* exactly 10 s later: kept */
  perf__spool_entry_t e;
  CHECK_EQ_INT(perf__spool_peek_oldest(sp, &e), PERF_OK);
  CHECK_EQ_INT(id_n(e.id), 0);
  /* One more, dated 20 s before the next start: the first is as old. */
  clocks_at(t0 - 30 * SEC, 5 * SEC, 10 * SEC); /* wall t0 - 20 s, boot 15 s */
  put(sp, 3, 1, 10);
  perf__spool_close(sp);
  forget_boot_of_batches();
  clocks_at(t0, 7 * SEC, 0); /* another boot */
  sp = open_spool(BIG_BYTES, 100, 10);
  CHECK_EQ_INT(stats(sp).evicted_quota, 2);
  CHECK_EQ_INT(stats(sp).files, 0);
  perf__spool_close(sp);
}

/* Lower bounds at the next start: the oldest go at open, counted. */
static void case_quota_reopen(void) {
  make_dir();
  perf__spool_t *sp = open_spool(BIG_BYTES, 10, 0);
  for (int i = 0; i < 12; i++)
    put(sp, 4, (uint64_t)i, 1000);
  perf__spool_stats_t st = stats(sp);
  CHECK_EQ_INT(st.evicted_quota, 2);
  CHECK_EQ_INT(st.files, 10);
  perf__spool_close(sp);

  sp = open_spool(BIG_BYTES, 10, 0);
  st = stats(sp);
  CHECK_EQ_INT(st.files, 10);
  CHECK_EQ_INT(st.bytes, 10 * (HDR + 1000));
  CHECK_EQ_INT(st.adopted, 10);
  CHECK_EQ_INT(st.evicted_quota, 0);
  CHECK_EQ_INT(st.written, 0);
  perf__spool_close(sp);

  sp = open_spool(BIG_BYTES, 6, 0); /* 4 too many files */
  st = stats(sp);
  CHECK_EQ_INT(st.adopted, 10);
  CHECK_EQ_INT(st.evicted_quota, 4);
  CHECK_EQ_INT(st.files, 6);
  CHECK_EQ_INT(count_dir(g_root).batches, 6);
  perf__spool_close(sp);

  sp = open_spool(3 * (HDR + 1000) + 10, 6, 0); /* 3 too many bytes */
  st = stats(sp);
  CHECK_EQ_INT(st.adopted, 6);
  CHECK_EQ_INT(st.evicted_quota, 3);
  CHECK_EQ_INT(st.files, 3);
  CHECK_EQ_INT(st.bytes, 3 * (HDR + 1000));
  got_t got[8];
  CHECK_EQ_INT(drain(sp, got, ARRAY_LEN(got), NULL), 3);
  for (int i = 0; i < 3; i++)
    CHECK_EQ_INT(got[i].n, 9 + i);
  perf__spool_close(sp);
}

static void case_too_big(void) {
  make_dir();
  perf__spool_t *sp = open_spool(1000, 10, 0);
  put(sp, 5, 0, 1000 - HDR); /* exactly max_bytes */
  uint64_t seq;
  CHECK_EQ_INT(try_put(sp, 5, 1, 1000 - HDR + 1, &seq), PERF_E_NO_MEMORY);
  perf__spool_stats_t st = stats(sp);
  CHECK_EQ_INT(st.refused_too_big, 1);
  CHECK_EQ_INT(st.written, 1);
  CHECK_EQ_INT(st.evicted_quota, 0); /* nothing evicted for a batch that cannot fit */
  CHECK_EQ_INT(st.files, 1);
  dir_count_t c = count_dir(g_root);
  CHECK_EQ_INT(c.batches, 1);
  CHECK_EQ_INT(c.tmps, 0);
  put(sp, 5, 2, 10); /* evicts the full-size one */
  st = stats(sp);
  CHECK_EQ_INT(st.evicted_quota, 1);
  CHECK_EQ_INT(st.files, 1);
  perf__spool_close(sp);
}

/* ---- cases: corrupt files ------------------------------------------------ */

static void batch_path(char *out, const char *dir, uint64_t seq, uint64_t tag, uint64_t n,
                       const char *suffix) {
  uint8_t id[16];
  make_id(tag, n, id);
  char name[128];
  int len = snprintf(name, sizeof name, "%020" PRIu64 "-", seq);
  for (int i = 0; i < 16; i++)
    len += snprintf(name + len, sizeof name - (size_t)len, "%02x", id[i]);
  snprintf(name + len, sizeof name - (size_t)len, "%s", suffix);
  path_in(out, dir, name);
}

static void patch_file(const char *path, off_t off, const void *bytes, size_t len) {
  int fd = open(path, O_WRONLY);
  CHECKF(fd >= 0, "%s: %s", path, strerror(errno));
  CHECK(pwrite(fd, bytes, len, off) == (ssize_t)len);
  close(fd);
}

static void flip_bit(const char *path, off_t off) {
  int fd = open(path, O_RDWR);
  CHECK(fd >= 0);
  uint8_t b;
  CHECK(pread(fd, &b, 1, off) == 1);
  b ^= 0x10;
  CHECK(pwrite(fd, &b, 1, off) == 1);
  close(fd);
}

static void truncate_file(const char *path, off_t len) {
  CHECKF(truncate(path, len) == 0, "%s: %s", path, strerror(errno));
}

static void case_corrupt_files(void) {
  make_dir();
  perf__spool_t *sp = open_spool(BIG_BYTES, 100, 0);
  uint64_t seqs[14];
  for (int i = 0; i < 14; i++)
    seqs[i] = put(sp, 6, (uint64_t)i, 100 + (size_t)i);
  perf__spool_close(sp);
  char p[PATH_LEN];
#define BATCH(i) (batch_path(p, g_root, seqs[i], 6, (i), ".batch"), p)
  flip_bit(BATCH(1), HDR + 50);                /* payload: found by the CRC at read */
  truncate_file(BATCH(3), HDR + 50);           /* torn payload: bad_length */
  truncate_file(BATCH(4), 30);                 /* torn header */
  truncate_file(BATCH(5), 0);                  /* empty */
  patch_file(BATCH(7), 0, "XSPL", 4);          /* bad_magic */
  patch_file(BATCH(8), 4, "\x02\x00", 2);      /* bad_version */
  patch_file(BATCH(10), HDR + 110, "tail", 4); /* longer than its header says: bad_length */
  flip_bit(BATCH(11), 24);                     /* created time: bad_header (header CRC) */
  char other[PATH_LEN];
  batch_path(other, g_root, seqs[12], 6, 999, ".batch"); /* its name names another id */
  CHECK(rename(BATCH(12), other) == 0);
  /* A temporary file left by a write that never finished, a stray file. */
  char tmp[PATH_LEN], stray[PATH_LEN];
  batch_path(tmp, g_root, seqs[13] + 1, 6, 100, ".tmp");
  FILE *f = fopen(tmp, "w");
  CHECK(f != NULL);
  fputs("PSPL\x01", f);
  fclose(f);
  path_in(stray, g_root, "README");
  f = fopen(stray, "w");
  CHECK(f != NULL);
  fclose(f);
#undef BATCH

  sp = open_spool(BIG_BYTES, 100, 0);
  perf__spool_stats_t st = stats(sp);
  CHECK_EQ_INT(st.quarantined_corrupt, 9);
  CHECK_EQ_INT(st.adopted, 6);
  CHECK_EQ_INT(st.files, 6); /* 0 2 6 9 13, and 1 whose payload is checked at read */
  CHECK_EQ_INT(count_quarantine(".batch.bad_length"), 2);
  CHECK_EQ_INT(count_quarantine(".batch.torn"), 1);
  CHECK_EQ_INT(count_quarantine(".batch.empty"), 1);
  CHECK_EQ_INT(count_quarantine(".batch.bad_magic"), 1);
  CHECK_EQ_INT(count_quarantine(".batch.bad_version"), 1);
  CHECK_EQ_INT(count_quarantine(".batch.bad_header"), 1);
  CHECK_EQ_INT(count_quarantine(".batch.bad_id"), 1);
  CHECK_EQ_INT(count_quarantine(".tmp.torn"), 1);
  /* New batches come after everything named before, the temp file too. */
  uint64_t seq = put(sp, 6, 14, 10);
  CHECK(seq > seqs[13] + 1);
  got_t got[16];
  size_t corrupt = 0;
  size_t n = drain(sp, got, ARRAY_LEN(got), &corrupt);
  CHECK_EQ_INT(corrupt, 1);
  CHECK_EQ_INT(n, 6);
  uint64_t want[] = {0, 2, 6, 9, 13, 14};
  for (size_t i = 0; i < n; i++)
    CHECK_EQ_INT(got[i].n, want[i]);
  st = stats(sp);
  CHECK_EQ_INT(st.quarantined_corrupt, 10);
  CHECK_EQ_INT(count_quarantine(".batch.bad_crc"), 1);
  CHECK_EQ_INT(count_quarantine(""), 10);
  CHECK_EQ_INT(st.files, 0);
  perf__spool_close(sp);

  /* Nothing more to set aside; the stray file is left alone. */
  sp = open_spool(BIG_BYTES, 100, 0);
  st = stats(sp);
  CHECK_EQ_INT(st.quarantined_corrupt + st.adopted + st.files, 0);
  CHECK(exists(stray));
  perf__spool_close(sp);
}

/* The quarantine keeps at most PERF__SPOOL_QUARANTINE_LIMIT files; the rest
   are deleted, still counted. */
static void case_quarantine_bounded(void) {
  make_dir();
  size_t total = PERF__SPOOL_QUARANTINE_LIMIT + 8;
  perf__spool_t *sp = open_spool(BIG_BYTES, 100, 0);
  for (size_t i = 0; i < total; i++)
    put(sp, 8, i, 10);
  perf__spool_close(sp);
  DIR *d = opendir(g_root);
  CHECK(d != NULL);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!ends_with(de->d_name, ".batch")) continue;
    char path[PATH_LEN];
    path_in(path, g_root, de->d_name);
    truncate_file(path, 0);
  }
  closedir(d);
  sp = open_spool(BIG_BYTES, 100, 0);
  CHECK_EQ_INT(stats(sp).quarantined_corrupt, total);
  CHECK_EQ_INT(count_quarantine(""), PERF__SPOOL_QUARANTINE_LIMIT);
  CHECK_EQ_INT(count_dir(g_root).batches, 0);
  perf__spool_close(sp);
}

/* ---- cases: injected I/O failures ---------------------------------------- */

/* For n = 1.. calls of `op` per put: the put fails, is counted, leaves no
   file behind, and the spool goes on as if it had not been tried. */
static void fault_case(int op, int max_nth, int err, bool short_write) {
  for (int nth = 1; nth <= max_nth; nth++) {
    char root[PATH_LEN], name[64];
    snprintf(name, sizeof name, "spool-op%d-call%d-err%d-%s", op, nth, err,
             short_write ? "short" : "whole");
    path_in(root, g_dir, name);
    snprintf(g_root, sizeof g_root, "%s", root);
    arm_fault(OP_NONE, 0, 0);
    perf__spool_t *sp = open_spool(BIG_BYTES, 100, 0);
    for (int i = 0; i < 3; i++)
      put(sp, 9, (uint64_t)i, 500);
    int warnings = atomic_load(&g_warnings);
    g_fault.short_write = short_write;
    arm_fault(op, nth, err);
    uint64_t seq;
    int r = try_put(sp, 9, 3, 500, &seq);
    CHECKF(r == PERF_E_SYSTEM, "op %d, call %d: put returned %d", op, nth, r);
    CHECKF(g_fault.calls >= nth, "op %d: only %d calls", op, g_fault.calls);
    CHECK(atomic_load(&g_warnings) > warnings); /* logged */
    perf__spool_stats_t st = stats(sp);
    CHECK_EQ_INT(st.write_failed, 1);
    CHECK_EQ_INT(st.written, 3);
    CHECK_EQ_INT(st.files, 3);
    dir_count_t c = count_dir(root);
    CHECK_EQ_INT(c.batches, 3);
    CHECK_EQ_INT(c.tmps, 0);
    CHECK_EQ_INT(c.others, 0);
    arm_fault(OP_NONE, 0, 0);
    for (int i = 4; i < 6; i++)
      put(sp, 9, (uint64_t)i, 500);
    got_t got[8];
    CHECK_EQ_INT(drain(sp, got, ARRAY_LEN(got), NULL), 5);
    uint64_t want[] = {0, 1, 2, 4, 5};
    for (int i = 0; i < 5; i++)
      CHECK_EQ_INT(got[i].n, want[i]);
    perf__spool_close(sp);
  }
}

static void case_fault_create(void) {
  make_dir();
  fault_case(OP_CREATE, 1, EMFILE, false);
}

static void case_fault_write(void) {
  make_dir();
  fault_case(OP_WRITE, 2, ENOSPC, false); /* the header's write, the payload's */
  fault_case(OP_WRITE, 2, EIO, true);     /* a short write, then an error */
}

static void case_fault_fsync(void) {
  make_dir();
  fault_case(OP_FSYNC, 2, EIO, false); /* the file's, the directory's */
}

static void case_fault_rename(void) {
  make_dir();
  fault_case(OP_RENAME, 1, EIO, false);
}

/* ---- cases: disk full ---------------------------------------------------- */

/* Fill the spool's file system with 16 KiB batches until a put fails, check
   the failures, then free space and write again. */
static void fill_until_full(perf__spool_t *sp) {
  size_t ok = 0, failed = 0;
  for (size_t i = 0; i < 200 && failed < 6; i++) {
    uint64_t seq;
    int r = try_put(sp, 10, i, 16384, &seq);
    if (r == PERF_OK) {
      CHECKF(failed == 0, "put %zu worked after a failure", i);
      ok++;
      continue;
    }
    CHECKF(r == PERF_E_SYSTEM, "put %zu: %d", i, r);
    failed++;
    perf__spool_stats_t st = stats(sp);
    CHECK_EQ_INT(st.write_failed, failed);
    CHECK_EQ_INT(st.written, ok);
    CHECK_EQ_INT(st.files, ok);
    dir_count_t c = count_dir(perf__spool_dir(sp));
    CHECK_EQ_INT(c.batches, ok);
    CHECK_EQ_INT(c.tmps, 0);
  }
  CHECKF(ok >= 3 && failed == 6, "%zu puts worked, %zu failed", ok, failed);
  printf("disk full after %zu batches of 16 KiB\n", ok);
  /* The uploader delivers two: there is room again. */
  for (int i = 0; i < 2; i++) {
    perf__spool_entry_t e;
    uint8_t *payload;
    size_t len;
    CHECK_EQ_INT(perf__spool_peek_oldest(sp, &e), PERF_OK);
    CHECK_EQ_INT(perf__spool_read(sp, &e, &payload, &len), PERF_OK);
    free(payload);
    CHECK_EQ_INT(perf__spool_remove(sp, &e), PERF_OK);
  }
  put(sp, 10, 1000, 16384);
  static got_t got[256];
  CHECK_EQ_INT(drain(sp, got, ARRAY_LEN(got), NULL), ok - 2 + 1);
  CHECK_EQ_INT(got[ok - 2].n, 1000);
  perf__spool_stats_t st = stats(sp);
  CHECK_EQ_INT(st.write_failed, 6);
  CHECK_EQ_INT(st.quarantined_corrupt, 0);
}

static void case_disk_full_tmpfs(void) {
  make_dir();
  if (geteuid() != 0) {
    printf("note: skipped, not root: cannot mount a tmpfs (disk_full_rlimit still runs)\n");
    return;
  }
  /* A mount namespace of our own: the tmpfs disappears with this process
     whatever happens. Without one, the exit handler unmounts it. */
  if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
    printf("note: no private mount namespace (%s)\n", strerror(errno));
  path_in(g_mount, g_dir, "mnt");
  CHECK(mkdir(g_mount, 0700) == 0);
  g_mount_owner = getpid();
  atexit(unmount_tmpfs);
  if (mount("tmpfs", g_mount, "tmpfs", 0, "size=256k,mode=0700") != 0) {
    printf("note: skipped, mounting a tmpfs is not permitted here (%s)\n", strerror(errno));
    g_mount[0] = '\0';
    return;
  }
  path_in(g_root, g_mount, "spool");
  arm_fault(OP_NONE, 0, 0);
  perf__spool_t *sp = open_spool(BIG_BYTES, 1000, 0);
  fill_until_full(sp);
  perf__spool_close(sp);
  sp = open_spool(BIG_BYTES, 1000, 0);
  CHECK_EQ_INT(stats(sp).quarantined_corrupt, 0);
  perf__spool_close(sp);
}

/* A child with a small RLIMIT_FSIZE and SIGXFSZ at its default action (which
   would kill it): puts over the limit fail and are counted, the child lives
   on, and once the limit is raised the same puts work. */
static void case_disk_full_rlimit(void) {
  make_dir();
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_DFL);
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_FSIZE, &rl) == 0);
    rlim_t hard = rl.rlim_max;
    rl.rlim_cur = 8192;
    CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
    perf__spool_t *sp = open_spool(BIG_BYTES, 100, 0);
    put(sp, 11, 0, 8192 - HDR); /* exactly at the limit */
    uint64_t seq;
    for (uint64_t i = 1; i <= 3; i++)
      CHECK_EQ_INT(try_put(sp, 11, i, 8192 - HDR + i, &seq), PERF_E_SYSTEM);
    perf__spool_stats_t st = stats(sp);
    CHECK_EQ_INT(st.write_failed, 3);
    CHECK_EQ_INT(st.written, 1);
    dir_count_t c = count_dir(g_root);
    CHECK_EQ_INT(c.batches, 1);
    CHECK_EQ_INT(c.tmps, 0);
    put(sp, 11, 4, 100);
    rl.rlim_cur = hard;
    CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
    put(sp, 11, 5, 20000);
    got_t got[8];
    CHECK_EQ_INT(drain(sp, got, ARRAY_LEN(got), NULL), 3);
    CHECK_EQ_INT(got[2].n, 5);
    perf__spool_close(sp);
    _exit(0);
  }
  int status;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child ended with status 0x%x%s", status,
         WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ ? " (killed by SIGXFSZ)" : "");
}

/* ---- cases: several processes -------------------------------------------- */

/* Child: open the spool, put 5 batches tagged argv[3], say where, then wait
   to be killed. */
static void child_hold(void) {
  CHECK(g_argc == 4);
  uint64_t tag = strtoull(g_argv[3], NULL, 10);
  perf__spool_t *sp = open_spool_io(BIG_BYTES, 100, 0, NULL);
  for (uint64_t i = 0; i < 5; i++)
    put(sp, tag, i, 200);
  say("ready %s\n", perf__spool_dir(sp));
  char c;
  while (read(0, &c, 1) != 0) { /* until killed (or the parent dies) */
  }
  perf__spool_close(sp);
}

static pid_t start_holder(const char *tag, char *dir, int *in_wr) {
  int rd;
  pid_t pid = spawn_self("child_hold", tag, &rd, in_wr);
  reader_t r = {.fd = rd};
  char line[PATH_LEN + 16];
  int got = read_line(&r, line, sizeof line, now_ns() + WAIT_MS * 1000000LL);
  CHECKF(got == 1 && strncmp(line, "ready ", 6) == 0, "child %s: no ready line", tag);
  CHECK(strlen(line + 6) < PATH_LEN);
  memcpy(dir, line + 6, strlen(line + 6) + 1);
  close(rd);
  return pid;
}

static void expect_batches(perf__spool_t *sp, uint64_t tag, size_t count) {
  got_t got[16];
  size_t n = drain(sp, got, ARRAY_LEN(got), NULL);
  CHECK_EQ_INT(n, count);
  for (size_t i = 0; i < n; i++) {
    CHECK_EQ_INT(got[i].tag, tag);
    CHECK_EQ_INT(got[i].n, i);
  }
}

static void case_two_processes(void) {
  make_dir();
  char dir_a[PATH_LEN], dir_b[PATH_LEN], expect_b[PATH_LEN + 16];
  int in_a, in_b;
  pid_t a = start_holder("1", dir_a, &in_a);
  pid_t b = start_holder("2", dir_b, &in_b);
  CHECK(strcmp(dir_a, g_root) == 0); /* the first owns the root */
  snprintf(expect_b, sizeof expect_b, "%s/%d", g_root, (int)b);
  CHECKF(strcmp(dir_b, expect_b) == 0, "second process in %s", dir_b);
  CHECK_EQ_INT(count_dir(dir_b).batches, 5);

  /* The first dies; the next process takes the root and its batches, and
     leaves the live second one's subdirectory alone. */
  kill_child(a);
  perf__spool_t *sp = open_spool(BIG_BYTES, 100, 0);
  CHECK(strcmp(perf__spool_dir(sp), g_root) == 0);
  perf__spool_stats_t st = stats(sp);
  CHECK_EQ_INT(st.adopted, 5);
  CHECK_EQ_INT(st.files, 5);
  CHECK_EQ_INT(count_dir(dir_b).batches, 5);
  expect_batches(sp, 1, 5);

  /* Two more spools in this process: the second gets <root>/<pid>, a third
     is refused; an empty subdirectory goes at close. */
  perf__spool_options_t o = {.dir = g_root, .max_bytes = BIG_BYTES, .max_files = 100};
  perf__spool_t *sp2 = NULL, *sp3 = NULL;
  CHECK_EQ_INT(perf__spool_open(&o, &sp2), PERF_OK);
  char own[PATH_LEN + 16];
  snprintf(own, sizeof own, "%s/%d", g_root, (int)getpid());
  CHECK(strcmp(perf__spool_dir(sp2), own) == 0);
  CHECK_EQ_INT(perf__spool_open(&o, &sp3), PERF_E_BUSY);
  CHECK(sp3 == NULL);
  CHECK_EQ_INT(stats(sp2).adopted, 0); /* the live second process's are not ours */
  perf__spool_close(sp2);
  CHECK(!exists(own));
  perf__spool_close(sp);

  /* The second dies too: its subdirectory is adopted and removed. */
  kill_child(b);
  sp = open_spool(BIG_BYTES, 100, 0);
  st = stats(sp);
  CHECK_EQ_INT(st.adopted, 5);
  CHECK(!exists(dir_b));
  CHECK_EQ_INT(count_dir(g_root).batches, 5);
  expect_batches(sp, 2, 5);
  perf__spool_close(sp);
  close(in_a);
  close(in_b);
}

/* ---- cases: kill -9 while writing ---------------------------------------- */

/* Child: open the spool, say "open", then put batches (tag 1000 + round)
   forever, saying "put <seq> <n>" only after each put returned success. */
static void child_writer(void) {
  CHECK(g_argc == 4);
  uint64_t round = strtoull(g_argv[3], NULL, 10);
  perf__spool_t *sp = open_spool_io(BIG_BYTES, PERF__SPOOL_MAX_FILES_LIMIT, 0, NULL);
  say("open\n");
  uint64_t s = round;
  for (uint64_t i = 0; i < 1000000; i++) {
    uint64_t seq = put(sp, 1000 + round, i, (size_t)(splitmix(&s) % 8192));
    say("put %" PRIu64 " %" PRIu64 "\n", seq, i);
  }
  perf__spool_close(sp);
}

typedef struct reported_s {
  uint64_t seq[1 << 16];
  size_t count;
} reported_t;

static void case_kill9(void) {
  make_dir();
  uint64_t seed = 20240901;
  const char *env = getenv("SPOOL_TEST_SEED");
  if (env) seed = strtoull(env, NULL, 10);
  printf("kill9: seed %" PRIu64 " (set SPOOL_TEST_SEED to repeat)\n", seed);
  fflush(stdout);
  static reported_t rep;
  static got_t got[1 << 16];
  static uint8_t seen[1 << 16];
  size_t total_reported = 0, total_extra = 0, total_torn = 0;
  for (int round = 0; round < 50; round++) {
    char arg[16];
    snprintf(arg, sizeof arg, "%d", round);
    int rd, in_wr;
    pid_t pid = spawn_self("child_writer", arg, &rd, &in_wr);
    reader_t r = {.fd = rd};
    char line[128];
    int got_line = read_line(&r, line, sizeof line, now_ns() + WAIT_MS * 1000000LL);
    CHECKF(got_line == 1 && strcmp(line, "open") == 0, "seed %" PRIu64 " round %d: no open line",
           seed, round);
    int delay_ms = (int)(splitmix(&seed) % 51);
    int64_t kill_at = now_ns() + delay_ms * 1000000LL;
    rep.count = 0;
    bool killed = false;
    for (;;) {
      int got_one = read_line(&r, line, sizeof line, kill_at);
      if (got_one == 0) {
        CHECKF(!killed, "seed %" PRIu64 " round %d: the pipe stays open after the kill", seed,
               round);
        CHECK(kill(pid, SIGKILL) == 0);
        killed = true;
        kill_at = now_ns() + WAIT_MS * 1000000LL; /* for the rest of its lines */
        continue;
      }
      if (got_one < 0) break;
      uint64_t seq, n;
      CHECKF(sscanf(line, "put %" SCNu64 " %" SCNu64, &seq, &n) == 2, "line '%s'", line);
      CHECK_EQ_INT(n, rep.count);
      CHECK(rep.count < ARRAY_LEN(rep.seq));
      rep.seq[rep.count++] = seq;
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
           "seed %" PRIu64 " round %d: child ended with status 0x%x", seed, round, status);
    close(rd);
    close(in_wr);

    /* The next run: every reported batch once, whole; at most one more (the
       put the kill cut short after its rename); torn temp files set aside. */
    size_t torn_before = count_quarantine(".tmp.torn");
    perf__spool_t *sp = open_spool_io(BIG_BYTES, PERF__SPOOL_MAX_FILES_LIMIT, 0, NULL);
    perf__spool_stats_t st = stats(sp);
    dir_count_t c = count_dir(g_root);
    CHECK_EQ_INT(c.tmps, 0);
    CHECK_EQ_INT(st.files, c.batches);
    CHECK_EQ_INT(st.adopted, c.batches);
    CHECKF(st.quarantined_corrupt <= 1, "seed %" PRIu64 " round %d: %" PRIu64 " quarantined", seed,
           round, st.quarantined_corrupt);
    if (torn_before < PERF__SPOOL_QUARANTINE_LIMIT)
      CHECK_EQ_INT(count_quarantine(".tmp.torn"), torn_before + st.quarantined_corrupt);
    size_t corrupt = 0;
    size_t n = drain(sp, got, ARRAY_LEN(got), &corrupt);
    CHECKF(corrupt == 0, "seed %" PRIu64 " round %d: a renamed batch was bad", seed, round);
    memset(seen, 0, sizeof seen);
    size_t extra = 0;
    for (size_t i = 0; i < n; i++) {
      CHECK_EQ_INT(got[i].tag, 1000 + (uint64_t)round);
      CHECK(got[i].n < ARRAY_LEN(seen));
      CHECKF(!seen[got[i].n], "seed %" PRIu64 " round %d: batch %" PRIu64 " twice", seed, round,
             got[i].n);
      seen[got[i].n] = 1;
      if (got[i].n < rep.count) {
        CHECK_EQ_INT(got[i].seq, rep.seq[got[i].n]);
      } else {
        CHECKF(got[i].n == rep.count,
               "seed %" PRIu64 " round %d: batch %" PRIu64 " delivered, %zu reported", seed, round,
               got[i].n, rep.count);
        extra++;
      }
    }
    for (size_t i = 0; i < rep.count; i++)
      CHECKF(seen[i], "seed %" PRIu64 " round %d: reported batch %zu missing", seed, round, i);
    CHECK_EQ_INT(n, rep.count + extra);
    total_reported += rep.count;
    total_extra += extra;
    total_torn += st.quarantined_corrupt;
    perf__spool_close(sp);
  }
  printf("kill9: 50 rounds, %zu batches reported and delivered once, %zu written but not "
         "reported, %zu torn temp files set aside\n",
         total_reported, total_extra, total_torn);
}

/* ---- cases: threads ------------------------------------------------------ */

typedef struct race_s {
  perf__spool_t *sp;
  atomic_bool writer_done;
  size_t puts;
  size_t removed, gone;
  uint8_t *delivered;
} race_t;

static void *race_writer(void *arg) {
  race_t *r = arg;
  for (size_t i = 0; i < r->puts; i++)
    put(r->sp, 12, i, i % 700);
  atomic_store(&r->writer_done, true);
  return NULL;
}

static void *race_uploader(void *arg) {
  race_t *r = arg;
  for (;;) {
    bool done = atomic_load(&r->writer_done);
    perf__spool_entry_t e;
    int err = perf__spool_peek_oldest(r->sp, &e);
    if (err == PERF__E_SPOOL_EMPTY) {
      if (done) break;
      sched_yield();
      continue;
    }
    CHECK_EQ_INT(err, PERF_OK);
    uint8_t *payload = NULL;
    size_t len;
    err = perf__spool_read(r->sp, &e, &payload, &len);
    if (err == PERF__E_SPOOL_GONE) { /* evicted meanwhile */
      r->gone++;
      continue;
    }
    CHECKF(err == PERF_OK, "read: %d", err);
    for (int i = 0; i < 50; i++) /* sending takes a while */
      CHECK(payload_matches(e.id, payload, len));
    free(payload);
    err = perf__spool_remove(r->sp, &e);
    if (err == PERF__E_SPOOL_GONE) {
      r->gone++;
      continue;
    }
    CHECK_EQ_INT(err, PERF_OK);
    CHECK(!r->delivered[id_n(e.id)]);
    r->delivered[id_n(e.id)] = 1;
    r->removed++;
    perf__spool_stats_t st = stats(r->sp);
    CHECK(st.files <= 16 && st.bytes <= 8192);
  }
  return NULL;
}

/* A fast writer (no fsync) and a slower uploader on a small spool: every
   batch is delivered once or evicted, never both, never lost. */
static void case_threads(void) {
  make_dir();
  g_fault.skip_fsync = true;
  race_t r = {.puts = 3000};
  r.sp = open_spool(8192, 16, 0);
  r.delivered = calloc(r.puts, 1);
  CHECK(r.delivered != NULL);
  pthread_t w, u;
  CHECK(pthread_create(&u, NULL, race_uploader, &r) == 0);
  CHECK(pthread_create(&w, NULL, race_writer, &r) == 0);
  pthread_join(w, NULL);
  pthread_join(u, NULL);
  perf__spool_stats_t st = stats(r.sp);
  CHECK_EQ_INT(st.written, r.puts);
  CHECK_EQ_INT(st.files, 0);
  CHECK_EQ_INT(st.bytes, 0);
  CHECK_EQ_INT(r.removed + st.evicted_quota, r.puts);
  CHECK_EQ_INT(st.quarantined_corrupt + st.write_failed, 0);
  CHECK_EQ_INT(count_dir(g_root).batches, 0);
  printf("threads: %zu delivered, %" PRIu64 " evicted, %zu evicted while being sent\n", r.removed,
         st.evicted_quota, r.gone);
  free(r.delivered);
  perf__spool_close(r.sp);
}

/* ---- main ---------------------------------------------------------------- */

static const test_case_t g_cases[] = {
    TEST_CASE(crc32c),
    TEST_CASE(round_trip),
    TEST_CASE(bad_arguments),
    TEST_CASE(quota_files),
    TEST_CASE(quota_bytes),
    TEST_CASE(quota_both),
    TEST_CASE(quota_age),
    TEST_CASE(age_wall_clock_jumps),
    TEST_CASE(age_earlier_boot),
    TEST_CASE(quota_reopen),
    TEST_CASE(too_big),
    TEST_CASE(corrupt_files),
    TEST_CASE(quarantine_bounded),
    TEST_CASE(fault_create),
    TEST_CASE(fault_write),
    TEST_CASE(fault_fsync),
    TEST_CASE(fault_rename),
    TEST_CASE(disk_full_tmpfs),
    TEST_CASE(disk_full_rlimit),
    TEST_CASE(two_processes),
    TEST_CASE(kill9),
    TEST_CASE(threads),
};

#define CHILD_CASE(fn)                                                                             \
  { #fn, fn, NULL }

static const test_case_t g_children[] = {CHILD_CASE(child_hold), CHILD_CASE(child_writer)};

int main(int argc, char **argv) {
  g_argc = argc;
  g_argv = argv;
  perf__log_set(count_log, NULL);
  if (argc >= 3) { /* a child process of a case, re-executed with its directory */
    use_dir(argv[2]);
    if (test_run_case(g_children, ARRAY_LEN(g_children), argv[1])) return 0;
    return 2;
  }
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
