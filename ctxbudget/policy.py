"""Packing policies and routing rules: data in YAML, validated into frozen models at load.

A load error names the file, the key path and what was found, for example::

    policies/packing/default@1.yaml: classes.how_to.ceiling: Input should be a valid
    integer (found 'lots')
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from ctxbudget.errors import ConfigError
from ctxbudget.escaping import DEFAULT_DATAMARK, marker_problem
from ctxbudget.models import ConfigModel, NonNegInt, Unit, load_yaml_model
from ctxbudget.schemas import QUERY_CLASSES, PolicyRef, QueryClass

Ordering = Literal["relevance", "edges", "document", "chronological"]
Weight = Annotated[float, Field(ge=0.0, le=10.0)]


class Weights(ConfigModel):
    """Weights of the admission utility; they need not sum to one."""

    relevance: Weight = 0.60
    novelty: Weight = 0.25
    authority: Weight = 0.15
    coverage: Weight = 0.30
    match: Weight = 0.0
    #: Entity links: the item is about an entity the question names that no admitted item
    #: covers yet, or about an entity an admitted item mentions (the second hop).
    link: Weight = 0.0


class ClassPolicy(ConfigModel):
    """How one query class is packed."""

    ceiling: Annotated[int, Field(gt=0)]
    per_source_cap: Annotated[int, Field(ge=1)] = 2
    max_items: Annotated[int, Field(ge=1)] = 12
    min_novelty: Unit = 0.2
    min_relevance: Unit = 0.0
    weights: Weights = Weights()
    ordering: Ordering = "relevance"
    compression: bool = True
    min_compressed_tokens: Annotated[int, Field(ge=1)] = 24
    alpha: Annotated[float, Field(gt=0.0, lt=1.0)] | None = None
    distinct_sources: bool = False
    option_coverage: bool = False
    #: Under budget pressure (the whole passages would not all fit), admit each item as an
    #: excerpt of its best ``excerpt_sentences`` sentences first, so more distinct items fit;
    #: 0 admits whole passages only (compression then only repairs an overflow).
    excerpt_sentences: Annotated[int, Field(ge=0, le=20)] = 0
    #: After admission, give excerpts their whole text back, best first, while room is left.
    expand_excerpts: bool = True
    #: Under pressure, an item whose utility is below this share of the first admitted
    #: item's waits until the admitted excerpts have grown; 0 admits every item first.
    excerpt_floor: Unit = 0.0


class NearDuplicate(ConfigModel):
    """Thresholds for clustering copies into one source family."""

    jaccard: Unit = 0.6
    containment: Unit = 0.8
    cosine: Unit = 0.95
    shingle_words: Annotated[int, Field(ge=1, le=8)] = 3


class Policy(ConfigModel):
    """A versioned packing policy: budget line items and one rule set per query class."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")]
    version: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")]
    description: str = ""
    safety_margin: NonNegInt = 64
    conversation_cap: NonNegInt = 1500
    answer_reserves: dict[str, NonNegInt]
    independent_authority: Unit = 0.9
    default_authority: Unit = 0.5
    source_authority: dict[str, Unit] = Field(default_factory=dict)
    near_duplicate: NearDuplicate = NearDuplicate()
    #: "always": every envelope names its chunk location; "partial": only when the text is
    #: merged or compressed; "none": never (the Pack's spans always hold it, and the id
    #: resolves to them).
    envelope_location: Literal["always", "partial", "none"] = "none"
    #: What happens to a passage the injection gate flags: "withhold" it (listed in the
    #: Pack's ``withheld``, never rendered), or render it as "low_trust" evidence (for corpora
    #: full of documentation about prompts).
    flagged_passages: Literal["withhold", "low_trust"] = "withhold"
    #: "quarantine": a flagged passage is handled whole (``flagged_passages``); "cut": first
    #: try to cut out the sentences the gate flags on their own and keep the rest as an
    #: excerpt when the gate finds it clean (the cut sentences listed in the Pack's
    #: ``withheld_sentences``); a passage that cannot be cut is handled whole.
    injection: Literal["quarantine", "cut"] = "quarantine"
    #: "plain": evidence text as retrieved; "datamark": ``datamark`` is written in place of
    #: every space of each text and title (and before every other whitespace character), so
    #: every word reads as data; the Pack's ``evidence_instruction`` says so for the system
    #: prompt. The marker's tokens count against the budget like any other.
    envelope_marking: Literal["plain", "datamark"] = "plain"
    #: The datamarking character (one visible character, not a letter, digit or markup).
    datamark: str = DEFAULT_DATAMARK
    #: When passages were withheld, say so on the rendered block (``withheld="N"``).
    withheld_notice: bool = True
    routing: str = "routing.yaml"
    calibration: str | None = None
    fallback_class: QueryClass = "point_lookup"
    classes: dict[QueryClass, ClassPolicy]

    @field_validator("datamark")
    @classmethod
    def _one_marker(cls, value: str) -> str:
        problem = marker_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @property
    def marker(self) -> str | None:
        """The datamarking character when the policy datamarks evidence, else None."""
        return self.datamark if self.envelope_marking == "datamark" else None

    @model_validator(mode="after")
    def _complete(self) -> Policy:
        missing = [c for c in QUERY_CLASSES if c not in self.classes]
        if missing:
            raise ValueError(f"classes: missing {', '.join(missing)}")
        if "default" not in self.answer_reserves:
            raise ValueError("answer_reserves: needs a 'default' entry")
        return self

    @property
    def ref(self) -> PolicyRef:
        """The policy's name and version, as packs and traces carry them."""
        return PolicyRef(name=self.name, version=self.version)

    def reserve_for(self, kind: str) -> int:
        """Tokens to reserve for an answer of contract ``kind``; the ``default`` entry for a
        kind the policy does not list."""
        return self.answer_reserves.get(kind, self.answer_reserves["default"])

    def authority_of(self, source_id: str, given: float | None) -> float:
        """Authority comes from the source registry first, then the candidate, then default."""
        if source_id in self.source_authority:
            return self.source_authority[source_id]
        return self.default_authority if given is None else given


