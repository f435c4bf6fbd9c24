"""The operations artefacts, checked as data: ops/k8s manifests, the Grafana dashboard, the
Prometheus alerting rules and docker-compose.yml.

- every YAML and JSON file parses;
- every metric a dashboard or alert expression names is one a worker exposes (a fresh
  ``Observability`` registry with every series present);
- every CTXBUDGET_* variable a manifest or the compose file sets is a setting the code reads;
- every Deployment probes /healthz and /readyz on the metrics port, has resources, runs as
  non-root on a read-only root filesystem, and mounts the policies as policies/ lays them out;
- the policies ConfigMap equals policies/; runbook links name existing files and headings.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ctxbudget.kafka.observability import Observability, PackFacts
from ctxbudget.kafka.settings import TopicNames, WorkerSettings
from ctxbudget.kafka.verify import VerifySettings
from ctxbudget.limit_settings import LimitSettings
from tests.paths import REPO

K8S = REPO / "ops" / "k8s"
DASHBOARD = REPO / "ops" / "dashboards" / "ctxbudget.json"
RULES = REPO / "ops" / "alerts" / "ctxbudget-rules.yaml"
COMPOSE = REPO / "docker-compose.yml"
STAGES = ("route", "consolidate", "select", "compress", "shadow")
#: Every Deployment: the packing stages, and the verify worker (it reads no policies).
WORKERS = (*STAGES, "verify")
METRICS_PORT = 9108


def _load_make_configmap() -> Any:
    spec = importlib.util.spec_from_file_location("make_configmap", K8S / "make-configmap.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _manifests() -> list[tuple[Path, dict[str, Any]]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                docs.append((path, doc))
    return docs


def _of_kind(kind: str) -> list[tuple[Path, dict[str, Any]]]:
    return [(p, d) for p, d in _manifests() if d["kind"] == kind]


def _pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["template"]["spec"]


# -- parsing


def test_every_ops_artefact_parses() -> None:
    """Every k8s, alert, compose and dashboard file parses; each manifest is in the namespace."""
    yamls = [*K8S.glob("*.yaml"), RULES, COMPOSE]
    for path in yamls:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        assert docs, path
        assert all(isinstance(d, dict) for d in docs), path
    for path in (REPO / "ops" / "dashboards").glob("*.json"):
        assert isinstance(json.loads(path.read_text()), dict), path
    for _, doc in _manifests():
        assert {"apiVersion", "kind", "metadata"} <= set(doc)
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == "ctxbudget", doc["metadata"]["name"]


def test_the_k8s_set_is_complete() -> None:
    """The set has namespace, config, secret, topics Job, Service; per stage a Deployment, PDB."""
    kinds = {(d["kind"], d["metadata"]["name"]) for _, d in _manifests()}
    assert ("Namespace", "ctxbudget") in kinds
    assert ("ConfigMap", "ctxbudget-policies") in kinds
    assert ("ConfigMap", "ctxbudget-settings") in kinds
    assert ("Secret", "ctxbudget-kafka-topics") in kinds
    assert ("Job", "ctxbudget-topics") in kinds
    for stage in WORKERS:
        assert ("Deployment", f"ctxbudget-{stage}") in kinds
        assert ("PodDisruptionBudget", f"ctxbudget-{stage}") in kinds
    assert any(kind == "Service" for kind, _ in kinds)


# -- metric names


def _exposed_names() -> set[str]:
    """Every sample name of a worker's /metrics, with every series present."""
    obs = Observability(worker="t")
    obs.observe(
        "select",
        0.01,
        ["ctx.packs.v1"],
        dead_letter_types=["DecodeError"],
        packs=[
            PackFacts(
                lane="live", evidence_tokens=900, evidence_budget=1000, dropped={"budget": 2}
            ),
        ],
    )
    obs.observe(
        "compress",
        0.02,
        ["ctx.shadow.v1"],
        packs=[PackFacts("shadow", 800, 1000, {"duplicate": 1}, withheld=1)],
    )
    obs.skip("select")
    obs.broker_answered()  # the lag is exported only while a broker answers
    obs.set_lag("ctx.candidates.v1", 0, 5)
    obs.set_control(percent=10, killed=False, shadow=True, version=3)
    obs.joined()
    obs.control_read()
    names = set()
    for line in obs.exposition().decode().splitlines():
        if line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def _metric_names(expr: str) -> set[str]:
    """The ctxbudget_* identifiers of a PromQL expression (label names excluded)."""
    without_labels = re.sub(r"\{[^}]*\}", "", expr)
    return set(re.findall(r"\b(ctxbudget_[a-z0-9_]+)\b", without_labels))


