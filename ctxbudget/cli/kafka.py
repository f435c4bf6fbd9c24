"""`ctxbudget broker | topics | worker | demo`: the Kafka side (needs the `kafka` extra)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from ctxbudget.cli.common import UsageFailure, policies_dir, worker_settings
from ctxbudget.errors import ConfigError
from ctxbudget.kafka import (
    DEFAULT_TOPICS_DIR,
    BrokerNotAnsweringError,
    BrokerPortInUseError,
    BrokerStartError,
    EmbeddedBroker,
    KafkaCluster,
    MetricsPortInUseError,
    TopicError,
    TopicSpec,
    apply_topics,
    ask_brokers,
    check_port_free,
    check_roles,
    fetch_kafka,
    load_specs,
    load_topic_specs,
    principals,
    run_cluster_forever,
    run_forever,
    run_verify_worker,
    run_worker,
    trusted_keys,
    verify_topics,
    written_roles,
)
from ctxbudget.resources import shipped

ALL_STAGES = ("route", "consolidate", "select", "compress")


@click.command("broker")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Port on 127.0.0.1 (default: a free one; embedded broker only).",
)
@click.option(
    "--kafka",
    "real_kafka",
    is_flag=True,
    help="Run Apache Kafka (fetched from Maven Central with Maven) instead of the embedded one.",
)
@click.option(
    "--nodes",
    type=click.Choice(["1", "3"]),
    default="1",
    show_default=True,
    help="Kafka nodes (combined broker and controller, 512 MiB heap each); with --kafka.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="An empty folder for storage, configs and credentials (default: a temporary one).",
)
@click.option(
    "--topics/--no-topics",
    "with_topics",
    default=True,
    show_default=True,
    help="With --kafka: create the shipped topics (replication factor = nodes).",
)
@click.option(
    "--fetch-only",
    is_flag=True,
    help="With --kafka: fetch the jars with Maven (cached), print their folder, exit.",
)
def broker_cmd(
    port: int | None,
    real_kafka: bool,
    nodes: str,
    data_dir: Path | None,
    with_topics: bool,
    fetch_only: bool,
) -> None:
    """Run a broker on 127.0.0.1 until Ctrl-C: the embedded one (memory only), or with
    --kafka a real Apache Kafka cluster (KRaft, SASL/SCRAM-SHA-512, ACLs enforced).

    Prints the bootstrap address first; point workers at it with CTXBUDGET_BROKERS. With
    --kafka it then names the credentials file (one SCRAM user per role of `ctxbudget acls`,
    and the super user admin; passwords are never printed). Exit status 2 when the port
    asked for is in use.
    """
    if real_kafka and fetch_only:
        try:
            click.echo(fetch_kafka(log=sys.stderr))
        except BrokerStartError as e:
            raise click.ClickException(str(e)) from e
        return
    if real_kafka:
        if port is not None:
            raise UsageFailure("--port is for the embedded broker; Kafka nodes take free ports")
        try:
            code = run_cluster_forever(
                nodes=int(nodes),
                users=list(principals().values()),
                data_dir=data_dir,
                on_ready=_cluster_topics if with_topics else None,
            )
        except BrokerStartError as e:
            raise click.ClickException(f"Apache Kafka did not start: {e}") from e
        sys.exit(code)
    try:
        code = run_forever(port=port)
    except BrokerPortInUseError as e:
        raise UsageFailure(str(e)) from e
    except BrokerStartError as e:
        raise click.ClickException(f"the embedded broker did not start: {e}") from e
    sys.exit(code)


def _cluster_topics(cluster: KafkaCluster) -> None:
    """Create the shipped topics on a fresh loopback cluster, as its super user."""
    report = apply_topics(
        cluster.bootstrap,
        _specs(None),
        replication_factor=cluster.nodes,
        settings=cluster.settings(),
    )
    click.echo(f"topics      {len(report.created)} created", err=True)


def _topics_dir(option: str | None) -> Path:
    """--dir, else ./topics, else the shipped specs (the checkout's or the package's)."""
    if option:
        return Path(option)
    local = Path("topics")
    return local if local.is_dir() else DEFAULT_TOPICS_DIR


def _specs(directory: str | None) -> list[TopicSpec]:
    try:
        return load_topic_specs(_topics_dir(directory))
    except TopicError as e:
        raise UsageFailure(str(e)) from e


@click.group("topics")
def topics_cmd() -> None:
    """Create or check the topics declared in topics/*.yaml."""


@topics_cmd.command("apply")
@click.option(
    "--brokers",
    envvar="CTXBUDGET_BROKERS",
    required=True,
    help="Bootstrap servers (or $CTXBUDGET_BROKERS).",
)
@click.option("--dir", "directory", help="Topic specs folder (default: ./topics).")
@click.option(
    "--replication-factor",
    type=int,
    default=None,
    help="Override every spec's replication factor (3 on a production cluster).",
)
def topics_apply(brokers: str, directory: str | None, replication_factor: int | None) -> None:
    """Create the missing topics; existing ones are reported, never altered."""
    specs = _specs(directory)
    settings = worker_settings()
    try:
        report = apply_topics(
            brokers, specs, replication_factor=replication_factor, settings=settings
        )
    except TopicError as e:
        raise click.ClickException(str(e)) from e
    for name in report.created:
        click.echo(f"created  {name}")
    for name in report.existing:
        click.echo(f"exists   {name}")


@topics_cmd.command("verify")
@click.option("--brokers", envvar="CTXBUDGET_BROKERS", required=True)
@click.option("--dir", "directory", help="Topic specs folder (default: ./topics).")
@click.option("--replication-factor", type=int, default=None)
def topics_verify(brokers: str, directory: str | None, replication_factor: int | None) -> None:
    """Report drift between the broker and the specs; exit 1 when there is any."""
    specs = _specs(directory)
    settings = worker_settings()
    try:
        drift = verify_topics(
            brokers, specs, replication_factor=replication_factor, settings=settings
        )
    except TopicError as e:
        raise click.ClickException(str(e)) from e
    for finding in drift:
        click.echo(str(finding))
    if drift:
        sys.exit(1)
    click.echo("no drift")


@click.command("worker")
@click.argument(
    "stages",
    nargs=-1,
    required=True,
    type=click.Choice([*ALL_STAGES, "fused", "shadow", "all", "verify"]),
)
def worker_cmd(stages: tuple[str, ...]) -> None:
    """Run worker agents for STAGES ('all' = the four stages in one process).

    'verify' runs the answer verifier alone (answers joined with their packs into verdicts;
    CTXBUDGET_VERIFY_* variables, see the README). Configuration comes from CTXBUDGET_*
    environment variables (see the README). A broker that does not answer within seconds is
    an error (exit status 1), a metrics port in use a usage error (exit status 2), each told
    in one line.
    """
    if "verify" in stages:
        if len(stages) > 1:
            raise UsageFailure("'verify' runs on its own: start the stage workers separately")
        run_verify_worker(worker_settings())
        return
    chosen = list(ALL_STAGES) if "all" in stages else list(dict.fromkeys(stages))
    settings = worker_settings()
    if settings.policies is None:
        settings = settings.model_copy(update={"policies": policies_dir(None)})
    try:
        # a lane pointed at the live topic is refused before anything is asked of the broker
        check_roles(
            settings.topics,
            written_roles(chosen, write_intermediate=settings.write_intermediate),
            load_specs(settings),
            writer=f"worker {'-'.join(chosen)}",
        )
        trusted_keys(settings)  # unreadable keys are a usage error, told before any broker
        if settings.metrics_port:
            check_port_free(settings.metrics_port)
        ask_brokers(settings)  # before faust is imported: a wrong address fails in seconds
        run_worker(settings, chosen)
    except ConfigError as e:  # a lane pointed at the live topic, a bad key, a bad policy
        raise UsageFailure(str(e)) from e
    except MetricsPortInUseError as e:
        raise UsageFailure(str(e)) from e
    except BrokerNotAnsweringError as e:
        raise click.ClickException(str(e)) from e


def _max_loop_lag(log_path: Path) -> float | None:
    """The worker's worst event-loop lag, from its last metrics line."""
    found = re.findall(r"max_loop_lag_ms=([0-9.]+)", log_path.read_text(errors="replace"))
    return float(found[-1]) if found else None


def demo_worker_env(bootstrap: str, policies: Path) -> dict[str, str]:
    """The demo worker's environment: this one, pointed at the embedded broker.

    The embedded broker speaks plaintext and the demo uses the shipped topic names, so a
    real cluster's CTXBUDGET_SASL_*, CTXBUDGET_SSL_* and topic overrides are left out.
    """
    dropped = ("CTXBUDGET_TOPICS__", "CTXBUDGET_SASL_", "CTXBUDGET_SSL_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env.update(
        CTXBUDGET_BROKERS=bootstrap,
        CTXBUDGET_POLICIES=str(policies),
        CTXBUDGET_SECURITY_PROTOCOL="PLAINTEXT",
    )
    return env


@click.command("demo")
@click.option(
    "--batches",
    type=click.Path(exists=True, dir_okay=False),
    help="CandidateBatch JSONL to feed (default: examples/batches.jsonl).",
)
@click.option(
    "--repeat",
    type=int,
    default=30,
    show_default=True,
    help="Feed the file this many times (request ids made unique).",
)
@click.option(
    "--topology",
    type=click.Choice(["split", "fused"]),
    default="split",
    show_default=True,
    help="Four agents, or one fused agent.",
)
@click.option("--timeout", type=float, default=120.0, show_default=True)
def demo_cmd(batches: str | None, repeat: int, topology: str, timeout: float) -> None:
    """Start the embedded broker, create the topics, run the workers, feed traffic.

    Prints a summary: packs received, dead letters, end-to-end latency, and whether every
    pack is byte-identical to the one `ctxbudget pack` makes for the same input.
    """
    from ctxbudget.cli.demo import DemoTraffic, run_demo

    source = Path(batches) if batches else shipped("examples") / "batches.jsonl"
    traffic = DemoTraffic.from_file(source, repeat=repeat)
    specs = _specs(None)
    with EmbeddedBroker() as broker:
        click.echo(f"broker      {broker.bootstrap} (embedded, memory only)", err=True)
        report = apply_topics(broker.bootstrap, specs)
        click.echo(f"topics      {len(report.created)} created", err=True)
        stages = ["fused"] if topology == "fused" else ["all"]
        env = demo_worker_env(broker.bootstrap, policies_dir(None))
        log_path = Path(tempfile.mkstemp(prefix="ctxbudget-demo-worker-", suffix=".log")[1])
        with log_path.open("wb") as log_file:
            worker = subprocess.Popen(
                [sys.executable, "-m", "ctxbudget", "worker", *stages],
                env=env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        click.echo(f"worker      pid {worker.pid} ({topology} topology), log {log_path}", err=True)
        try:
            summary = run_demo(
                broker.bootstrap, traffic, timeout_s=timeout, policies=policies_dir(None)
            )
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
        for line in summary.lines():
            click.echo(line)
        lag = _max_loop_lag(log_path)
        if lag is not None:
            click.echo(f"demo: worker event-loop lag, worst 50 ms probe: {lag:.1f} ms")
        if not summary.ok:
            sys.exit(1)
