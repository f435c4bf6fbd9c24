"""The SQL views behind the report; ``ops/analytics.md`` documents each with examples.

The sink creates them in the database file (so the DuckDB CLI sees them); the report and
``explain`` recreate them as TEMP views on their read-only connection, so a file written by an
older sink is always read with the current definitions. ``SELECT sql FROM duckdb_views()``
shows the text of each.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb


@dataclass(frozen=True)
class View:
    """One view: its name, what one of its rows is (one line), and its SELECT."""

    name: str
    doc: str
    sql: str


STAGE_RANK = "(VALUES ('route', 1), ('consolidate', 2), ('select', 3), ('compress', 4))"

VIEWS: tuple[View, ...] = (
    View(
        "v_requests",
        "one row per request and lane: class, policy, labels, budget, outcome, total latency",
        """
        SELECT r.request_id, r.lane, r.cohort, r.policy, r.query_class, r.route_rule,
               r.replay_run_id, r.candidate_count,
               coalesce(CAST(json_extract(r.details, '$.labelled') AS BOOLEAN), false)
                   AS labelled,
               coalesce(from_json(json_extract(r.details, '$.relevant_chunk_ids'),
                                  '["VARCHAR"]'), []) AS relevant_ids,
               r.evidence_budget,
               c.evidence_tokens,
               json_extract_string(c.details, '$.answerability') AS answerability,
               c.request_id IS NOT NULL AS complete,
               t.stages, t.latency_ms
        FROM events r
        LEFT JOIN events c
               ON c.request_id = r.request_id AND c.lane = r.lane AND c.stage = 'compress'
        LEFT JOIN (SELECT request_id, lane, count(*) AS stages, sum(latency_ms) AS latency_ms
                   FROM events GROUP BY request_id, lane) t
               ON t.request_id = r.request_id AND t.lane = r.lane
        WHERE r.stage = 'route'
        """,
    ),
    View(
        "v_candidate_fates",
        "one row per candidate (route stage) and lane: final fate, where it was decided, why",
        f"""
        WITH stage_rank(stage, rank) AS {STAGE_RANK},
        candidates AS (
            SELECT DISTINCT request_id, lane, chunk_id FROM decisions WHERE stage = 'route'),
        admitted AS (
            SELECT DISTINCT request_id, lane, chunk_id FROM decisions
            WHERE stage = 'compress' AND reason = 'admitted'),
        finished AS (SELECT request_id, lane FROM events WHERE stage = 'compress'),
        last_drop AS (
            SELECT d.request_id, d.lane, d.chunk_id, d.stage, d.reason, d.detail, d.kept_as
            FROM decisions d JOIN stage_rank s ON s.stage = d.stage
            WHERE d.reason <> 'admitted'
            QUALIFY row_number() OVER (PARTITION BY d.request_id, d.lane, d.chunk_id
                                       ORDER BY s.rank DESC, d.seq) = 1),
        own AS (
            SELECT c.request_id, c.lane, c.chunk_id,
                   CASE WHEN a.chunk_id IS NOT NULL THEN 'admitted'
                        WHEN l.reason IS NOT NULL THEN l.reason
                        WHEN f.request_id IS NULL THEN 'in_flight'
                        ELSE 'unknown' END AS fate,
                   CASE WHEN a.chunk_id IS NOT NULL THEN 'compress' ELSE l.stage END AS stage,
                   CASE WHEN a.chunk_id IS NULL THEN l.detail END AS detail,
                   CASE WHEN a.chunk_id IS NULL THEN l.kept_as END AS kept_as
            FROM candidates c
            LEFT JOIN admitted a USING (request_id, lane, chunk_id)
            LEFT JOIN last_drop l USING (request_id, lane, chunk_id)
            LEFT JOIN finished f USING (request_id, lane))
        SELECT o.request_id, o.lane, r.query_class, r.policy, o.chunk_id, o.fate, o.stage,
               o.detail, o.kept_as,
               CASE WHEN o.kept_as <> o.chunk_id THEN k.fate END AS family_fate,
               CASE WHEN o.fate IN ('duplicate', 'near_duplicate') AND o.kept_as <> o.chunk_id
                         AND k.fate IS NOT NULL AND k.fate NOT IN ('admitted', 'in_flight')
                    THEN k.fate ELSE o.fate END AS effective_reason
        FROM own o
        LEFT JOIN own k
               ON k.request_id = o.request_id AND k.lane = o.lane AND k.chunk_id = o.kept_as
        LEFT JOIN events r
               ON r.request_id = o.request_id AND r.lane = o.lane AND r.stage = 'route'
        """,
    ),
    View(
        "v_needed",
        "labelled requests: each needed chunk as never retrieved, retrieved but dropped, admitted",
        """
        WITH needed AS (
            SELECT request_id, lane, cohort, policy, query_class,
                   unnest(relevant_ids) AS chunk_id
            FROM v_requests WHERE labelled)
        SELECT n.request_id, n.lane, n.cohort, n.policy, n.query_class, n.chunk_id,
               CASE WHEN f.chunk_id IS NULL THEN 'never retrieved'
                    WHEN f.fate = 'admitted' THEN 'admitted'
                    WHEN f.fate = 'in_flight' THEN 'in flight'
                    ELSE 'retrieved but dropped' END AS diagnosis,
               CASE WHEN f.fate NOT IN ('admitted', 'in_flight')
                    THEN f.effective_reason END AS reason,
               f.fate, f.stage, f.detail, f.kept_as
        FROM needed n
        LEFT JOIN v_candidate_fates f USING (request_id, lane, chunk_id)
        """,
    ),
    View(
        "v_diagnosis",
        "needed chunks counted by lane, class, diagnosis and drop reason",
        """
        SELECT lane, query_class, diagnosis, coalesce(reason, '') AS reason,
               count(*) AS needed_chunks, count(DISTINCT request_id) AS requests
        FROM v_needed
        GROUP BY ALL
        ORDER BY lane, query_class, diagnosis, reason
        """,
    ),
    View(
        "v_needed_by_class",
        "per lane and class: labelled requests, needed, retrieved and admitted chunks, recall",
        """
        WITH r AS (
            SELECT lane, query_class, count(*) AS labelled_requests
            FROM v_requests WHERE labelled GROUP BY ALL),
        n AS (
            SELECT lane, query_class, count(*) AS needed,
                   count(*) FILTER (WHERE diagnosis <> 'never retrieved') AS retrieved,
                   count(*) FILTER (WHERE diagnosis = 'admitted') AS admitted
            FROM v_needed GROUP BY ALL)
        SELECT r.lane, r.query_class, r.labelled_requests,
               coalesce(n.needed, 0) AS needed, coalesce(n.retrieved, 0) AS retrieved,
               coalesce(n.admitted, 0) AS admitted,
               round(n.admitted / nullif(n.needed, 0), 4) AS recall,
               round(n.admitted / nullif(n.retrieved, 0), 4) AS pack_recall
        FROM r LEFT JOIN n USING (lane, query_class)
        ORDER BY r.lane, r.query_class
        """,
    ),
    View(
        "v_label_chunks",
        "one row per chunk of the labels stream: its source, the live pack's class, its fate",
        """
        SELECT l.request_id, l.source, l.chunk_id, l.ts,
               r.query_class, r.policy,
               r.request_id IS NOT NULL AS matched,
               f.chunk_id IS NOT NULL AS retrieved,
               f.chunk_id IS NOT NULL AND f.fate <> 'in_flight'
                   AND coalesce(f.effective_reason, '') <> 'conformal' AS kept_by_filter,
               f.fate = 'admitted' OR coalesce(f.family_fate, '') = 'admitted' AS admitted
        FROM labels l
        LEFT JOIN events r
               ON r.request_id = l.request_id AND r.lane = 'live' AND r.stage = 'route'
        LEFT JOIN v_candidate_fates f
               ON f.request_id = l.request_id AND f.lane = 'live' AND f.chunk_id = l.chunk_id
        """,
    ),
    View(
        "v_label_coverage",
        "per label source and class: relevant chunks retrieved, kept by the filter, admitted, "
        "with the Wilson 95% lower bound of the filter's coverage",
        """
        WITH c AS (
            SELECT source, query_class,
                   count(DISTINCT request_id) AS labelled_requests,
                   count(*) AS relevant,
                   count(*) FILTER (WHERE retrieved) AS retrieved,
                   count(*) FILTER (WHERE kept_by_filter) AS kept_by_filter,
                   count(*) FILTER (WHERE admitted) AS admitted
            FROM v_label_chunks WHERE matched GROUP BY ALL)
        SELECT source, query_class, labelled_requests, relevant, retrieved, kept_by_filter,
               admitted,
               round(kept_by_filter / nullif(retrieved, 0), 4) AS filter_coverage,
               round((kept_by_filter / retrieved + 1.9208 / retrieved
                      - 1.96 * sqrt((kept_by_filter / retrieved)
                                    * (1 - kept_by_filter / retrieved) / retrieved
                                    + 0.9604 / (retrieved * retrieved)))
                     / (1 + 3.8416 / retrieved), 4) AS filter_coverage_low,
               round(admitted / nullif(retrieved, 0), 4) AS pack_coverage
        FROM c
        ORDER BY source, query_class
        """,
    ),
    View(
        "v_pack_outcomes",
        "one row per pack: from the packs table, else from the compress trace event",
        """
        WITH c AS (SELECT * FROM events WHERE stage = 'compress'),
        s AS (SELECT request_id, lane, json_extract(details, '$.coverage') AS cov
              FROM events WHERE stage = 'select')
        SELECT coalesce(p.request_id, c.request_id) AS request_id,
               coalesce(p.lane, c.lane) AS lane,
               coalesce(p.cohort, c.cohort) AS cohort,
               coalesce(p.policy, c.policy) AS policy,
               coalesce(p.query_class, c.query_class) AS query_class,
               coalesce(p.evidence_tokens, c.evidence_tokens) AS evidence_tokens,
               coalesce(p.evidence_budget, c.evidence_budget) AS evidence_budget,
               coalesce(p.answerability, json_extract_string(c.details, '$.answerability'))
                   AS answerability,
               coalesce(p.evidence_count,
                        json_array_length(json_extract(c.details, '$.evidence_ids')))
                   AS evidence_count,
               coalesce(p.dropped, CAST(json_extract(c.details, '$.dropped_counts')
                                        AS MAP(VARCHAR, INTEGER))) AS dropped,
               coalesce(p.coverage_alpha, CAST(json_extract(s.cov, '$.alpha') AS DOUBLE))
                   AS coverage_alpha,
               coalesce(p.coverage_guaranteed,
                        CAST(json_extract(s.cov, '$.guaranteed') AS BOOLEAN))
                   AS coverage_guaranteed,
               p.request_id IS NOT NULL AS has_pack,
               c.request_id IS NOT NULL AS has_trace
        FROM packs p
        FULL OUTER JOIN c ON c.request_id = p.request_id AND c.lane = p.lane
        LEFT JOIN s ON s.request_id = coalesce(p.request_id, c.request_id)
                   AND s.lane = coalesce(p.lane, c.lane)
        """,
    ),
    View(
        "v_lane_summary",
        "per lane and policy: packs, tokens, budget use, answerability counts",
        """
        SELECT lane, policy, count(*) AS packs,
               round(avg(evidence_tokens), 1) AS mean_tokens,
               median(evidence_tokens) AS median_tokens,
               round(avg(evidence_tokens / nullif(evidence_budget, 0)), 4) AS mean_budget_use,
               count(*) FILTER (WHERE answerability = 'ok') AS ok,
               count(*) FILTER (WHERE answerability = 'partial') AS partial,
               count(*) FILTER (WHERE answerability = 'no_evidence') AS no_evidence,
               count(*) FILTER (WHERE answerability = 'insufficient_budget')
                   AS insufficient_budget
        FROM v_pack_outcomes
        GROUP BY ALL
        ORDER BY lane, policy
        """,
    ),
    View(
        "v_drop_reasons",
        "drop reasons summed over packs (the Pack's own `dropped` counts), by lane and class",
        """
        SELECT lane, query_class, e['key'] AS reason, sum(e['value']) AS dropped,
               count(DISTINCT request_id) AS packs
        FROM (SELECT lane, query_class, request_id, unnest(map_entries(dropped)) AS e
              FROM v_pack_outcomes WHERE dropped IS NOT NULL)
        GROUP BY ALL
        ORDER BY lane, query_class, dropped DESC, reason
        """,
    ),
    View(
        "v_stage_latency",
        "per lane and stage: events and latency (mean, p50, p95, max) in milliseconds",
        f"""
        SELECT e.lane, e.stage, count(*) AS events,
               round(avg(e.latency_ms), 3) AS mean_ms,
               round(quantile_cont(e.latency_ms, 0.5), 3) AS p50_ms,
               round(quantile_cont(e.latency_ms, 0.95), 3) AS p95_ms,
               round(max(e.latency_ms), 3) AS max_ms
        FROM events e JOIN {STAGE_RANK} s(stage, rank) ON s.stage = e.stage
        GROUP BY e.lane, e.stage, s.rank
        ORDER BY e.lane, s.rank
        """,
    ),
    View(
        "v_coverage",
        "per lane, policy and alpha: target 1-alpha against the needed chunks actually admitted",
        """
        WITH p AS (
            SELECT request_id, lane, policy, coverage_alpha AS alpha, coverage_guaranteed
            FROM v_pack_outcomes WHERE coverage_alpha IS NOT NULL),
        n AS (
            SELECT request_id, lane,
                   count(*) FILTER (WHERE diagnosis <> 'never retrieved') AS retrieved,
                   count(*) FILTER (WHERE diagnosis = 'admitted') AS admitted,
                   count(*) FILTER (WHERE reason = 'conformal') AS filtered
            FROM v_needed GROUP BY ALL)
        SELECT p.lane, p.policy, p.alpha, round(1 - p.alpha, 4) AS target,
               count(*) AS packs,
               round(avg(CASE WHEN p.coverage_guaranteed THEN 1.0 ELSE 0.0 END), 4)
                   AS guaranteed_share,
               coalesce(sum(n.retrieved), 0) AS needed_retrieved,
               coalesce(sum(n.admitted), 0) AS needed_admitted,
               round(sum(n.admitted) / nullif(sum(n.retrieved), 0), 4) AS observed_coverage,
               round(1 - sum(n.filtered) / nullif(sum(n.retrieved), 0), 4) AS filter_coverage
        FROM p LEFT JOIN n USING (request_id, lane)
        GROUP BY ALL
        ORDER BY p.lane, p.policy, p.alpha
        """,
    ),
    View(
        "v_lane_compare",
        "requests packed in both lanes: tokens, answerability and needed chunks side by side",
        """
        WITH acc AS (SELECT request_id, lane, accepted_ids FROM events WHERE stage = 'compress'),
        need AS (SELECT request_id, lane,
                        count(*) FILTER (WHERE diagnosis = 'admitted') AS needed_admitted
                 FROM v_needed GROUP BY ALL)
        SELECT l.request_id, l.query_class, l.policy AS live_policy, s.policy AS shadow_policy,
               l.evidence_tokens AS live_tokens, s.evidence_tokens AS shadow_tokens,
               s.evidence_tokens - l.evidence_tokens AS token_delta,
               l.answerability AS live_answerability, s.answerability AS shadow_answerability,
               len(list_intersect(la.accepted_ids, sa.accepted_ids)) AS shared_chunks,
               round(len(list_intersect(la.accepted_ids, sa.accepted_ids))
                     / nullif(len(list_distinct(list_concat(la.accepted_ids, sa.accepted_ids))),
                              0), 4) AS chunk_jaccard,
               ln.needed_admitted AS live_needed_admitted,
               sn.needed_admitted AS shadow_needed_admitted
        FROM v_pack_outcomes l
        JOIN v_pack_outcomes s ON s.request_id = l.request_id AND s.lane = 'shadow'
        LEFT JOIN acc la ON la.request_id = l.request_id AND la.lane = 'live'
        LEFT JOIN acc sa ON sa.request_id = s.request_id AND sa.lane = 'shadow'
        LEFT JOIN need ln ON ln.request_id = l.request_id AND ln.lane = 'live'
        LEFT JOIN need sn ON sn.request_id = s.request_id AND sn.lane = 'shadow'
        WHERE l.lane = 'live'
        """,
    ),
    View(
        "v_rejects_by_kind",
        "bad records kept by the sink, counted by where they came from and why",
        """
        SELECT origin, kind, count(*) AS records, min(error) AS example_error
        FROM rejects GROUP BY ALL ORDER BY origin, kind
        """,
    ),
)


def create(con: duckdb.DuckDBPyConnection, *, temp: bool = False) -> None:
    """Create (or replace) every view; TEMP ones on a read-only connection."""
    kind = "TEMP VIEW" if temp else "VIEW"
    tables = _tables(con) if temp else set()
    for view in VIEWS:
        if temp and any(t not in tables for t in _NEEDS.get(view.name, ())):
            continue  # a file from before the table existed, read without writing it
        con.execute(f"CREATE OR REPLACE {kind} {view.name} AS {view.sql}")


#: Views over tables a database written by an older sink may lack.
_NEEDS: dict[str, tuple[str, ...]] = {
    "v_label_chunks": ("labels",),
    "v_label_coverage": ("labels",),
}


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {str(r[0]) for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


def exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the connection sees a view or table of this name."""
    found = con.execute(
        "SELECT count(*) FROM (SELECT view_name AS n FROM duckdb_views() "
        "UNION ALL SELECT table_name FROM duckdb_tables()) WHERE n = ?",
        [name],
    ).fetchone()
    return bool(found and found[0])