def _dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            exprs.extend(t["expr"] for t in panel.get("targets", ()) if t.get("expr"))
            walk(panel.get("panels", []))

    walk(dashboard["panels"])
    for var in dashboard.get("templating", {}).get("list", []):
        query = var.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if var.get("type") == "query" and query:
            exprs.append(query)
    return exprs


def _alert_rules() -> list[dict[str, Any]]:
    rules = yaml.safe_load(RULES.read_text())
    return [rule for group in rules["groups"] for rule in group["rules"]]


def test_every_dashboard_and_alert_metric_is_exposed_by_a_worker() -> None:
    """Every metric a dashboard panel or alert queries is one a worker's /metrics exposes."""
    exposed = _exposed_names()
    exprs = _dashboard_exprs() + [r["expr"] for r in _alert_rules()]
    used = set().union(*(_metric_names(e) for e in exprs))
    assert used, "no ctxbudget metric found in the expressions"
    # exposed names carry their suffixes (_total, _bucket, _sum, _count): a counter or a
    # histogram queried by its bare name is caught here too
    assert not used - exposed, f"not exposed by a worker: {sorted(used - exposed)}"


def test_the_dashboard_covers_what_operators_watch() -> None:
    """The dashboard charts traffic, p50/p99 latency, lag, budgets, drops, control; ids unique."""
    dashboard = json.loads(DASHBOARD.read_text())
    used = set().union(*(_metric_names(e) for e in _dashboard_exprs()))
    for name in (
        "ctxbudget_records_in_total",
        "ctxbudget_records_out_total",
        "ctxbudget_handle_seconds_bucket",
        "ctxbudget_dead_letters_total",
        "ctxbudget_consumer_lag",
        "ctxbudget_pack_evidence_tokens_bucket",
        "ctxbudget_pack_budget_use_ratio_bucket",
        "ctxbudget_candidates_dropped_total",
        "ctxbudget_passages_withheld_total",
        "ctxbudget_control_rollout_percent",
        "ctxbudget_control_killed",
        "ctxbudget_control_shadow",
        "ctxbudget_control_version",
        "ctxbudget_worker_ready",
    ):
        assert name in used, name
    exprs = " ".join(_dashboard_exprs())
    assert "histogram_quantile(0.5" in exprs and "histogram_quantile(0.99" in exprs
    ids = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            ids.append(panel["id"])
            walk(panel.get("panels", []))

    walk(dashboard["panels"])
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    assert dashboard["uid"] and dashboard["title"]


# -- alerts


def test_every_alert_is_documented_and_links_an_existing_runbook() -> None:
    """Every alert has a summary, a severity and a runbook link to an existing file and heading."""
    rules = _alert_rules()
    names = {r["alert"] for r in rules}
    assert {
        "CtxbudgetConsumerLagGrowing",
        "CtxbudgetDeadLetters",
        "CtxbudgetKillSwitchOn",
        "CtxbudgetBudgetNearCeiling",
        "CtxbudgetRecordsSkipped",
        "CtxbudgetWorkerNotReady",
        "CtxbudgetWorkerDown",
        "CtxbudgetWorkersAbsent",
        "CtxbudgetBrokerUnreachable",
    } <= names
    for rule in rules:
        notes = rule["annotations"]
        assert notes["summary"].strip() and notes["description"].strip(), rule["alert"]
        assert rule["labels"]["severity"] in ("info", "warning", "critical")
        link = notes["runbook_url"]
        path, _, anchor = link.partition("#")
        assert path.startswith("ops/runbooks/") and path.endswith(".md"), link
        target = REPO / path
        assert target.is_file(), link
        if anchor:
            headings = {
                re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
                for line in target.read_text().splitlines()
                if line.startswith("#")
            }
            assert anchor in headings, link


