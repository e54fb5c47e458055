/*
 * rate_interval.h - how sure a rate is: the exact (Garwood) 95% confidence
 * interval of a Poisson count, and the rule that says when two rates differ
 * (docs/api.md "Hang rates and their intervals"). A hang rate is a count of
 * hangs over a watched time; a count of 2 says little about its mean (0.24
 * to 7.2), so a rate is shown with its interval and a difference only when
 * the intervals of the two sides do not overlap. Pure functions, no I/O.
 */
#ifndef PERF_COLLECTOR_RATE_INTERVAL_H
#define PERF_COLLECTOR_RATE_INTERVAL_H

#include <stdbool.h>
#include <stdint.h>

/* A side with fewer hangs, or less watched time, is "not enough data":
   its difference from another is never asserted. */
#define RATE_MIN_COUNT 5
#define RATE_MIN_WATCHED_HOURS 0.1

/* The 95% exact Poisson interval of the mean of a count k: low, the
   0.025 quantile of Gamma(k, 1) (0 when k is 0); high, the 0.975 quantile
   of Gamma(k + 1, 1). These are the chi-square quantiles of Garwood (1936)
   halved: chi2(0.025, 2k) / 2 and chi2(0.975, 2k + 2) / 2. Computed with
   the regularized incomplete gamma function and bisection, to a relative
   error below 1e-9. */
void rate_poisson_interval(uint64_t k, double *low, double *high);

/* The 95% exact (Clopper-Pearson) interval of a share: k of n (events
   of a group among a version's hangs, samples of a stack among its CPU
   samples), the 0.025 quantile of Beta(k, n - k + 1) (0 when k is 0) to
   the 0.975 quantile of Beta(k + 1, n - k) (1 when k is n); [0, 1] for n
   0. To a relative error below 1e-9. */
void rate_binomial_interval(uint64_t k, uint64_t n, double *low, double *high);

/* Enough data to compare: at least RATE_MIN_COUNT events over at least
   RATE_MIN_WATCHED_HOURS. */
bool rate_enough_data(uint64_t count, double hours);

/* How rate b stands against rate a, each given by its interval
   [low, high]: 1 higher (b's low above a's high), -1 lower (b's high
   below a's low), 0 the intervals overlap. */
int rate_compare(double a_low, double a_high, double b_low, double b_high);

#endif
