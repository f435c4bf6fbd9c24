"""The Kafka edge of the ``ctxbudget`` package: the one place in it that talks to Kafka.

No module under ``ctxbudget/`` other than this package imports ``kafka`` (kafka-python),
``aiokafka`` or ``workers``; ``tests/unit/test_kafka_edge.py`` walks the sources and holds
that rule. The commands and the audit sink reach Kafka through this package only:

- :mod:`ctxbudget.kafka.io`: clients from the one client-config factory, reading a topic
  (from the start until it goes quiet, or from stored positions), writing records;
- :mod:`ctxbudget.kafka.control`: the control topic (the state in force, a change to it);
- :mod:`ctxbudget.kafka.replay`: where replay writes (the shadow lane, never the live topic);
- this module: what the commands run from ``workers``: the settings, the embedded broker,
  the loopback Apache Kafka cluster, the topic specs and their admin, the ACL plan, a worker.

Dependencies point one way: ``ctxbudget.cli`` -> ``ctxbudget.kafka`` -> ``workers`` -> the
core. ``workers`` (the faust workers and the broker-side code) never imports this package.
The client-config factory stays in ``workers.clients`` and is used from here rather than moved
here: the commands run workers, the embedded broker and the topic admin, so this package
depends on ``workers`` in any case, and the workers build their own clients with the factory
without importing the package that sits above them.

Nothing here imports kafka-python, aiokafka or faust at import time: they are imported when a
client or a worker is made, so ``import ctxbudget.kafka`` works without the ``kafka`` extra
(the commands that need it fail then with the name of the missing package).
"""

from __future__ import annotations

from collections.abc import Sequence

from workers.acls import ROLES, AclBinding, acl_plan, apply_acls, plan_json, principals
from workers.acls import render_commands as render_acl_commands
from workers.broker import BrokerPortInUseError, BrokerStartError, EmbeddedBroker, run_forever
from workers.control import trusted_keys
from workers.kafka_cluster import KafkaCluster, fetch_kafka, run_cluster_forever
from workers.lanes import LaneError, check_destination, check_roles, written_roles
from workers.limits import LimitSettings, input_limits, load_specs
from workers.observability import MetricsPortInUseError, check_port_free
from workers.probe import BrokerNotAnsweringError, ask_brokers
from workers.settings import TopicNames, WorkerSettings
from workers.topic_admin import (
    ApplyReport,
    DriftFinding,
    TopicAdminError,
    apply_topics,
    verify_topics,
)
from workers.topics import DEFAULT_TOPICS_DIR, TopicError, TopicSpec, load_topic_specs

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
    "LimitSettings",
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
    "input_limits",
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
    from workers.app import WorkerApp

    WorkerApp(settings, stages).run()


def verify_access() -> tuple[tuple[str, str], bool]:
    """What the ACL plan needs of the verify worker's ``CTXBUDGET_VERIFY_*`` settings: its
    (answers, verdicts) topics, and whether it writes labels."""
    from workers.verify import VerifySettings

    verify = VerifySettings()
    return (verify.answers_topic, verify.verdicts_topic), verify.labels


def run_verify_worker(settings: WorkerSettings) -> None:
    """Run the verify worker until SIGTERM/SIGINT (``ctxbudget worker verify``)."""
    from workers.verify import run_verify_worker as run

    run(settings)
