"""`ctxbudget pack` (ctxbudget.cli.pack) on hostile input: one pack or one dead letter a line.

Hostile input: a bad line never aborts the run, the exit status tells
what happened (0 packed, 1 dead letters, 2 usage, 3 internal), JSON is strict (duplicate
keys, 64-bit integers), the batch's tenant is its principal's, and dead letters are bounded.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget.cli.pack import pack_cmd
from ctxbudget.codec import (
    DEAD_LETTER_EXCERPT_BYTES,
    decode_batch,
    encode,
)
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import DeadLetter
from tests.paths import REPO
from tests.unit.example_lines import BIG, EXAMPLES, GOOD, edited

POLICIES = str(REPO / "policies")


def _pack(*args: str, stdin: bytes | None = None) -> Result:
    return CliRunner().invoke(pack_cmd, [*args, "--policies", POLICIES], input=stdin)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()] if path.exists() else []


# The lines of the mixed file: (kind, bytes, what its dead letter's error says). None marks a
# line that must be packed; EITHER one that may be packed or dead-lettered (a 5,000-digit
# version string trips a later stage today; that stage may learn to cope with it).
EITHER = "*"
HOSTILE: list[tuple[str, bytes, str | None]] = [
    ("good", GOOD, None),
    ("2^70 input_limit", edited(b'"input_limit":4096', b'"input_limit":' + BIG), "input_limit"),
    ("2^70 instructions", edited(b'"tokens":350', b'"tokens":' + BIG), "instructions.tokens"),
    (
        "2^70 span start",
        edited(
            b'"access_label":"public"}',
            b'"access_label":"public","span":{"start":' + BIG + b',"end":' + BIG + b"}}",
        ),
        "span.start",
    ),
    ("5000-digit number version", edited(b'"version":"3"', b'"version":' + b"9" * 5000), "JSON"),
    (
        "5000-digit string version",
        edited(b'"version":"3"', b'"version":"' + b"9" * 5000 + b'"'),
        EITHER,
    ),
    (
        "duplicate key",
        edited(
            b'"principal":{"tenant_id":"acme"', b'"principal":{"tenant_id":"x","tenant_id":"acme"'
        ),
        "duplicate key principal.tenant_id",
    ),
    (
        "tenant mismatch",
        edited(b'"tenant_id":"acme","principal"', b'"tenant_id":"globex","principal"'),
        "tenant_id 'globex' differs from principal.tenant_id 'acme'",
    ),
    ("good again", EXAMPLES[1], None),
    ("not UTF-8", b'{"request_id": "\xff\xfe\x80"}', "JSON"),
    ("empty object", b"{}", "Field required"),
    ("array", b"[]", "object"),
    ("deep array", b"[" * 100_000 + b"]" * 100_000, "JSON"),
    ("deep object", b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "JSON"),
    ("negative count", edited(b'"tokens":350', b'"tokens":-1'), "instructions.tokens"),
    ("last good", EXAMPLES[2], None),
]


def _pipeline_packs(lines: list[bytes]) -> list[bytes]:
    """What the in-process pipeline makes of these lines."""
    pipe = Pipeline.from_store(PolicyStore.load(Path(POLICIES)), "default@1")
    return [encode(pipe.run(decode_batch(x)).pack) + b"\n" for x in lines]


# ---------------------------------------------------------------- the mixed file


def test_every_hostile_line_is_one_dead_letter_and_the_good_ones_are_packed(
    tmp_path: Path,
) -> None:
    """Each line ends as exactly one pack or one dead letter with its line number; exit 1."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(line for _, line, _ in HOSTILE) + b"\n")
    out, dead = tmp_path / "packs.jsonl", tmp_path / "dead.jsonl"
    res = _pack(str(src), "-o", str(out), "--dead-letter", str(dead))
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.stderr

    letters = _jsonl(dead)
    dead_lines = [d["line"] for d in letters]
    must_die = [n for n, (_, _, why) in enumerate(HOSTILE, 1) if why not in (None, EITHER)]
    may_die = [n for n, (_, _, why) in enumerate(HOSTILE, 1) if why is not None]
    assert dead_lines == sorted(dead_lines) and set(must_die) <= set(dead_lines) <= set(may_die)
    for d in letters:
        kind, raw, why = HOSTILE[d["line"] - 1]
        DeadLetter.model_validate(d)
        assert d["schema"] == "ctx.dead_letter.v1" and d["stage"] == "pack"
        assert why is not None and (why == EITHER or why in d["error"]), (kind, d["error"])
        assert f"line {d['line']}: " in res.stderr
        assert d["original_bytes"] == len(raw)
        assert d["original_sha256"] == hashlib.sha256(raw).hexdigest()
        if kind == "not UTF-8":
            assert d["raw_encoding"] == "base64" and base64.b64decode(d["raw"]) == raw

    packed = [raw for n, (_, raw, _) in enumerate(HOSTILE, 1) if n not in dead_lines]
    assert out.read_bytes() == b"".join(_pipeline_packs(packed))
    n, p, k = len(HOSTILE), len(packed), len(letters)
    assert f"pack: {n} batches, {p} packs, {k} dead letters" in res.stderr


