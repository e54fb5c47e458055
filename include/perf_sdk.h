/*
 * perf_sdk.h - the one public header of libperfsdk, the embedded performance
 * telemetry SDK for Linux apps.
 *
 * Conventions (the same for every function below):
 *  - Functions that can fail return 0 on success and a negative perf_error_t
 *    on failure; perf_strerror() turns a code into a static string.
 *  - Memory returned through an out-parameter belongs to the caller and is
 *    released with perf_free(), unless the function says otherwise.
 *  - Every function may be called from any thread, before perf_sdk_init,
 *    twice, or after perf_sdk_shutdown (it then returns an error code);
 *    none of them prints, exits or aborts.
 *  - Signal handlers: only the functions marked "async-signal-safe" may be
 *    called from one (the loop marks, perf_strerror). The others take
 *    locks and allocate, so they are not async-signal-safe; but when one
 *    is called from a signal handler (or the log callback) that
 *    interrupted another SDK call on the same thread, it returns
 *    PERF_E_BUSY at once, changing nothing, instead of deadlocking.
 *  - fork: the SDK holds none of its locks across fork() (it waits for a
 *    capture or a rule build in flight to end first). A child that goes on
 *    without exec restarts the SDK by itself at its next SDK call or loop
 *    mark (see perf_sdk_init). exec replaces the SDK with the new program.
 *  - exit: when the process exits (return from main, exit()), what was
 *    recorded is written or spooled within exit_timeout_ms; _exit() and
 *    crashes are not covered.
 */
#ifndef PERF_SDK_H
#define PERF_SDK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(PERF_SDK_BUILD)
#define PERF_API __attribute__((visibility("default")))
#else
#define PERF_API
#endif

/* PERF_DEPRECATED(msg): a function or type kept for the apps that use it,
   with a better way named in msg; a call compiles with a warning
   (-Wdeprecated-declarations). Deprecated functions stay exported, with
   their behaviour, until the next major version. */
#if defined(__GNUC__) || defined(__clang__)
#define PERF_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define PERF_DEPRECATED(msg)
#endif

/* PERF_EXPERIMENTAL_API: an exported function whose name, parameters or
   behaviour may still change in a minor version (docs/versions.md). An
   app that wants to be told where it uses one defines
   PERF_SDK_WARN_EXPERIMENTAL before including this header: each call then
   compiles with a -Wdeprecated-declarations warning saying so. */
#if defined(PERF_SDK_WARN_EXPERIMENTAL)
#define PERF_EXPERIMENTAL_API                                                                      \
  PERF_API PERF_DEPRECATED("experimental perf sdk API: may change in a minor version")
#else
#define PERF_EXPERIMENTAL_API PERF_API
#endif

#define PERF_SDK_NAME "perf-sdk-c"
/* The version of this header, the same as the library's built with it
   (the CMake project version; the build checks they agree). A change of
   MAJOR or MINOR may change the ABI between the front (libperfsdk.so) and
   its core; PATCH never does. */
#define PERF_SDK_VERSION_MAJOR 0
#define PERF_SDK_VERSION_MINOR 1
#define PERF_SDK_VERSION_PATCH 0
#define PERF_SDK_VERSION "0.1.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH, for #if: 0.1.0 is 100. */
#define PERF_SDK_VERSION_NUMBER                                                                    \
  (PERF_SDK_VERSION_MAJOR * 10000 + PERF_SDK_VERSION_MINOR * 100 + PERF_SDK_VERSION_PATCH)

/* The one error enum: 0 is success, every failure is negative. Values are
   never renumbered; new ones are added at the end. Each function below
   says which codes it returns and why; docs/operations.md ("Errors") has
   the same per code. */
