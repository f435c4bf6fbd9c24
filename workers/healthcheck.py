"""``python -m workers.healthcheck``: the container healthcheck
(:mod:`ctxbudget.kafka.healthcheck`)."""

import sys

from ctxbudget.kafka.healthcheck import main

if __name__ == "__main__":
    sys.exit(main())