def test_tracebacks_are_not_how_a_bad_line_is_reported(tmp_path: Path) -> None:
    """A bad line is one line on stderr (numbered), whatever the exception behind it."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join([HOSTILE[1][1], HOSTILE[7][1], GOOD]) + b"\n")
    res = _pack(str(src), "-o", str(tmp_path / "o.jsonl"))
    assert res.exit_code == 1
    lines = res.stderr.splitlines()
    assert lines[0].startswith("line 1: model.input_limit: integer")
    assert lines[1].startswith("line 2: invalid CandidateBatch: tenant_id")
    assert lines[2].startswith("pack: 3 batches, 1 packs, 2 dead letters")


def test_all_good_exits_0_and_packs_every_line_in_order(tmp_path: Path) -> None:
    """Good lines only: exit 0, the in-process packs in input order, an empty dead-letter file."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(EXAMPLES) + b"\n")
    out = tmp_path / "packs.jsonl"
    res = _pack(str(src), "-o", str(out), "--dead-letter", str(tmp_path / "dead.jsonl"))
    assert res.exit_code == 0, res.output
    assert out.read_bytes() == b"".join(_pipeline_packs(EXAMPLES))
    assert (tmp_path / "dead.jsonl").read_bytes() == b""


def test_stdin_to_stdout_with_a_bad_line(tmp_path: Path) -> None:
    """'-' both ways: the packs of the good lines reach stdout, the bad line does not."""
    res = _pack("-", "-o", "-", stdin=b"\n".join([GOOD, b"{", EXAMPLES[1]]) + b"\n")
    assert res.exit_code == 1
    assert res.stdout_bytes == b"".join(_pipeline_packs([GOOD, EXAMPLES[1]]))
    assert "line 2: not valid JSON" in res.stderr


# ---------------------------------------------------------------- exit statuses 2 and 3


def _assert_one_line_usage_error(res: Result, *words: str) -> None:
    assert res.exit_code == 2, res.output
    assert ("Traceback" not in res.output and res.exception is None) or isinstance(
        res.exception, SystemExit
    )
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.stderr
    for w in words:
        assert w in lines[0]


def test_a_missing_input_file_is_a_usage_error(tmp_path: Path) -> None:
    """A missing input is one usage-error line naming it; an existing output is left as it was."""
    out = tmp_path / "packs.jsonl"
    out.write_bytes(b"keep me\n")
    res = _pack(str(tmp_path / "nope.jsonl"), "-o", str(out))
    _assert_one_line_usage_error(res, "nope.jsonl", "No such file")
    assert out.read_bytes() == b"keep me\n"  # nothing was opened for writing


def test_a_directory_as_input_is_a_usage_error(tmp_path: Path) -> None:
    """A directory given as the input is one usage-error line: cannot read BATCHES."""
    _assert_one_line_usage_error(_pack(str(tmp_path)), "cannot read BATCHES")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--policy", "nope@1"], ["unknown policy", "nope@1"]),
        (["--policy", "default"], ["default"]),
    ],
)
def test_an_unknown_policy_is_a_usage_error(
    tmp_path: Path, args: list[str], words: list[str]
) -> None:
    """An unknown or unversioned --policy is one usage-error line naming it; no output is made."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(GOOD + b"\n")
    _assert_one_line_usage_error(_pack(str(src), "-o", str(tmp_path / "o"), *args), *words)
    assert not (tmp_path / "o").exists()


def test_a_missing_policies_folder_is_a_usage_error(tmp_path: Path) -> None:
    """A policies folder with no policies is one usage-error line naming the folder."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(GOOD + b"\n")
    res = CliRunner().invoke(pack_cmd, [str(src), "--policies", str(tmp_path / "none")])
    _assert_one_line_usage_error(res, str(tmp_path / "none"), "no packing policy found")


