"""The `ctxbudget` command line: one group, commands registered from small modules.

A command's module is imported when the command runs (or when the commands are listed, as
``--help`` does): `ctxbudget pack` does not pay for importing the Kafka clients, the
analytics store or the verifier.
"""

from __future__ import annotations

import importlib

from ctxbudget.blas import limit_blas_threads

limit_blas_threads()  # before anything imports numpy

import click  # noqa: E402  (after the BLAS thread limit)

from ctxbudget import __version__  # noqa: E402

#: One command module: its name, the attributes holding its commands, their command names.
_Module = tuple[str, tuple[str, ...], tuple[str, ...]]

#: The commands, as blocks of modules imported together, and whether the block is optional.
#: An optional block is all or nothing: when one of its modules cannot be imported for a
#: missing optional library (the `kafka` extra, the analytics extra), none of its commands
#: is offered. A module of the core commands that cannot be imported is an error.
_BLOCKS: tuple[tuple[bool, tuple[_Module, ...]], ...] = (
    (
        False,
        (("pack", ("pack_cmd", "schema_cmd", "policies_cmd"), ("pack", "schema", "policies")),),
    ),
    (False, (("init", ("init_cmd",), ("init",)),)),
    (False, (("conformal_cmds", ("calibrate_cmd", "evaluate_cmd"), ("calibrate", "evaluate")),)),
    (False, (("monitor_cmd", ("monitor_cmd",), ("monitor",)),)),
    (False, (("replay", ("replay_cmd", "compare_cmd"), ("replay", "compare")),)),
    (False, (("verify_cmd", ("verify_cmd",), ("verify",)),)),
    (
        True,
        (
            (
                "kafka",
                ("broker_cmd", "topics_cmd", "worker_cmd", "demo_cmd"),
                ("broker", "topics", "worker", "demo"),
            ),
            ("produce", ("produce_cmd", "label_cmd"), ("produce", "label")),
            ("control", ("control_cmd",), ("control",)),
            ("acls", ("acls_cmd",), ("acls",)),
        ),
    ),
    (
        True,
        (
            (
                "analyst_cmds",
                ("audit_sink_cmd", "report_cmd", "explain_cmd"),
                ("audit-sink", "report", "explain"),
            ),
        ),
    ),
)


class _LazyGroup(click.Group):
    """A group that imports a block of command modules the first time one of its commands
    is asked for."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._block_of = {
            name: i
            for i, (_, modules) in enumerate(_BLOCKS)
            for _, _, names in modules
            for name in names
        }
        self._loaded: set[int] = set()

    def _load(self, index: int) -> None:
        if index in self._loaded:
            return
        optional, modules = _BLOCKS[index]
        try:
            found = [
                (importlib.import_module(f"ctxbudget.cli.{module}"), attrs)
                for module, attrs, _ in modules
            ]
        except ModuleNotFoundError:
            if optional:
                self._loaded.add(index)
                return
            raise
        self._loaded.add(index)
        for mod, attrs in found:
            for attr in attrs:
                self.add_command(getattr(mod, attr))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command ``cmd_name``, its block imported first when it is not yet."""
        index = self._block_of.get(cmd_name)
        if index is not None:
            self._load(index)
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command offered (each block imported)."""
        for index in range(len(_BLOCKS)):
            self._load(index)
        return super().list_commands(ctx)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ctxbudget")
def main() -> None:
    """Pack retrieved evidence for LLM prompts under a hard token budget."""
