/*
 * perf_sdk.h - the one public header of libperfsdk, the embedded performance
 * telemetry SDK for Linux apps.
 *
 * Conventions (the same for every function below):
 *  - Functions that can fail return 0 on success and a negative perf_error_t
 *    on failure; perf_strerror() turns a code into a static string.
 *  - Memory returned through an out-parameter belongs to the caller and is
 *    released with perf_free(), unless the function says otherwise.
 *  - Every function is safe to call from any thread at any time; none of them
 *    prints, exits or aborts.
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

#define PERF_SDK_NAME "perf-sdk-c"
#define PERF_SDK_VERSION "0.1.0"

/* The one error enum: 0 is success, every failure is negative. */
typedef enum perf_error_e {
  PERF_OK = 0,
  PERF_E_INVALID_ARGUMENT = -1, /* a NULL pointer, a zero size, an unknown enum value */
  PERF_E_NO_MEMORY = -2,        /* an allocation failed; nothing was changed */
  PERF_E_NO_THREAD = -3,        /* the thread id is not a live thread of this process */
  PERF_E_TIMEOUT = -4,   /* the thread did not answer in time (signal blocked, D state, stopped) */
  PERF_E_BUSY = -5,      /* a capture of that thread is already in flight */
  PERF_E_SIGNAL = -6,    /* no usable real-time signal, or the configured one is taken */
  PERF_E_SYSTEM = -7,    /* a system call failed unexpectedly; see errno-style detail in the log */
  PERF_E_TRUNCATED = -8, /* the output buffer was too small; it holds the innermost frames */
  PERF_E_INVALID_CONFIG = -9, /* a configuration field is out of range; the log names it */
  PERF_E_ALREADY_INITIALIZED =
      -10, /* init called twice, or a setting that only applies before first use */
  PERF_E_NOT_INITIALIZED = -11, /* the call needs perf_sdk_init() first, or came after shutdown */
  PERF_E_UNSUPPORTED = -12,     /* the platform or build lacks the requested feature */
} perf_error_t;

/* A static, never-NULL English description of an error code. */
PERF_API const char *perf_strerror(int err);

/* Release memory the SDK returned to the caller (NULL is fine). */
PERF_API void perf_free(void *p);

/* ------------------------------------------------------------------------ */
/* The any-thread stack sampler                                              */
/* ------------------------------------------------------------------------ */
/*
 * The sampler captures the call stack of any thread of this process from any
 * other thread (or itself) by sending it a dedicated real-time signal whose
 * handler unwinds the interrupted context into preallocated storage. It works
 * without perf_sdk_init(): the handler is installed on first use.
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
  /* How long a capture waits for the target thread, 1..10000 ms.
     Default 100; env PERF_SDK_SAMPLE_TIMEOUT_MS. */
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
   PERF_E_ALREADY_INITIALIZED); mode and timeout may change at any time. */
PERF_API int perf_sampler_configure(const perf_sampler_options_t *opts);

/* The signal number the sampler uses (installing the handler if needed), or
   a negative perf_error_t. */
PERF_API int perf_sampler_signal(void);

/* Kernel thread id of the process's main thread. */
PERF_API pid_t perf_main_thread_id(void);

/*
 * Capture the stack of thread `tid` (a kernel thread id of this process;
 * 0 = the calling thread) into pcs[0..max), innermost first. pcs[0] is the
 * interrupted program counter; the others are return addresses. *count gets
 * the number of frames written. Returns PERF_E_TRUNCATED (with max frames
 * written) when the stack is deeper than max. pcs is owned by the caller.
 */
PERF_API int perf_backtrace_thread(pid_t tid, uintptr_t *pcs, size_t max, size_t *count);

/*
 * Capture and symbolize the stack of `tid` (0 = calling thread) as text:
 * a header line `thread <tid> "<name>"` then one line per frame,
 * `<index> <module basename> 0x<pc> <symbol> + <offset>` (`??` when no symbol
 * is known). *out_text is NUL-terminated, allocated by the SDK, and freed by
 * the caller with perf_free().
 */
PERF_API int perf_backtrace_thread_text(pid_t tid, char **out_text);

/*
 * The same report for every thread of the process, separated by blank lines.
 * A thread that cannot be captured (exited, signal blocked) keeps its header
 * and gets a line `error: <perf_strerror text>`. Free with perf_free().
 */
PERF_API int perf_backtrace_all_threads_text(char **out_text);

#ifdef __cplusplus
}
#endif

#endif /* PERF_SDK_H */
