"""``python -m ctxbudget.testing.traffic``: see :mod:`ctxbudget.testing.traffic.cli`."""

from ctxbudget.testing.traffic.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
