"""One BLAS thread per packing process unless configured: set before numpy first loads.

The packing work is many small matrix products (a batch's shared-shingle table, its
embedding similarities); a BLAS thread pool per process spends more CPU waking its threads
than the products take, and on a shared machine makes a heavy tail of slow batches. The
process's parallelism is its workers and their CPU threads instead.

``CTXBUDGET_BLAS_THREADS`` (a positive integer) chooses another count; a thread variable
the environment already sets (``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``,
``MKL_NUM_THREADS``) is kept as it is.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

#: The variables the BLAS builds numpy ships with (OpenBLAS, MKL, OpenMP) read at load.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: The product's own knob for the count.
BLAS_THREADS_ENV = "CTXBUDGET_BLAS_THREADS"


def limit_blas_threads(environ: MutableMapping[str, str] | None = None) -> str:
    """Set each BLAS thread variable the environment leaves unset to the configured count
    (``CTXBUDGET_BLAS_THREADS``, else 1) and return that count. Takes effect only when
    called before numpy is first imported."""
    env = os.environ if environ is None else environ
    wanted = env.get(BLAS_THREADS_ENV, "").strip() or "1"
    if not wanted.isdigit() or int(wanted) < 1:
        raise ValueError(f"{BLAS_THREADS_ENV} must be a positive integer, got {wanted!r}")
    for name in BLAS_THREAD_VARIABLES:
        env.setdefault(name, wanted)
    return wanted
