"""Valid random ``inputs`` for the built-in models, without loading them (no torch).

What synthetic sends need (``python -m producer send --synthetic``, the demo,
the benchmarks): a client never loads torch. The built-in models' own
``sample_inputs`` call the same functions, so a seeded stream of samples is
the same on both sides. A user's model makes its samples from its spec
(worker/models/spec.py), which needs the model loaded.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from worker.core.errors import ConfigError

CHURN_FEATURES = 16  # the churn model's input width (worker/models/churn.py)


def churn_inputs(rng: random.Random) -> list[float]:
    """A vector of CHURN_FEATURES numbers in [0, 1], rounded to 4 decimals."""
    return [round(rng.random(), 4) for _ in range(CHURN_FEATURES)]


def text_inputs(rng: random.Random) -> str:
    """A sentence or two of 4 to 40 words (the minilm model's inputs)."""
    return random_text(rng, rng.randint(4, 40))


SAMPLERS: dict[str, Callable[[random.Random], Any]] = {"churn": churn_inputs, "minilm": text_inputs}


def sampler(model: str) -> Callable[[random.Random], Any]:
    """The sample maker of a built-in model; raises ConfigError for any other name."""
    try:
        return SAMPLERS[model]
    except KeyError:
        raise ConfigError(f"no synthetic inputs for model {model!r}: only for the built-in models "
                          f"({', '.join(SAMPLERS)}); send a file of requests for another model") from None


_SUBJECTS = (
    "the customer", "our team", "a small bakery", "the new manager", "my neighbour", "the city council",
    "a young engineer", "the old library", "this quarterly report", "the delivery driver", "her brother",
    "the support agent", "a local farmer", "the research group", "the train", "every student",
)
_VERBS = (
    "ordered", "reviewed", "fixed", "cancelled", "painted", "shipped", "described", "opened", "found",
    "recommended", "returned", "closed", "updated", "explained", "planned", "visited",
)
_OBJECTS = (
    "a blue bicycle", "the late invoice", "two fresh loaves of bread", "the broken printer",
    "a long letter", "the summer schedule", "an expensive subscription", "the garden fence",
    "a new phone plan", "the missing parcel", "the annual budget", "a quiet hotel room",
    "the software update", "a cup of coffee", "the football match", "three old maps",
)
_TAILS = (
    "on Monday morning", "after a long wait", "without any problems", "before the holidays",
    "in the rain", "for the second time", "at the end of the month", "with great care",
    "near the station", "because the price went up", "during the meeting", "as soon as possible",
)
_JOINS = ("and", "but", "so", "while", "because", "although")


def random_text(rng: random.Random, words: int) -> str:
    """A plausible English sentence (or two) of about ``words`` words, from fixed phrase lists."""
    clauses: list[str] = []
    count = 0
    while count < words:
        clause = f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
        if rng.random() < 0.6:
            clause += f" {rng.choice(_TAILS)}"
        if clauses:
            clause = f"{rng.choice(_JOINS)} {clause}" if rng.random() < 0.7 else f". {clause[0].upper()}{clause[1:]}"
        clauses.append(clause)
        count += len(clause.split())
    text = " ".join(clauses).replace(" . ", ". ")
    return f"{text[0].upper()}{text[1:]}."
