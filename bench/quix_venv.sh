#!/usr/bin/env bash
# Creates .venv-quix/: Quix Streams in an environment of its own, for the bench's Quix contender
# (bench/quix_app.py). Quix Streams pins an older confluent-kafka than the worker's, so it cannot share
# .venv/; everything else it needs (torch, redis, the worker's own code) it sees through a .pth file
# pointing at the packages .venv/ sees and at this checkout, after its own. Rerunning is cheap.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
quix="$repo/.venv-quix"
requirements="$repo/bench/quix-requirements.txt"
stamp="$quix/.requirements-$(sha256sum "$requirements" | cut -c1-16)"

[ -x "$repo/.venv/bin/python" ] || { echo "quix-venv: run 'make venv' first" >&2; exit 2; }
if [ ! -f "$stamp" ]; then
    echo "quix-venv: creating $quix (Quix Streams and its confluent-kafka; about a minute)" >&2
    rm -rf "$quix"
    "$repo/.venv/bin/python" -m venv "$quix"  # on the same interpreter as .venv/
    "$quix/bin/python" -m pip install -q -r "$requirements"
    site=$("$quix/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    { cat "$repo/.venv/lib/python"*/site-packages/streamscore-deps.pth; echo "$repo"; } > "$site/streamscore.pth"
    touch "$stamp"
fi
