"""``python -m bench.dedup_calls``: the worker's CPU a request for its two Redis calls, claim and done marks.

A poll's requests are claimed in one script call and their done marks written
in another (worker/dedup/redis_store.py). This times both on a real Redis
(``REDIS_URL``, e.g. ``make up``) from the worker's side: the client process's
CPU (user + system) a request, building the call's arguments and reading its
answer included, for batches of ``--batch`` requests whose replies are the
size of a churn reply. The server's own time is not counted: it is another
process, as it is in ``make bench-cpu``.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import uuid
from collections.abc import Callable

from worker.core.messages import Position, Request
from worker.dedup.redis_store import RedisDedupStore

REPLY = b'{"id":"%s","status":"ok","outputs":[0.1234567,0.87654321],"model":"churn","model_version":"1"}'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dedup_calls", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=500, help="requests a call (default 500, a poll's most)")
    parser.add_argument("--calls", type=int, default=1000, help="calls of each kind (default 1,000)")
    args = parser.parse_args(argv)
    url = os.environ.get("REDIS_URL")
    if not url:
        print("error: REDIS_URL must be set (`make up` starts a local Redis)", file=sys.stderr)
        return 2
    namespace = f"bench-dedup-{uuid.uuid4().hex[:8]}"
    store = RedisDedupStore(url, namespace, ttl_s=600, lease_ms=600_000)
    batches = [[Request(f"{call}-{i}", None, Position("requests", 0, call * args.batch + i)) for i in range(args.batch)]
               for call in range(args.calls)]
    claim_s = _cpu_s(lambda: [store.claim(batch) for batch in batches])
    done = [([r.id for r in batch], [REPLY % r.id.encode() for r in batch]) for batch in batches]

    def complete_all() -> None:
        for ids, replies in done:
            store.complete(ids, replies)

    complete_s = _cpu_s(complete_all)
    store.close()
    requests = args.batch * args.calls
    print(f"{args.calls} calls of {args.batch} requests each, client CPU a request:")
    print(f"  claim        {claim_s / requests * 1e6:.2f} µs")
    print(f"  done marks   {complete_s / requests * 1e6:.2f} µs")
    return 0


def _cpu_s(work: Callable[[], object]) -> float:
    before = resource.getrusage(resource.RUSAGE_SELF)
    work()
    after = resource.getrusage(resource.RUSAGE_SELF)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


if __name__ == "__main__":
    raise SystemExit(main())