def test_alert_thresholds_are_the_agreed_ones() -> None:
    """The rules keep their agreed expressions and waits."""
    by_name = {r["alert"]: r for r in _alert_rules()}
    lag = by_name["CtxbudgetConsumerLagGrowing"]
    assert "deriv(ctxbudget_consumer_lag[10m])" in lag["expr"] and "> 1000" in lag["expr"]
    dead = by_name["CtxbudgetDeadLetters"]
    # the first dead letter fires (the series start at 0): increase over 10m, no wait
    assert "increase(ctxbudget_dead_letters_total[10m])" in dead["expr"] and dead["for"] == "0m"
    assert "ctxbudget_control_killed" in by_name["CtxbudgetKillSwitchOn"]["expr"]
    budget = by_name["CtxbudgetBudgetNearCeiling"]
    assert "histogram_quantile(0.9" in budget["expr"] and "> 0.97" in budget["expr"]
    assert budget["for"] == "30m"
    assert "ctxbudget_records_skipped_total" in by_name["CtxbudgetRecordsSkipped"]["expr"]
    ready = by_name["CtxbudgetWorkerNotReady"]
    assert "ctxbudget_worker_ready == 0" in ready["expr"] and ready["for"] == "5m"
    assert by_name["CtxbudgetWorkerDown"]["expr"] == 'up{job="ctxbudget"} == 0'
    assert by_name["CtxbudgetWorkersAbsent"]["expr"] == 'absent(up{job="ctxbudget"})'
    broker = by_name["CtxbudgetBrokerUnreachable"]
    assert broker["expr"] == "ctxbudget_broker_reachable == 0" and broker["for"] == "1m"


# -- environment variables


def _known_variables() -> set[str]:
    names = set()
    for field in WorkerSettings.model_fields:
        if field == "topics":
            names |= {f"CTXBUDGET_TOPICS__{t.upper()}" for t in TopicNames.model_fields}
        else:
            names.add(f"CTXBUDGET_{field.upper()}")
    # documented extras: the input limits and topic checks of ctxbudget/kafka/limits.py
    names |= {f"CTXBUDGET_{field.upper()}" for field in LimitSettings.model_fields}
    # the verify worker's own settings (ctxbudget/kafka/verify.py)
    names |= {f"CTXBUDGET_VERIFY_{field.upper()}" for field in VerifySettings.model_fields}
    return names


def _set_variables() -> dict[str, set[str]]:
    """Every variable a manifest or the compose file sets, with where."""
    found: dict[str, set[str]] = {}
    for path, doc in _manifests():
        where = f"{path.name}:{doc['kind']}/{doc['metadata']['name']}"
        if doc["kind"] in ("ConfigMap", "Secret") and doc["metadata"]["name"] != (
            "ctxbudget-policies"
        ):
            for name in {**doc.get("data", {}), **doc.get("stringData", {})}:
                found.setdefault(name, set()).add(where)
        if doc["kind"] in ("Deployment", "Job"):
            for container in _pod_spec(doc)["containers"]:
                for item in container.get("env", []):
                    found.setdefault(item["name"], set()).add(where)
    compose = yaml.safe_load(COMPOSE.read_text())
    for name, service in compose["services"].items():
        env = service.get("environment", {})
        if isinstance(env, list):
            env = dict(item.split("=", 1) for item in env)
        for var in env:
            if name != "kafka":
                found.setdefault(var, set()).add(f"docker-compose.yml:{name}")
    return found


def test_every_variable_set_is_one_the_code_reads() -> None:
    """Every CTXBUDGET_* variable the manifests or compose file set is a setting the code reads."""
    known = _known_variables()
    found = _set_variables()
    assert "CTXBUDGET_BROKERS" in found and "CTXBUDGET_METRICS_PORT" in found
    unknown = {name: sorted(where) for name, where in found.items() if name not in known}
    assert not unknown, f"set but read by nothing: {unknown}"


