"""One client-config factory for every Kafka client: each entry point gets the security settings.

The kafka-python client classes are replaced by recorders that keep the keyword arguments
each construction received and then refuse to connect (as an unreachable broker would), so
every command and worker entry point can be driven to the point where it builds its client,
without a broker. faust's agents are checked through the App's ``broker_credentials``.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxbudget.cli import main
from tests.paths import REPO

kafka = pytest.importorskip("kafka", reason="the 'kafka' extra is not installed")
faust = pytest.importorskip("faust", reason="the 'kafka' extra is not installed")

from kafka.errors import KafkaTimeoutError  # noqa: E402

from ctxbudget.kafka import clients  # noqa: E402
from ctxbudget.kafka.settings import WorkerSettings  # noqa: E402

SECURED = {
    "CTXBUDGET_SECURITY_PROTOCOL": "SASL_SSL",
    "CTXBUDGET_SASL_MECHANISM": "SCRAM-SHA-512",
    "CTXBUDGET_SASL_USERNAME": "svc-ctxbudget",
    "CTXBUDGET_SASL_PASSWORD": "s3cret-pw",
}
EXAMPLES = str(REPO / "examples" / "batches.jsonl")


class Recorder:
    """Stands in for KafkaProducer / KafkaConsumer / KafkaAdminClient."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.admin_topics: list[str] | None = None  # None: the admin client refuses too

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.calls]

    def of(self, client_id: str) -> dict[str, Any]:
        found = [c for _, c in self.calls if c.get("client_id") == client_id]
        assert found, f"no client {client_id!r} was built; built: {self.calls}"
        return found[-1]

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        recorder = self

        class FakeProducer:
            def __init__(self, **config: Any) -> None:
                recorder.calls.append(("producer", config))
                raise KafkaTimeoutError("recorder: no broker in unit tests")

        class FakeConsumer:
            def __init__(self, *topics: str, **config: Any) -> None:
                recorder.calls.append(("consumer", config))
                raise KafkaTimeoutError("recorder: no broker in unit tests")

        class FakeAdmin:
            def __init__(self, **config: Any) -> None:
                recorder.calls.append(("admin", config))
                if recorder.admin_topics is None:
                    raise KafkaTimeoutError("recorder: no broker in unit tests")

            def list_topics(self) -> list[str]:
                assert recorder.admin_topics is not None
                return recorder.admin_topics

            def close(self) -> None:
                pass

        monkeypatch.setattr(kafka, "KafkaProducer", FakeProducer)
        monkeypatch.setattr(kafka, "KafkaConsumer", FakeConsumer)
        monkeypatch.setattr(kafka, "KafkaAdminClient", FakeAdmin)


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    rec = Recorder()
    rec.install(monkeypatch)
    return rec


@pytest.fixture
def secured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """SASL_SSL settings in the environment; the working directory has no .env file."""
    for key, value in SECURED.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CTXBUDGET_BROKERS", raising=False)
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def assert_secured(config: dict[str, Any]) -> None:
    """The kafka-python keywords of a client on the secured cluster."""
    assert config["security_protocol"] == "SASL_SSL"
    assert config["sasl_mechanism"] == "SCRAM-SHA-512"
    assert config["sasl_plain_username"] == "svc-ctxbudget"
    assert config["sasl_plain_password"] == "s3cret-pw"
    assert isinstance(config["ssl_context"], ssl.SSLContext)
    assert config["ssl_context"].check_hostname


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


# -- the factory itself ------------------------------------------------------------------------


def test_plaintext_without_settings() -> None:
    """Without settings: plaintext, the broker list split at commas, other options passed on."""
    config = clients.client_config(None, brokers="a:1, b:2", client_id="x", acks="all")
    assert config == {
        "bootstrap_servers": ["a:1", "b:2"],
        "security_protocol": "PLAINTEXT",
        "client_id": "x",
        "acks": "all",
    }