typedef enum perf_error_e {
  PERF_OK = 0,
  /* A NULL pointer, a size or timeout out of range; also
     perf_sdk_loop_nested_end without a begin. */
  PERF_E_INVALID_ARGUMENT = -1,
  /* An allocation failed, or a bound was reached (a text report's 64 MiB,
     the SDK's threads, PERF_SDK_MAX_LOOPS watched loops); nothing was
     changed. */
  PERF_E_NO_MEMORY = -2,
  /* The thread id is not a live thread of this process; or a loop call
     (mark, nested_begin/end) from a thread that has no watched loop: it
     neither registered one (perf_sdk_loop_register) nor is the watched
     thread. */
  PERF_E_NO_THREAD = -3,
  /* A capture: the thread did not answer the sampler in time (it blocks
     the sampler's signal, got no CPU within timeout_ms, or kept waking and
     blocking). */
  PERF_E_TIMEOUT = -4,
  /* The sampler is already capturing that thread, or cannot send another
     request now (every request slot in use, the signal queue full); or an
     SDK call is already in progress on this thread (a signal handler or the
     log callback called back into the SDK). In an event, a CPU profile's
     sample not taken: before its thread's stack or unwind rules were
     learned, with the sample ring full, or of a thread past the bound. */
  PERF_E_BUSY = -5,
  /* No usable real-time signal: none free, the configured one is taken, or
     the app replaced the sampler's handler (nothing is sent then). */
  PERF_E_SIGNAL = -6,
  /* A system call (or libdwfl) failed or answered unexpectedly. */
  PERF_E_SYSTEM = -7,
  /* The stack was deeper than the output buffer; it holds the innermost
     frames. */
  PERF_E_TRUNCATED = -8,
  /* A configuration field or sampler option is out of range; the log names
     it. */
  PERF_E_INVALID_CONFIG = -9,
  /* perf_sdk_init while running, or a sampler setting (signal, stack copy
     size) that only applies before the sampler's first use. */
  PERF_E_ALREADY_INITIALIZED = -10,
  /* The call needs perf_sdk_init() first, or came after perf_sdk_shutdown. */
  PERF_E_NOT_INITIALIZED = -11,
  /* The SDK's core library, or what a feature needs (libdwfl for
     PERF_UNWIND_STACK_COPY), could not be loaded or set up; the log says
     which. */
  PERF_E_UNSUPPORTED = -12,
  /* perf_sdk_capture_now over max_events_per_hour: the event was dropped
     (counted in events_dropped_rate). */
  PERF_E_RATE_LIMITED = -13,
  /* perf_sdk_capture_now with queue_capacity events already waiting for
     the writer: the event was dropped (counted in events_dropped_queue). */
  PERF_E_QUEUE_FULL = -14,
  /* timeout_ms ran out first: what perf_sdk_flush had not written or sent
     yet is written and sent later; perf_sdk_shutdown leaves a still busy
     SDK thread running. */
  PERF_E_DEADLINE = -15,
  /* Recorded events were lost: a batch could not be put into the spool
     (disk full, I/O error, over spool_max_bytes), or the spool could not be
     opened; the log says why. */
  PERF_E_SINK_FAILED = -16,
} perf_error_t;

/* A static, never-NULL English description of an error code.
   Async-signal-safe. */
PERF_API const char *perf_strerror(int err);

/* Release memory the SDK returned to the caller (NULL is fine). */
PERF_API void perf_free(void *p);

/* The version of the library answering ("0.1.0", static, never NULL):
   PERF_SDK_VERSION of the header it was built with, which may differ from
   the app's. libperfsdk.so answers its own version; it loads its core only
   when both have the same MAJOR.MINOR (docs/versions.md). */
PERF_API const char *perf_sdk_version(void);

/* ------------------------------------------------------------------------ */
/* The any-thread stack sampler                                              */
/* ------------------------------------------------------------------------ */
/*
 * The sampler captures the call stack of any thread of this process from any
 * other thread (or itself) by sending it a dedicated real-time signal whose
 * handler unwinds the interrupted context into preallocated storage. It works
 * without perf_sdk_init(): the handler is installed on first use.
 *
 * What the app sees of it:
 *  - A thread blocked in a system call (nanosleep, poll, epoll_wait, select,
 *    read, accept, futex waits, ...) is never signalled: its stack is read
 *    through /proc while it blocks, so no call of the app returns EINTR or
 *    early because of a capture. (A thread caught in the microsecond in
 *    which it enters a blocking call can still be interrupted there; see
 *    docs/operations.md, "Side effects on the app".)
 *  - A thread that blocks the sampler's signal keeps none: its mask is read
 *    as the signal flies and a signal it blocks is taken back at once (the
 *    capture fails with PERF_E_TIMEOUT after min(timeout_ms, 100 ms) of
 *    looking), so none stays pending to kill a program the thread execs
 *    (short of a race of a few microseconds: docs/operations.md).
 *  - No signal is sent once the app replaced the sampler's handler (set it
 *    to SIG_DFL, SIG_IGN or its own): captures of running threads then fail
 *    with PERF_E_SIGNAL.
 *  - The handler needs about 0.5 KiB of the interrupted thread's stack beyond
 *    the kernel's signal frame, and never binds a symbol lazily.
 */

/* How the signal handler turns the interrupted context into a stack. */
typedef enum perf_unwind_mode_e {
  /* Default. Call-frame information (.eh_frame) compiled per module into
     compact rules off the handler; the handler follows them at frame-pointer
     speed, and falls back to frame pointers where a module has no rules. */
  PERF_UNWIND_CFI = 0,
  /* Frame pointers only: fastest, loses frames in code built without them. */
  PERF_UNWIND_FRAME_POINTER = 1,
  /* The handler copies the top of the stack (stack_copy_bytes) and the
     requesting thread unwinds the copy with elfutils libdwfl. Slowest;
     useful as an independent cross-check of PERF_UNWIND_CFI. */
  PERF_UNWIND_STACK_COPY = 2,
} perf_unwind_mode_t;