def test_the_kafka_secret_names_every_sasl_setting() -> None:
    """Each of the seven Kafka secrets sets protocol, mechanism, user and password, validly."""
    secrets = _of_kind("Secret")
    assert len(secrets) == 7  # the topics job and the six Deployments
    protocol = WorkerSettings.model_fields["security_protocol"].annotation
    mechanism = WorkerSettings.model_fields["sasl_mechanism"].annotation
    for _, secret in secrets:
        names = set(secret.get("stringData", {})) | set(secret.get("data", {}))
        assert {
            "CTXBUDGET_SECURITY_PROTOCOL",
            "CTXBUDGET_SASL_MECHANISM",
            "CTXBUDGET_SASL_USERNAME",
            "CTXBUDGET_SASL_PASSWORD",
        } <= names
        assert secret["stringData"]["CTXBUDGET_SECURITY_PROTOCOL"] in protocol.__args__
        assert secret["stringData"]["CTXBUDGET_SASL_MECHANISM"] in mechanism.__args__


def test_each_workload_reads_the_secret_of_its_own_role_only() -> None:
    """One identity per role: a Deployment or Job names its own Secret and no other, and the
    Secret's user is the principal `ctxbudget acls` grants that role."""
    from ctxbudget.kafka.acls import principals

    users = {
        doc["metadata"]["name"]: doc["stringData"]["CTXBUDGET_SASL_USERNAME"]
        for _, doc in _of_kind("Secret")
    }
    for _, doc in [*_of_kind("Deployment"), *_of_kind("Job")]:
        role = doc["metadata"]["name"].removeprefix("ctxbudget-")
        (container,) = _pod_spec(doc)["containers"]
        secrets = [s["secretRef"]["name"] for s in container["envFrom"] if "secretRef" in s]
        assert secrets == [f"ctxbudget-kafka-{role}"], doc["metadata"]["name"]
        assert users[secrets[0]] == principals()[role]


# -- deployments


@pytest.mark.parametrize("stage", WORKERS)
def test_each_deployment_is_probed_bounded_and_unprivileged(stage: str) -> None:
    """Each worker's Deployment is probed on the metrics port, bounded, non-root and read-only."""
    docs = [d for _, d in _of_kind("Deployment") if d["metadata"]["name"] == f"ctxbudget-{stage}"]
    assert len(docs) == 1
    doc = docs[0]
    pod = _pod_spec(doc)
    (container,) = pod["containers"]
    assert container["args"] == ["worker", stage]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["CTXBUDGET_METRICS_PORT"] == str(METRICS_PORT)
    assert env["CTXBUDGET_LOG_FORMAT"] == "json"
    sources = [next(iter(s.values()))["name"] for s in container["envFrom"]]
    assert "ctxbudget-settings" in sources and f"ctxbudget-kafka-{stage}" in sources

    ports = {p["name"]: p["containerPort"] for p in container["ports"]}

    def probe_port(probe: dict[str, Any]) -> int:
        port = probe["httpGet"]["port"]
        return ports[port] if isinstance(port, str) else int(port)

    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        if kind in container:
            assert probe_port(container[kind]) == METRICS_PORT, kind

    resources = container["resources"]
    assert resources["requests"]["cpu"] and resources["limits"]["cpu"]
    request = _mebibytes(resources["requests"]["memory"])
    limit = _mebibytes(resources["limits"]["memory"])
    assert 125 < request <= limit, "a worker settles at 105-125 MB RSS (ops/performance.md)"

    security = {**pod.get("securityContext", {}), **container["securityContext"]}
    assert security["runAsNonRoot"] is True
    assert security.get("runAsUser", 1000) != 0
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/tmp" in mounts, "the worker's scratch folder needs a writable /tmp"
    assert pod["terminationGracePeriodSeconds"] >= 30

    template = doc["spec"]["template"]["metadata"]
    assert template["annotations"]["prometheus.io/scrape"] == "true"
    assert template["annotations"]["prometheus.io/port"] == str(METRICS_PORT)
    selector = doc["spec"]["selector"]["matchLabels"]
    assert selector.items() <= template["labels"].items()
    pdbs = [
        d
        for _, d in _of_kind("PodDisruptionBudget")
        if d["spec"]["selector"]["matchLabels"] == selector
    ]
    assert len(pdbs) == 1, f"{stage}: one PodDisruptionBudget selecting its pods"


