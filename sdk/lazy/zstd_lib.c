/*
 * zstd_lib.c - libzstd for libperfsdk-core.so, loaded at the first call
 * (sdk/base/lazy_lib.h): the functions the batch encoder and decoder call,
 * under their own names. Objects counted: compression and decompression
 * contexts (the encoder makes one per batch, so none outlives a batch).
 */
#include <zstd.h>
#include <zstd_errors.h>

#include "sdk/lazy/lazy_fn.h"

/* clang-format off */
#define ZSTD_FNS(X)                                                                                \
  X(FN, size_t, ZSTD_CCtx_reset, (ZSTD_CCtx *a, ZSTD_ResetDirective b), (a, b), (size_t)-1)        \
  X(FN, size_t, ZSTD_CCtx_setParameter, (ZSTD_CCtx *a, ZSTD_cParameter b, int c), (a, b, c),       \
    (size_t)-1)                                                                                    \
  X(FN, size_t, ZSTD_DCtx_reset, (ZSTD_DCtx *a, ZSTD_ResetDirective b), (a, b), (size_t)-1)        \
  X(FN, size_t, ZSTD_DCtx_setParameter, (ZSTD_DCtx *a, ZSTD_dParameter b, int c), (a, b, c),       \
    (size_t)-1)                                                                                    \
  X(FN, size_t, ZSTD_compress2, (ZSTD_CCtx *a, void *b, size_t c, const void *d, size_t e),        \
    (a, b, c, d, e), (size_t)-1)                                                                   \
  X(FN, size_t, ZSTD_compressBound, (size_t a), (a), 0)                                            \
  X(NEW, ZSTD_CCtx *, ZSTD_createCCtx, (void), (), NULL)                                           \
  X(NEW, ZSTD_DCtx *, ZSTD_createDCtx, (void), (), NULL)                                           \
  X(FN, size_t, ZSTD_decompressStream, (ZSTD_DCtx *a, ZSTD_outBuffer *b, ZSTD_inBuffer *c),       \
    (a, b, c), (size_t)-1)                                                                         \
  X(END, size_t, ZSTD_freeCCtx, (ZSTD_CCtx *a), (a), 0)                                            \
  X(END, size_t, ZSTD_freeDCtx, (ZSTD_DCtx *a), (a), 0)                                            \
  X(FN, ZSTD_ErrorCode, ZSTD_getErrorCode, (size_t a), (a), ZSTD_error_GENERIC)                    \
  X(FN, unsigned, ZSTD_isError, (size_t a), (a), 1)
/* clang-format on */

PERF__LAZY_LIBRARY("libzstd.so.1", ZSTD_FNS, NULL)