typedef struct perf_sampler_options_s {
  /* Real-time signal to use, or 0 to pick a free one between SIGRTMIN and
     SIGRTMAX at install (the highest one with the default disposition).
     Default 0; env PERF_SDK_SAMPLE_SIGNAL. Only honoured before first use. */
  int signal;
  /* Default PERF_UNWIND_CFI; env PERF_SDK_UNWIND_MODE=cfi|fp|stack_copy. */
  perf_unwind_mode_t unwind_mode;
  /* How long a capture waits for the target thread's answer, 1..10000 ms:
     a thread starved of CPU on a loaded machine answers late, with the
     stack it was preempted in. Default 1000; env PERF_SDK_SAMPLE_TIMEOUT_MS.
     A thread that blocks the signal is waited for min(timeout_ms, 100). */
  unsigned timeout_ms;
  /* Bytes of stack copied per capture in PERF_UNWIND_STACK_COPY mode,
     1024..1048576, default 32768; env PERF_SDK_STACK_COPY_BYTES.
     Only honoured before first use (the copy buffers are preallocated). */
  size_t stack_copy_bytes;
} perf_sampler_options_t;

/* Fill *opts with the defaults above (environment overrides not applied). */
PERF_API void perf_sampler_options_init(perf_sampler_options_t *opts);

/* Apply sampler options. Call before the first capture to choose the signal
   or the stack copy size (later calls that change them get
   PERF_E_ALREADY_INITIALIZED); mode and timeout may change at any time.
   Returns PERF_E_INVALID_ARGUMENT (opts NULL), PERF_E_INVALID_CONFIG (an
   option out of range, logged), PERF_E_ALREADY_INITIALIZED, PERF_E_BUSY
   (called from a signal handler inside another SDK call), PERF_E_UNSUPPORTED
   (libperfsdk.so: the core library could not be loaded). */
PERF_API int perf_sampler_configure(const perf_sampler_options_t *opts);

/* The signal number the sampler uses (installing the handler if needed), or
   a negative perf_error_t: PERF_E_SIGNAL (no usable signal), PERF_E_NO_MEMORY,
   PERF_E_BUSY (inside another SDK call on this thread), PERF_E_UNSUPPORTED
   (the core library could not be loaded). */
PERF_API int perf_sampler_signal(void);

/* Kernel thread id of the process's main thread. */
PERF_API pid_t perf_main_thread_id(void);

/*
 * Capture the stack of thread `tid` (a kernel thread id of this process;
 * 0 = the calling thread) into pcs[0..max), innermost first. pcs[0] is the
 * interrupted program counter; the others are return addresses. *count gets
 * the number of frames written. Returns PERF_E_TRUNCATED (with max frames
 * written) when the stack is deeper than max. pcs is owned by the caller.
 * Other returns: PERF_E_INVALID_ARGUMENT (pcs or count NULL, max 0, tid < 0),
 * PERF_E_NO_THREAD (tid is not a live thread of this process),
 * PERF_E_TIMEOUT (the thread did not answer: it blocks the sampler's
 * signal, got no CPU within timeout_ms, or kept waking and blocking; also
 * tid 0 from a thread that blocks the signal), PERF_E_BUSY (a capture of
 * that thread is in flight from another thread, no request slot or signal
 * queue room, or called from a signal handler inside another SDK call),
 * PERF_E_SIGNAL (no usable signal, or the app replaced the handler),
 * PERF_E_SYSTEM (/proc or a system call failed), PERF_E_NO_MEMORY,
 * PERF_E_UNSUPPORTED (PERF_UNWIND_STACK_COPY without libdwfl, or the core
 * library could not be loaded).
 */
PERF_API int perf_backtrace_thread(pid_t tid, uintptr_t *pcs, size_t max, size_t *count);

/*
 * Capture and symbolize the stack of `tid` (0 = calling thread) as text:
 * a header line `thread <tid> "<name>"` then one line per function,
 * innermost first:
 *   <index> <module basename> 0x<pc> [inline] <function> <file>:<line>
 *   <index> <module basename> 0x<pc> <function> + <offset> <file>:<line>
 *   <index> <module basename> 0x<pc> <module basename>+0x<module-relative address>
 * A frame whose code the compiler inlined is several lines sharing its pc:
 * each inlined function on a line marked `[inline]`, then the function the
 * machine code belongs to with its offset. `<file>:<line>` ends a line when
 * the module's DWARF is found (in it, or in its debug file by build-id or
 * debuglink, as gdb finds it); names are demangled (C++, Rust). Functions
 * are named from every symbol table of the module (.symtab or its debug
 * file's, .dynsym, the PLT stubs as `<function>@plt`), wherever gdb names
 * them; a frame no symbol names is written `<module basename>+0x<address
 * from the module's load base, in hex>` (`??+0x<pc>` when the pc is in no
 * module), as in perf-dump and the collector. A stack that did not
 * reach its outermost frame ends with `<index> <truncated: reason>`
 * (depth, ...). Names are read on the calling thread (symbol tables and
 * DWARF, cached). *out_text is NUL-terminated, allocated by the SDK, and
 * freed by the caller with perf_free(). Returns the codes of
 * perf_backtrace_thread but PERF_E_TRUNCATED (a stack deeper than 1024
 * frames is 0, its text ends with `<truncated: depth>`); PERF_E_NO_MEMORY
 * also for a text over 64 MiB; PERF_E_INVALID_ARGUMENT for out_text NULL.
 */
