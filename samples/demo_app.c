/*
 * demo_app.c - a small app with the SDK switched on: a poll()-based event
 * loop that tells the hang monitor when it is busy and when it is idle,
 * serves a stream of requests, and has two performance problems for the SDK
 * to catch:
 *
 *  - a hang: the "load_user_profile" request spins for ~1 s on the loop
 *    thread in load_user_profile -> parse_profile_blob ->
 *    checksum_profile_slowly, well over the 250 ms hang threshold;
 *  - a CPU burst: after the hang, the "image-worker" thread burns ~3 s of CPU
 *    in resize_images -> apply_filter -> convolve_kernel while the loop sits
 *    idle in poll().
 *
 * At the end it records a manual event (perf_sdk_capture_now), shuts the SDK
 * down and prints its counters. Events go to perf-report.txt in the current
 * directory unless PERF_SDK_SINK / PERF_SDK_SINK_PATH say otherwise.
 *
 * Build and run: ./scripts/demo.sh (runs it in a temporary directory and
 * prints the report).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "perf_sdk.h"

/* Keep every function of the chains a frame of its own under its own name:
   no inlining, and no GCC clones (".constprop.0") at -O2. */
#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noclone))
#endif

#define TICK_MS 50            /* the timer delivers one request per tick */
#define TICKS_BEFORE_HANG 20  /* render_tick requests before load_user_profile */
#define TICKS_AFTER_HANG 5    /* and after it */
#define RENDER_WORK_US 1000   /* a quick request: ~1 ms of work */
#define HANG_MS 1000          /* load_user_profile: ~1 s on the loop thread */
#define BURN_MS 3000          /* image-worker: ~3 s of CPU */
#define LOOP_TIMEOUT_MS 20000 /* give up if nothing happens (worker: <= 15 s) */

/* Requests, one byte each on the self-pipe. */
enum request {
  REQ_RENDER_TICK = 'r',
  REQ_LOAD_USER_PROFILE = 'p',
  REQ_IMAGES_DONE = 'i', /* posted by the image worker when it is done */
};

static int g_pipe[2]; /* the self-pipe: [0] polled by the loop, [1] written */
static volatile uint64_t g_sink;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t ms_since(uint64_t start_ns) {
  return (now_ns() - start_ns) / 1000000u;
}

/* ---- The quick request: ~1 ms of work --------------------------------- */

static NOINLINE uint64_t render_tick(unsigned frame) {
  uint64_t deadline = now_ns() + RENDER_WORK_US * 1000u;
  uint64_t x = frame;
  while (now_ns() < deadline)
    for (int i = 0; i < 256; i++)
      x = x * 6364136223846793005u + 1442695040888963407u;
  return x;
}

/* ---- The hang: ~1 s on the loop thread --------------------------------- */

static unsigned char g_profile_blob[4096];

/* Checksums the blob over and over until the deadline: the deterministic
   "slow parser" the hang event should point at. */
static NOINLINE uint64_t checksum_profile_slowly(const unsigned char *blob, size_t len,
                                                 uint64_t deadline) {
  uint64_t h = 1469598103934665603u; /* FNV-1a */
  do {
    for (size_t i = 0; i < len; i++)
      h = (h ^ blob[i]) * 1099511628211u;
  } while (now_ns() < deadline);
  return h;
}

static NOINLINE uint64_t parse_profile_blob(const unsigned char *blob, size_t len) {
  size_t fields = 0;
  for (size_t i = 0; i < len; i++)
    fields += blob[i] == ',';
  uint64_t sum = checksum_profile_slowly(blob, len, now_ns() + HANG_MS * 1000000u);
  return sum ^ fields; /* use the result: no tail call */
}

static NOINLINE uint64_t load_user_profile(unsigned user_id) {
  for (size_t i = 0; i < sizeof g_profile_blob; i++)
    g_profile_blob[i] = i % 16 == 15 ? ',' : (unsigned char)('a' + (i + user_id) % 26);
  uint64_t sum = parse_profile_blob(g_profile_blob, sizeof g_profile_blob);
  return sum + user_id;
}

/* ---- The CPU burst: ~3 s on the image-worker thread -------------------- */

