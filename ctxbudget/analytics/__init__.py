"""The audit stream for analysts: trace events and packs in DuckDB, a report, explanations.

This package sits at the edge like ``ctxbudget.cli``: it reads files, Kafka (through
``ctxbudget.kafka``) and DuckDB. The pure core never imports it. Modules:

- ``tables``: the DuckDB tables (one column list feeds both the DDL and the loader);
- ``views``: the SQL views behind the report, documented in ``ops/analytics.md``;
- ``records``: raw bytes to table rows, or a reject with the reason;
- ``store``: one transaction per batch of rows, consumed offsets and rejects;
- ``sink``: the loop that feeds the store from files, or from Kafka through
  ``ctxbudget.kafka.io.KafkaSource`` (the package itself never imports a Kafka client);
- ``figures`` / ``report``: the HTML report; ``explain``: one request, candidate by candidate.
"""
