"""streamscore benchmarks: ``python -m bench`` (``make bench``).

Every figure of one run is measured on the same broker, one after the other,
so that ratios between them hold on a noisy machine:

- the model ceiling: forward passes on ready-made tensors, no Kafka
  (``model_ceiling.py``);
- the Kafka ceiling: a plain kafka-python consume-and-reply loop, no model
  (``kafka_ceiling.py``);
- the naive baseline: one request at a time, decode, model, send, commit
  (``naive.py``);
- streamscore over a grid of batch sizes and wait limits, closed-loop
  throughput and open-loop latency (``grid.py``, ``openloop.py``).

``suite.py`` runs them per workload (``workloads.py``), ``targets.py`` checks
the figures' ratios against ``targets.toml``, ``report.py`` and ``plots.py`` write
``bench/results/``.
"""
