"""The rules a control record must pass before a worker applies it, and the keys behind them."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.codec import encode
from ctxbudget.errors import ConfigError
from ctxbudget.rollout import ControlState, next_state
from ctxbudget.signing import (
    MAX_CONTROL_RECORD_BYTES,
    REFUSAL_REASONS,
    KeyRing,
    Verdict,
    generate_key_pair,
    judge,
    key_id,
    load_private_key,
    load_trusted_keys,
    sign_state,
    signed_bytes,
)

OPERATOR = Ed25519PrivateKey.generate()
STRANGER = Ed25519PrivateKey.generate()
TRUSTED = KeyRing([OPERATOR.public_key()])
KNOWN = {"default@1", "lean@1"}
HELD = sign_state(ControlState(baseline="default@1", candidate="lean@1", version=4), OPERATOR)


def _judge(raw: bytes, held: ControlState = HELD) -> Verdict:
    return judge(raw, keys=TRUSTED, held=held, known_policy=KNOWN.__contains__)


def _state(**update: object) -> ControlState:
    return HELD.model_copy(update={"version": 5, "key_id": None, "signature": None, **update})


def _signed(key: Ed25519PrivateKey = OPERATOR, **update: object) -> bytes:
    return encode(sign_state(_state(**update), key))


def _edit(raw: bytes, **changes: object) -> bytes:
    return orjson.dumps({**orjson.loads(raw), **changes})


# -- what is applied ------------------------------------------------------------------------


def test_a_newer_state_signed_by_a_trusted_key_is_applied() -> None:
    """Signed, version above the held one, known policies: applied as signed."""
    verdict = _judge(_signed(killed=True))
    assert verdict.applied and verdict.state is not None
    assert verdict.state.killed and verdict.state.key_id == key_id(OPERATOR.public_key())
    assert verdict.reason is None


def test_the_record_in_force_read_again_is_neither_applied_nor_refused() -> None:
    """Re-reading the topic after a reconnection meets the held record: passed over quietly."""
    verdict = _judge(encode(HELD))
    assert not verdict.applied and verdict.reason is None


def test_any_of_several_trusted_keys_signs_during_a_rotation() -> None:
    """Old and new key both trusted: a state signed by either is applied."""
    new = Ed25519PrivateKey.generate()
    ring = TRUSTED.with_key(new.public_key())
    for key in (OPERATOR, new):
        raw = _signed(key)
        assert judge(raw, keys=ring, held=HELD, known_policy=KNOWN.__contains__).applied


# -- what is refused, and why ---------------------------------------------------------------


def _forged_records() -> dict[str, tuple[bytes, str]]:
    """Each forged record an unprivileged producer can write, with the reason it is refused."""
    unsigned = encode(_state(percent=100.0, candidate="lean@1", killed=False))
    huge_note = "x" * 900_000
    return {
        "rollout 100% unsigned": (unsigned, "unsigned"),
        "same-version kill lift": (_signed(version=4, killed=False, note="lifted"), "same_version"),
        "unknown baseline ghost@1": (_signed(baseline="ghost@1"), "unknown_policy"),
        "version 10^12 unsigned, baseline swapped": (
            encode(_state(version=10**12, baseline="lean@1")),
            "unsigned",
        ),
        "900 KB note": (_signed(note=huge_note), "oversize"),
        "3 MB record": (b"{" + b" " * 3_000_000 + b"}", "oversize"),
        "signed by an untrusted key": (_signed(STRANGER, killed=False), "untrusted_key"),
        "valid signature, payload modified": (
            _edit(_signed(killed=True), killed=False),
            "bad_signature",
        ),
        "stale version": (_signed(version=3), "stale"),
        "not JSON": (b"\xff{", "malformed"),
        "a list": (b"[1, 2]", "malformed"),
        "signed, not a state": (_signed(percent=300.0), "malformed"),
        "signature moved to another key id": (
            _edit(_signed(STRANGER), key_id=key_id(OPERATOR.public_key())),
            "bad_signature",
        ),
        "signature not base64": (_edit(_signed(), signature="%%%"), "bad_signature"),
        "key id removed": (_edit(_signed(), key_id=None), "untrusted_key"),
    }


@pytest.mark.parametrize("name", list(_forged_records()))
def test_every_forged_record_is_refused_with_its_reason(name: str) -> None:
    """None of the forged records is applied; each names why."""
    raw, reason = _forged_records()[name]
    verdict = _judge(raw)
    assert not verdict.applied
    assert verdict.reason == reason, verdict.detail
    assert verdict.reason in REFUSAL_REASONS and verdict.detail


def test_a_signed_state_over_the_size_limit_is_refused_before_it_is_parsed() -> None:
    """The limit holds even for a record a trusted key signed."""
    raw = _signed(note="n" * MAX_CONTROL_RECORD_BYTES)
    assert _judge(raw).reason == "oversize"


def test_a_duplicated_member_cannot_change_what_was_verified() -> None:
    """A second "killed" appended to a signed record: the object verified is the one applied,
    so either the signature fails or the state is the one signed."""
    raw = _signed(killed=True)
    forged = raw[:-1] + b',"killed":false}'
    verdict = _judge(forged)
    assert not verdict.applied or (verdict.state is not None and verdict.state.killed)


def test_an_unknown_member_added_after_signing_breaks_the_signature() -> None:
    """Members a newer release adds are covered by the signature as well."""
    assert _judge(_edit(_signed(), extra="x")).reason == "bad_signature"


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_are_never_applied(raw: bytes) -> None:
    """Whatever bytes a producer writes without the key, the held state stays."""
    assert not _judge(raw).applied


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["killed", "percent", "shadow", "baseline", "version", "note"]),
    st.one_of(st.booleans(), st.integers(0, 10**12), st.text(max_size=20)),
)
def test_no_change_to_a_signed_record_is_applied(member: str, value: object) -> None:
    """Changing any member of a signed record to a different value breaks its signature."""
    raw = _signed(killed=True, note="x")
    original = orjson.loads(raw)
    if original.get(member) == value:
        return
    assert not _judge(_edit(raw, **{member: value})).applied


def test_the_signed_bytes_are_the_sorted_object_without_its_signature() -> None:
    """The canonical form is documented: tag, then sorted compact JSON without "signature"."""
    obj = {"b": 1, "a": [True, None], "signature": "zz"}
    assert signed_bytes(obj) == b'ctxbudget.control_state.v1\n{"a":[true,null],"b":1}'


def test_next_state_drops_the_previous_signature() -> None:
    """A change made from a signed state is unsigned until the operator signs it."""
    after = next_state(
        HELD, {"killed": True}, known_policy=lambda ref: None, at="2026-01-01T00:00:00Z", by="op"
    )
    assert after.signature is None and after.key_id is None and after.version == 5


# -- keys -----------------------------------------------------------------------------------


def test_keygen_writes_a_private_file_for_the_owner_only_and_a_public_one(tmp_path: Path) -> None:
    """The pair's names say which is which; the private one is mode 0600; they match."""
    private, public = generate_key_pair(tmp_path / "k")
    assert "private" in private.name and "public" in public.name
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    ring = load_trusted_keys(public)
    signing = load_private_key(private)
    assert ring.ids() == [key_id(signing.public_key())]
    assert private.name == f"control-{ring.ids()[0].removeprefix('ed25519:')}-private.pem"