@pytest.mark.parametrize("option", ["-o", "--trace", "--dead-letter"])
def test_an_unwritable_output_is_a_usage_error(tmp_path: Path, option: str) -> None:
    """Each output path in a missing folder, or naming a directory, is one usage-error line."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(GOOD + b"\n")
    bad = str(tmp_path / "missing-dir" / "x.jsonl")
    args = [str(src), option, bad] + ([] if option == "-o" else ["-o", str(tmp_path / "o")])
    _assert_one_line_usage_error(_pack(*args), "cannot write", "missing-dir")
    _assert_one_line_usage_error(_pack(str(src), option, str(tmp_path)), "Is a directory")


def test_a_bad_option_keeps_clicks_usage_error() -> None:
    """A bad option value keeps click's usage error (exit 2) naming the option and value."""
    res = _pack("x.jsonl", "--lane", "sideways")
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "Usage: pack" in res.output
    assert "Invalid value for '--lane': 'sideways'" in res.output


def test_the_help_documents_the_exit_statuses() -> None:
    """The help text lists exit statuses 0, 1, 2 and 3 and what each means."""
    text = CliRunner().invoke(pack_cmd, ["--help"]).output
    assert "Exit status:" in text
    for line in (
        "0  every line was packed",
        "1  one or more lines",
        "2  usage error",
        "3  internal",
    ):
        assert line in text


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ctxbudget", "pack", *args, "--policies", POLICIES]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_an_output_that_breaks_is_an_internal_failure_exit_3(tmp_path: Path) -> None:
    """Writing fails (disk full): one line on stderr, exit 3, no traceback."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(EXAMPLES * 20) + b"\n")
    proc = subprocess.run(
        _cli(str(src), "-o", "/dev/full"), capture_output=True, timeout=300, check=False
    )
    assert proc.returncode == 3, proc.stderr.decode()
    err = proc.stderr.decode()
    assert "Traceback" not in err
    assert err.strip().splitlines() == [err.strip()] and err.startswith("Error: internal failure")
    assert "No space left on device" in err


def test_a_closed_stdout_is_an_internal_failure_exit_3(tmp_path: Path) -> None:
    """The reader of stdout goes away: exit 3, one line, no 'Exception ignored' noise."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(EXAMPLES * 60) + b"\n")  # far more than a pipe buffer of packs
    proc = subprocess.Popen(
        _cli(str(src), "-o", "-"), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 3, err
    assert "Traceback" not in err and "Exception ignored" not in err
    assert err.strip().splitlines() == [err.strip()] and "BrokenPipeError" in err


# ---------------------------------------------------------------- dead letters


def test_a_large_bad_line_is_a_bounded_dead_letter_in_the_run(tmp_path: Path) -> None:
    """In a run, a 200 KB bad line's dead letter keeps a 64 KiB excerpt, its size and id."""
    big = edited(b'"text":"API keys', b'"text":"' + b"x" * 200_000 + b'","oops":"API keys')
    big = edited(b'"tenant_id":"acme","principal"', b'"tenant_id":"other","principal"', big)
    src = tmp_path / "in.jsonl"
    src.write_bytes(big + b"\n" + GOOD + b"\n")
    dead = tmp_path / "dead.jsonl"
    res = _pack(str(src), "-o", str(tmp_path / "o"), "--dead-letter", str(dead))
    assert res.exit_code == 1
    (d,) = _jsonl(dead)
    assert d["line"] == 1 and len(d["raw"]) == DEAD_LETTER_EXCERPT_BYTES
    assert d["original_bytes"] == len(big) and d["request_id"] == "req-0001"


# ---------------------------------------------------------------- properties


def _leaf_paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(node, dict):
        out = [path] if path else []
        return out + [p for k, v in node.items() for p in _leaf_paths(v, (*path, k))]
    if isinstance(node, list):
        return [path] + [p for i, v in enumerate(node) for p in _leaf_paths(v, (*path, i))]
    return [path]


def _replace(node: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    node[path[0]] = _replace(node[path[0]], path[1:], value)
    return node


_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=10,
)


@st.composite
def _lines(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["good", "mutated", "mutated", "json", "bytes"]))
    if kind == "good":
        return draw(st.sampled_from(EXAMPLES))
    if kind == "json":
        return json.dumps(draw(_ANY_JSON)).encode()
    if kind == "bytes":
        return draw(st.binary(max_size=40)).replace(b"\n", b" ")
    data = json.loads(draw(st.sampled_from(EXAMPLES)))
    path = draw(st.sampled_from(_leaf_paths(data)))
    return json.dumps(_replace(data, path, draw(_ANY_JSON))).encode()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_lines(), min_size=1, max_size=5))
