"""The guarantees against hostile input, small and in process (``bench.guarantees``).

- tenant and access-label fuzzing: no admitted chunk id outside what the principal may see,
  no forbidden passage's marker in a pack, exact token counts within the budget; and the same
  checker, with authorization switched off, does find the leaks (so its zero means something);
- the poison file through the ``ctxbudget pack`` command: every line ends as exactly one pack
  or one dead letter, exit status 1.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import ctxbudget.stages.route as routing
from bench.guarantees.fuzz import FuzzCase, authorization_off, fuzz_cases, pack_cases
from bench.guarantees.poison import poison_lines, run_poison


@pytest.fixture(scope="module")
def cases() -> list[FuzzCase]:
    return fuzz_cases(150, seed=3, msmarco=False)


def test_the_fuzzer_plants_every_kind_of_trap(cases: list[FuzzCase]) -> None:
    """The cases hold every trap kind, 20-80% forbidden candidates, by the router's own rule."""
    traps = {t for c in cases for t in c.traps}
    assert traps >= {
        "same_id_other_tenant",
        "permitted_copy_of_forbidden",
        "forbidden_newer_version",
        "forbidden_overlapping_span",
        "forbidden_sibling_same_parent",
    }
    forbidden = sum(len(c.forbidden) for c in cases)
    candidates = sum(len(c.batch.candidates) for c in cases)
    assert 0.2 * candidates < forbidden < 0.8 * candidates
    # the fuzzer's rule is the router's rule
    for case in cases[:40]:
        for i, cand in enumerate(case.batch.candidates):
            assert (routing.authorization_problem(case.batch, cand) is not None) == (
                i in case.forbidden
            )


@pytest.mark.parametrize("policy", ["default@1", "lean@1"])
def test_no_leak_and_no_pack_over_budget(cases: list[FuzzCase], policy: str) -> None:
    """Under both policies no forbidden chunk or marker reaches a pack; none is over budget."""
    t = pack_cases(cases, policy)["all"]
    assert t.batches == t.packs == len(cases) and t.errors == 0, t.error_examples
    assert t.evidence_items > len(cases)  # packs are not trivially empty
    assert t.unauthorized_ids_admitted == 0
    assert t.markers_in_rendered == 0 and t.markers_in_pack == 0, t.leak_examples
    assert t.packs_leaking == 0
    assert t.decided_by_forbidden == 0
    assert t.token_mismatch == 0 and t.over_budget == 0


def test_the_checker_finds_leaks_when_authorization_is_off(cases: list[FuzzCase]) -> None:
    """With authorization switched off the checker finds leaks, and the switch is undone after."""
    original = routing.authorization_problem
    with authorization_off():
        t = pack_cases(cases, "default@1")["all"]
    assert routing.authorization_problem is original
    assert t.packs_leaking > len(cases) // 4
    assert t.unauthorized_ids_admitted > 0 and t.markers_in_rendered > 0
    assert t.token_mismatch == 0 and t.over_budget == 0


def test_poison_lines_are_distinct_and_single_lines() -> None:
    """Poison lines are distinct single lines with unique request ids, over 100 of them attacks."""
    lines = poison_lines(5, good=3)
    assert len({x.raw for x in lines}) == len(lines)
    assert all(b"\n" not in x.raw for x in lines)
    rids = [x.request_id for x in lines if x.request_id is not None]
    assert len(set(rids)) == len(rids)
    assert sum(1 for x in lines if x.attack is not None) >= 100


def test_every_poison_line_is_one_pack_or_one_dead_letter(tmp_path: Path) -> None:
    """The mixed file through the `ctxbudget pack` console script (a child process)."""
    report = run_poison(5, good=8, rounds=1, work_budget_s=30.0, workdir=tmp_path, timing=False)
    assert report["run"]["exit_status"] == 1, report["run"]
    assert not report["run"]["traceback"]
    assert report["exactly_one"] == report["lines"], report["problems"]
    assert report["problems"] == []
    assert report["packs"] + report["dead_letters"] == report["lines"]
    assert report["pack_checks"]["over_budget"] == 0
    assert report["pack_checks"]["tokens_not_exact"] == 0
    kinds = report["kinds"]
    assert kinds["good"]["packed"] == kinds["good"]["lines"] == 8
    assert kinds["injection_attack"]["packed"] == kinds["injection_attack"]["lines"]
    for kind in ("invalid_json", "not_utf8_passage", "duplicate_key_tenant", "tenant_mismatch"):
        assert kinds[kind]["dead"] == 1, (kind, kinds[kind])
    # the gate withholds most attacks; whatever it misses is counted, not hidden
    attacks = report["attacks"]["all"]
    assert attacks["withheld"] + attacks["admitted"] <= attacks["attacks"]
    assert attacks["withheld"] >= 0.9 * attacks["attacks"]
    assert len(report["attacks_rendered"]) == attacks["admitted"]