def test_keygen_never_overwrites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second pair with the same id (forced here) is refused, the first pair intact."""
    private, _ = generate_key_pair(tmp_path)
    key = load_private_key(private)
    monkeypatch.setattr(Ed25519PrivateKey, "generate", staticmethod(lambda: key))
    with pytest.raises(ConfigError, match="already exists"):
        generate_key_pair(tmp_path)


def test_a_folder_of_public_keys_is_one_ring_and_hidden_entries_are_passed_over(
    tmp_path: Path,
) -> None:
    """A mounted Secret (files plus ..data links) gives every key in it."""
    for _ in range(2):
        generate_key_pair(tmp_path / "pairs")
    trusted = tmp_path / "trusted"
    trusted.mkdir()
    for n, public in enumerate(sorted((tmp_path / "pairs").glob("*public*"))):
        (trusted / f"key-{n}.pem").write_bytes(public.read_bytes())
    (trusted / "..data").mkdir()
    assert len(load_trusted_keys(trusted)) == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no public key files"),
        (b"not a key", "not a PEM public key"),
        ("private", "holds a private key"),
    ],
)
def test_bad_trusted_keys_are_a_config_error(
    tmp_path: Path, content: bytes | str | None, message: str
) -> None:
    """An empty folder, a file that is no key, or a private key given to a worker."""
    folder = tmp_path / "trusted"
    folder.mkdir()
    if content == "private":
        private, _ = generate_key_pair(tmp_path / "pair")
        (folder / "k.pem").write_bytes(private.read_bytes())
    elif isinstance(content, bytes):
        (folder / "k.pem").write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        load_trusted_keys(folder)
    with pytest.raises(ConfigError, match="no such trusted key"):
        load_trusted_keys(tmp_path / "missing.pem")


def test_a_signature_is_64_bytes_of_standard_base64() -> None:
    """The wire form of the signature, as documented."""
    signature = sign_state(_state(), OPERATOR).signature
    assert signature is not None and len(base64.b64decode(signature, validate=True)) == 64
