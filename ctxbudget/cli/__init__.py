"""The `ctxbudget` command line: one group, commands registered from small modules."""

from __future__ import annotations

import contextlib
import importlib

from ctxbudget.blas import limit_blas_threads

limit_blas_threads()  # before anything imports numpy

import click  # noqa: E402  (after the BLAS thread limit)

from ctxbudget import __version__  # noqa: E402


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ctxbudget")
def main() -> None:
    """Pack retrieved evidence for LLM prompts under a hard token budget."""


def _register(module: str, *names: str) -> None:
    mod = importlib.import_module(f"ctxbudget.cli.{module}")
    for name in names:
        main.add_command(getattr(mod, name))


_register("pack", "pack_cmd", "schema_cmd", "policies_cmd")
_register("init", "init_cmd")
_register("conformal_cmds", "calibrate_cmd", "evaluate_cmd")
_register("monitor_cmd", "monitor_cmd")
_register("replay", "replay_cmd", "compare_cmd")
_register("verify_cmd", "verify_cmd")
with contextlib.suppress(ModuleNotFoundError):  # the Kafka commands need the `kafka` extra
    _register("kafka", "broker_cmd", "topics_cmd", "worker_cmd", "demo_cmd")
    _register("produce", "produce_cmd", "label_cmd")
    _register("control", "control_cmd")
    _register("acls", "acls_cmd")
with contextlib.suppress(ModuleNotFoundError):
    _register("analyst_cmds", "audit_sink_cmd", "report_cmd", "explain_cmd")
