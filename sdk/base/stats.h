/*
 * stats.h - the SDK's counters (perf_sdk_get_stats), updated with relaxed
 * atomics from any SDK thread or the capture_now caller.
 */
#ifndef PERF_STATS_H
#define PERF_STATS_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct perf__stats_s {
  atomic_uint_fast64_t events_recorded, events_written;
  atomic_uint_fast64_t events_dropped_rate, events_dropped_queue, events_dropped_sink,
      events_dropped_oversized;
  /* the journal of the open batch (sdk/wire/journal.h) */
  atomic_uint_fast64_t events_journaled, events_replayed, journal_torn, journal_write_failed;
  atomic_uint_fast64_t hangs_detected, cpu_bursts, samples_taken, samples_failed;
  /* the CPU monitor's bursts (sdk/monitors/cpu_monitor.c) */
  atomic_uint_fast64_t cpu_bursts_empty, cpu_samples_off_cpu;
  /* the continuous CPU profile (sdk/monitors/cpu_profile.c); hz_now is a gauge */
  atomic_uint_fast64_t cpu_profile_windows, cpu_profile_samples, cpu_profile_samples_dropped,
      cpu_profile_rate_lowered, cpu_profile_hz_now, cpu_profile_cost_us;
  /* the loop registry (sdk/monitors/loop_registry.c) */
  atomic_uint_fast64_t loops_refused;
  /* the uploader */
  atomic_uint_fast64_t batches_sent, batches_retried, batches_rejected, batches_dropped_server;
} perf__stats_t;

#define PERF__COUNT(stats, field, n)                                                               \
  atomic_fetch_add_explicit(&(stats)->field, (n), memory_order_relaxed)

#endif
