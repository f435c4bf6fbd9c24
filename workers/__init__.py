"""Kafka plumbing and the thin faust-streaming workers around the pure ``ctxbudget`` core."""

from ctxbudget.blas import limit_blas_threads

limit_blas_threads()  # one BLAS thread per worker process unless configured