#define IMG_W 64
#define IMG_H 64
static float g_image[IMG_W * IMG_H];
static float g_filtered[IMG_W * IMG_H];

/* A 3x3 convolution of the image's interior: where the burst's samples
   should land. */
static NOINLINE float convolve_kernel(const float *src, float *dst, const float k[9]) {
  float total = 0.0f;
  for (int y = 1; y < IMG_H - 1; y++) {
    for (int x = 1; x < IMG_W - 1; x++) {
      float acc = 0.0f;
      for (int ky = -1; ky <= 1; ky++)
        for (int kx = -1; kx <= 1; kx++)
          acc += src[(y + ky) * IMG_W + x + kx] * k[(ky + 1) * 3 + kx + 1];
      dst[y * IMG_W + x] = acc;
      total += acc;
    }
  }
  return total;
}

static NOINLINE float apply_filter(unsigned pass) {
  float k[9];
  for (int i = 0; i < 9; i++)
    k[i] = (float)((pass + (unsigned)i) % 5) / 16.0f;
  float total = convolve_kernel(g_image, g_filtered, k);
  return total * 0.5f; /* use the result: no tail call */
}

/* Filters the image again and again until the deadline; returns how many
   passes it made. */
static NOINLINE unsigned resize_images(uint64_t deadline) {
  unsigned passes = 0;
  float total = 0.0f;
  for (int i = 0; i < IMG_W * IMG_H; i++)
    g_image[i] = (float)(i % 97) / 97.0f;
  while (now_ns() < deadline)
    total += apply_filter(passes++);
  g_sink += (uint64_t)total;
  return passes;
}

/* The worker waits for its job (queued once the profile is loaded), burns
   CPU, then posts REQ_IMAGES_DONE to the loop through the self-pipe. */
static pthread_mutex_t g_job_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_job_cond = PTHREAD_COND_INITIALIZER;
static int g_job_queued; /* guarded by g_job_lock */
static int g_job_cancel; /* guarded by g_job_lock */

static void queue_image_job(void) {
  pthread_mutex_lock(&g_job_lock);
  g_job_queued = 1;
  pthread_cond_signal(&g_job_cond);
  pthread_mutex_unlock(&g_job_lock);
}

/* Lets the worker exit if its job never came (the loop failed early). */
static void cancel_image_job(void) {
  pthread_mutex_lock(&g_job_lock);
  g_job_cancel = 1;
  pthread_cond_signal(&g_job_cond);
  pthread_mutex_unlock(&g_job_lock);
}

static void *image_worker(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "image-worker");
  pthread_mutex_lock(&g_job_lock);
  while (!g_job_queued && !g_job_cancel)
    pthread_cond_wait(&g_job_cond, &g_job_lock);
  int cancel = g_job_cancel;
  pthread_mutex_unlock(&g_job_lock);
  if (cancel) return NULL;

  /* Burn at least BURN_MS, and on a busy machine until the SDK has seen the
     burst and sampled it for a while (cpu_burst_ms is 1 s), at most 15 s. */
  uint64_t start = now_ns(), burst_seen = 0;
  unsigned passes = 0;
  for (;;) {
    passes += resize_images(now_ns() + 100 * 1000000u);
    perf_sdk_stats_t st;
    if (!burst_seen && perf_sdk_get_stats(&st) == 0 && st.cpu_bursts > 0) burst_seen = now_ns();
    uint64_t now = now_ns();
    if (now - start >= 15000 * 1000000ull) break;
    if (now - start >= BURN_MS * 1000000ull && burst_seen && now - burst_seen >= 1500 * 1000000ull)
      break;
  }
  printf("image-worker: %u filter passes in %" PRIu64 " ms\n", passes, ms_since(start));
  fflush(stdout);
  char req = REQ_IMAGES_DONE;
  if (write(g_pipe[1], &req, 1) != 1) perror("image-worker: write");
  return NULL;
}

/* ---- The event loop ---------------------------------------------------- */

struct loop {
  int timer_fd;
  unsigned scripted; /* requests the timer has delivered so far */
  int script_done;   /* the timer has nothing more to deliver */
  int images_done;   /* the worker posted REQ_IMAGES_DONE */
};

