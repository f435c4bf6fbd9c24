"""A stage is found from its wire id: module ``ctxbudget.stages.<id>``, one stage class there,
the pipeline attribute that runs it; the compress stage's old result name still answers."""

from __future__ import annotations

import importlib
import inspect
from typing import get_args

import pytest

from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import TraceEvent
from ctxbudget.testing import batch, candidate
from tests.paths import REPO

#: Each wire stage id, its class and the Pipeline attribute holding it.
STAGES = {
    "route": ("QueryRouter", "router"),
    "consolidate": ("Consolidator", "consolidator"),
    "select": ("EvidenceSelector", "selector"),
    "compress": ("PackCompressor", "compressor"),
}


def _pipeline() -> Pipeline:
    return Pipeline.from_store(PolicyStore.load(REPO / "policies"), "default@1")


def test_every_wire_stage_id_has_its_module_and_one_stage_class() -> None:
    """Each stage id on the wire names a module of ctxbudget.stages holding one public class
    with a run() method, the one the stages index lists."""
    assert set(STAGES) == set(get_args(TraceEvent.model_fields["stage"].annotation))
    index = importlib.import_module("ctxbudget.stages").__doc__ or ""
    for stage_id, (class_name, _) in STAGES.items():
        module = importlib.import_module(f"ctxbudget.stages.{stage_id}")
        own = [
            name
            for name, obj in vars(module).items()
            if inspect.isclass(obj)
            and obj.__module__ == module.__name__
            and not name.startswith("_")
            and callable(getattr(obj, "run", None))
        ]
        assert own == [class_name]
        assert f"``{stage_id}``" in index and f"``{class_name}``" in index


def test_the_pipeline_runs_each_stage_from_the_attribute_named_for_it() -> None:
    """Pipeline.router/consolidator/selector/compressor are the stage objects of their ids."""
    pipe = _pipeline()
    for stage_id, (class_name, attribute) in STAGES.items():
        stage = getattr(pipe, attribute)
        assert type(stage).__name__ == class_name
        assert type(stage).__module__ == f"ctxbudget.stages.{stage_id}"


def test_pipeline_result_finished_is_a_deprecated_name_of_compressed() -> None:
    """The compress stage's result was PipelineResult.finished: it still answers, with a
    DeprecationWarning, and is the very object of PipelineResult.compressed."""
    result = _pipeline().run(batch([candidate("c1", "Tokyo is the capital of Japan.")]))
    with pytest.warns(DeprecationWarning, match="use PipelineResult.compressed"):
        old = result.finished
    assert old is result.compressed and result.pack is result.compressed.pack
