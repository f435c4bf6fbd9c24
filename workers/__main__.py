"""``python -m workers STAGE...``: run the stage workers, as ``ctxbudget worker STAGE...``."""

import sys

from ctxbudget.cli import main

if __name__ == "__main__":
    main(["worker", *sys.argv[1:]], prog_name="python -m workers")
