"""Chaos suite: the worker against real Kafka and Redis while things break.

Each scenario keeps a producer sending uniquely-id'd requests, breaks
something (kills workers, scales the group step by step, stops the broker or Redis, stalls
a batch past max.poll.interval.ms), then lets the workers finish and counts
what actually landed on the reply topic: requests sent, request IDs answered,
duplicate replies, IDs scored twice, and lost IDs.

    python -m tests.chaos --size small|full [--only a,b] [--out DIR]   # the tables
    python -m tests.chaos.scaling [--runs 5]                            # h, every protocol
    pytest tests/chaos                                                  # the small size, asserted

Modules: ``load`` (the producer), ``fleet`` (worker processes and their
supervisor), ``local_services`` (stopping and starting the broker and Redis),
``tally`` (counting replies), ``run`` (one scenario from start to tally),
``scenarios`` (what each scenario breaks and promises), ``steps`` (each
step's longest gap and latency, from a reader following the replies),
``report`` (tables), ``slow_model`` (a model that stalls on demand),
``scaling`` (scenario h on every client, group protocol and delivery).
"""