def test_pack_never_raises_and_every_line_is_accounted_for(lines: list[bytes]) -> None:
    """For any lines, exit 0 or 1, and packs + dead letters == lines, in order."""
    with CliRunner().isolated_filesystem():
        Path("in.jsonl").write_bytes(b"\n".join(lines) + b"\n")
        res = _pack("in.jsonl", "-o", "out.jsonl", "--dead-letter", "dead.jsonl")
        packs, letters = _jsonl(Path("out.jsonl")), _jsonl(Path("dead.jsonl"))
    numbered = [(n, x) for n, x in enumerate(lines, 1) if x.rstrip(b"\r").strip()]
    assert res.exit_code == (1 if letters else 0), res.output
    assert "Traceback" not in res.output
    assert len(packs) + len(letters) == len(numbered)
    dead = [d["line"] for d in letters]
    assert dead == sorted(set(dead)) and set(dead) <= {n for n, _ in numbered}
    packed = [x for n, x in numbered if n not in dead]
    assert [p["request_id"] for p in packs] == [json.loads(x)["request_id"] for x in packed]


def test_a_failure_reading_the_input_is_an_internal_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a line's fault (the disk went away mid-file): exit 3 with one line on stderr."""
    import ctxbudget.cli.pack as pack_mod

    def broken(fh: Any) -> Any:
        yield 1, GOOD
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(pack_mod, "iter_lines", broken)
    src = tmp_path / "in.jsonl"
    src.write_bytes(GOOD + b"\n" + GOOD + b"\n")
    res = _pack(str(src), "-o", str(tmp_path / "o"))
    assert res.exit_code == 3
    assert res.stderr.strip() == (
        "Error: internal failure after 1 lines (1 packs, 0 dead letters): "
        "OSError: [Errno 5] Input/output error"
    )


def test_a_bug_loading_the_policy_is_an_internal_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception loading the policy is exit 3, one line naming it an internal failure."""

    def boom(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("bug")

    monkeypatch.setattr(Pipeline, "from_store", boom)
    src = tmp_path / "in.jsonl"
    src.write_bytes(GOOD + b"\n")
    res = _pack(str(src), "-o", str(tmp_path / "o"))
    assert res.exit_code == 3
    assert res.stderr.strip() == "Error: internal failure loading the policy: RuntimeError: bug"


def test_the_workers_dead_letter_hostile_batches_the_same_way() -> None:
    """The route and fused handlers share the codec: same strict checks, bounded letters."""
    from ctxbudget.kafka.handlers import (
        Context,
        Metrics,
        Pipelines,
        build_handler,
        static_assignment,
    )
    from ctxbudget.kafka.settings import TopicNames

    topics = TopicNames()
    ctx = Context(
        pipelines=Pipelines(Path(POLICIES)),
        topics=topics,
        metrics=Metrics(),
        assign=static_assignment("default@1"),
    )
    hostile = [raw for _, raw, why in HOSTILE if why not in (None, EITHER)]
    for stage in ("route", "fused"):
        for raw in hostile:
            (out,) = build_handler(stage, ctx).handle(raw, source="t", offset=3)
            assert out.topic == topics.deadletter
            d = orjson.loads(out.value)
            assert d["offset"] == 3 and d["original_bytes"] == len(raw)
            assert len(out.value) < DEAD_LETTER_EXCERPT_BYTES * 2


def test_pack_holds_lines_to_the_workers_input_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CTXBUDGET_MAX_* variables the workers read apply to `ctxbudget pack` too: a line
    over one is a dead letter naming the limit, and a bad value is a usage error."""
    n = len(orjson.loads(GOOD)["candidates"])
    assert _pack("-", stdin=GOOD + b"\n").exit_code == 0
    monkeypatch.setenv("CTXBUDGET_MAX_CANDIDATES", str(n - 1))
    result = _pack("-", stdin=GOOD + b"\n")
    assert result.exit_code == 1
    assert "max_candidates" in result.stderr
    monkeypatch.setenv("CTXBUDGET_MAX_CANDIDATES", "none")
    result = _pack("-", stdin=GOOD + b"\n")
    assert result.exit_code == 2
    assert "CTXBUDGET_MAX_CANDIDATES" in result.stderr
