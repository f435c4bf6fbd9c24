"""The four wire stages, one module each, named by the stage id on the wire and in traces.

===============  ===================  ======================  ================================
stage id         module               class                   in -> out
===============  ===================  ======================  ================================
``route``        :mod:`.route`        ``QueryRouter``         CandidateBatch -> RoutedBatch
``consolidate``  :mod:`.consolidate`  ``Consolidator``        RoutedBatch -> ConsolidatedBatch
``select``       :mod:`.select`       ``EvidenceSelector``    ConsolidatedBatch -> PackedBatch
``compress``     :mod:`.compress`     ``PackCompressor``      PackedBatch -> Pack
===============  ===================  ======================  ================================

Each is one class: keyword-only configuration in ``__init__`` and one ``run()`` from a frozen
model to the next (compress returns the Pack with its decisions, a
:class:`~ctxbudget.trace.CompressResult`). :class:`ctxbudget.pipeline.Pipeline` composes them
(its ``router``, ``consolidator``, ``selector`` and ``compressor``); the Kafka workers call the
very same objects one hop at a time. A stage imports only core modules, never another stage.
"""
