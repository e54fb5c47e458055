/*
 * event_text.h - the human-readable form of an event, written by the file
 * sink:
 *
 *   event <kind> start=<ISO 8601 UTC> duration_ms=<n> thread=<tid> samples=<n> [cpu_percent=<n>]
 *   app name=<..> version=<..> environment=<..> [tags=k=v,...] dropped=<n> failed_samples=<n>
 *   [reason="<..>"]
 *   [thread tid=<tid> name="<..>" cpu_percent=<n>]...
 *   [states thread=<tid> waiting in read() (pipe) 62%, running 38%]...
 *   stack samples=<n> thread=<tid> [state="<the states of its samples, as above>"]
 *   <index> <module> 0x<pc> <symbol> + <offset>      (sdk/base/frame_text.h)
 *   ...
 *   <blank line>
 *
 * A window of the continuous CPU profile (kind "profile") has no samples:
 * after its header, a line of its totals, its threads, then its functions
 * by their own CPU time (the innermost frame's), each with its share of
 * the window's CPU time and its share anywhere on the stacks, then its
 * stacks with their CPU time and state:
 *
 *   profile cpu_ms=<n> stacks=<n> samples_dropped=<n>
 *   function self_percent=<..> total_percent=<..> cpu_ms=<n> name="<function>"
 *
 * Events of this process come as perf__event_t; a fatal hang recovered
 * from a dead process's marker comes as the marker's decoded batch.
 * Runs on the writer thread.
 */
#ifndef PERF_EVENT_TEXT_H
#define PERF_EVENT_TEXT_H

#include "perf/v1/perf.pb-c.h"
#include "sdk/base/strbuf.h"
#include "sdk/pipeline/config.h"
#include "sdk/pipeline/event.h"

/* Every distinct stack, dominant first: "stack samples=.. thread=.." with
   its samples' states (state_text.h) when known, and its frames. */
int perf__format_event_stacks(perf__strbuf_t *b, const perf__event_t *ev);

/* The whole report of one event, ending with a blank line. */
int perf__format_event(perf__strbuf_t *b, const perf__event_t *ev, const perf__config_t *cfg);

/* The report of the fatal hang in a dead process's marker (a decoded
   one-event batch), with `reason`. */
int perf__format_fatal_hang(perf__strbuf_t *b, const Perf__V1__Batch *marker, const char *reason,
                            const perf__config_t *cfg);

#endif
