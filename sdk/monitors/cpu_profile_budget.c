/*
 * cpu_profile_budget.c - the continuous CPU profile's budget (see
 * cpu_profile_budget.h). CPU monitor thread.
 */
#include "sdk/monitors/cpu_profile_budget.h"

#include <inttypes.h>
#include <string.h>

#include "sdk/base/log.h"

#define HEADROOM 0.8  /* of the budget a second the rate is sized for */
#define SMOOTHING 0.3 /* the weight of a step's cost in the smoothed rates */
#define RAISE_TO 0.6  /* of the room a raised rate may take */
#define RAISE_AFTER_NS 10000000000LL
#define MINUTE_NS 60000000000.0

static double allowed_rate(const perf__profile_budget_t *b);
static unsigned raised(const perf__profile_budget_t *b, unsigned hz, double room);

void perf__profile_budget_init(perf__profile_budget_t *b, unsigned permille, unsigned max_hz,
                               int64_t now_ns) {
  memset(b, 0, sizeof *b);
  b->per_s = (double)permille * 1e6;
  b->max_hz = max_hz;
  b->changed_ns = now_ns;
}

unsigned perf__profile_budget_step(perf__profile_budget_t *b, unsigned hz, int64_t now_ns,
                                   int64_t dt_ns, const perf__profile_cost_t *cost, bool *lowered) {
  *lowered = false;
  if (dt_ns <= 0) return hz;
  double dt = (double)dt_ns;
  b->steps[b->step++ % PERF__PROFILE_BUDGET_STEPS] = cost->signals_ns + cost->monitor_ns;
  if (b->step == 1) return hz;
  /* The monitor's part: its steady work, and the window's end spread over
     the window. */
  double once = cost->once_ns < cost->monitor_ns ? (double)cost->once_ns : 0;
  double fixed = (double)cost->monitor_ns - once + once * dt / (double)cost->window_ns;
  double fixed_rate = fixed * 1e9 / dt, signal_rate = (double)cost->signals_ns * 1e9 / dt;
  bool first = b->step == 2;
  b->fixed_rate = first ? fixed_rate : (1 - SMOOTHING) * b->fixed_rate + SMOOTHING * fixed_rate;
  b->signal_rate = first ? signal_rate : (1 - SMOOTHING) * b->signal_rate + SMOOTHING * signal_rate;
  double allowed = allowed_rate(b), room = allowed - b->fixed_rate;
  perf__log(PERF__LOG_DEBUG,
            "cpu profile: %u Hz, %.0f us in %.0f ms, %.0f us/s (monitor %.0f us/s), allowed %.0f "
            "us/s",
            hz, (double)(cost->signals_ns + cost->monitor_ns) / 1e3, dt / 1e6,
            (b->fixed_rate + b->signal_rate) / 1e3, b->fixed_rate / 1e3, allowed / 1e3);
  if (b->fixed_rate + b->signal_rate > allowed && hz > 1) {
    /* The rate whose signals the room beside the monitor's part pays for. */
    double want = room > 0 && b->signal_rate > 0 ? hz * room / b->signal_rate : 1;
    *lowered = true;
    return want < 1 ? 1 : want < hz ? (unsigned)want : hz - 1;
  }
  if (hz < b->max_hz && now_ns - b->changed_ns >= RAISE_AFTER_NS && room > 0)
    return raised(b, hz, room);
  return hz;
}

void perf__profile_budget_rate_changed(perf__profile_budget_t *b, unsigned old_hz, unsigned new_hz,
                                       int64_t now_ns) {
  if (old_hz) b->signal_rate *= (double)new_hz / old_hz;
  b->changed_ns = now_ns;
}

/* HEADROOM of the budget a second, and never more than what the last
   minute's steps before the next one left of the minute's. */
static double allowed_rate(const perf__profile_budget_t *b) {
  double spent = 0;
  for (size_t k = 1; k < PERF__PROFILE_BUDGET_STEPS && k <= b->step; k++)
    spent += (double)b->steps[(b->step - k) % PERF__PROFILE_BUDGET_STEPS];
  double allowed = HEADROOM * b->per_s;
  double left = (b->per_s * MINUTE_NS / 1e9 - spent) * 1e9 / PERF__PROFILE_STEP_NS;
  return left < allowed ? left : allowed;
}

/* Up again, slowly: to what RAISE_TO of the room pays for, at most
   double (an idle process's signals say nothing: a half more). */
static unsigned raised(const perf__profile_budget_t *b, unsigned hz, double room) {
  double want = b->signal_rate > 0 ? hz * RAISE_TO * room / b->signal_rate : hz * 1.5 + 1;
  if (want > 2.0 * hz) want = 2.0 * hz;
  if (want > b->max_hz) want = b->max_hz;
  return want > hz * 1.2 ? (unsigned)want : hz;
}
