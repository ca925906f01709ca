"""From records to pairs: a shadow topic's (or a JSONL file's) records, or two reply topics joined by id.

Pure but for reading the file: records come in as ``Record`` values (from a
topic: worker/compare/topics.py), pairs go out lazily, and what was skipped
is counted in a ReadTally. The first record of an id is the one compared;
later ones count as repeated.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from worker.compare.pairs import Answer, InvalidPair, Pair, ReadTally, answer_from_reply, joined, pair_from_shadow


@dataclass(frozen=True)
class Record:
    where: str  # for messages: "topic[partition]@offset", "file:line"
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


def file_records(path: Path, tally: ReadTally, max_records: int | None = None) -> Iterator[Record]:
    """The non-blank lines of a JSONL file, as records without a key; the first ``max_records`` of them.

    Raises OSError when the file cannot be read.
    """
    read = 0
    with path.open("rb") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            if max_records is not None and read >= max_records:
                tally.stop(f"--max-records {max_records} reached")
                return
            read += 1
            tally.records += 1
            yield Record(f"{path}:{number}", None, line)


def shadow_pairs(records: Iterable[Record], tally: ReadTally) -> Iterator[Pair]:
    """A pair per shadow record, the first of each id; the others are counted in ``tally``."""
    seen: set[str] = set()
    for record in records:
        try:
            pair = pair_from_shadow(record.value or b"", record.key)
        except InvalidPair as error:
            tally.skip(record.where, error)
            continue
        if pair.id in seen:
            tally.repeated += 1
            continue
        seen.add(pair.id)
        if _one_version(pair, tally):
            continue
        yield pair


def joined_pairs(live: Iterable[Record], candidate: Iterable[Record], tally: ReadTally) -> Iterator[Pair]:
    """A pair per id answered on both sides, read from two reply topics: every live reply is read (and held)
    first, then the candidate replies are matched as they come. Ids of one side only are counted in ``tally``."""
    waiting: dict[str, Answer] = {}
    for answer in _answers(live, tally):
        if answer.id in waiting:
            tally.repeated += 1
        else:
            waiting[answer.id] = answer
    matched: set[str] = set()
    unmatched: set[str] = set()
    for answer in _answers(candidate, tally):
        if answer.id in waiting:
            matched.add(answer.id)
            pair = joined(waiting.pop(answer.id), answer)
            if not _one_version(pair, tally):
                yield pair
        elif answer.id in matched or answer.id in unmatched:
            tally.repeated += 1
        else:
            unmatched.add(answer.id)
    tally.unmatched("live", waiting)
    tally.unmatched("candidate", unmatched)


def _answers(records: Iterable[Record], tally: ReadTally) -> Iterator[Answer]:
    for record in records:
        try:
            yield answer_from_reply(record.value, record.headers)
        except InvalidPair as error:
            tally.skip(record.where, error)


def _one_version(pair: Pair, tally: ReadTally) -> bool:
    """Whether both sides of ``pair`` are one version (counted in ``tally``): a shadow left running after its
    candidate was promoted compares the version with itself, which would only dilute the comparison."""
    if pair.live.version is None or pair.live.version != pair.candidate.version:
        return False
    tally.same_version += 1
    return True