@pytest.mark.parametrize(
    ("protocol", "tls", "sasl"),
    [("PLAINTEXT", False, False), ("SSL", True, False), ("SASL_PLAINTEXT", False, True)],
)
def test_each_protocol_carries_what_it_needs(protocol: str, tls: bool, sasl: bool) -> None:
    """SSL gets only a TLS context, SASL_PLAINTEXT only SASL credentials, PLAINTEXT neither."""
    settings = WorkerSettings(
        brokers="k:9093", security_protocol=protocol, sasl_username="u", sasl_password="p"
    )
    config = clients.client_config(settings)
    assert config["bootstrap_servers"] == ["k:9093"]
    assert config["security_protocol"] == protocol
    assert ("ssl_context" in config) is tls
    assert ("sasl_plain_password" in config) is sasl


def test_the_ca_file_and_client_certificate_are_loaded(tmp_path: Path) -> None:
    """A CA file's certificates reach the TLS context; a missing client certificate is OSError."""
    certifi = pytest.importorskip("certifi")
    settings = WorkerSettings(security_protocol="SSL", ssl_cafile=Path(certifi.where()))
    context = clients.ssl_context(settings)
    assert context is not None and context.cert_store_stats()["x509_ca"] > 0
    missing = WorkerSettings(security_protocol="SSL", ssl_certfile=tmp_path / "nope.pem")
    with pytest.raises(OSError):
        clients.ssl_context(missing)


def test_options_cannot_override_the_security_settings() -> None:
    """A caller's security_protocol option is refused: only the settings decide it."""
    with pytest.raises(ValueError, match="security_protocol"):
        clients.client_config(None, brokers="a:1", security_protocol="SSL")


def test_the_password_is_not_in_the_settings_description() -> None:
    """The loggable settings description shows the SASL password masked, never its value."""
    settings = WorkerSettings(**{"sasl_password": "s3cret-pw"})
    described = settings.describe()
    assert "s3cret-pw" not in repr(described)
    assert described["sasl_password"] == "**********"


def test_no_kafka_client_is_built_outside_the_factory() -> None:
    """Every kafka-python construction goes through ctxbudget/kafka/clients.py (benches too)."""
    pattern = re.compile(r"\bKafka(Producer|Consumer|AdminClient)\(")
    offenders = [
        f"{path.relative_to(REPO)}:{n}"
        for folder in ("ctxbudget", "workers", "bench")
        for path in sorted((REPO / folder).rglob("*.py"))
        if path != REPO / "ctxbudget" / "kafka" / "clients.py"
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if pattern.search(line)
    ]
    assert offenders == []


# -- every entry point -------------------------------------------------------------------------


def test_faust_agents_get_the_credentials(secured: Path) -> None:
    """The faust app gets SCRAM-SHA-512 credentials: user, password and a TLS context."""
    from ctxbudget.kafka.app import WorkerApp

    app = WorkerApp(WorkerSettings(policies=REPO / "policies"), ["route"])
    try:
        creds = app.app.conf.broker_credentials
        assert isinstance(creds, faust.SASLCredentials)
        assert (creds.username, creds.password) == ("svc-ctxbudget", "s3cret-pw")
        assert creds.mechanism.value == "SCRAM-SHA-512"
        assert isinstance(creds.ssl_context, ssl.SSLContext)
    finally:
        app.executor.shutdown()


def test_control_follower_and_control_producer(secured: Path, recorder: Recorder) -> None:
    """The worker's control follower and control producer are built with the secured settings."""
    from ctxbudget.kafka.app import WorkerApp
    from ctxbudget.rollout import ControlState

    app = WorkerApp(WorkerSettings(policies=REPO / "policies"), ["route"])
    try:
        from ctxbudget.kafka.control_follower import ControlFollower, ControlHolder

        follower = ControlFollower(
            bootstrap=app.settings.bootstrap(),
            settings=app.settings,
            topic=app.settings.topics.control,
            holder=ControlHolder(ControlState(baseline="default@1")),
        )
        with pytest.raises(KafkaTimeoutError):
            follower._consumer()
        assert_secured(recorder.of("ctxbudget-control-follower"))
        with pytest.raises(KafkaTimeoutError):
            app._control_producer()
        assert_secured(recorder.of("ctxbudget-control"))
    finally:
        app.executor.shutdown()


