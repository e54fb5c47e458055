/*
 * sdk_report.c - the file sink's report read back (see sdk_report.h).
 */
#include "sdk_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "stack_assert.h"

static bool is_event_line(const char *line, const char *kind) {
  if (strncmp(line, "event ", 6) != 0) return false;
  size_t n = kind ? strlen(kind) : 0;
  return !kind || (strncmp(line + 6, kind, n) == 0 && line[6 + n] == ' ');
}

/* The line after `line`, or NULL after the last. */
static const char *next_line(const char *line) {
  const char *eol = strchr(line, '\n');
  return eol && eol[1] ? eol + 1 : NULL;
}

size_t count_events(const char *report, const char *kind) {
  size_t n = 0;
  for (const char *line = *report ? report : NULL; line; line = next_line(line))
    n += is_event_line(line, kind);
  return n;
}

void find_event(const char *report, const char *kind, size_t nth, event_t *ev) {
  const char *line = *report ? report : NULL;
  for (size_t seen = 0; line; line = next_line(line))
    if (is_event_line(line, kind) && seen++ == nth) break;
  CHECKF(line != NULL, "no event %s #%zu in the report:\n%s", kind, nth, report);
  const char *end = strstr(line, "\n\n");
  size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
  memset(ev, 0, sizeof *ev);
  ev->text = strndup(line, len);
  CHECK(ev->text != NULL);
  CHECKF(sscanf(line, "event %15s start=%39s duration_ms=%ld thread=%d samples=%ld", ev->kind,
                ev->start, &ev->duration_ms, &ev->thread, &ev->samples) == 5,
         "bad event header in:\n%s", ev->text);
  const char *eol = strchr(ev->text, '\n');
  const char *cpu = strstr(ev->text, " cpu_percent=");
  ev->cpu_percent = cpu && (!eol || cpu < eol) ? strtol(cpu + 13, NULL, 10) : -1;
  const char *dropped = strstr(ev->text, " dropped=");
  CHECKF(dropped != NULL, "no dropped= in:\n%s", ev->text);
  ev->dropped = strtol(dropped + 9, NULL, 10);
}

void event_free(event_t *ev) {
  free(ev->text);
  ev->text = NULL;
}

bool event_stack(const event_t *ev, size_t nth, ev_stack_t *out) {
  const char *s = ev->text;
  for (size_t seen = 0;; s++) {
    s = strstr(s, "\nstack samples=");
    if (!s) return false;
    if (seen++ == nth) break;
  }
  s++;
  const char *end = strstr(s + 1, "\nstack samples=");
  size_t len = end ? (size_t)(end - s) + 1 : strlen(s);
  CHECK(sscanf(s, "stack samples=%ld thread=%d", &out->samples, &out->thread) == 2);
  out->text = strndup(s, len);
  CHECK(out->text != NULL);
  return true;
}

long event_stack_samples(const event_t *ev) {
  long sum = 0;
  ev_stack_t st;
  for (size_t i = 0; event_stack(ev, i, &st); i++) {
    sum += st.samples;
    free(st.text);
  }
  return sum;
}

void expect_chain(const event_t *ev, size_t nth, const char *const *chain, size_t n) {
  ev_stack_t st;
  CHECKF(event_stack(ev, nth, &st), "no stack #%zu in:\n%s", nth, ev->text);
  stack_syms_t *s = malloc(sizeof *s);
  CHECK(s != NULL);
  stack_parse(st.text, s); /* skips the "stack ..." header line */
  if (!stack_has_chain(s, chain, n)) {
    fprintf(stderr, "stack #%zu lacks the consecutive frames:", nth);
    for (size_t i = 0; i < n; i++)
      fprintf(stderr, " %s", chain[i]);
    stack_dump("event", ev->text);
    exit(1);
  }
  free(s);
  free(st.text);
}

void expect_start_between(const event_t *ev, time_t from, time_t to) {
  struct tm tm;
  memset(&tm, 0, sizeof tm);
  int ms = -1, end = 0;
  CHECKF(sscanf(ev->start, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms, &end) == 7 &&
             end == (int)strlen(ev->start) && end == 24,
         "start=%s is not YYYY-MM-DDTHH:MM:SS.mmmZ", ev->start);
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  time_t t = timegm(&tm);
  CHECKF(t >= from - 2 && t <= to + 2, "start=%s is not within [%lld, %lld] (epoch s)", ev->start,
         (long long)from, (long long)to);
}
