"""streamscore worker: consume scoring requests from Kafka, micro-batch them,
run a PyTorch model, publish one reply per request, deduplicate with Redis."""

__version__ = "0.1.0"
