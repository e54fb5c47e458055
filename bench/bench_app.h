/*
 * bench_app.h - what the benchmarks that build realistic stacks share:
 * the "app" they pretend to be (49 real, named, distinct functions of the
 * including executable, so on-device symbolization finds real names) and a
 * small deterministic random generator. Include it from one .c file of a
 * benchmark only (it defines static functions and data).
 */
#ifndef PERF_BENCH_APP_H
#define PERF_BENCH_APP_H

#include <stdint.h>

static volatile int g_sink;

#define BODY(k)                                                                                    \
  {                                                                                                \
    g_sink += k;                                                                                   \
    g_sink ^= 3 * k;                                                                               \
    g_sink++;                                                                                      \
    g_sink += 5 * k;                                                                               \
    g_sink ^= 7;                                                                                   \
    g_sink++;                                                                                      \
    g_sink += 11 * k;                                                                              \
  }

#define APP_FUNCTIONS(X)                                                                           \
  X(app_main_loop)                                                                                 \
  X(app_dispatch_event)                                                                            \
  X(ui_handle_input)                                                                               \
  X(ui_layout_pass)                                                                                \
  X(ui_measure_text)                                                                               \
  X(ui_render_frame)                                                                               \
  X(net_poll_sockets)                                                                              \
  X(net_read_response)                                                                             \
  X(http_parse_headers)                                                                            \
  X(http_parse_chunked)                                                                            \
  X(json_parse_value)                                                                              \
  X(json_parse_object)                                                                             \
  X(json_parse_array)                                                                              \
  X(json_parse_string)                                                                             \
  X(db_execute_query)                                                                              \
  X(db_fetch_rows)                                                                                 \
  X(db_btree_search)                                                                               \
  X(db_page_read)                                                                                  \
  X(cache_lookup)                                                                                  \
  X(cache_insert)                                                                                  \
  X(cache_evict)                                                                                   \
  X(img_decode_png)                                                                                \
  X(img_inflate_rows)                                                                              \
  X(img_scale_bilinear)                                                                            \
  X(fs_read_config)                                                                                \
  X(fs_watch_changes)                                                                              \
  X(log_write_record)                                                                              \
  X(log_format_line)                                                                               \
  X(crypto_sha256_update)                                                                          \
  X(crypto_verify_signature)                                                                       \
  X(sync_merge_changes)                                                                            \
  X(sync_diff_trees)                                                                               \
  X(sync_apply_patch)                                                                              \
  X(task_run_pending)                                                                              \
  X(task_schedule_next)                                                                            \
  X(timer_fire_expired)                                                                            \
  X(plugin_call_hook)                                                                              \
  X(script_eval_expr)                                                                              \
  X(script_call_function)                                                                          \
  X(script_gc_collect)                                                                             \
  X(model_update_state)                                                                            \
  X(model_notify_observers)                                                                        \
  X(view_bind_data)                                                                                \
  X(view_diff_children)                                                                            \
  X(store_load_profile)                                                                            \
  X(store_save_profile)                                                                            \
  X(settings_apply)                                                                                \
  X(search_index_document)                                                                         \
  X(search_tokenize)                                                                               \
  X(search_rank_results)

#define DEFINE_FN(name) __attribute__((noinline, used)) static void name(void) BODY(__COUNTER__ + 1)
APP_FUNCTIONS(DEFINE_FN)

typedef struct {
  uintptr_t addr;
  const char *name;
} fn_ref_t;

#define REF_FN(name) {(uintptr_t)name, #name},
static const fn_ref_t g_app[] = {APP_FUNCTIONS(REF_FN)};
#define APP_COUNT (sizeof g_app / sizeof g_app[0])

/* xorshift: the same sequence on every run from a benchmark's own seed. */
static uint64_t g_rng = BENCH_RNG_SEED;
static uint32_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (uint32_t)(g_rng >> 16);
}

#endif