def test_the_worker_passes_its_settings_to_the_follower() -> None:
    """WorkerApp.start_control builds the follower with the worker's settings."""
    source = (REPO / "ctxbudget" / "kafka" / "app.py").read_text()
    call = source[source.index("self.follower = ControlFollower(") :][:400]
    assert "settings=self.settings" in call


def test_ctxbudget_control(
    secured: Path, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`control show` reads the control topic with the secured client settings."""
    assert run("control", "keygen", str(secured / "keys")).exit_code == 0
    (private,) = (secured / "keys").glob("*private*")
    monkeypatch.setenv("CTXBUDGET_CONTROL_KEY", str(private))
    result = run("control", "show", "--brokers", "k1:9093")
    assert result.exit_code == 1 and "cannot read the control topic" in result.output
    assert recorder.of("ctxbudget-control")["bootstrap_servers"] == ["k1:9093"]
    assert_secured(recorder.of("ctxbudget-control"))


def test_control_writer(secured: Path, recorder: Recorder) -> None:
    """Writing a control state builds its producer with the secured settings."""
    from ctxbudget.kafka.control import write_state
    from ctxbudget.rollout import ControlState

    with pytest.raises(KafkaTimeoutError):
        write_state(
            ["k1:9093"],
            control_topic="c",
            audit_topic="a",
            action="kill",
            before=None,
            after=ControlState(baseline="default@1"),
            settings=WorkerSettings(),
        )
    assert_secured(recorder.of("ctxbudget-control"))


@pytest.mark.parametrize("command", ["apply", "verify"])
def test_topic_admin(secured: Path, recorder: Recorder, command: str) -> None:
    """`topics apply` and `verify` build a secured admin client, exit 1 when it cannot connect."""
    result = run("topics", command, "--brokers", "k1:9093", "--dir", str(REPO / "topics"))
    assert result.exit_code == 1 and "cannot reach the broker" in result.output
    assert_secured(recorder.of("ctxbudget-topics"))


def test_replay_reading_a_topic(secured: Path, recorder: Recorder) -> None:
    """Replay from a topic builds a secured consumer, exits 2 naming the broker it cannot reach."""
    result = run(
        "replay", "--from-topic", "ctx.candidates.v1", "--brokers", "k1:9093",
        "--policy", "default@1", "--run-id", "r1", "--out", "out.jsonl",
        "--policies", str(REPO / "policies"),
    )  # fmt: skip
    assert result.exit_code == 2 and "cannot reach the broker at k1:9093" in result.output
    assert_secured(recorder.of("ctxbudget-consumer"))


def test_replay_writing_the_shadow_topic(secured: Path, recorder: Recorder) -> None:
    """Replay to the shadow topic builds a secured producer and exits 2 when it cannot connect."""
    result = run(
        "replay", EXAMPLES, "--brokers", "k1:9093", "--policy", "default@1",
        "--run-id", "r1", "--policies", str(REPO / "policies"),
    )  # fmt: skip
    assert result.exit_code == 2 and "cannot reach the broker" in result.output
    assert_secured(recorder.of("ctxbudget-producer"))


def test_compare_reading_the_pack_topics(secured: Path, recorder: Recorder) -> None:
    """Compare over the pack topics builds a secured consumer and exits 2 naming the broker."""
    result = run("compare", "--brokers", "k1:9093")
    assert result.exit_code == 2 and "cannot reach the broker at k1:9093" in result.output
    assert_secured(recorder.of("ctxbudget-consumer"))


def test_audit_sink(secured: Path, recorder: Recorder) -> None:
    """The audit sink builds a secured consumer and exits 2 naming the broker it cannot reach."""
    pytest.importorskip("duckdb")
    result = run("audit-sink", "--to", "audit.duckdb", "--brokers", "k1:9093", "--until-idle", "0")
    assert result.exit_code == 2 and "cannot reach k1:9093" in result.output
    assert_secured(recorder.of("ctxbudget-audit-sink"))


def test_produce(secured: Path, recorder: Recorder) -> None:
    """Produce builds a secured producer; with the topic there: admin, then producer, secured."""
    result = run("produce", EXAMPLES, "--brokers", "k1:9093")
    assert result.exit_code == 2 and "cannot reach the broker at k1:9093" in result.output
    assert_secured(recorder.of("ctxbudget-produce"))
    recorder.calls.clear()
    recorder.admin_topics = ["ctx.candidates.v1"]
    result = run("produce", EXAMPLES, "--brokers", "k1:9093")
    assert recorder.kinds() == ["admin", "producer"]
    for _, config in recorder.calls:
        assert_secured(config)
    assert result.exit_code == 2 and "cannot reach the broker at k1:9093" in result.output


def test_demo_clients_come_from_the_factory_in_plaintext(secured: Path, recorder: Recorder) -> None:
    """The demo talks to its own embedded broker: the factory, with no credentials."""
    from ctxbudget.cli.demo import DemoTraffic, run_demo

    traffic = DemoTraffic.from_file(Path(EXAMPLES), repeat=1)
    with pytest.raises(KafkaTimeoutError):
        run_demo("127.0.0.1:1", traffic, timeout_s=1, policies=REPO / "policies")
    config = recorder.of("ctxbudget-demo")
    assert config["security_protocol"] == "PLAINTEXT" and "sasl_plain_password" not in config


def test_demo_worker_environment_is_plaintext(
    secured: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's worker process must not inherit a real cluster's settings."""
    from ctxbudget.cli.kafka import demo_worker_env

    monkeypatch.setenv("CTXBUDGET_TOPICS__PACKS", "elsewhere.v1")
    monkeypatch.setenv("CTXBUDGET_SSL_CAFILE", "/etc/ca.pem")
    env = demo_worker_env("127.0.0.1:5", Path("/p"))
    assert env["CTXBUDGET_SECURITY_PROTOCOL"] == "PLAINTEXT"
    assert env["CTXBUDGET_BROKERS"] == "127.0.0.1:5" and env["CTXBUDGET_POLICIES"] == "/p"
    assert not any(
        k.startswith(("CTXBUDGET_SASL_", "CTXBUDGET_SSL_", "CTXBUDGET_TOPICS__")) for k in env
    )


def test_the_password_file_reaches_kafka_python_and_faust(tmp_path: Path) -> None:
    """CTXBUDGET_SASL_PASSWORD_FILE: its first line is the password every client gets."""
    secret = tmp_path / "route.password"
    secret.write_text("from-a-file\n")
    settings = WorkerSettings(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="ctxbudget-route",
        sasl_password_file=secret,
    )
    config = clients.client_config(settings, brokers="k:9092")
    assert config["sasl_plain_password"] == "from-a-file"
    assert config["sasl_mechanism"] == "SCRAM-SHA-512"
    assert clients.faust_credentials(settings).password == "from-a-file"
    assert "from-a-file" not in repr(settings.describe())
    secret.write_text("rotated\n")  # read again when the next client is made
    assert clients.client_config(settings, brokers="k:9092")["sasl_plain_password"] == "rotated"


def test_a_password_and_a_password_file_together_are_refused(tmp_path: Path) -> None:
    """Two sources for one secret would leave which one wins to chance."""
    with pytest.raises(ValueError, match="not both"):
        WorkerSettings(sasl_password="x", sasl_password_file=tmp_path / "pw")


def test_an_unreadable_password_file_is_named(tmp_path: Path) -> None:
    """The error names the variable and the file, not the secret."""
    settings = WorkerSettings(
        security_protocol="SASL_PLAINTEXT", sasl_password_file=tmp_path / "missing"
    )
    with pytest.raises(ValueError, match=r"CTXBUDGET_SASL_PASSWORD_FILE .*missing"):
        clients.client_config(settings, brokers="k:9092")
