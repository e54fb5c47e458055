/*
 * alert_payload.c - an alert as a webhook's body (see alert_payload.h).
 */
#include "collector/alerts/alert_payload.h"

#include <stdlib.h>
#include <string.h>

/* text with Slack's three control characters escaped (&amp; &lt; &gt;),
   appended to out (malloc'ed, grown); NULL when out of memory. */
static char *slack_escape(char *out, const char *text) {
  size_t len = out ? strlen(out) : 0, add = 0;
  for (const char *p = text; *p; p++)
    add += *p == '&' ? 5 : (*p == '<' || *p == '>') ? 4 : 1;
  char *grown = realloc(out, len + add + 1);
  if (!grown) return free(out), NULL;
  char *w = grown + len;
  for (const char *p = text; *p; p++) {
    const char *rep = *p == '&' ? "&amp;" : *p == '<' ? "&lt;" : *p == '>' ? "&gt;" : NULL;
    if (rep) {
      memcpy(w, rep, strlen(rep));
      w += strlen(rep);
    } else {
      *w++ = *p;
    }
  }
  *w = '\0';
  return grown;
}

/* Slack's mrkdwn: the summary, then <link|Open in the dashboard> (the
   link's own characters are URL-encoded: none to escape). */
static char *slack_text(const alert_t *a) {
  char *text = slack_escape(NULL, a->summary);
  if (!text || !*a->link) return text;
  static const char LABEL[] = "|Open in the dashboard>";
  size_t len = strlen(text), link = strlen(a->link);
  char *grown = realloc(text, len + 2 + link + sizeof LABEL);
  if (!grown) return free(text), NULL;
  memcpy(grown + len, "\n<", 2);
  memcpy(grown + len + 2, a->link, link);
  memcpy(grown + len + 2 + link, LABEL, sizeof LABEL);
  return grown;
}

static json_t *slack_json(const alert_t *a) {
  char *text = slack_text(a);
  json_t *o = text ? json_pack("{s:s,s:[{s:s,s:{s:s,s:s}}]}", "text", text, "blocks", "type",
                               "section", "text", "type", "mrkdwn", "text", text)
                   : NULL;
  free(text);
  return o;
}

static json_t *own_json(const alert_t *a) {
  return json_pack("{s:s,s:I,s:s,s:s,s:s,s:s?,s:O}", "alert", a->rule->kind, "rule",
                   (json_int_t)a->rule->id, "key", a->key, "app", a->app, "summary", a->summary,
                   "link", *a->link ? a->link : NULL, "details", a->details);
}

char *alert_payload(const alert_t *a) {
  json_t *o = strcmp(a->rule->format, "slack") == 0 ? slack_json(a) : own_json(a);
  char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(o);
  return text;
}
