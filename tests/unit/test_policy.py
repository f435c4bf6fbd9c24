"""Policies and routing rules (ctxbudget.policy): the shipped files load, bad ones are refused
naming the file, the key and the value found."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxbudget.errors import ConfigError
from ctxbudget.policy import PolicyStore, load_policy, load_routing
from tests.paths import REPO


@pytest.mark.parametrize(
    "path", sorted((REPO / "policies" / "packing").glob("*.yaml")), ids=lambda p: p.name
)
def test_every_shipped_policy_loads(path: Path) -> None:
    """Policies are data validated at load; every shipped file must pass."""
    policy = load_policy(path)
    assert policy.classes.keys() == {
        "point_lookup",
        "how_to",
        "comparison",
        "aggregation",
        "troubleshooting",
    }


def test_the_shipped_routing_rules_load() -> None:
    """routing.yaml compiles."""
    assert load_routing(REPO / "policies" / "routing.yaml").rules


def test_a_bad_value_names_file_key_and_found(tmp_path: Path) -> None:
    """An error names the file, the key path and the value found."""
    text = (REPO / "policies" / "packing" / "default@1.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("ceiling: 3500", "ceiling: lots", 1))
    with pytest.raises(ConfigError) as err:
        load_policy(bad)
    msg = str(err.value)
    assert "bad.yaml" in msg and "classes.how_to.ceiling" in msg and "'lots'" in msg


def test_a_missing_class_is_refused(tmp_path: Path) -> None:
    """Every query class needs its rules: a policy cannot silently skip one."""
    bad = tmp_path / "p.yaml"
    bad.write_text(
        "name: p\nversion: '1'\nanswer_reserves: {default: 1}\nclasses:\n  how_to: {ceiling: 10}\n"
    )
    with pytest.raises(ConfigError, match="missing point_lookup"):
        load_policy(bad)


def test_broken_yaml_names_the_file(tmp_path: Path) -> None:
    """A YAML syntax error is a ConfigError naming the file."""
    bad = tmp_path / "broken.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match=r"broken\.yaml"):
        load_policy(bad)


def test_an_unknown_policy_lists_the_known_ones(store: PolicyStore) -> None:
    """Asking for a policy that does not exist says which do."""
    with pytest.raises(ConfigError, match="default@1"):
        store.get("nope@9")
