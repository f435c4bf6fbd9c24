"""Relevance labels (ctxbudget.labels): taken from a labelled batch, put back on a batch, and
made from the citations a verified answer's supported claims give."""

from __future__ import annotations

from ctxbudget.labels import Label, label_of_batch, label_of_verdict, with_label
from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import Labels
from ctxbudget.testing import batch, candidate
from ctxbudget.verification import Answer, AnswerVerifier

KEYS = "API keys for the Acme gateway expire after 90 days."


def test_a_batch_label_round_trips_without_changing_the_batch() -> None:
    """The label names the batch's relevant ids under the given source; an unlabelled batch
    gives none, and labelling a copy leaves the original unlabelled."""
    plain = batch([candidate("a", "one"), candidate("b", "two")], request_id="r1")
    assert label_of_batch(plain, "analyst") is None
    label = Label(request_id="r1", relevant_chunk_ids=("b",), source="replay")
    labelled = with_label(plain, label)
    assert plain.labels is None and labelled.labels == Labels(relevant_chunk_ids=("b",))
    assert label_of_batch(labelled, "replay") == label


def test_a_verify_label_holds_what_supported_claims_cite(pipeline: Pipeline) -> None:
    """A supported claim's cited evidence becomes a ``verify`` label of its chunk ids; an
    answer whose claims cite nothing in the pack gives no label."""
    b = batch(
        [candidate("keys", KEYS, 9.0), candidate("other", "The office opened in 2019.", 1.0)],
        query="when do Acme API keys expire?",
    )
    pack = pipeline.run(b).pack
    (eid,) = [e.evidence_id for e in pack.evidence if "keys" in e.chunk_ids]
    verifier = AnswerVerifier()
    cited = Answer(request_id=pack.request_id, text=f"Acme API keys expire after 90 days [{eid}].")
    verdict = verifier.run(cited, pack)
    assert verdict.claims[0].status == "supported"
    label = label_of_verdict(verdict, pack)
    assert label == Label(request_id=pack.request_id, relevant_chunk_ids=("keys",), source="verify")
    uncited = Answer(request_id=pack.request_id, text="Acme API keys expire after 90 days.")
    assert label_of_verdict(verifier.run(uncited, pack), pack) is None