/* The requests the timer delivers, one per tick, in order; 0 when done. */
static int scripted_request(unsigned i) {
  if (i < TICKS_BEFORE_HANG) return REQ_RENDER_TICK;
  if (i == TICKS_BEFORE_HANG) return REQ_LOAD_USER_PROFILE;
  if (i <= TICKS_BEFORE_HANG + TICKS_AFTER_HANG) return REQ_RENDER_TICK;
  return 0;
}

static void handle_request(struct loop *loop, int req) {
  switch (req) {
  case REQ_RENDER_TICK: g_sink += render_tick(loop->scripted); break;
  case REQ_LOAD_USER_PROFILE: {
    perf_sdk_loop_busy_label("GET /profile"); /* a unit of work of its own, named */
    uint64_t start = now_ns();
    g_sink += load_user_profile(42);
    printf("load_user_profile: %" PRIu64 " ms on the loop thread\n", ms_since(start));
    fflush(stdout);
    queue_image_job(); /* the profile's pictures need thumbnails */
    break;
  }
  case REQ_IMAGES_DONE:
    printf("loop: thumbnails published\n");
    fflush(stdout);
    loop->images_done = 1;
    break;
  default: fprintf(stderr, "loop: unknown request '%c'\n", req); break;
  }
}

static void on_timer(struct loop *loop) {
  uint64_t expirations;
  /* Ticks missed while a request hung are coalesced into one, like frames. */
  if (read(loop->timer_fd, &expirations, sizeof expirations) != sizeof expirations) return;
  int req = scripted_request(loop->scripted);
  if (req == 0) return;
  handle_request(loop, req);
  loop->scripted++;
  if (scripted_request(loop->scripted) == 0) {
    /* Nothing more to deliver: stop the timer and wait for the worker. */
    struct itimerspec off = {{0, 0}, {0, 0}};
    timerfd_settime(loop->timer_fd, 0, &off, NULL);
    loop->script_done = 1;
    printf("loop: %u requests served, waiting for image-worker\n", loop->scripted);
    fflush(stdout);
  }
}

static void on_pipe(struct loop *loop) {
  char reqs[64];
  ssize_t n = read(g_pipe[0], reqs, sizeof reqs);
  for (ssize_t i = 0; i < n; i++)
    handle_request(loop, reqs[i]);
}

/* Serves requests until the script is done and the worker has reported
   back. Returns 0, or -1 on a poll error or when nothing happened for
   LOOP_TIMEOUT_MS. */
static int run_loop(struct loop *loop) {
  struct pollfd fds[2] = {
      {.fd = g_pipe[0], .events = POLLIN},
      {.fd = loop->timer_fd, .events = POLLIN},
  };
  while (!(loop->script_done && loop->images_done)) {
    perf_sdk_loop_idle(); /* about to block waiting for work */
    int n = poll(fds, 2, LOOP_TIMEOUT_MS);
    perf_sdk_loop_busy(); /* handling work from here on */
    if (n < 0) {
      if (errno == EINTR) continue; /* e.g. the sampler's signal */
      perror("poll");
      perf_sdk_loop_idle(); /* giving up is not a hang either */
      return -1;
    }
    if (n == 0) {
      fprintf(stderr, "loop: nothing happened for %d ms\n", LOOP_TIMEOUT_MS);
      perf_sdk_loop_idle();
      return -1;
    }
    if (fds[0].revents & POLLIN) on_pipe(loop);
    if (fds[1].revents & POLLIN) on_timer(loop);
  }
  /* The loop is over: what follows (capture, shutdown) is not a hang. */
  perf_sdk_loop_idle();
  return 0;
}

/* ---- SDK setup and the end of the run ---------------------------------- */

static void log_to_stderr(perf_log_level_t level, const char *message, void *user) {
  static const char *const names[] = {"debug", "info", "warn", "error"};
  (void)user;
  const char *name = (unsigned)level < sizeof names / sizeof names[0] ? names[level] : "?";
  fprintf(stderr, "[perf-sdk] %s %s\n", name, message);
}

