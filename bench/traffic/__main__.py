"""``python -m bench.traffic``: see :mod:`bench.traffic.cli`."""

from bench.traffic.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
