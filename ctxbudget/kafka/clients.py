"""The one place every Kafka client of the project gets its configuration.

Every client, whatever library it comes from, is built from one :class:`WorkerSettings`
(``CTXBUDGET_*`` variables): the faust agents (:func:`faust_credentials`), and every
kafka-python client through :func:`client_config` and the three constructors below, which
the control follower and its producer, ``ctxbudget control``, topic admin, ``replay``,
``audit-sink``, ``produce`` and ``demo`` call. So a secured cluster's settings
(``CTXBUDGET_SECURITY_PROTOCOL``, ``CTXBUDGET_SASL_*``, ``CTXBUDGET_SSL_*``) reach every
connection, never only some of them.

``settings=None`` means a plaintext client with no credentials (the embedded broker, tests,
benchmarks); the functions here never read the environment themselves: the commands build
the settings once and pass them in.

TLS: one :class:`ssl.SSLContext` is made from ``CTXBUDGET_SSL_CAFILE`` (the system's trusted
roots when unset) and, for mutual TLS, ``CTXBUDGET_SSL_CERTFILE`` / ``CTXBUDGET_SSL_KEYFILE``;
host names are checked. faust (aiokafka) and kafka-python get the same context.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxbudget.kafka.settings import WorkerSettings

__all__ = [
    "admin_client",
    "bootstrap_servers",
    "build",
    "client_config",
    "consumer",
    "faust_credentials",
    "producer",
    "ssl_context",
]

_TLS = ("SSL", "SASL_SSL")
_SASL = ("SASL_PLAINTEXT", "SASL_SSL")


def bootstrap_servers(
    brokers: str | Sequence[str] | None, settings: WorkerSettings | None
) -> list[str]:
    """``--brokers`` (comma-separated or a list) when given, else ``CTXBUDGET_BROKERS``."""
    if brokers is None:
        if settings is None:
            raise ValueError("no bootstrap servers: pass brokers or settings")
        return settings.bootstrap()
    items = brokers.split(",") if isinstance(brokers, str) else list(brokers)
    servers = [b.strip() for b in items if b.strip()]
    if not servers:
        raise ValueError(f"bootstrap servers must be 'host:port[,host:port]', got {brokers!r}")
    return servers


def ssl_context(settings: WorkerSettings) -> ssl.SSLContext | None:
    """The TLS context for ``SSL`` / ``SASL_SSL``; None for the plaintext protocols."""
    if settings.security_protocol not in _TLS:
        return None
    context = ssl.create_default_context(
        cafile=str(settings.ssl_cafile) if settings.ssl_cafile else None
    )
    if settings.ssl_certfile:
        context.load_cert_chain(
            str(settings.ssl_certfile),
            str(settings.ssl_keyfile) if settings.ssl_keyfile else None,
        )
    return context


def _password(settings: WorkerSettings) -> str:
    return settings.password()


def security_config(settings: WorkerSettings | None) -> dict[str, Any]:
    """The kafka-python security keywords of ``settings`` (plaintext for None)."""
    if settings is None:
        return {"security_protocol": "PLAINTEXT"}
    proto = settings.security_protocol
    config: dict[str, Any] = {"security_protocol": proto}
    if proto in _TLS:
        config["ssl_context"] = ssl_context(settings)
    if proto in _SASL:
        config["sasl_mechanism"] = settings.sasl_mechanism
        config["sasl_plain_username"] = settings.sasl_username or ""
        config["sasl_plain_password"] = _password(settings)
    return config


def client_config(
    settings: WorkerSettings | None,
    *,
    brokers: str | Sequence[str] | None = None,
    client_id: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """kafka-python keyword arguments: bootstrap servers, security, client id, ``options``.

    ``options`` are the client's own settings (``acks``, ``group_id``, timeouts); they may
    not override the bootstrap servers or the security settings.
    """
    config: dict[str, Any] = {"bootstrap_servers": bootstrap_servers(brokers, settings)}
    config.update(security_config(settings))
    clash = sorted(set(options) & (set(config) | {"sasl_plain_password", "ssl_context"}))
    if clash:
        raise ValueError(f"client options may not override {clash}: they come from the settings")
    if client_id is not None:
        config["client_id"] = client_id
    config.update(options)
    return config


def build(kind: str, config: Mapping[str, Any], *topics: str) -> Any:
    """A kafka-python client (``producer``, ``consumer`` or ``admin``) from a :func:`client_config`.

    The only place in the project where a kafka-python client is constructed.
    """
    import kafka

    if kind == "producer":
        return kafka.KafkaProducer(**config)
    if kind == "consumer":
        return kafka.KafkaConsumer(*topics, **config)
    if kind == "admin":
        return kafka.KafkaAdminClient(**config)
    raise ValueError(f"unknown client kind {kind!r}; expected producer, consumer or admin")


def producer(
    settings: WorkerSettings | None,
    *,
    brokers: str | Sequence[str] | None = None,
    client_id: str = "ctxbudget",
    **options: Any,
) -> Any:
    """A kafka-python ``KafkaProducer`` configured from ``settings``."""
    return build(
        "producer", client_config(settings, brokers=brokers, client_id=client_id, **options)
    )


def consumer(
    settings: WorkerSettings | None,
    *topics: str,
    brokers: str | Sequence[str] | None = None,
    client_id: str = "ctxbudget",
    **options: Any,
) -> Any:
    """A kafka-python ``KafkaConsumer`` configured from ``settings`` (subscribed to ``topics``)."""
    config = client_config(settings, brokers=brokers, client_id=client_id, **options)
    return build("consumer", config, *topics)


def admin_client(
    settings: WorkerSettings | None,
    *,
    brokers: str | Sequence[str] | None = None,
    client_id: str = "ctxbudget",
    **options: Any,
) -> Any:
    """A kafka-python ``KafkaAdminClient`` configured from ``settings``."""
    return build("admin", client_config(settings, brokers=brokers, client_id=client_id, **options))


def faust_credentials(settings: WorkerSettings) -> Any:
    """faust's ``broker_credentials`` (its aiokafka consumers and producer); None: plaintext."""
    import faust

    proto = settings.security_protocol
    if proto == "PLAINTEXT":
        return None
    context = ssl_context(settings)
    if proto == "SSL":
        return faust.SSLCredentials(context)
    return faust.SASLCredentials(
        username=settings.sasl_username or "",
        password=_password(settings),
        mechanism=settings.sasl_mechanism,
        ssl_context=context,
    )