PERF_API int perf_backtrace_thread_text(pid_t tid, char **out_text);

/*
 * The same report for every thread of the process, separated by blank lines.
 * A thread that cannot be captured (exited, signal blocked) keeps its header
 * and gets a line `error: <perf_strerror text>`. Free with perf_free().
 * Returns PERF_E_INVALID_ARGUMENT (out_text NULL), PERF_E_NO_MEMORY,
 * PERF_E_SYSTEM (/proc/self/task unreadable), PERF_E_BUSY (inside another
 * SDK call on this thread), PERF_E_UNSUPPORTED (the core library could not
 * be loaded).
 */
PERF_API int perf_backtrace_all_threads_text(char **out_text);

/* ------------------------------------------------------------------------ */
/* The SDK: configuration, lifecycle, monitors                               */
/* ------------------------------------------------------------------------ */

/* Where events go. */
typedef enum perf_sink_e {
  PERF_SINK_NONE = 0, /* detect and count, record nothing (dry run) */
  PERF_SINK_FILE = 1, /* append human-readable reports to sink_path */
  PERF_SINK_HTTP = 2, /* send batches to the collector at endpoint, through the disk spool */
} perf_sink_t;

/* Log levels passed to log_fn. */
typedef enum perf_log_level_e {
  PERF_LOG_DEBUG = 0,
  PERF_LOG_INFO = 1,
  PERF_LOG_WARN = 2,
  PERF_LOG_ERROR = 3,
} perf_log_level_t;

/* Called from SDK threads (and from the thread calling perf_sdk_init) with a
   NUL-terminated message that is only valid during the call. Must not call
   back into the SDK. */
typedef void (*perf_log_fn)(perf_log_level_t level, const char *message, void *user);

#define PERF_MAX_TAGS 16        /* free-form key/value tags per process */
#define PERF_MAX_TAG_BYTES 128  /* longest tag key or value, NUL excluded */
#define PERF_MAX_LABEL_BYTES 63 /* longest unit-of-work label kept, NUL excluded */

/* A tag: a key of 1..PERF_MAX_TAG_BYTES bytes without ':' (the
   collector's tag=key:value filter splits at the first colon; a key with
   one is PERF_E_INVALID_CONFIG at init), a value of at most
   PERF_MAX_TAG_BYTES bytes, colons allowed. */
typedef struct perf_tag_s {
  const char *key;
  const char *value;
} perf_tag_t;

/*
 * Configuration. perf_sdk_config_init() fills the defaults given below; the
 * strings are borrowed during perf_sdk_init() only (the SDK copies them).
 * Every operational field can be overridden from the environment as
 * PERF_SDK_<FIELD NAME IN UPPER CASE> (PERF_SDK_SINK=file|http|none,
 * PERF_SDK_HANG_THRESHOLD_MS=500, ...); PERF_SDK_DISABLED=1 turns the SDK
 * off (perf_sdk_init then returns 0 and starts nothing). Out-of-range values
 * make perf_sdk_init fail with PERF_E_INVALID_CONFIG and a log message
 * naming the field and its allowed range. Booleans (PERF_SDK_DISABLED,
 * PERF_SDK_SYMBOLIZE, PERF_SDK_TLS_VERIFY, PERF_SDK_STRICT_ENV) are 1, 0,
 * true, false, yes, no, on or off, in any case. A PERF_SDK_* variable the
 * SDK does not know, and a PERF_SDK_DISABLED it cannot parse, are logged
 * at each perf_sdk_init (a warning naming the variable and the nearest
 * known name; an error naming the variable and its value) unless
 * strict_env makes them fail it.
 */
