/*
 * query_params.c - a query's filters and plan bound to their slots (see
 * query_params.h).
 */
#include "collector/store/query_params.h"

#include <string.h>

static void text(const store_binder_t *b, int slot, const char *t) {
  b->text(b->stmt, slot, t, t ? strlen(t) : 0);
}

void store_bind_filters(const store_binder_t *b, const store_top_query_t *q) {
  text(b, STORE_SLOT_APP, q->app);
  text(b, STORE_SLOT_VERSION, q->version);
  text(b, STORE_SLOT_ENVIRONMENT, q->environment);
  text(b, STORE_SLOT_HOST, q->host);
  b->i64(b->stmt, STORE_SLOT_FROM, q->from_ns);
  b->i64(b->stmt, STORE_SLOT_TO, q->to_ns);
  text(b, STORE_SLOT_KIND, q->kind);
  text(b, STORE_SLOT_LABEL, q->label);
  text(b, STORE_SLOT_LOOP, q->loop);
  for (size_t i = 0; i < STORE_MAX_TAG_FILTERS; i++) {
    int k = STORE_SLOT_TAG + 2 * (int)i;
    const store_tag_t *t = i < q->n_tags ? &q->tags[i] : NULL;
    b->text(b->stmt, k, t ? t->key : NULL, t ? t->key_len : 0);
    text(b, k + 1, t ? t->value : NULL);
  }
}

void store_bind_rows(const store_binder_t *b, uint64_t rows_max) {
  b->i64(b->stmt, STORE_SLOT_ROWS, rows_max > INT64_MAX ? INT64_MAX : (int64_t)rows_max);
}

void store_bind_plan(const store_binder_t *b, const rollup_plan_t *plan) {
  b->i64(b->stmt, STORE_SLOT_DAY, plan->day[0]);
  b->i64(b->stmt, STORE_SLOT_DAY + 1, plan->day[1]);
  for (int i = 0; i < 2; i++) {
    b->i64(b->stmt, STORE_SLOT_RAW + 2 * i, plan->raw[i][0]);
    b->i64(b->stmt, STORE_SLOT_RAW + 1 + 2 * i, plan->raw[i][1]);
    b->i64(b->stmt, STORE_SLOT_BUCKET + 2 * i, plan->bucket[i][0]);
    b->i64(b->stmt, STORE_SLOT_BUCKET + 1 + 2 * i, plan->bucket[i][1]);
  }
}
