/*
 * stopped_time.c - stops of the process seen by a monitor thread (see
 * stopped_time.h).
 */
#include "sdk/monitors/stopped_time.h"

#include <string.h>
#include <sys/resource.h>

#include "sdk/base/clock.h"

/* Lateness below this is the timer's and the scheduler's noise. */
#define SLACK_NS 20000000

static long voluntary_switches(void) {
  struct rusage u;
  return getrusage(RUSAGE_THREAD, &u) == 0 ? u.ru_nvcsw : -1;
}

void perf__stopped_time_init(perf__stopped_time_t *st) {
  memset(st, 0, sizeof *st);
  st->switches = -1;
}

void perf__stopped_time_before_sleep(perf__stopped_time_t *st) {
  st->switches = voluntary_switches();
}

void perf__stopped_time_after_sleep(perf__stopped_time_t *st, int64_t wake_at_ns) {
  int64_t late = perf__now_ns() - wake_at_ns;
  long now = voluntary_switches();
  bool stopped = st->switches >= 0 && now >= st->switches + 2 && late > SLACK_NS;
  st->switches = -1;
  if (!stopped) return;
  st->stops[st->next % PERF__STOPS_KEPT] = (perf__stop_t){wake_at_ns + late, late};
  st->next++;
}

int64_t perf__stopped_within(const perf__stopped_time_t *st, int64_t from_ns, int64_t to_ns) {
  int64_t total = 0;
  for (unsigned i = 0; i < PERF__STOPS_KEPT; i++) {
    const perf__stop_t *s = &st->stops[i];
    if (s->length_ns <= 0) continue;
    int64_t a = s->end_ns - s->length_ns, b = s->end_ns;
    if (a < from_ns) a = from_ns;
    if (b > to_ns) b = to_ns;
    if (b > a) total += b - a;
  }
  return total;
}
