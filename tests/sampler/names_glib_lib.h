/*
 * names_glib_lib.h - the library names_glib_app calls in its last hang.
 */
#ifndef PERF_TEST_NAMES_GLIB_LIB_H
#define PERF_TEST_NAMES_GLIB_LIB_H

/* Wait ms milliseconds in select(); returns ms. */
int names_glib_reload_settings(int ms);

#endif
