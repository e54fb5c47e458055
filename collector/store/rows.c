/*
 * rows.c - read rows decoded by column (see rows.h).
 */
#include "collector/store/rows.h"

store_event_row_t store_event_row(const store_columns_t *c, int first) {
  const void *r = c->row;
  int i = first;
  return (store_event_row_t){.id = c->i64(r, i),
                             .kind = c->text(r, i + 1),
                             .start_ns = c->i64(r, i + 2),
                             .duration_ns = c->i64(r, i + 3),
                             .tid = (uint32_t)c->i64(r, i + 4),
                             .cpu_percent = (int32_t)c->i64(r, i + 5),
                             .reason = c->text(r, i + 6),
                             .app = c->text(r, i + 7),
                             .version = c->text(r, i + 8),
                             .environment = c->text(r, i + 9),
                             .group_sig = c->text(r, i + 10),
                             .tags_json = c->text(r, i + 11),
                             .label = c->text(r, i + 12),
                             .loop = c->text(r, i + 13)};
}

store_stack_row_t store_stack_row(const store_columns_t *c) {
  const void *r = c->row;
  return (store_stack_row_t){.stack_sig = c->text(r, 0),
                             .frames_json = c->text(r, 1),
                             .samples = (uint64_t)c->i64(r, 2),
                             .cpu_us = (uint64_t)c->i64(r, 3),
                             .wall_ns = c->i64(r, 4),
                             .first_start_ns = c->i64(r, 5),
                             .last_end_ns = c->i64(r, 6),
                             .stacks = (uint64_t)c->i64(r, 7),
                             .rows_read = (uint64_t)c->i64(r, 9)};
}

bool store_stack_row_usable(const store_stack_row_t *row) {
  return row->stack_sig ? row->frames_json != NULL : row->stacks > 0;
}

store_count_row_t store_count_row(const store_columns_t *c) {
  const void *r = c->row;
  return (store_count_row_t){.stack_sig = c->text(r, 0),
                             .frames_json = c->text(r, 1),
                             .tid = (uint32_t)c->i64(r, 2),
                             .samples = (uint64_t)c->i64(r, 3),
                             .cpu_us = c->is_null(r, 4) ? -1 : c->i64(r, 4)};
}

store_top_row_t store_top_row(const store_columns_t *c) {
  const void *r = c->row;
  return (store_top_row_t){.group_sig = c->text(r, 0),
                           .names_json = c->text(r, 1),
                           .version = c->text(r, 2),
                           .label = c->text(r, 3),
                           .events = (uint64_t)c->i64(r, 4),
                           .samples = (uint64_t)c->i64(r, 5),
                           .total_ns = c->i64(r, 6),
                           .first_ns = c->i64(r, 7),
                           .last_ns = c->i64(r, 8),
                           .max_ns = c->i64(r, 9),
                           .dbin = (int)c->i64(r, 10),
                           .cpu_us = (uint64_t)c->i64(r, 12),
                           .groups = (uint64_t)c->i64(r, 13),
                           .rows_read = (uint64_t)c->i64(r, 14)};
}
