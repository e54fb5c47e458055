/*
 * pprof_check.h - reading a pprof export back for the collector tests: our
 * own decoding (zlib, then the protoc-c code of proto/pprof/profile.proto)
 * with the format's rules checked, and `go tool pprof` (Debian's
 * golang-go, run offline) as the independent reader. A failed check exits
 * the test process (check.h).
 */
#ifndef PERF_TEST_PPROF_CHECK_H
#define PERF_TEST_PPROF_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pprof/profile.pb-c.h"

typedef Perftools__Profiles__Profile pprof_profile_t;

/* Gunzip and unpack data, then check the format's rules: string_table[0]
   is "", every string index is in the table, mapping / location /
   function ids are non-zero and unique, every reference (a sample's
   locations, a location's mapping and its lines' functions) resolves, and
   every sample has one value per sample_type. Free the result with
   perftools__profiles__profile__free_unpacked(p, NULL). */
pprof_profile_t *pprof_decode_checked(const void *data, size_t len);

/* The string at index i of p's table. */
const char *pprof_string(const pprof_profile_t *p, int64_t i);

/* The sum of column `column` of every sample's values. */
int64_t pprof_value_total(const pprof_profile_t *p, size_t column);

/* Whether a Function of p is named name. */
bool pprof_has_function(const pprof_profile_t *p, const char *name);

/* `go tool pprof <args...> <file>` with HOME, GOCACHE and PPROF_TMPDIR
   under dir and no network; its exit status must be 0. Returns what it
   printed (stdout and stderr; malloc'ed, the caller frees). */
char *pprof_tool(const char *dir, const char *const *args, const char *file);

/* The total of `go tool pprof -top`'s header line "Showing nodes
   accounting for A, B% of <total> total" as an integer; -1 without one. */
long long pprof_top_total(const char *output);

/* Whether a row of `-top` output ends in the function name. */
bool pprof_top_lists(const char *output, const char *name);

#endif
