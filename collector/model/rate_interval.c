/*
 * rate_interval.c - the exact Poisson interval of a count (see
 * rate_interval.h). The quantiles of the gamma distribution come from its
 * regularized lower incomplete function P(a, x), evaluated as Numerical
 * Recipes does (a series below a + 1, a continued fraction above), and
 * inverted by bisection: P is increasing in x, so bisection cannot fail,
 * and 200 halvings of a bracket reach the precision of a double. A
 * share's (binomial) interval inverts the regularized incomplete beta
 * function I_x(a, b) the same way (its continued fraction, Numerical
 * Recipes' betacf).
 */
#include "collector/model/rate_interval.h"

#include <math.h>

#define ALPHA 0.05 /* 95% intervals */
#define EPS 1e-15
#define MAX_TERMS 100000 /* the series and the fraction need about sqrt(a) terms */

/* log Gamma(a), a > 0: lgamma_r, as the read threads call it at once
   (lgamma writes the global signgam). */
static double log_gamma(double a) {
  int sign;
  return lgamma_r(a, &sign);
}

/* P(a, x) by its series, for x < a + 1. */
static double gamma_series(double a, double x) {
  double term = 1.0 / a, sum = term;
  for (int n = 1; n < MAX_TERMS && fabs(term) > fabs(sum) * EPS; n++) {
    term *= x / (a + n);
    sum += term;
  }
  return sum * exp(-x + a * log(x) - log_gamma(a));
}

/* 1 - P(a, x) by its continued fraction (modified Lentz), for x >= a + 1. */
static double gamma_fraction(double a, double x) {
  const double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < MAX_TERMS; i++) {
    double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    double step = d * c;
    h *= step;
    if (fabs(step - 1.0) < EPS) break;
  }
  return exp(-x + a * log(x) - log_gamma(a)) * h;
}

/* The regularized lower incomplete gamma function P(a, x), a > 0. */
static double gamma_p(double a, double x) {
  if (x <= 0) return 0.0;
  return x < a + 1.0 ? gamma_series(a, x) : 1.0 - gamma_fraction(a, x);
}

/* The x where P(a, x) = p, 0 < p < 1. */
static double gamma_quantile(double a, double p) {
  double lo = 0.0, hi = a + 10.0 * sqrt(a) + 10.0;
  while (gamma_p(a, hi) < p)
    hi *= 2.0;
  for (int i = 0; i < 200 && hi - lo > hi * 1e-12; i++) {
    double mid = 0.5 * (lo + hi);
    if (gamma_p(a, mid) < p)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

void rate_poisson_interval(uint64_t k, double *low, double *high) {
  *low = k ? gamma_quantile((double)k, ALPHA / 2) : 0.0;
  *high = gamma_quantile((double)k + 1.0, 1.0 - ALPHA / 2);
}

/* The continued fraction of I_x(a, b) (modified Lentz), x < (a + 1) / (a + b + 2). */
static double beta_fraction(double a, double b, double x) {
  const double tiny = 1e-300;
  double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0);
  if (fabs(d) < tiny) d = tiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m < MAX_TERMS; m++) {
    double m2 = 2.0 * m, an = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2));
    d = 1.0 + an * d;
    d = fabs(d) < tiny ? 1.0 / tiny : 1.0 / d;
    c = 1.0 + an / c;
    if (fabs(c) < tiny) c = tiny;
    h *= d * c;
    an = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0));
    d = 1.0 + an * d;
    d = fabs(d) < tiny ? 1.0 / tiny : 1.0 / d;
    c = 1.0 + an / c;
    if (fabs(c) < tiny) c = tiny;
    double step = d * c;
    h *= step;
    if (fabs(step - 1.0) < EPS) break;
  }
  return h;
}

/* The regularized incomplete beta function I_x(a, b), a, b > 0. */
static double beta_i(double a, double b, double x) {
  if (x <= 0) return 0.0;
  if (x >= 1) return 1.0;
  double front =
      exp(log_gamma(a + b) - log_gamma(a) - log_gamma(b) + a * log(x) + b * log(1.0 - x));
  if (x < (a + 1.0) / (a + b + 2.0)) return front * beta_fraction(a, b, x) / a;
  return 1.0 - front * beta_fraction(b, a, 1.0 - x) / b;
}

/* The x where I_x(a, b) = p, 0 < p < 1. */
static double beta_quantile(double a, double b, double p) {
  double lo = 0.0, hi = 1.0;
  for (int i = 0; i < 200 && hi - lo > 1e-15; i++) {
    double mid = 0.5 * (lo + hi);
    if (beta_i(a, b, mid) < p)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

void rate_binomial_interval(uint64_t k, uint64_t n, double *low, double *high) {
  if (n == 0 || k > n) {
    *low = 0.0, *high = 1.0;
    return;
  }
  double kd = (double)k, nd = (double)n;
  *low = k ? beta_quantile(kd, nd - kd + 1.0, ALPHA / 2) : 0.0;
  *high = k < n ? beta_quantile(kd + 1.0, nd - kd, 1.0 - ALPHA / 2) : 1.0;
}

bool rate_enough_data(uint64_t count, double hours) {
  return count >= RATE_MIN_COUNT && hours >= RATE_MIN_WATCHED_HOURS;
}

int rate_compare(double a_low, double a_high, double b_low, double b_high) {
  if (b_low > a_high) return 1;
  if (b_high < a_low) return -1;
  return 0;
}
