"""The deployable edge: what a container or a process supervisor runs.

The workers' code is :mod:`ctxbudget.kafka`; this folder holds only entry points that run it
(``python -m workers STAGE...``, ``python -m workers.healthcheck``). It is not in the wheel,
which installs ``ctxbudget`` alone; the worker image copies it beside the installed package.
"""
