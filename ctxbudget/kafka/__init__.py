"""The Kafka edge: the one package that talks to Kafka, and the workers that run on it.

Everything that needs a broker is here; the pure core (every other module of ``ctxbudget``
but :mod:`ctxbudget.cli`) never imports this package, kafka-python, aiokafka or faust, and
``tests/unit/test_architecture.py`` walks the sources and holds that rule. Dependencies point
one way: ``ctxbudget.cli`` -> ``ctxbudget.kafka`` -> the core.

- settings and clients: :mod:`.settings` (``CTXBUDGET_*``), :mod:`.clients` (the one
  client-config factory), :mod:`.limits` (the limits a worker enforces), :mod:`.io` (reading
  and writing topics from the commands);
- the workers: :mod:`.app` (the faust app and its stage agents), :mod:`.handlers` (bytes in,
  outputs out, per stage), :mod:`.delivery`, :mod:`.transport`, :mod:`.control_follower`
  (the signed control state each worker follows), :mod:`.observability`, :mod:`.logs`,
  :mod:`.probe`, :mod:`.healthcheck`, :mod:`.scratch`, :mod:`.lanes`; the verify worker,
  :mod:`.verify` over :mod:`.verify_join`;
- the operator's side: :mod:`.control` (the control topic from a command), :mod:`.replay`,
  :mod:`.coverage`, the topic specs and their admin (:mod:`.topics`, :mod:`.topic_admin`),
  the ACL plan (:mod:`.acls`);
- brokers to run against: :mod:`.broker` (the embedded development broker) and
  :mod:`.kafka_cluster` (a loopback Apache Kafka cluster fetched with Maven).

The top-level ``workers/`` folder of the repository holds only what a container runs
(``python -m workers.healthcheck``); the wheel installs ``ctxbudget`` alone.

Nothing here imports kafka-python, aiokafka or faust at import time: they are imported when a
client or a worker is made, so ``import ctxbudget.kafka`` works without the ``kafka`` extra
(the commands that need it fail then with the name of the missing package).
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxbudget.blas import limit_blas_threads
from ctxbudget.kafka.acls import ROLES, AclBinding, acl_plan, apply_acls, plan_json, principals
from ctxbudget.kafka.acls import render_commands as render_acl_commands
from ctxbudget.kafka.broker import (
    BrokerPortInUseError,
    BrokerStartError,
    EmbeddedBroker,
    run_forever,
)
from ctxbudget.kafka.control_follower import trusted_keys
from ctxbudget.kafka.kafka_cluster import KafkaCluster, fetch_kafka, run_cluster_forever
from ctxbudget.kafka.lanes import LaneError, check_destination, check_roles, written_roles
from ctxbudget.kafka.limits import load_specs
from ctxbudget.kafka.observability import MetricsPortInUseError, check_port_free
from ctxbudget.kafka.probe import BrokerNotAnsweringError, ask_brokers
from ctxbudget.kafka.settings import TopicNames, WorkerSettings
from ctxbudget.kafka.topic_admin import (
    ApplyReport,
    DriftFinding,
    TopicAdminError,
    apply_topics,
    verify_topics,
)
from ctxbudget.kafka.topics import DEFAULT_TOPICS_DIR, TopicError, TopicSpec, load_topic_specs

limit_blas_threads()  # one BLAS thread per worker process unless configured

__all__ = [
    "DEFAULT_TOPICS_DIR",
    "ROLES",
    "AclBinding",
    "ApplyReport",
    "BrokerNotAnsweringError",
    "BrokerPortInUseError",
    "BrokerStartError",
    "DriftFinding",
    "EmbeddedBroker",
    "KafkaCluster",
    "LaneError",
    "MetricsPortInUseError",
    "TopicAdminError",
    "TopicError",
    "TopicNames",
    "TopicSpec",
    "WorkerSettings",
    "acl_plan",
    "apply_acls",
    "apply_topics",
    "ask_brokers",
    "check_destination",
    "check_port_free",
    "check_roles",
    "fetch_kafka",
    "load_specs",
    "load_topic_specs",
    "plan_json",
    "principals",
    "render_acl_commands",
    "run_cluster_forever",
    "run_forever",
    "run_verify_worker",
    "run_worker",
    "trusted_keys",
    "verify_access",
    "verify_topics",
    "written_roles",
]


def run_worker(settings: WorkerSettings, stages: Sequence[str]) -> None:
    """Run a faust worker for ``stages`` until SIGTERM/SIGINT (``ctxbudget worker``).

    faust is imported here, when a worker is run, not when the command line starts.
    """
    from ctxbudget.kafka.app import WorkerApp

    WorkerApp(settings, stages).run()


def verify_access() -> tuple[tuple[str, str], bool]:
    """What the ACL plan needs of the verify worker's ``CTXBUDGET_VERIFY_*`` settings: its
    (answers, verdicts) topics, and whether it writes labels."""
    from ctxbudget.kafka.verify import VerifySettings

    verify = VerifySettings()
    return (verify.answers_topic, verify.verdicts_topic), verify.labels


def run_verify_worker(settings: WorkerSettings) -> None:
    """Run the verify worker until SIGTERM/SIGINT (``ctxbudget worker verify``)."""
    from ctxbudget.kafka.verify import run_verify_worker as run

    run(settings)
