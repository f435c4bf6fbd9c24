"""`python -m ctxbudget` is the `ctxbudget` command."""

from ctxbudget.cli import main

main()