def _mebibytes(quantity: str) -> float:
    units = {"Mi": 1, "Gi": 1024, "M": 1e6 / 2**20, "G": 1e9 / 2**20}
    for suffix, factor in units.items():
        if quantity.endswith(suffix) and quantity[: -len(suffix)].isdigit():
            return int(quantity[: -len(suffix)]) * factor
    raise AssertionError(f"unexpected memory quantity {quantity!r}")


def test_the_metrics_service_reaches_every_worker_port() -> None:
    """The metrics Service selects every worker, ready or not (a not-ready one must be seen)."""
    (_, service), *_ = _of_kind("Service")
    ports = {p["port"] for p in service["spec"]["ports"]}
    assert METRICS_PORT in ports
    assert service["spec"]["publishNotReadyAddresses"] is True
    for _, doc in _of_kind("Deployment"):
        labels = doc["spec"]["template"]["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= labels.items()


def test_the_topics_job_applies_then_verifies() -> None:
    """The topics Job runs `topics apply` then `verify`, non-root, read-only, memory bounded."""
    (_, job), *_ = _of_kind("Job")
    pod = _pod_spec(job)
    (container,) = pod["containers"]
    script = " ".join(container.get("command", []) + container.get("args", []))
    assert re.search(r"ctxbudget topics apply\b.*&&.*ctxbudget topics verify\b", script)
    assert pod["restartPolicy"] in ("Never", "OnFailure")
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["resources"]["limits"]["memory"]


# -- policies


def test_the_policies_configmap_equals_policies_folder() -> None:
    """The policies ConfigMap holds exactly the files of policies/ under valid keys."""
    make = _load_make_configmap()
    (_, configmap), *_ = [
        (p, d) for p, d in _of_kind("ConfigMap") if d["metadata"]["name"] == "ctxbudget-policies"
    ]
    files = make.policy_files(REPO / "policies")
    assert files, "policies/ holds no YAML"
    shipped = {make.path_for(key): text for key, text in configmap["data"].items()}
    assert shipped == files, "stale: run python ops/k8s/make-configmap.py"
    for key in configmap["data"]:
        assert re.fullmatch(r"[-._a-zA-Z0-9]+", key), f"invalid ConfigMap key {key!r}"
    assert make.main(["--check"]) == 0


def test_every_workload_mounts_the_policies_as_the_folder_lays_them_out() -> None:
    """Each packing Deployment mounts the policies read-only, laid out as policies/, where it
    reads them."""
    make = _load_make_configmap()
    wanted = make.items(REPO / "policies")
    for _, doc in _of_kind("Deployment"):
        if doc["metadata"]["name"] == "ctxbudget-verify":
            continue
        pod = _pod_spec(doc)
        (container,) = pod["containers"]
        env = {item["name"]: item.get("value") for item in container["env"]}
        volume = next(
            v
            for v in pod["volumes"]
            if v.get("configMap", {}).get("name") == ("ctxbudget-policies")
        )
        assert volume["configMap"]["items"] == wanted, doc["metadata"]["name"]
        mount = next(m for m in container["volumeMounts"] if m["name"] == volume["name"])
        assert env["CTXBUDGET_POLICIES"] == mount["mountPath"]
        assert mount.get("readOnly") is True


# -- docker-compose.yml additions


def test_compose_runs_the_shadow_worker_and_the_audit_sink() -> None:
    """Compose runs a shadow worker with a healthcheck and an analytics audit sink on a volume."""
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    shadow = services["shadow"]
    assert shadow["command"] == ["worker", "shadow"]
    assert shadow["environment"]["CTXBUDGET_METRICS_PORT"] == str(METRICS_PORT)
    assert shadow["healthcheck"]["test"] == ["CMD", "python", "-m", "ctxbudget.kafka.healthcheck"]
    sink = services["audit-sink"]
    assert sink["command"][:3] == ["audit-sink", "--to", "/data/audit.duckdb"]
    assert sink["command"][3:] == ["--brokers", "kafka:9092"]
    volume = next(v for v in sink["volumes"] if v.endswith(":/data"))
    assert volume.split(":")[0] in yaml.safe_load(COMPOSE.read_text())["volumes"]
    assert sink["build"]["args"]["WITH_ANALYTICS"] == "true"
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "ARG WITH_ANALYTICS" in dockerfile and "['analytics']" in dockerfile
