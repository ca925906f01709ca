"""streamscore producer side: send scoring requests, await or collect replies."""

from producer.client import ReplyTimeout, ScoringClient

__all__ = ["ReplyTimeout", "ScoringClient"]
