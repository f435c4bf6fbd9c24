"""One BLAS thread per packing process unless configured."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctxbudget.blas import BLAS_THREAD_VARIABLES, limit_blas_threads


def test_unset_variables_get_one_thread() -> None:
    """With nothing configured every BLAS variable is set to 1."""
    env: dict[str, str] = {}
    assert limit_blas_threads(env) == "1"
    assert {k: env[k] for k in BLAS_THREAD_VARIABLES} == dict.fromkeys(BLAS_THREAD_VARIABLES, "1")


def test_the_product_knob_and_an_explicit_variable_win() -> None:
    """CTXBUDGET_BLAS_THREADS chooses the count; a variable already set is kept."""
    env = {"CTXBUDGET_BLAS_THREADS": "3", "OMP_NUM_THREADS": "2"}
    limit_blas_threads(env)
    assert env["OPENBLAS_NUM_THREADS"] == "3" and env["OMP_NUM_THREADS"] == "2"


def test_a_bad_count_is_refused() -> None:
    """A count that is not a positive integer names the variable."""
    with pytest.raises(ValueError, match="CTXBUDGET_BLAS_THREADS"):
        limit_blas_threads({"CTXBUDGET_BLAS_THREADS": "0"})


def test_the_command_line_sets_the_limit_before_numpy_loads() -> None:
    """Importing the CLI sets OPENBLAS_NUM_THREADS in a fresh process before numpy loads."""
    code = (
        "import os; os.environ.pop('OPENBLAS_NUM_THREADS', None); import ctxbudget.cli, sys; "
        "print(os.environ['OPENBLAS_NUM_THREADS'])"
    )
    env = {"PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == "1"