typedef struct perf_sdk_config_s {
  /* The size of this struct as the app's copy of this header declares it,
     set by perf_sdk_config_init (never by hand). Fields are only ever
     added at the end, so a library newer than the app's header reads the
     fields the app knows and gives the later ones their defaults; an app
     newer than the library is refused (PERF_E_INVALID_CONFIG naming
     struct_size). */
  size_t struct_size;

  /* App metadata, sent with every event. */
  const char *app_name;           /* default: the executable's name; 1..128 bytes */
  const char *app_version;        /* default "unknown"; 1..128 bytes */
  const char *environment;        /* default "production"; 1..128 bytes */
  perf_tag_t tags[PERF_MAX_TAGS]; /* key NULL ends the list */

  perf_sink_t sink;      /* default PERF_SINK_NONE */
  const char *sink_path; /* PERF_SINK_FILE: report file (appended); required */
  const char *data_dir;  /* state across runs (fatal hangs, the spool);
                            default "$XDG_STATE_HOME/perf-sdk/<app_name>" or
                            "~/.local/state/perf-sdk/<app_name>"; NULL or
                            empty string from the env disables fatal-hang
                            reports */
  const char *endpoint;  /* PERF_SINK_HTTP: collector base URL */
  const char *api_key;   /* PERF_SINK_HTTP: bearer token */

  /* Hang monitor (the watched thread's loop busy for too long). */
  unsigned hang_threshold_ms;       /* default 250; 20..60000 */
  unsigned hang_sample_interval_ms; /* default 100; 5..60000 */
  unsigned hang_max_samples;        /* default 20; 1..200 */

  /* CPU-usage monitor (the process burns CPU). */
  /* A burst is found when the process's mean CPU use over the last
     cpu_window_ms is at least cpu_threshold_percent (of one core) and no
     tick of that window (a tenth of it, 20..500 ms) fell under half the
     threshold. */
  unsigned cpu_threshold_percent; /* default 80; 1..25600 */
  unsigned cpu_window_ms;         /* default 2000; 100..600000 */
  unsigned cpu_sample_hz;         /* burst sampling rate; default 100; 1..1000 */
  unsigned cpu_burst_ms;          /* burst length; default 1000; 10..60000 */
  unsigned cpu_top_threads;       /* hottest threads sampled from a burst's start (with CPU timers,
                                     threads that turn hot or start during it too, up
                                     to 64); default 3; 1..64 */
  unsigned cpu_cooldown_ms;       /* quiet time after a burst; default 30000; 0..3600000 */

  unsigned max_events_per_hour; /* default 60; 1..100000 */
  unsigned queue_capacity;      /* events waiting for the writer; default 64; 1..4096 */

  /* Batches (PERF_SINK_HTTP, and the batch records of PERF_SINK_FILE). */
  unsigned batch_max_bytes;    /* serialized size bound; default 1048576; 16384..16777216 */
  unsigned batch_max_delay_ms; /* a batch is closed this long after its first event;
                                  default 10000; 100..3600000 */
  unsigned zstd_level;         /* default 3; 1..19 */
  unsigned symbolize;          /* 1: function names (demangled), and inline chains with
                                  file:line where DWARF is found, go with the frames;
                                  0: addresses only; default 1 */

  /* The disk spool (<data_dir>/spool; for PERF_SINK_FILE <sink_path>.batches). */
  unsigned spool_max_bytes; /* default 33554432 (32 MiB); 65536..4294967295 */
  unsigned spool_max_files; /* default 1000; 1..65536 */
  unsigned spool_max_age_s; /* default 604800 (7 days); 0 = no limit; ..315360000 */

  /* The uploader (PERF_SINK_HTTP). */
  unsigned connect_timeout_ms; /* default 5000; 100..120000 */
  unsigned request_timeout_ms; /* default 30000; 100..600000 */
  unsigned backoff_base_ms;    /* first retry delay ceiling; default 1000; 10..600000 */
  unsigned backoff_cap_ms;     /* largest retry delay ceiling; default 300000; 10..86400000 */
  unsigned max_server_errors;  /* other 5xx: attempts before a batch is dropped; default 5;
                                  1..100 */
  unsigned tls_verify;         /* 1: verify the collector's certificate; default 1 */
  const char *ca_bundle;       /* CA file; NULL: the system's */

  perf_log_fn log_fn; /* default NULL: the SDK says nothing */
  void *log_user;     /* passed to log_fn */

  /* Process exit (return from main, exit()): how long the SDK may delay it
     to write, spool and (http) send what was recorded; what is not sent by
     then stays in the spool for the next run. 0: do nothing at exit.
     Default 300; 0..60000. */
  unsigned exit_timeout_ms;

  /* PERF_SINK_HTTP: the program that sends the batches, a process of its
     own started while there is something to send, so that libcurl, its TLS
     library and the ~35 libraries they need never load into the app (see
     docs/operations.md, "Side effects on the app"). NULL (default): the
     perfsdk/perf-upload installed beside the library; when there is none,
     libcurl is loaded in this process. "off": libcurl in this process. A
     path: that program (perf_sdk_init fails with PERF_E_INVALID_CONFIG when
     it is not executable). Where no helper can run (no process may be
     started, the file does not execute, three helpers in a row end before
     answering), the log says so and libcurl is loaded in this process. */
  const char *upload_helper;

  /* PERF_SINK_HTTP: when no batch has reached the collector for this many
     seconds while batches wait (the collector down, refusing the key, ...),
     one warning to log_fn saying why and what to check; the next one only
     after batches have reached it again and then stopped again. 0: never.
     Default 60; 0..86400. */
  unsigned upload_stall_warn_s;

  /* 1: perf_sdk_init fails with PERF_E_INVALID_CONFIG on a PERF_SDK_*
     environment variable the SDK does not know (a misspelling) or a
     PERF_SDK_DISABLED that is not a boolean, instead of logging it and
     going on (any other value it cannot parse fails init either way).
     Default 0; env PERF_SDK_STRICT_ENV (which wins, as every variable). */
  unsigned strict_env;

  /* The always-on CPU profile (docs/sdk.md "The continuous CPU profile"):
     every thread of the process that burns CPU is sampled at
     cpu_profile_hz per second of its own CPU time, the samples aggregated
     per (stack, thread, state) with the CPU time they stand for, and each
     minute's profile sent as one event of kind "profile" (none for a
     minute without a sample). A CPU burst keeps its own rate and event
     meanwhile. 0: off. Default 0; 0..1000 (19 is a usual choice). */
  unsigned cpu_profile_hz;
  /* The CPU the profile may cost the process (its signal handler on the
     sampled threads, the monitor's draining and aggregating), in
     thousandths of one core: 5 is 0.5% of a core, 5 ms of CPU per second,
     300 ms per minute. Over it the SDK lowers the profile's rate (never
     below 1 Hz; perf_sdk_stats_t.cpu_profile_rate_lowered). Default 5;
     1..1000. */
  unsigned cpu_profile_budget_permille;
} perf_sdk_config_t;

