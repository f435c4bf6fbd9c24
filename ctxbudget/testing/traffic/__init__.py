"""Evaluation traffic: CandidateBatch v1 lines with the awkward cases mixed in on purpose.

Two generators share one assembler:

* :func:`from_msmarco` builds multi-passage QA traffic from the MS MARCO TREC-DL19 BEIR subset:
  BM25 (written here with numpy) retrieves the candidates of each judged query, a second
  signal (BM25 with other parameters plus query-term coverage) fills ``rerank_score``;
* :func:`synthetic` builds the same shape from generated sentences (numbers, dates, negations),
  for tests and benchmarks that must not depend on the data folder.

Into each batch go, at configurable rates, the cases the product must survive: syndicated
copies of a relevant passage, an exact duplicate chunk id, a stale older version of the same
document, a cross-tenant passage, a passage with an access label the principal lacks, an
injected passage carrying instructions, and overlapping chunks of one document. They all
score in the top band, so a score-sorted assembler admits them.

What the packer sees carries no label: every chunk, doc and source id is an opaque hash of the
same shape, and ``metadata`` holds nothing that depends on the kind of passage. What the
generator knows (which chunk is a copy of which, which one is injected) goes to a separate
*truth* file (:class:`BatchTruth`, one JSON line per request), read by ``bench.quality``.

The evidence budget is tight by construction: the budget equation of
``ctxbudget.testing.naive`` is solved for a target equal to a random fraction
(``evidence_fraction``) of the token cost of the retrieved originals, so that a score-sorted
fill keeps only part of the relevant passages.

Dataset-derived output is never written inside the repository (research licences).

The package, one module per part:

* :mod:`~ctxbudget.testing.traffic.base`: tenants, access labels, kinds, the error, the awkward
  rates;
* :mod:`~ctxbudget.testing.traffic.truth`: truth records, the writer and reader of traffic files;
* :mod:`~ctxbudget.testing.traffic.ids`: opaque ids, fake sources, authorities, dates;
* :mod:`~ctxbudget.testing.traffic.bm25`: BM25 and query-term coverage;
* :mod:`~ctxbudget.testing.traffic.edits`: syndicated copies, stale versions, injections;
* :mod:`~ctxbudget.testing.traffic.assemble`: drafts, the plan of awkward cases, the wire
  candidates;
* :mod:`~ctxbudget.testing.traffic.frame`: the prompt frame and the evidence budget;
* :mod:`~ctxbudget.testing.traffic.msmarco` and :mod:`~ctxbudget.testing.traffic.dataset_free`: the
  two generators;
* :mod:`~ctxbudget.testing.traffic.cli`: ``python -m ctxbudget.testing.traffic``.

Every name is importable from ``ctxbudget.testing.traffic`` itself.
"""

from __future__ import annotations

from ctxbudget.testing.traffic.assemble import (
    Draft,
    _Context,
    add_awkward,
    plan_awkward,
)
from ctxbudget.testing.traffic.base import (
    FORBIDDEN_LABELS,
    KINDS,
    MSMARCO_EVIDENCE_FRACTION,
    OTHER_TENANT,
    PRINCIPAL_LABELS,
    REPO_ROOT,
    SYNTHETIC_EVIDENCE_FRACTION,
    TENANT,
    AwkwardRates,
    Kind,
    TrafficError,
)
from ctxbudget.testing.traffic.bm25 import (
    BM25Index,
    bm25_terms,
    coverage,
)
from ctxbudget.testing.traffic.cli import (
    _inside_repo,
    main,
)
from ctxbudget.testing.traffic.dataset_free import (
    N_FACT_TEMPLATES,
    synthetic,
)
from ctxbudget.testing.traffic.edits import (
    inject,
    sentence_spans,
    stale_text,
    syndicate,
)
from ctxbudget.testing.traffic.frame import (
    INPUT_LIMITS,
    TurnSource,
)
from ctxbudget.testing.traffic.ids import (
    authority_for,
    chunk_id_for,
    doc_id_for,
    source_for,
)
from ctxbudget.testing.traffic.msmarco import (
    MIN_ORIGINALS,
    MSMARCO_DIRNAME,
    MsMarco,
    default_data_dir,
    from_dbpedia,
    from_msmarco,
    msmarco_dir,
    repair_mojibake,
)
from ctxbudget.testing.traffic.truth import (
    BatchTruth,
    GeneratedBatch,
    read_truth,
    truth_path_for,
    write_traffic,
)

__all__ = [
    "FORBIDDEN_LABELS",
    "INPUT_LIMITS",
    "KINDS",
    "MIN_ORIGINALS",
    "MSMARCO_DIRNAME",
    "MSMARCO_EVIDENCE_FRACTION",
    "N_FACT_TEMPLATES",
    "OTHER_TENANT",
    "PRINCIPAL_LABELS",
    "REPO_ROOT",
    "SYNTHETIC_EVIDENCE_FRACTION",
    "TENANT",
    "AwkwardRates",
    "BM25Index",
    "BatchTruth",
    "Draft",
    "GeneratedBatch",
    "Kind",
    "MsMarco",
    "TrafficError",
    "TurnSource",
    "_Context",
    "_inside_repo",
    "add_awkward",
    "authority_for",
    "bm25_terms",
    "chunk_id_for",
    "coverage",
    "default_data_dir",
    "doc_id_for",
    "from_dbpedia",
    "from_msmarco",
    "inject",
    "main",
    "msmarco_dir",
    "plan_awkward",
    "read_truth",
    "repair_mojibake",
    "sentence_spans",
    "source_for",
    "stale_text",
    "syndicate",
    "synthetic",
    "truth_path_for",
    "write_traffic",
]
