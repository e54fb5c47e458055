/*
 * dashboard.h - the web dashboard's static files, compiled into the binary
 * (dashboard_assets.h): GET / and /dashboard redirect to /dashboard/,
 * /dashboard/ is index.html, /dashboard/<file> the others. No
 * authentication: the page holds no data, the API it calls does. Runs on
 * the MHD worker of the request; the assets are read-only.
 */
#ifndef PERF_COLLECTOR_DASHBOARD_H
#define PERF_COLLECTOR_DASHBOARD_H

#include <microhttpd.h>
#include <stdbool.h>

/* True when url belongs to the dashboard ("/", "/dashboard", "/dashboard/..."). */
bool dashboard_owns(const char *url);

/* Answer a GET or HEAD of a url dashboard_owns: 302 to /dashboard/, 200
   with the file (Content-Type, Cache-Control: no-cache and an ETag), 304
   when If-None-Match has that ETag, or 404 for an unknown file. */
enum MHD_Result dashboard_serve(struct MHD_Connection *conn, const char *url);

#endif
