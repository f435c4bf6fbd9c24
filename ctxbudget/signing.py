"""Signed control states: the operator signs each state with Ed25519, a worker judges each record.

**What is signed.** The record's JSON object without its ``signature`` member, written with
its keys sorted and no whitespace (orjson, ``OPT_SORT_KEYS``), after the domain tag
:data:`SIGNING_TAG`. The ``key_id`` member is inside the signed bytes, so a record cannot be
moved to another key. A verifier rebuilds those bytes from the object it received, not from
its own model, so members a newer release adds are covered by the signature as well.

**The signature.** ``signature`` holds the 64-byte Ed25519 signature in standard base64;
``key_id`` names the key: ``ed25519:`` and the first 16 hex digits of the SHA-256 of its raw
32-byte public key (:func:`key_id`). Both are plain added members of ``ctx.control_state.v1``;
an older reader ignores them.

**The rules** (:func:`judge`): a record is applied only when it is at most ``max_bytes``, is a
JSON object signed by a trusted key over exactly these bytes, is a valid state, has a version
strictly greater than the one held, and names policies this process has loaded. Anything else
is refused with one of :data:`REFUSAL_REASONS`; the held state keeps serving. The record that
put the held state in force, read again, is neither applied nor refused.

Pure: keys are read from the files given, nothing here reads the environment or a clock.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Literal

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import ValidationError

from ctxbudget.errors import ConfigError
from ctxbudget.models import ReportModel, describe_validation
from ctxbudget.rollout import ControlState

__all__ = [
    "MAX_CONTROL_RECORD_BYTES",
    "REFUSAL_REASONS",
    "SIGNING_TAG",
    "KeyRing",
    "RefusalReason",
    "Verdict",
    "generate_key_pair",
    "judge",
    "key_id",
    "load_private_key",
    "load_trusted_keys",
    "sign_state",
    "signed_bytes",
]

#: Prefixed to the canonical bytes before signing: a signature over a control state can
#: never be taken for a signature over anything else made with the same key.
SIGNING_TAG = b"ctxbudget.control_state.v1\n"

#: The largest control record a worker reads (a state is a few hundred bytes; the topic's own
#: limit, 1 MiB, is far too generous for it).
MAX_CONTROL_RECORD_BYTES = 16 * 1024

RefusalReason = Literal[
    "oversize",
    "malformed",
    "unsigned",
    "untrusted_key",
    "bad_signature",
    "stale",
    "same_version",
    "unknown_policy",
]
#: Why a record is refused, in the order the checks are made.
REFUSAL_REASONS: tuple[RefusalReason, ...] = (
    "oversize",
    "malformed",
    "unsigned",
    "untrusted_key",
    "bad_signature",
    "stale",
    "same_version",
    "unknown_policy",
)

_KEY_ID_PREFIX = "ed25519:"
_KEY_ID_HEX = 16


# -- keys -----------------------------------------------------------------------------------


def key_id(public: Ed25519PublicKey) -> str:
    """The short name of a public key: ``ed25519:`` + 16 hex digits of its SHA-256."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return _KEY_ID_PREFIX + hashlib.sha256(raw).hexdigest()[:_KEY_ID_HEX]


class KeyRing:
    """Trusted public keys by key id (several during a rotation)."""

    def __init__(self, keys: Iterable[Ed25519PublicKey] = ()) -> None:
        self._keys: dict[str, Ed25519PublicKey] = {}
        for key in keys:
            self._keys[key_id(key)] = key

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, kid: object) -> bool:
        return kid in self._keys

    def get(self, kid: str) -> Ed25519PublicKey | None:
        """The key named ``kid``, or None when it is not trusted."""
        return self._keys.get(kid)

    def ids(self) -> list[str]:
        """The key ids, sorted."""
        return sorted(self._keys)

    def with_key(self, key: Ed25519PublicKey) -> KeyRing:
        """A ring holding these keys and ``key``."""
        return KeyRing([*self._keys.values(), key])


def generate_key_pair(directory: Path) -> tuple[Path, Path]:
    """Write a new key pair into ``directory``: ``control-<id>-private.pem`` (PKCS#8, mode
    0600) and ``control-<id>-public.pem``; return their paths. An existing file is never
    overwritten (a ConfigError)."""
    private = Ed25519PrivateKey.generate()
    kid = key_id(private.public_key()).removeprefix(_KEY_ID_PREFIX)
    directory.mkdir(parents=True, exist_ok=True)
    private_path = directory / f"control-{kid}-private.pem"
    public_path = directory / f"control-{kid}-public.pem"
    for path in (private_path, public_path):
        if path.exists():
            raise ConfigError(f"{path}: already exists; not overwritten")
    private_pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(private_pem)
    os.chmod(private_path, 0o600)  # whatever the umask
    public_path.write_bytes(public_pem)
    return private_path, public_path


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the key file: {e.strerror or e}") from e


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """The operator's signing key (an unencrypted PEM PKCS#8 Ed25519 private key)."""
    try:
        key = serialization.load_pem_private_key(_read(path), password=None)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{path}: not an unencrypted PEM private key ({e})") from e
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(f"{path}: a {type(key).__name__}, not an Ed25519 private key")
    return key


def _load_public_key(path: Path) -> Ed25519PublicKey:
    data = _read(path)
    if b"PRIVATE KEY" in data:
        raise ConfigError(f"{path}: holds a private key; workers are given public keys only")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{path}: not a PEM public key ({e})") from e
    if not isinstance(key, Ed25519PublicKey):
        raise ConfigError(f"{path}: a {type(key).__name__}, not an Ed25519 public key")
    return key


