/*
 * test_rate_interval.c - the exact Poisson interval of a hang count
 * (collector/model/rate_interval.c) against values computed independently
 * (mpmath 1.3: the 0.025 and 0.975 quantiles of the gamma distribution by
 * bisection on its regularized incomplete function at 30 digits): counts
 * from 0 to 100000, each bound to 1e-7 relative; the "not enough data"
 * rule at its edges; overlapping and separate intervals; the exact
 * (Clopper-Pearson) interval of a share k of n against mpmath's beta
 * quantiles (betainc inverted by bisection at 40 digits), to 1e-7.
 */
#include <math.h>

#include "check.h"
#include "collector/model/rate_interval.h"

static const struct {
  uint64_t k;
  double low, high;
} GARWOOD[] = {
    {0, 0.0, 3.688879454},
    {1, 0.02531780798, 5.571643391},
    {2, 0.2422092785, 7.224687668},
    {5, 1.62348639, 11.66833208},
    {6, 2.201894253, 13.05947402},
    {8, 3.453832177, 15.76318922},
    {10, 4.795388696, 18.39035604},
    {100, 81.36399125, 121.6267938},
    {1000, 938.9730184, 1063.952136},
    {100000, 99381.15266, 100621.7447},
};

static const struct {
  uint64_t k, n;
  double low, high;
} CLOPPER_PEARSON[] = {
    {5, 10, 0.18708602844739853, 0.81291397155260143},
    {1, 20, 0.0012650894979498038, 0.24873276277202774},
    {19, 20, 0.75126723722797223, 0.9987349105020502},
    {0, 10, 0, 0.30849710781876076},
    {10, 10, 0.69150289218123918, 1},
    {30, 100, 0.21240642048953661, 0.39981467617980413},
    {6, 1000, 0.0022049824851513773, 0.013013423270974496},
};

static void check_close(double got, double want, const char *what, uint64_t k) {
  CHECKF(fabs(got - want) <= 1e-7 * fmax(1.0, want), "k=%llu %s: %.10g, want %.10g",
         (unsigned long long)k, what, got, want);
}

static void case_garwood(void) {
  for (size_t i = 0; i < ARRAY_LEN(GARWOOD); i++) {
    double low = -1, high = -1;
    rate_poisson_interval(GARWOOD[i].k, &low, &high);
    check_close(low, GARWOOD[i].low, "low", GARWOOD[i].k);
    check_close(high, GARWOOD[i].high, "high", GARWOOD[i].k);
  }
}

static void case_enough_data(void) {
  CHECK(!rate_enough_data(4, 100.0));
  CHECK(rate_enough_data(5, 0.1));
  CHECK(!rate_enough_data(5, 0.0999));
  CHECK(!rate_enough_data(2, 10.0 / 3600)); /* 2 hangs in 10 s: 720 per hour, nothing known */
  CHECK(!rate_enough_data(0, 1000.0));
  CHECK(rate_enough_data(1000000, 1.0));
}

static void case_compare(void) {
  /* 2 vs 2 in an hour: the same interval */
  CHECK_EQ_INT(rate_compare(0.2422, 7.2247, 0.2422, 7.2247), 0);
  /* touching at a bound: still overlapping */
  CHECK_EQ_INT(rate_compare(1.0, 2.0, 2.0, 3.0), 0);
  CHECK_EQ_INT(rate_compare(1.0, 2.0, 2.0001, 3.0), 1);
  CHECK_EQ_INT(rate_compare(2.0001, 3.0, 1.0, 2.0), -1);
  /* 6 in 2 h (1.10..6.53 per hour) against 5 in 0.1 h (16.2..116.7) */
  CHECK_EQ_INT(rate_compare(1.10, 6.53, 16.23, 116.68), 1);
}

static void case_binomial(void) {
  for (size_t i = 0; i < ARRAY_LEN(CLOPPER_PEARSON); i++) {
    double low = -1, high = -1;
    rate_binomial_interval(CLOPPER_PEARSON[i].k, CLOPPER_PEARSON[i].n, &low, &high);
    check_close(low, CLOPPER_PEARSON[i].low, "share low", CLOPPER_PEARSON[i].k);
    check_close(high, CLOPPER_PEARSON[i].high, "share high", CLOPPER_PEARSON[i].k);
  }
  double low = -1, high = -1;
  rate_binomial_interval(0, 0, &low, &high);
  CHECK(low == 0.0 && high == 1.0);
}

static const test_case_t g_cases[] = {
    TEST_CASE(binomial),
    TEST_CASE(garwood),
    TEST_CASE(enough_data),
    TEST_CASE(compare),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
