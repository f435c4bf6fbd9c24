"""Kafka plumbing and the thin faust-streaming workers around the pure ``ctxbudget`` core."""
