"""A real Apache Kafka cluster on loopback: 1 or 3 KRaft nodes, SASL/SCRAM, ACLs enforced.

The jars come from Maven Central through ``ops/kafka/pom.xml`` (:func:`fetch_kafka`, cached in
``~/.cache/ctxbudget/kafka-VERSION``; Maven keeps its own cache in ``~/.m2``). Each node is
one JVM (``kafka.Kafka``, 512 MiB heap) in the combined ``broker,controller`` role, its
storage formatted first with ``kafka.tools.StorageTool format``, which also creates the SCRAM
users (``--add-scram``). The client listener speaks SASL_PLAINTEXT with SCRAM-SHA-512 (the
brokers use it between themselves too, as the super user ``admin``); the controller listener
speaks SASL PLAIN. The authorizer is KRaft's ``StandardAuthorizer`` with
``allow.everyone.if.no.acl.found=false``: a principal may do only what an ACL grants it.

:class:`KafkaCluster` starts, kills (SIGKILL), stops (SIGTERM) and restarts nodes; the
reliability bench and the tests drive it. :func:`run_cluster_forever` serves
``ctxbudget broker --kafka``. Passwords are random, written to files readable by the owner
only, and never printed.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Any, Self, TextIO

from ctxbudget.kafka.broker import (
    BrokerError,
    BrokerStartError,
    _die_with_parent,
    _free_port,
    _tcp_open,
)
from ctxbudget.kafka.settings import WorkerSettings
from ctxbudget.resources import shipped

__all__ = [
    "ADMIN_USER",
    "KAFKA_VERSION",
    "KafkaCluster",
    "KafkaFetchError",
    "fetch_kafka",
    "kafka_cache_dir",
    "run_cluster_forever",
]

#: The Apache Kafka release the pom names (keep in step with ops/kafka/pom.xml).
KAFKA_VERSION = "4.4.0"
#: The super user: the brokers among themselves, the topics and ACL admin of the tests.
ADMIN_USER = "admin"
_HOST = "127.0.0.1"
#: The pom and the log configuration: ops/kafka of the checkout, else the wheel's copy.
_OPS = shipped("ops/kafka")
POM = _OPS / "pom.xml"
LOG4J_CONFIG = _OPS / "log4j2.properties"
_MECHANISM = "SCRAM-SHA-512"
_PROTOCOL = "SASL_PLAINTEXT"
_COMPLETE = ".complete"


class KafkaFetchError(BrokerStartError):
    """Java, Maven or the Kafka jars are missing, or Maven could not fetch them."""


def kafka_cache_dir() -> Path:
    """``$CTXBUDGET_KAFKA_CACHE``, else ``~/.cache/ctxbudget/kafka-VERSION``."""
    env = os.environ.get("CTXBUDGET_KAFKA_CACHE")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "ctxbudget" / f"kafka-{KAFKA_VERSION}"


def _pom_digest() -> str:
    import hashlib

    return hashlib.sha256(POM.read_bytes()).hexdigest()[:16]


def fetch_kafka(*, cache: Path | None = None, log: TextIO | None = None) -> Path:
    """The folder of the Kafka classpath's jars, fetched with Maven on first use.

    ``mvn -q dependency:copy-dependencies`` copies them from Maven Central (through ``~/.m2``)
    into ``CACHE/libs``; a marker holding the pom's digest says the copy is complete and
    current, so later calls cost nothing.
    """
    libs = (cache or kafka_cache_dir()) / "libs"
    marker = libs / _COMPLETE
    if not POM.is_file():
        raise KafkaFetchError(f"no pom at {POM}: run from a ctxbudget checkout")
    digest = _pom_digest()
    if marker.is_file() and marker.read_text().strip() == digest:
        return libs
    for tool, package in (("java", "openjdk-17-jre-headless"), ("mvn", "maven")):
        if shutil.which(tool) is None:
            raise KafkaFetchError(
                f"'{tool}' is not on PATH: install it (apt-get install {package})"
            )
    staging = libs.with_name("libs.partial")
    shutil.rmtree(staging, ignore_errors=True)
    if log is not None:
        print(f"fetching Apache Kafka {KAFKA_VERSION} with Maven into {libs} ...", file=log)
    started = time.monotonic()
    done = subprocess.run(
        [
            "mvn",
            "-q",
            "-B",
            "-f",
            str(POM),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={staging}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        raise KafkaFetchError(f"Maven could not fetch Apache Kafka {KAFKA_VERSION}:\n{tail}")
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
    marker.write_text(digest + "\n")
    if log is not None:
        print(f"fetched in {time.monotonic() - started:.0f} s", file=log)
    return libs


def _cluster_id() -> str:
    """A random cluster id (base64 of a UUID) that the storage tool cannot take for an option."""
    while True:
        found = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not found.startswith("-"):
            return found


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


@dataclass(frozen=True, slots=True)
class _Node:
    node_id: int
    client_port: int
    controller_port: int
    folder: Path

    @property
    def bootstrap(self) -> str:
        return f"{_HOST}:{self.client_port}"


def _jaas(module: str, user: str, password: str, extra: str = "") -> str:
    return f'{module} required username="{user}" password="{password}"{extra};'


class KafkaCluster:
    """1 or 3 Apache Kafka nodes on 127.0.0.1 in child JVMs, with SCRAM users and ACLs.

    Use it as a context manager::

        with KafkaCluster(nodes=3, users=["ctxbudget-route"]) as cluster:
            settings = cluster.settings("ctxbudget-route")

    ``data_dir`` (default: a temporary folder, removed at stop) holds each node's config,
    storage and log, ``credentials.json`` and one password file per user
    (``secrets/USER.password``), all readable by the owner only.
    """

    def __init__(
        self,
        *,
        nodes: int = 1,
        users: Sequence[str] = (),
        data_dir: Path | None = None,
        heap_mb: int = 512,
        startup_timeout_s: float = 180.0,
        stop_timeout_s: float = 30.0,
        libs: Path | None = None,
        broker_config: Mapping[str, str] | None = None,
    ) -> None:
        if nodes not in (1, 3):
            raise ValueError(f"nodes must be 1 or 3, got {nodes!r}")
        if heap_mb < 128:
            raise ValueError(f"heap_mb must be >= 128, got {heap_mb!r}")
        bad = [u for u in users if not u or any(c in u for c in ',=[]" ')]
        if bad or ADMIN_USER in users:
            raise ValueError(f"user names must be plain and not {ADMIN_USER!r}, got {bad}")
        self.nodes = nodes
        self.users = [ADMIN_USER, *dict.fromkeys(users)]
        self._own_dir = data_dir is None
        self._data_dir = data_dir
        self._heap_mb = heap_mb
        self._startup_timeout_s = startup_timeout_s
        self._stop_timeout_s = stop_timeout_s
        self._libs = libs
        self._extra = dict(broker_config or {})
        self._passwords: dict[str, str] = {}
        self._nodes: dict[int, _Node] = {}
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._logs: dict[int, IO[bytes]] = {}
        self._cluster_id = _cluster_id()
        self._spawner: _Spawner | None = None

    # -- addresses and credentials ----------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        if self._data_dir is None:
            raise BrokerError("the Kafka cluster was not started")
        return self._data_dir

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:P1,127.0.0.1:P2,...``: every node's client listener."""
        if not self._nodes:
            raise BrokerError("the Kafka cluster was not started")
        return ",".join(n.bootstrap for n in self._nodes.values())

    @property
    def credentials_file(self) -> Path:
        return self.data_dir / "credentials.json"

    def password_file(self, user: str) -> Path:
        """The file holding ``user``'s password (CTXBUDGET_SASL_PASSWORD_FILE)."""
        if user not in self._passwords:
            raise KeyError(f"no SCRAM user {user!r}; the cluster has {self.users}")
        return self.data_dir / "secrets" / f"{user}.password"

    def env(self, user: str = ADMIN_USER) -> dict[str, str]:
        """The CTXBUDGET_* variables a worker or command needs to connect as ``user``."""
        return {
            "CTXBUDGET_BROKERS": self.bootstrap,
            "CTXBUDGET_SECURITY_PROTOCOL": _PROTOCOL,
            "CTXBUDGET_SASL_MECHANISM": _MECHANISM,
            "CTXBUDGET_SASL_USERNAME": user,
            "CTXBUDGET_SASL_PASSWORD_FILE": str(self.password_file(user)),
        }

    def settings(self, user: str = ADMIN_USER, **overrides: Any) -> WorkerSettings:
        """Worker settings that connect as ``user`` (these values win over CTXBUDGET_*)."""
        values: dict[str, Any] = {
            "brokers": self.bootstrap,
            "security_protocol": _PROTOCOL,
            "sasl_mechanism": _MECHANISM,
            "sasl_username": user,
            "sasl_password_file": self.password_file(user),
            **overrides,
        }
        return WorkerSettings(**values)

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> Self:
        """Fetch the jars, format every node's storage, start the nodes, wait until ready."""
        if self._nodes:
            raise BrokerError("the Kafka cluster was already started")
        libs = self._libs or fetch_kafka()
        self._classpath = f"{libs}/*"
        if self._data_dir is None:
            self._data_dir = Path(tempfile.mkdtemp(prefix="ctxbudget-kafka-"))
        elif any(self._data_dir.iterdir()) if self._data_dir.exists() else False:
            raise BrokerStartError(f"data folder {self._data_dir} is not empty")
        try:
            self._prepare()
            self._format_all()
            for node_id in self._nodes:
                self._spawn(node_id)
            self.wait_ready(self._startup_timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _prepare(self) -> None:
        data = self.data_dir
        data.mkdir(parents=True, exist_ok=True)
        self._passwords = {u: secrets.token_urlsafe(24) for u in self.users}
        for user, password in self._passwords.items():
            _write_private(data / "secrets" / f"{user}.password", password + "\n")
        for node_id in range(1, self.nodes + 1):
            self._nodes[node_id] = _Node(
                node_id, _free_port(_HOST), _free_port(_HOST), data / f"node-{node_id}"
            )
        for node in self._nodes.values():
            node.folder.mkdir(parents=True, exist_ok=True)
            _write_private(node.folder / "server.properties", self._properties(node))
        _write_private(
            self.credentials_file,
            json.dumps(
                {
                    "bootstrap": self.bootstrap,
                    "security_protocol": _PROTOCOL,
                    "sasl_mechanism": _MECHANISM,
                    "super_user": ADMIN_USER,
                    "users": self._passwords,
                    "password_files": {u: str(self.password_file(u)) for u in self.users},
                },
                indent=2,
            )
            + "\n",
        )

    def _properties(self, node: _Node) -> str:
        admin_pw = self._passwords[ADMIN_USER]
        voters = ",".join(f"{n.node_id}@{_HOST}:{n.controller_port}" for n in self._nodes.values())
        rf = str(self.nodes)
        isr = "2" if self.nodes == 3 else "1"
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule"
        plain = "org.apache.kafka.common.security.plain.PlainLoginModule"
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"CLIENT://{node.bootstrap},CONTROLLER://{_HOST}:{node.controller_port}",
            "advertised.listeners": f"CLIENT://{node.bootstrap}",
            "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "inter.broker.listener.name": "CLIENT",
            "controller.listener.names": "CONTROLLER",
            "sasl.mechanism.inter.broker.protocol": _MECHANISM,
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.client.sasl.enabled.mechanisms": _MECHANISM,
            "listener.name.client.scram-sha-512.sasl.jaas.config": _jaas(
                scram, ADMIN_USER, admin_pw
            ),
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": _jaas(
                plain, ADMIN_USER, admin_pw, f' user_{ADMIN_USER}="{admin_pw}"'
            ),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:{ADMIN_USER}",
            "allow.everyone.if.no.acl.found": "false",
            "log.dirs": str(node.folder / "data"),
            "auto.create.topics.enable": "false",
            "num.partitions": "1",
            "default.replication.factor": rf,
            "min.insync.replicas": isr,
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": "3",
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": isr,
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": isr,
            "group.initial.rebalance.delay.ms": "0",
            "unclean.leader.election.enable": "false",
            "controlled.shutdown.enable": "true",
            **self._extra,
        }
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def _java(self, main: str, *args: str, heap_mb: int) -> list[str]:
        return [
            "java",
            f"-Xms{heap_mb}m",
            f"-Xmx{heap_mb}m",
            # a small node on a small machine: one GC thread, the quick JIT only (startup and
            # restarts take half the CPU time; loopback throughput does not need C2)
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
            "-cp",
            self._classpath,
            main,
            *args,
        ]

    def _format_all(self) -> None:
        scram = [
            arg
            for user, pw in self._passwords.items()
            for arg in ("--add-scram", f"{_MECHANISM}=[name={user},password={pw}]")
        ]
        running = []
        for node in self._nodes.values():
            command = self._java(
                "kafka.tools.StorageTool",
                "format",
                "--cluster-id",
                self._cluster_id,
                "--config",
                str(node.folder / "server.properties"),
                *scram,
                heap_mb=256,
            )
            # its output lists the SCRAM records (salts and keys): kept out of any terminal
            with (node.folder / "format.log").open("wb") as out:
                running.append(
                    (node, subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT))
                )
        for node, proc in running:
            if proc.wait(timeout=self._startup_timeout_s) != 0:
                tail = (node.folder / "format.log").read_text(errors="replace")[-1500:]
                raise BrokerStartError(f"formatting node {node.node_id} failed:\n{tail}")

    def _spawn(self, node_id: int) -> None:
        """Start a node's JVM from the cluster's spawner thread (see :class:`_Spawner`)."""
        if self._spawner is None:
            self._spawner = _Spawner()
        node = self._nodes[node_id]
        log = (node.folder / "broker.log").open("ab")
        self._logs[node_id] = log
        self._procs[node_id] = self._spawner.popen(
            self._java(
                "kafka.Kafka", str(node.folder / "server.properties"), heap_mb=self._heap_mb
            ),
            log,
        )

    def admin(self, user: str = ADMIN_USER, **options: Any) -> Any:
        """A kafka-python admin client connected as ``user``."""
        from ctxbudget.kafka import clients

        return clients.admin_client(self.settings(user), client_id="ctxbudget-cluster", **options)

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Return once every running node answers as a broker of the cluster."""
        deadline = time.monotonic() + timeout_s
        want = set(self.running_nodes())
        last = ""
        while time.monotonic() < deadline:
            for node_id, proc in self._procs.items():
                if proc.poll() is not None:
                    raise BrokerStartError(
                        f"Kafka node {node_id} exited with code {proc.returncode}; log tail:\n"
                        f"{self.log_tail(node_id)}"
                    )
            if all(_tcp_open(_HOST, self._nodes[n].client_port) for n in want):
                try:
                    seen = self._registered_brokers()
                except Exception as e:  # still starting: authentication or metadata not ready
                    last = f"{type(e).__name__}: {e}"
                else:
                    if want <= seen:
                        return
                    last = f"brokers registered: {sorted(seen)}, want {sorted(want)}"
            time.sleep(0.5)
        raise BrokerStartError(
            f"the Kafka cluster was not ready within {timeout_s:g} s ({last}); "
            f"log tail of node 1:\n{self.log_tail(1)}"
        )

    def _registered_brokers(self) -> set[int]:
        admin = self.admin(request_timeout_ms=5000, bootstrap_timeout_ms=5000)
        try:
            found = admin.describe_cluster()
        finally:
            admin.close()
        return {
            int(b.get("broker_id", b.get("node_id", -1)))
            for b in found.get("brokers", [])
            if not b.get("is_fenced", False)
        }

    def running_nodes(self) -> list[int]:
        return [n for n, p in self._procs.items() if p.poll() is None]

    def pid(self, node_id: int) -> int:
        return self._procs[node_id].pid

    def kill(self, node_id: int) -> None:
        """SIGKILL a node (no controlled shutdown, nothing flushed)."""
        proc = self._procs[node_id]
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)

    def stop_node(self, node_id: int) -> int | None:
        """SIGTERM a node (controlled shutdown: it hands its leaderships over first)."""
        proc = self._procs[node_id]
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(self._stop_timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        return proc.returncode

    def start_node(self, node_id: int, *, wait: bool = True) -> None:
        """Start a stopped or killed node again on its storage; wait until it is a broker."""
        if self._procs[node_id].poll() is None:
            raise BrokerError(f"Kafka node {node_id} is running")
        self._logs.pop(node_id).close()
        self._spawn(node_id)
        if wait:
            self.wait_ready(self._startup_timeout_s)

    def leader(self, topic: str, partition: int = 0) -> int:
        """The node that leads ``topic``'s ``partition`` now."""
        admin = self.admin(request_timeout_ms=5000)
        try:
            described = admin.describe_topics([topic])
        finally:
            admin.close()
        for item in described:
            for part in item["partitions"]:
                if part["partition_index"] == partition:
                    return int(part["leader_id"])
        raise BrokerError(f"no partition {partition} of {topic}")

    def wait_in_sync(self, topics: Sequence[str], timeout_s: float = 120.0) -> None:
        """Return once every partition of ``topics`` has all its replicas in sync."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            admin = self.admin(request_timeout_ms=5000)
            try:
                described = admin.describe_topics(list(topics))
            except Exception:
                described = []
            finally:
                admin.close()
            parts = [p for t in described for p in t["partitions"]]
            if parts and all(len(p["isr_nodes"]) == len(p["replica_nodes"]) for p in parts):
                return
            time.sleep(0.5)
        raise BrokerError(f"replicas of {list(topics)} not in sync within {timeout_s:g} s")

    def log_tail(self, node_id: int, *, lines: int = 30) -> str:
        path = self._nodes[node_id].folder / "broker.log" if node_id in self._nodes else None
        if path is None or not path.is_file():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM every node, SIGKILL those still up after ``stop_timeout_s``. Idempotent."""
        for proc in self._procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self._stop_timeout_s
        for proc in self._procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self._procs.clear()
        for log in self._logs.values():
            log.close()
        self._logs.clear()
        if self._own_dir and self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None
        self._nodes.clear()
        if self._spawner is not None:
            self._spawner.close()
            self._spawner = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class _Spawner:
    """One thread that starts every JVM of a cluster and lives as long as the cluster.

    Each node asks Linux to SIGTERM it when the thread that started it dies (so a killed
    test run or bench leaves no broker behind). Started from whichever thread happened to
    restart a node (a bench's chaos thread, say), a node would die with that thread; started
    from this one, it lives until :meth:`KafkaCluster.stop` or the process's end.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[tuple[list[str], IO[bytes], threading.Event, list[Any]]] = []
        self._wake = threading.Condition(self._lock)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="kafka-node-spawner", daemon=True)
        self._thread.start()

    def popen(self, command: list[str], log: IO[bytes]) -> subprocess.Popen[bytes]:
        done = threading.Event()
        box: list[Any] = []
        with self._wake:
            self._requests.append((command, log, done, box))
            self._wake.notify()
        done.wait()
        result = box[0]
        if isinstance(result, BaseException):
            raise BrokerStartError(f"could not start a Kafka node: {result}") from result
        proc: subprocess.Popen[bytes] = result
        return proc

    def _run(self) -> None:
        hook = _die_with_parent if sys.platform.startswith("linux") else None
        while True:
            with self._wake:
                while not self._requests and not self._closed:
                    self._wake.wait()
                if self._closed and not self._requests:
                    return
                command, log, done, box = self._requests.pop(0)
            try:
                box.append(
                    subprocess.Popen(
                        command,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        preexec_fn=hook,
                    )
                )
            except OSError as e:
                box.append(e)
            done.set()

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(5)


def run_cluster_forever(
    *,
    nodes: int,
    users: Sequence[str],
    data_dir: Path | None,
    out: TextIO | None = None,
    on_ready: Any = None,
) -> int:
    """Run a loopback Kafka cluster until Ctrl-C or SIGTERM (``ctxbudget broker --kafka``).

    Prints the bootstrap servers, then where the credentials are (never the passwords).
    Returns 0 after a requested stop, 1 if a node died on its own.
    """
    stream = out if out is not None else sys.stdout
    stop_requested = threading.Event()

    def _request_stop(signum: int, frame: FrameType | None) -> None:
        stop_requested.set()

    previous = {sig: signal.signal(sig, _request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        print(
            f"starting Apache Kafka {KAFKA_VERSION}: {nodes} node(s) on {_HOST} ...",
            file=sys.stderr,
            flush=True,
        )
        with KafkaCluster(nodes=nodes, users=users, data_dir=data_dir) as cluster:
            if on_ready is not None:
                on_ready(cluster)
            print(cluster.bootstrap, file=stream, flush=True)
            print(
                f"credentials {cluster.credentials_file} (SASL_PLAINTEXT, {_MECHANISM}; "
                f"super user {ADMIN_USER}; password files in {cluster.data_dir / 'secrets'})",
                file=sys.stderr,
                flush=True,
            )
            while not stop_requested.wait(0.5):
                down = [n for n in range(1, nodes + 1) if n not in cluster.running_nodes()]
                if down:
                    print(
                        f"Kafka node {down[0]} stopped unexpectedly:\n{cluster.log_tail(down[0])}",
                        file=sys.stderr,
                    )
                    return 1
            print("stopping the Kafka nodes ...", file=sys.stderr, flush=True)
        return 0
    finally:
        for sig, handler in previous.items():
            with contextlib.suppress(ValueError):
                signal.signal(sig, handler)