/* Fill the first struct_size bytes of *cfg with the defaults (no
   environment applied yet: perf_sdk_init applies it) and record
   struct_size in it. Called through perf_sdk_config_init, which passes the
   size the app was compiled with. */
PERF_API void perf_sdk_config_init_sized(perf_sdk_config_t *cfg, size_t struct_size);

/* Fill *cfg with the defaults. */
static inline void perf_sdk_config_init(perf_sdk_config_t *cfg) {
  perf_sdk_config_init_sized(cfg, sizeof *cfg);
}

/* Start the monitors and the event writer. The calling thread becomes the
   watched thread of the hang monitor. Returns PERF_E_ALREADY_INITIALIZED when
   running, PERF_E_INVALID_CONFIG (logged, naming the field) on bad config,
   PERF_E_SYSTEM (logged with the path and errno) when the spool directory
   (<data_dir>/spool for PERF_SINK_HTTP, <sink_path>.batches for
   PERF_SINK_FILE) cannot be created or written, or a thread cannot be
   started; PERF_E_INVALID_ARGUMENT (cfg NULL), PERF_E_NO_MEMORY, PERF_E_BUSY
   (called from a signal handler inside another SDK call),
   PERF_E_UNSUPPORTED (libperfsdk.so: the core library could not be loaded,
   or is of another MAJOR.MINOR version: the log names both versions).

   After fork(), in a child that goes on without exec (daemonize, prefork
   servers), the SDK restarts by itself at the child's next SDK call or loop
   mark, with the same configuration: new threads, the child's pid in its
   events, a spool of its own; the thread that forked becomes the watched
   thread. Nothing the parent had queued is written by the child. Called
   in such a child before that restart, perf_sdk_init starts the SDK with
   the new cfg instead (0), and perf_sdk_shutdown cancels the restart (0).
   The child never touches the parent's threads. */
PERF_API int perf_sdk_init(const perf_sdk_config_t *cfg);

/* Stop the monitors, write what is queued, stop the writer; returns within
   timeout_ms (0..600000; events still queued then are dropped and counted).
   PERF_E_DEADLINE when an SDK thread was still busy then (the writer in a
   write that does not return, a monitor in a capture; at least 1 s is given
   to the monitors): it is left running, the rest is stopped.
   PERF_E_NOT_INITIALIZED when not running, PERF_E_INVALID_ARGUMENT for a
   timeout out of range, PERF_E_BUSY inside another SDK call on this thread.
   perf_sdk_init may be called again afterwards. */
PERF_API int perf_sdk_shutdown(int timeout_ms);

/* Make the calling thread the one the hang monitor watches: the thread of
   the loop named "main" (a loop the thread had registered is forgotten).
   PERF_E_NOT_INITIALIZED when not running. */
PERF_API int perf_sdk_watch_current_thread(void);

/* ---- Watched loops ------------------------------------------------------
   The hang monitor watches every loop registered here, each with its own
   threshold and its own hang state: two loops hung at once are two hang
   events, each with its own thread's stacks. The watched thread (the one
   that called perf_sdk_init, or perf_sdk_watch_current_thread) runs the
   loop named "main"; any other thread that runs a loop (a libevent worker
   base, a GLib worker context, a render thread) registers its own. The
   marks below act on the calling thread's loop, found through a
   thread-local pointer (no lock, no system call, no allocation). Events
   and loop statistics name their loop (reports, the wire, perf-dump). */

/* At most this many loops are watched at once, "main" included. */
#define PERF_SDK_MAX_LOOPS 64
/* The longest loop name, NUL excluded. */
#define PERF_SDK_MAX_LOOP_NAME_BYTES 31

/* Register the calling thread's loop under `name` (1..31 bytes of
   A-Z a-z 0-9 . _ -, e.g. "worker-3"), with its own hang threshold:
   threshold_ms 0 takes the config's hang_threshold_ms (and follows it at a
   later perf_sdk_init), else 20..60000 (the range of hang_threshold_ms).
   The loop starts idle; the thread marks it with the calls below. Called
   again on the same thread: the name and threshold are replaced (a hang in
   progress ends). Called on the watched thread: renames its loop (default
   "main") and sets its threshold. Loops of the same name are counted
   together in the loop statistics. A registration outlives
   perf_sdk_shutdown (the thread's loop goes on) and ends with
   perf_sdk_loop_unregister or the thread's exit. Not async-signal-safe
   (the first registration of a thread may allocate its thread-specific
   slot). Returns PERF_E_INVALID_ARGUMENT (a bad name or threshold, logged
   naming it), PERF_E_NO_MEMORY when PERF_SDK_MAX_LOOPS loops are watched
   already (counted in loops_refused, logged once per run),
   PERF_E_NO_THREAD (nothing logged) on one of the SDK's own threads (from
   the log callback), PERF_E_NOT_INITIALIZED when not running. */
