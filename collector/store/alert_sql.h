/*
 * alert_sql.h - the alert tables' statements (store.h alert_rule_add ..
 * new_groups), written once for every backend in its slot syntax
 * (SQL_SLOT, SQL_TEXT, SQL_INT: query_sql.h), so a backend keeps only the
 * tables' types and the running of them. Tables: alert_rules (one row a
 * rule) and alerts (one row per rule and key, unique: the de-duplication
 * every collector of a database shares).
 */
#ifndef PERF_COLLECTOR_ALERT_SQL_H
#define PERF_COLLECTOR_ALERT_SQL_H

#define ASQL_RULE_COLUMNS "id, kind, url, format, app, event_kind, created_ns"
#define ASQL_ALERT_COLUMNS "id, rule_id, alert_key, state, status, attempts, time_ns, summary, link"

#define ASQL_RULE_ADD                                                                              \
  "INSERT INTO alert_rules(kind, url, format, app, event_kind, created_ns)"                        \
  " VALUES(" SQL_SLOT("1") ", " SQL_SLOT("2") ", " SQL_SLOT("3") ", " SQL_TEXT("4") ", " SQL_TEXT( \
      "5") ", " SQL_INT("6") ") RETURNING id"
#define ASQL_RULE_DELETE "DELETE FROM alert_rules WHERE id = " SQL_INT("1") " RETURNING id"
#define ASQL_RULES "SELECT " ASQL_RULE_COLUMNS " FROM alert_rules ORDER BY id"

/* Nothing on a conflict: no row comes back, the alert was raised before. */
#define ASQL_CLAIM                                                                                 \
  "INSERT INTO alerts(rule_id, alert_key, state, status, attempts, time_ns, summary, link)"        \
  " VALUES(" SQL_INT("1") ", " SQL_SLOT("2") ", " SQL_SLOT("3") ", 0, 0, " SQL_INT(                \
      "4") ", " SQL_SLOT("5") ", " SQL_SLOT("6") ")"                                               \
                                                 " ON CONFLICT(rule_id, alert_key) DO NOTHING "    \
                                                 "RETURNING id"
#define ASQL_UPDATE                                                                                \
  "UPDATE alerts SET state = " SQL_SLOT("2") ", status = " SQL_INT("3") ", attempts = " SQL_INT(   \
      "4") ", time_ns = " SQL_INT("5") " WHERE id = " SQL_INT("1")
#define ASQL_ROWS                                                                                  \
  "SELECT " ASQL_ALERT_COLUMNS " FROM alerts WHERE " SQL_INT("1") " <= 0 OR rule_id = " SQL_INT(   \
      "1") " ORDER BY time_ns DESC, id DESC LIMIT " SQL_INT("2")

#define ASQL_APP_VERSIONS                                                                          \
  "SELECT version, min(received_ns) FROM batches WHERE app = " SQL_SLOT(                           \
      "1") " AND version IS NOT NULL AND version <> ''"                                            \
           " GROUP BY version ORDER BY 2, 1"

/* The groups named by the events of app $1's batches received since $3
   that no event of their kind named in a batch received before $2 (any
   app's): hang groups by events.group_sig, CPU groups (stacks) by the
   stack counts of cpu events; each with the first of those batches. */
#define ASQL_NEW_GROUP_PART(kind, join, sig, old_join, old_sig, kinds)                             \
  "SELECT " sig ", '" kind "', g.frames, min(b.received_ns) FROM batches b"                        \
  " JOIN events e ON e.batch_id = b.id" join " JOIN groups g ON g.signature = " sig                \
  " WHERE b.app = " SQL_SLOT("1") " AND b.received_ns >= " SQL_INT(                                \
      "3") " AND e.kind IN (" kinds ") AND NOT EXISTS (SELECT 1 FROM events o" old_join            \
           " JOIN batches ob ON ob.id = o.batch_id WHERE " old_sig " = " sig                       \
           " AND o.kind IN (" kinds ") AND ob.received_ns < " SQL_INT("2") ")"                     \
                                                                           " GROUP BY " sig        \
                                                                           ", g.frames"
/* by_sig: a term on the earlier stack counts (alias oc) that lets the
   backend find them by signature ("" when its index holds every row). */
#define ASQL_NEW_GROUPS(by_sig)                                                                    \
  "SELECT * FROM (" ASQL_NEW_GROUP_PART(                                                           \
      "hang", "", "e.group_sig", "", "o.group_sig",                                                \
      "'hang', 'fatal_hang'") " UNION ALL " ASQL_NEW_GROUP_PART("cpu",                             \
                                                                " JOIN stack_counts c ON "         \
                                                                "c.event_id = e.id",               \
                                                                "c.stack_sig",                     \
                                                                " JOIN stack_counts oc ON "        \
                                                                "oc.event_id = o.id" by_sig,       \
                                                                "oc.stack_sig",                    \
                                                                "'cpu'") ") x ORDER BY 4, 1, 2"

#endif
