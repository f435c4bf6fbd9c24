"""Worker configuration: environment variables with the CTXBUDGET_ prefix, built once, frozen.

Secrets (SASL password) are never printed: ``WorkerSettings.describe()`` masks them. The
password comes from ``CTXBUDGET_SASL_PASSWORD`` or, better, from the file named by
``CTXBUDGET_SASL_PASSWORD_FILE`` (a mounted Secret), read when a client is made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ctxbudget.models import ReportModel


class TopicNames(ReportModel):
    """Topic names (v1 contract); override one with e.g. CTXBUDGET_TOPICS__PACKS=my.packs."""

    candidates: str = "ctx.candidates.v1"
    routed: str = "ctx.routed.v1"
    consolidated: str = "ctx.consolidated.v1"
    packed: str = "ctx.packed.v1"
    packs: str = "ctx.packs.v1"
    shadow: str = "ctx.shadow.v1"
    audit: str = "ctx.audit.v1"
    control: str = "ctx.control.v1"
    deadletter: str = "ctx.deadletter.v1"
    labels: str = "ctx.labels.v1"


class WorkerSettings(BaseSettings):
    """Everything a worker needs to know, from CTXBUDGET_* variables (or a .env file)."""

    model_config = SettingsConfigDict(
        env_prefix="CTXBUDGET_",
        env_nested_delimiter="__",
        env_file=".env",
        frozen=True,
        extra="ignore",
    )

    brokers: str = Field(default="127.0.0.1:9092", description="bootstrap servers, comma-separated")
    app_id: str = "ctxbudget"
    group_prefix: str = "ctxbudget"
    topics: TopicNames = TopicNames()
    policies: Path | None = None
    policy: str = "default@1"
    concurrency: int = Field(default=1, ge=1, le=64)
    cpu_threads: int = Field(default=2, ge=1, le=64)
    session_timeout_s: float = Field(default=6.0, gt=0)
    heartbeat_interval_s: float = Field(default=1.0, gt=0)
    rebalance_timeout_s: float = Field(default=10.0, gt=0)
    commit_interval_s: float = Field(default=1.0, gt=0)
    fetch_max_wait_ms: int = Field(
        default=50, ge=1, le=5000, description="longest a fetch may wait for records"
    )
    topic_specs: Path | None = Field(
        default=None, description="topic specs folder (default ./topics, else the shipped)"
    )
    check_topics: bool = Field(
        default=True, description="refuse to start while a topic the worker uses is missing"
    )
    write_intermediate: bool = Field(
        default=False, description="fused worker: also write routed/consolidated/packed topics"
    )
    compact_intermediate: bool = Field(
        default=True,
        description="write intermediate items compact (fields equal to the representative "
        "candidate's left out); readers accept both forms",
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "PLAIN"
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    sasl_password_file: Path | None = Field(
        default=None, description="a file holding the SASL password (instead of sasl_password)"
    )
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    control_key: Path | None = Field(
        default=None, description="operator: the Ed25519 private key that signs control states"
    )
    control_trusted_keys: Path | None = Field(
        default=None,
        description="workers: the public key file (or folder of them) control states must be "
        "signed by; unset = the control topic is ignored, rollout.yaml's baseline only",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["auto", "json", "console"] = Field(
        default="auto", description="json in production; auto = console in a terminal"
    )
    log_evidence: bool = Field(
        default=False, description="debugging only: let evidence text into the logs"
    )
    metrics_port: int = Field(
        default=0, ge=0, le=65535, description="Prometheus /metrics, /healthz, /readyz; 0 = off"
    )

    @field_validator("control_key", "control_trusted_keys", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        """An empty variable (``CTXBUDGET_CONTROL_TRUSTED_KEYS=``, as compose passes an unset
        one) means no key, not the working directory."""
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _one_password_source(self) -> WorkerSettings:
        if self.sasl_password and self.sasl_password_file is not None:
            raise ValueError(
                "set CTXBUDGET_SASL_PASSWORD or CTXBUDGET_SASL_PASSWORD_FILE, not both"
            )
        return self

    def password(self) -> str:
        """The SASL password: ``sasl_password`` (an empty one counts as unset), else the first
        line of ``sasl_password_file`` (read now, so a rotated Secret file is picked up by the
        next client), else ""."""
        if self.sasl_password:
            return self.sasl_password.get_secret_value()
        if self.sasl_password_file is None:
            return ""
        try:
            text = self.sasl_password_file.read_text(encoding="utf-8")
        except OSError as e:
            raise ValueError(
                f"CTXBUDGET_SASL_PASSWORD_FILE {self.sasl_password_file}: cannot read it ({e})"
            ) from e
        return text.splitlines()[0] if text else ""

    def specs_dir(self) -> Path:
        """The topic specs folder: ``CTXBUDGET_TOPIC_SPECS``, else ``./topics`` when present,
        else the shipped copy."""
        if self.topic_specs is not None:
            return self.topic_specs
        local = Path("topics")
        if local.is_dir():
            return local
        from ctxbudget.kafka.topics import DEFAULT_TOPICS_DIR

        return DEFAULT_TOPICS_DIR

    def bootstrap(self) -> list[str]:
        """The bootstrap servers of ``brokers``, as a list without blanks."""
        return [b.strip() for b in self.brokers.split(",") if b.strip()]

    def describe(self) -> dict[str, object]:
        """The settings as a dict safe to log (the password masked)."""
        data = self.model_dump(mode="json")
        if self.sasl_password is not None:
            data["sasl_password"] = "**********"
        return data