PERF_EXPERIMENTAL_API int perf_sdk_loop_register(const char *name, int threshold_ms);

/* Forget the calling thread's loop (its hang in progress ends; its
   statistics so far are still sent). On the watched thread, its loop goes
   back to the name "main" and the config's threshold, still watched.
   A thread that exits is forgotten without this call. PERF_E_NO_THREAD
   when the thread has no loop; PERF_E_NOT_INITIALIZED when not running. */
PERF_EXPERIMENTAL_API int perf_sdk_loop_unregister(void);

/* The calling thread's loop's hang threshold in milliseconds (its own, or
   the config's), for integrations that pace a heartbeat by it (a quarter
   of it: an idle loop's heartbeats then come well within it).
   PERF_E_NO_THREAD on a thread that has no loop, PERF_E_NOT_INITIALIZED
   when not running. Async-signal-safe as the marks. */
PERF_EXPERIMENTAL_API int perf_sdk_loop_threshold_ms(void);

/* Mark the calling thread's loop as busy (it started handling work) / idle
   (it is about to block waiting for work). A thread-local load, two atomic
   stores on the loop's own cache line and a vDSO clock read.
   Async-signal-safe, except the first call in a forked child, which
   restarts the SDK there. These marks, the heartbeat, nested_begin, pause
   and resume below return 0, or PERF_E_NOT_INITIALIZED when not running;
   the marks and nested_begin/end return PERF_E_NO_THREAD, changing
   nothing, on a thread that has no loop (not registered, not the watched
   thread). */
PERF_API int perf_sdk_loop_busy(void);
PERF_API int perf_sdk_loop_idle(void);

/* perf_sdk_loop_busy, naming the unit of work ("GET /users", "render
   frame"): a hang of this unit carries the label (events, reports, the
   collector's label filter). The label is copied (at most
   PERF_MAX_LABEL_BYTES bytes, cut at a UTF-8 character boundary); NULL or
   "" is no label. A memcpy more than perf_sdk_loop_busy; watched thread
   only; async-signal-safe as the marks. */
PERF_API int perf_sdk_loop_busy_label(const char *label);

/* For loops without an idle point: "a new unit of work starts now". A hang
   is then the time between two heartbeats exceeding the threshold.
   Async-signal-safe as the marks above. */
PERF_API int perf_sdk_heartbeat(void);

/* A loop nested inside the current unit of work: redis running its event
   loop from inside a long script to answer BUSY, a GUI toolkit's modal
   dialog loop. Call begin before the nested loop and end after it, on the
   watched thread; in between, busy / idle / heartbeat marks (the nested
   loop's) change nothing, so the outer unit stays one unit of work and is
   reported as one hang, with its stacks, however often the nested loop goes
   idle. Pairs nest. end without begin: PERF_E_INVALID_ARGUMENT. One atomic
   add; async-signal-safe as the marks; PERF_E_NOT_INITIALIZED when not
   running. */
PERF_API int perf_sdk_loop_nested_begin(void);
PERF_API int perf_sdk_loop_nested_end(void);

/* Stop / restart hang detection of every loop, from any thread (nested
   calls do not count: one resume ends any number of pauses). Hangs in
   progress at pause are ended; a loop registered while paused starts
   paused. Async-signal-safe as the marks. */
PERF_API int perf_sdk_pause(void);
PERF_API int perf_sdk_resume(void);

/* Record a manual event with every thread's stack, captured now on the
   calling thread (a few tens of microseconds per thread); the event is then
   queued for the writer. `reason` (may be NULL) travels with the event. A
   thread that cannot be captured is a failed sample of the event, not an
   error. Returns PERF_E_RATE_LIMITED over max_events_per_hour (the event is
   dropped, counted in events_dropped_rate), PERF_E_QUEUE_FULL when
   queue_capacity events already wait for the writer (dropped, counted in
   events_dropped_queue), PERF_E_NOT_INITIALIZED when not running,
   PERF_E_NO_MEMORY, PERF_E_SYSTEM (/proc/self/task unreadable),
   PERF_E_BUSY (called from a signal handler inside another SDK call). */
PERF_API int perf_sdk_capture_now(const char *reason);

