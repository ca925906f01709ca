"""streamscore producer side: send scoring requests, await or collect replies."""

from producer.aio import AsyncScoringClient
from producer.client import ClientRequest, ReplyTimeout, ScoreResult, ScoringClient
from worker.core.security import KafkaSecurity

__all__ = ["AsyncScoringClient", "ClientRequest", "KafkaSecurity", "ReplyTimeout", "ScoreResult", "ScoringClient"]
