"""The worker's HTTP surface: Prometheus metrics and the health probes, read from the loop's WorkerStats.

Only this package imports prometheus_client; the loop and the core only count.
"""
