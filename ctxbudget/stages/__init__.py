"""The four wire stages, one module each, named by the stage id on the wire and in traces.

=============  =====================================  =========================================
stage id       module                                 in -> out
=============  =====================================  =========================================
``route``      :mod:`ctxbudget.stages.route`          CandidateBatch -> RoutedBatch
``consolidate``:mod:`ctxbudget.stages.consolidate`    RoutedBatch -> ConsolidatedBatch
``select``     :mod:`ctxbudget.stages.select`         ConsolidatedBatch -> PackedBatch
``compress``   :mod:`ctxbudget.stages.compress`       PackedBatch -> Pack
=============  =====================================  =========================================

Each is one class: keyword-only configuration in ``__init__`` and one ``run()`` from a frozen
model to the next. :class:`ctxbudget.pipeline.Pipeline` composes them; the Kafka workers call
the very same objects one hop at a time.
"""