class RoutingRule(ConfigModel):
    """One classification rule: the class it assigns, its priority (the highest-priority match
    wins) and its patterns, regular expressions searched case-insensitively in the query text."""

    name: Annotated[str, Field(min_length=1)]
    query_class: QueryClass
    priority: int = 0
    patterns: list[str]

    @model_validator(mode="after")
    def _compiles(self) -> RoutingRule:
        for p in self.patterns:
            try:
                re.compile(p)
            except re.error as e:
                raise ValueError(f"pattern {p!r} does not compile: {e}") from e
        return self

    @cached_property
    def regex(self) -> re.Pattern[str]:
        """The patterns as one case-insensitive alternation."""
        return re.compile("|".join(f"(?:{p})" for p in self.patterns), re.IGNORECASE)


class RoutingRules(ConfigModel):
    """A routing file: the classification rules, and the patterns of questions about
    history (earlier versions)."""

    rules: list[RoutingRule]
    history_patterns: list[str] = Field(default_factory=list)

    @cached_property
    def by_priority(self) -> tuple[tuple[RoutingRule, ...], ...]:
        """The rules grouped by priority, highest first; file order within a group."""
        priorities = sorted({r.priority for r in self.rules}, reverse=True)
        return tuple(tuple(r for r in self.rules if r.priority == p) for p in priorities)

    @cached_property
    def history_regex(self) -> re.Pattern[str] | None:
        """The history patterns as one case-insensitive alternation; None when there are none."""
        if not self.history_patterns:
            return None
        return re.compile("|".join(f"(?:{p})" for p in self.history_patterns), re.IGNORECASE)


# ---------------------------------------------------------------- loading


def load_policy(path: Path) -> Policy:
    """Read and validate one packing policy file; any problem is a
    :class:`ConfigError` naming it."""
    return load_yaml_model(Policy, path)


def load_routing(path: Path) -> RoutingRules:
    """Read and validate one routing file; any problem is a :class:`ConfigError` naming it."""
    return load_yaml_model(RoutingRules, path)


class PolicyStore:
    """Every policy in ``<root>/packing/*.yaml`` with its routing rules, by name@version."""

    def __init__(self, policies: Mapping[str, tuple[Policy, RoutingRules]], root: Path) -> None:
        if not policies:
            raise ConfigError(f"{root}: no packing policy found under packing/")
        self._policies = dict(policies)
        self.root = root

    @classmethod
    def load(cls, root: Path) -> PolicyStore:
        """Every policy in ``<root>/packing/*.yaml``, with the routing file each names (each file
        loaded once). :class:`ConfigError` for an invalid file, a policy defined twice, a missing
        routing file, or no policy at all."""
        root = Path(root)
        found: dict[str, tuple[Policy, RoutingRules]] = {}
        routing_cache: dict[str, RoutingRules] = {}
        for path in sorted((root / "packing").glob("*.yaml")):
            policy = load_policy(path)
            key = str(policy.ref)
            if key in found:
                raise ConfigError(f"{path}: policy {key} is defined twice")
            if policy.routing not in routing_cache:
                rpath = root / policy.routing
                if not rpath.exists():
                    raise ConfigError(f"{path}: routing: file {rpath} does not exist")
                routing_cache[policy.routing] = load_routing(rpath)
            found[key] = (policy, routing_cache[policy.routing])
        return cls(found, root)

    def names(self) -> list[str]:
        """The ``name@version`` of every policy, sorted."""
        return sorted(self._policies)

    def get(self, ref: str | PolicyRef) -> tuple[Policy, RoutingRules]:
        """Policy ``ref`` and its routing rules; a :class:`ConfigError` listing the known
        policies when there is none by that name."""
        key = str(ref)
        if key not in self._policies:
            raise ConfigError(f"unknown policy {key!r}; known: {', '.join(self.names())}")
        return self._policies[key]


def default_policies_dir() -> Path:
    """The shipped ``policies/`` folder: the checkout's, else the copy inside the package.

    $CTXBUDGET_POLICIES and ./policies are looked at by the commands, never here.
    """
    from ctxbudget.resources import shipped

    return shipped("policies")
