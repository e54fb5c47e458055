/*
 * cpu_monitor.h - detects the process burning CPU (above
 * cpu_threshold_percent of one core for cpu_window_ms), then samples its
 * hottest threads at cpu_sample_hz for cpu_burst_ms and records one event
 * per burst, then stays quiet for cpu_cooldown_ms.
 */
#ifndef PERF_CPU_MONITOR_H
#define PERF_CPU_MONITOR_H

#include <stdint.h>

#include "sdk/base/stats.h"
#include "sdk/pipeline/config.h"
#include "sdk/pipeline/recorder.h"

typedef struct perf__cpu_monitor_s perf__cpu_monitor_t;

/* Start the monitor thread ("perf-cpu-mon", a perf__worker). The SDK's own
   threads (every perf__worker, the monitor itself included) are never
   picked as hot threads. Everything passed must outlive the monitor. */
int perf__cpu_monitor_start(const perf__config_t *cfg, perf__recorder_t *recorder,
                            perf__stats_t *stats, perf__cpu_monitor_t **out);

/* Stop the thread; a burst in progress is recorded with what it has.
   Waits until the monotonic deadline_ns (0: no limit); PERF_E_TIMEOUT when
   it was still capturing then (left running: what start was given must
   stay alive). */
int perf__cpu_monitor_stop(perf__cpu_monitor_t *m, int64_t deadline_ns);

#endif