/* Send (PERF_SINK_HTTP) or write (PERF_SINK_FILE) everything recorded so
   far, a hang whose unit of work ended before the call included (the hang
   monitor looks at the loop first): the events queued before the call and
   the open batch go to the spool, then the uploader sends until the spool
   is empty. Returns within timeout_ms
   (0..600000): PERF_E_DEADLINE when events or batches remain (nothing is
   dropped for it: the writer and the uploader go on, and what is in the
   spool is sent by the next run if need be), at once when the uploader's
   next try (a backoff after a refusal or an error) comes after timeout_ms;
   PERF_E_SINK_FAILED when a batch could not be put into the spool since the
   previous flush (PERF_SINK_HTTP: its events are counted in
   events_dropped_sink; the log says why), or the spool could not be opened.
   PERF_E_NOT_INITIALIZED when not running, PERF_E_INVALID_ARGUMENT for a
   timeout out of range, PERF_E_BUSY inside another SDK call on this
   thread. */
PERF_API int perf_sdk_flush(int timeout_ms);

/* Counters since init. */
typedef struct perf_sdk_stats_s {
  uint64_t events_recorded;      /* queued for the sink */
  uint64_t events_written;       /* written by the sink (PERF_SINK_HTTP: its batch is in
                                    the spool; PERF_SINK_FILE: its report is in the file) */
  uint64_t events_dropped_rate;  /* over max_events_per_hour */
  uint64_t events_dropped_queue; /* queue full, or still queued at shutdown */
  uint64_t events_dropped_sink;  /* the sink failed to write them (a batch not put into the
                                    spool, a report not written, a torn journal record) */
  uint64_t hangs_detected;
  uint64_t cpu_bursts;
  uint64_t samples_taken;
  uint64_t samples_failed;           /* a capture returned an error */
  uint64_t events_dropped_oversized; /* too large for an empty batch */
  /* Batches and the spool (all 0 with PERF_SINK_NONE). */
  uint64_t batches_written;        /* put into the spool */
  uint64_t batches_sent;           /* acknowledged by the collector (2xx) and deleted */
  uint64_t batches_retried;        /* attempts that will be repeated (network error, 429, 503...) */
  uint64_t batches_rejected;       /* refused for good (4xx): set aside in quarantine/ */
  uint64_t batches_dropped_server; /* other 5xx, after max_server_errors attempts */
  uint64_t batches_quarantined_corrupt; /* torn or corrupt spool files set aside */
  uint64_t batches_evicted;             /* oldest batches dropped for the spool's bounds (quota) */
  uint64_t batches_write_failed;        /* could not be written to the spool (disk full, I/O) */
  uint64_t spool_files;                 /* batches on disk now */
  uint64_t spool_bytes;                 /* their bytes */
  /* The journal of the open batch (docs/internals/spool.md "Journal of the open batch"). */
  uint64_t events_journaled;     /* appended to the journal: a kill -9 from now on loses
                                    nothing of them (PERF_SINK_HTTP and FILE) */
  uint64_t events_replayed;      /* events of earlier runs' journals put into the spool at
                                    start (not in events_recorded/_written of this run) */
  uint64_t journal_torn;         /* torn last records of those journals (the process died
                                    inside the write): dropped, also in events_dropped_sink */
  uint64_t journal_write_failed; /* events not journaled (disk full, I/O): they live only in
                                    the open batch in memory until it is closed */
  /* The CPU monitor's bursts (README "CPU profiles"). */
  uint64_t cpu_bursts_empty;    /* bursts (in cpu_bursts) that caught no thread running: no
                                   CPU event was recorded for them */
  uint64_t cpu_samples_off_cpu; /* burst samples of threads found blocked (in samples_taken):
                                   not CPU samples, left out of the events */
  uint64_t loops_refused;       /* perf_sdk_loop_register calls refused with
                                   PERF_SDK_MAX_LOOPS loops watched */
  /* The continuous CPU profile (cpu_profile_hz; all 0 when off). */
  uint64_t cpu_profile_windows;         /* profile events recorded (windows with samples) */
  uint64_t cpu_profile_samples;         /* samples aggregated into those windows */
  uint64_t cpu_profile_samples_dropped; /* samples not aggregated: the window's table of
                                           (stack, thread, state) entries was full */
  uint64_t cpu_profile_rate_lowered;    /* times the rate was lowered to stay within
                                           cpu_profile_budget_permille */
  uint64_t cpu_profile_hz_now;          /* the rate in use now (a gauge, not a count) */
  uint64_t cpu_profile_cost_us;         /* the SDK's own CPU spent on the profile, microseconds
                                           (what the budget is measured against) */
} perf_sdk_stats_t;

/* Copy the first struct_size bytes of the counters (fields are only ever
   added at the end: an app built against an older, shorter
   perf_sdk_stats_t gets the fields it knows, nothing is written past them;
   struct_size a multiple of 8, at least 8, else PERF_E_INVALID_ARGUMENT).
   Called through perf_sdk_get_stats. PERF_E_NOT_INITIALIZED before init
   (counters of the last run remain readable after shutdown), PERF_E_BUSY
   inside another SDK call on this thread. */
PERF_API int perf_sdk_get_stats_sized(perf_sdk_stats_t *stats, size_t struct_size);

static inline int perf_sdk_get_stats(perf_sdk_stats_t *stats) {
  return perf_sdk_get_stats_sized(stats, sizeof *stats);
}

#ifdef __cplusplus
}
#endif

#endif /* PERF_SDK_H */
