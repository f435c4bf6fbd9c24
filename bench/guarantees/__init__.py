"""The guarantees against hostile input, measured: ``python -m bench.guarantees fuzz|poison|kill``.

    python -m bench.guarantees fuzz   [--n 2000] [--seed 1] [--policies default@1,lean@1]
    python -m bench.guarantees poison [--seed 1] [--good 200] [--rounds 3] [--work-budget-s 2]
    python -m bench.guarantees kill   [--batches 2000] [--kills 5] [--rate 40] [--poison]
                                      [--kafka 3 [--replicas 3] [--broker-kills 2] [--rolling]]

Exit status 1 when a guarantee did not hold (a leak, a line without exactly one outcome, a
lost request, a dead worker...), else 0.

Each prints a table of figures and, with ``--json-out F``, writes them as JSON.

``fuzz`` (in process, no broker): generated traffic (``ctxbudget.testing.traffic.synthetic`` and,
when the
data folder holds it, ``from_msmarco``) with every candidate's ``tenant_id`` and
``access_label`` redrawn (the principal's, another one, a look-alike such as ``ACME``,
``acme `` or fullwidth, or ``None``), the principal's labels redrawn, and constructed traps
added: a forbidden passage under the chunk id of a permitted one, a permitted copy of a
forbidden passage under another id, a forbidden newer version of a permitted document, a
forbidden chunk overlapping a permitted one's span, a forbidden sibling under the same parent.
Every forbidden candidate carries a marker of its own in each sentence and its title. Each
batch is packed with every policy, then checked: no admitted chunk id belongs only to
forbidden candidates, no marker appears in ``rendered`` (nor anywhere in the Pack),
``evidence_tokens`` is the exact count of ``rendered`` and at most the evidence budget, and
no permitted candidate was dropped in favour of a forbidden one (a side channel). A control
run with authorization switched off (``ctxbudget.stages.route.authorization_problem`` returning
None) shows that the checker does find leaks, so a zero means something.

``poison``: a mixed JSONL file (good batches interleaved with hostile lines of every kind in
:func:`poison_lines`, and one batch per attack of ``tests/data/injection_corpus.jsonl``
embedded beside benign passages) is packed by the ``ctxbudget pack`` console script in a
child process with ``--dead-letter``. Every line must end as exactly one pack (matched by
request id) or one dead letter (matched by line number); the exit status must be 1. Wall
time, the child's peak RSS (its ``VmHWM``) and its RSS after each round of the mix (``--rounds``:
memory must level off) are reported, and each line is timed alone in process against a
per-batch work budget (``--work-budget-s``, 2 s by default: the input limits bound what a
batch may hold, no code bounds its time, so this is the bench's own bound). Which kinds were
packed and which dead-lettered (with the error), and how many injected attacks were admitted,
are tabled; a dead letter of a type other than the refusals (``InputError``, ``LimitError``,
``TokenizerError``) is an unexpected error, listed.

``kill``: a fresh embedded broker, the shipped topics, one worker process per stage (``ctxbudget
worker route|consolidate|select|compress``), batches produced at a fixed rate, and a random
stage worker SIGKILLed ``--kills`` times during the run and restarted. Then every request must
have at least one pack, duplicates must be byte-identical (and equal to the in-process pack),
nothing lost; duplicates, latency, the time to drain and, per kill, when the packs of the
requests sent in the next 2 s were all out are reported. A worker that exits on its own is
recorded and restarted, as a supervisor would, up to 5 times per stage (then it is left down:
a crash loop). With ``--poison`` the poison lines of ``poison`` (and records a file cannot
hold: a null value, good batches with no key or a non-UTF-8 key) go on the candidates topic
too, and each must end as exactly one pack or one dead letter (identical repeats allowed
after a kill), with every worker alive at the end.

``kill --kafka 3``: the same on a real Apache Kafka cluster of 3 loopback nodes
(:mod:`ctxbudget.kafka.kafka_cluster`; replication factor 3, ``min.insync.replicas`` 2, acks=all,
SASL/SCRAM, ACLs from :mod:`ctxbudget.kafka.acls` applied, each stage worker connecting as its own
principal). ``--replicas 3`` runs a consumer group of 3 processes per stage (the worker
SIGKILLs pick among them); ``--broker-kills N`` SIGKILLs the node leading partition 0 of the
candidates topic, then of the packs topic, in turn, and starts it again after
``--broker-restart-delay-s``; ``--rolling`` then stops (SIGTERM) and restarts each node in
turn, waiting for every replica to be back in sync before the next. A record the bench's
producer could not get acknowledged is sent again (counted); a request is lost when the
broker acknowledged it and no pack came.
"""