static void print_stats(void) {
  perf_sdk_stats_t st;
  int err = perf_sdk_get_stats(&st);
  if (err) {
    printf("no SDK stats: %s\n", perf_strerror(err));
    return;
  }
  printf("events recorded: %" PRIu64 "\n", st.events_recorded);
  printf("events written:  %" PRIu64 "\n", st.events_written);
  printf("events dropped:  %" PRIu64 " (rate %" PRIu64 ", queue %" PRIu64 ", sink %" PRIu64 ")\n",
         st.events_dropped_rate + st.events_dropped_queue + st.events_dropped_sink,
         st.events_dropped_rate, st.events_dropped_queue, st.events_dropped_sink);
  printf("hangs detected:  %" PRIu64 "\n", st.hangs_detected);
  printf("cpu bursts:      %" PRIu64 "\n", st.cpu_bursts);
}

int main(void) {
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "demo_app";
  cfg.app_version = "1.0.0";
  cfg.environment = "demo";
  cfg.tags[0] = (perf_tag_t){"region", "local"};
  cfg.tags[1] = (perf_tag_t){"build", "debug"};
  cfg.tags[2] = (perf_tag_t){NULL, NULL};
  /* Report to a file by default. The SDK applies PERF_SDK_SINK and
     PERF_SDK_SINK_PATH itself (they win over these); getenv only decides
     the default written here. */
  if (!getenv("PERF_SDK_SINK")) cfg.sink = PERF_SINK_FILE;
  if (!getenv("PERF_SDK_SINK_PATH")) cfg.sink_path = "perf-report.txt";
  cfg.hang_threshold_ms = 250;
  /* CPU: usage above 10% of a core on every tick for 1.5 s must fire for
     the worker's burn, but not for the 1 s hang, which also spins a core
     (its streak is too short). 10% rather than the default 80% so that a
     busy machine still shows the burst: the worker sharing the cores with
     a build or a test suite stays above it on every tick, and nothing else
     here comes near it (a render tick is 1 ms in 50). One event per run
     (cooldown). */
  cfg.cpu_threshold_percent = 10;
  cfg.cpu_window_ms = 1500;
  cfg.cpu_cooldown_ms = 60000;
  cfg.log_fn = log_to_stderr;

  /* The SDK compiles the loaded modules' unwind rules on its writer thread
     at start, and a capture waits for them: on a loaded machine (or under a
     sanitizer) that can outlast the first second, and the hang below would
     be over before its first sample. One capture of this thread builds them
     now (perf_backtrace_thread shares them with the SDK). */
  uintptr_t pcs[8];
  size_t depth;
  perf_backtrace_thread(0, pcs, sizeof pcs / sizeof pcs[0], &depth);

  int err = perf_sdk_init(&cfg);
  if (err) {
    fprintf(stderr, "perf_sdk_init: %s\n", perf_strerror(err));
    return 1;
  }

  struct loop loop = {.timer_fd = -1};
  if (pipe2(g_pipe, O_NONBLOCK | O_CLOEXEC) != 0) {
    perror("pipe2");
    return 1;
  }
  loop.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (loop.timer_fd < 0) {
    perror("timerfd_create");
    return 1;
  }
  struct itimerspec every_tick = {{0, TICK_MS * 1000000L}, {0, TICK_MS * 1000000L}};
  timerfd_settime(loop.timer_fd, 0, &every_tick, NULL);

  pthread_t worker;
  if (pthread_create(&worker, NULL, image_worker, NULL) != 0) {
    fprintf(stderr, "pthread_create failed\n");
    return 1;
  }

  int status = run_loop(&loop) == 0 ? 0 : 1;
  cancel_image_job(); /* no-op when the job already ran */
  pthread_join(worker, NULL);

  err = perf_sdk_capture_now("demo finished");
  if (err) fprintf(stderr, "perf_sdk_capture_now: %s\n", perf_strerror(err));
  err = perf_sdk_shutdown(5000);
  if (err) fprintf(stderr, "perf_sdk_shutdown: %s\n", perf_strerror(err));
  print_stats();

  close(loop.timer_fd);
  close(g_pipe[0]);
  close(g_pipe[1]);
  return status;
}
