"""Counters of what the worker did with every record it consumed."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class WorkerStats:
    """Every consumed record ends as exactly one of: reply (ok, error, expired),
    dead letter, duplicate, or handed over (its partition went to another
    worker, which answers it). Not thread-safe."""

    consumed: int = 0
    replied_ok: int = 0
    replied_error: int = 0
    replied_expired: int = 0
    dead_lettered: int = 0
    duplicates: int = 0
    handed_over: int = 0
    aborted_transactions: int = 0  # exactly-once: each one's replies were discarded and their records consumed again
    batches: int = 0
    scored: int = 0
    compute_s: float = 0.0
    batch_sizes: Counter[int] = field(default_factory=Counter)
    error_codes: Counter[str] = field(default_factory=Counter)

    def record_batch(self, size: int, compute_s: float) -> None:
        self.batches += 1
        self.scored += size
        self.compute_s += compute_s
        self.batch_sizes[size] += 1

    def snapshot(self) -> dict[str, Any]:
        return {
            "consumed": self.consumed,
            "replied_ok": self.replied_ok,
            "replied_error": self.replied_error,
            "replied_expired": self.replied_expired,
            "dead_lettered": self.dead_lettered,
            "duplicates": self.duplicates,
            "handed_over": self.handed_over,
            "aborted_transactions": self.aborted_transactions,
            "batches": self.batches,
            "mean_batch_size": round(self.scored / self.batches, 2) if self.batches else 0.0,
            "compute_s": round(self.compute_s, 3),
            "error_codes": dict(self.error_codes),
        }
