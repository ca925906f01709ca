"""streamscore producer side: send scoring requests, await or collect replies."""

from producer.aio import AsyncScoringClient
from producer.client import ClientRequest, ReplyTimeout, ScoreResult, ScoringClient

__all__ = ["AsyncScoringClient", "ClientRequest", "ReplyTimeout", "ScoreResult", "ScoringClient"]