def load_trusted_keys(path: Path) -> KeyRing:
    """The public keys in ``path``: one PEM file, or every file of a folder whose name does
    not start with a dot (a mounted Kubernetes Secret's ``..data`` links are passed over).
    A folder without keys, or a file that is not an Ed25519 public key, is a ConfigError."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if not p.name.startswith(".") and p.is_file())
        if not files:
            raise ConfigError(f"{path}: no public key files in the trusted keys folder")
        return KeyRing(_load_public_key(p) for p in files)
    if not path.exists():
        raise ConfigError(f"{path}: no such trusted key file or folder")
    return KeyRing([_load_public_key(path)])


# -- signing --------------------------------------------------------------------------------


def signed_bytes(obj: Mapping[str, object]) -> bytes:
    """The bytes a signature covers: :data:`SIGNING_TAG` and the object without its
    ``signature`` member, keys sorted, no whitespace."""
    body = {k: v for k, v in obj.items() if k != "signature"}
    return SIGNING_TAG + orjson.dumps(body, option=orjson.OPT_SORT_KEYS)


def sign_state(state: ControlState, key: Ed25519PrivateKey) -> ControlState:
    """``state`` with ``key_id`` set to the key's and ``signature`` over it."""
    unsigned = state.model_copy(update={"key_id": key_id(key.public_key()), "signature": None})
    payload = unsigned.model_dump(mode="json", by_alias=True)
    signature = base64.b64encode(key.sign(signed_bytes(payload))).decode("ascii")
    return unsigned.model_copy(update={"signature": signature})


# -- judging a record -----------------------------------------------------------------------


class Verdict(ReportModel):
    """What to do with one control record: apply ``state``, pass it over (``state`` and
    ``reason`` both None: the record of the state held), or refuse it for ``reason``."""

    state: ControlState | None = None
    reason: RefusalReason | None = None
    detail: str = ""
    #: What the record claims (refused records too), for the log and the audit event.
    key_id: str | None = None
    version: int | None = None

    @property
    def applied(self) -> bool:
        """The record is to be put in force."""
        return self.state is not None


def _claims(obj: Mapping[str, object]) -> tuple[str | None, int | None]:
    kid, version = obj.get("key_id"), obj.get("version")
    return (
        kid[:64] if isinstance(kid, str) else None,
        version if isinstance(version, int) and not isinstance(version, bool) else None,
    )


def _check_signature(obj: Mapping[str, object], keys: KeyRing) -> tuple[RefusalReason, str] | None:
    signature, kid = obj.get("signature"), obj.get("key_id")
    if signature is None:
        return "unsigned", "no signature"
    public = keys.get(kid) if isinstance(kid, str) else None
    if public is None:
        return "untrusted_key", f"signed by {str(kid)[:64]!r}, not a trusted key"
    try:
        raw = base64.b64decode(signature, validate=True) if isinstance(signature, str) else b""
        public.verify(raw, signed_bytes(obj))
    except (binascii.Error, ValueError, InvalidSignature):
        return "bad_signature", f"the signature does not match the record for key {kid}"
    return None


def _parse(raw: bytes, max_bytes: int) -> dict[str, object] | Verdict:
    if len(raw) > max_bytes:
        return Verdict(reason="oversize", detail=f"{len(raw)} bytes, over the {max_bytes} allowed")
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        return Verdict(reason="malformed", detail=f"not JSON: {e}")
    if not isinstance(obj, dict):
        return Verdict(reason="malformed", detail=f"a JSON {type(obj).__name__}, not an object")
    return obj


def judge(
    raw: bytes,
    *,
    keys: KeyRing,
    held: ControlState,
    known_policy: Callable[[str], bool],
    max_bytes: int = MAX_CONTROL_RECORD_BYTES,
) -> Verdict:
    """Whether the control record ``raw`` replaces ``held`` (the rules in the module text).

    ``known_policy(ref)`` says whether the process has the policy ``ref`` loaded.
    """
    parsed = _parse(raw, max_bytes)
    if isinstance(parsed, Verdict):
        return parsed
    kid, version = _claims(parsed)

    def refuse(reason: RefusalReason, detail: str) -> Verdict:
        return Verdict(reason=reason, detail=detail, key_id=kid, version=version)

    bad = _check_signature(parsed, keys)
    if bad is not None:
        return refuse(*bad)
    try:  # the object verified, not the bytes again: a parser could read those differently
        state = ControlState.model_validate(parsed)
    except ValidationError as e:
        return refuse("malformed", describe_validation(e, root="(message)"))
    if state.candidate is None and state.percent > 0:
        return refuse("malformed", f"percent {state.percent} without a candidate policy")
    if state.version < held.version:
        return refuse("stale", f"version {state.version} is older than {held.version} in force")
    if state.version == held.version:
        if state.signature is not None and state.signature == held.signature:
            return Verdict(key_id=kid, version=version)  # the record in force, read again
        return refuse("same_version", f"version {state.version} is the version in force")
    unknown = [
        r for r in (state.baseline, state.candidate) if r is not None and not known_policy(r)
    ]
    if unknown:
        return refuse("unknown_policy", f"policy {', '.join(unknown)} is not loaded here")
    return Verdict(state=state, key_id=kid, version=version)
