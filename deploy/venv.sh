#!/usr/bin/env bash
# Creates .venv/ for this checkout, reusing a cached environment for the heavy
# dependencies (torch alone is several GB).
#
# The dependencies live in $STREAMSCORE_CACHE_DIR/venvs/<hash>, keyed by a hash
# of pyproject.toml's dependency lists and the Python version, built once per machine. .venv/ is a
# small environment of its own that sees those packages through a .pth file and
# holds an editable install of this checkout (so the console scripts work).
# Rerunning is cheap: both steps are skipped when already done.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
cache=${STREAMSCORE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/streamscore}

log() { echo "venv: $*" >&2; }

# What to install: pyproject.toml's dependencies and extras, not the project itself.
reqs=$("$python" - "$repo/pyproject.toml" <<'PY'
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["dev"]
                + project["optional-dependencies"]["bench"] + project["optional-dependencies"]["docs"]
                + project["optional-dependencies"]["text"]
                + project["optional-dependencies"]["confluent"]
                + project["optional-dependencies"]["formats"]
                + project["optional-dependencies"]["otel"]
                + project["optional-dependencies"]["ray"]))
PY
)
key=$( { echo "$reqs"; "$python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-16)
deps="$cache/venvs/$key"

# One installer at a time per cache: two at once (two checkouts, two `make` runs) would delete each
# other's half-built environment. The second waits, then finds the first one's complete.
mkdir -p "$cache/venvs"
exec 9>"$cache/venvs/.lock"
if ! flock -n 9; then
    log "another install into $cache/venvs is running: waiting for it"
    flock 9
fi

if [ ! -f "$deps/.complete" ]; then
    log "installing dependencies into $deps (first run on this machine: torch is large, this takes minutes)"
    rm -rf "$deps.partial"
    mkdir -p "$cache/venvs"
    "$python" -m venv "$deps.partial"
    "$deps.partial/bin/python" -m pip install -q --upgrade pip
    echo "$reqs" > "$deps.partial/requirements.txt"
    "$deps.partial/bin/python" -m pip install -q -r "$deps.partial/requirements.txt"
    # Renamed only once complete, so an interrupted install is never mistaken
    # for a good one. Only bin/ scripts keep the old path; we always call
    # bin/python, which is a plain link to the interpreter.
    rm -rf "$deps"
    mv "$deps.partial" "$deps"
    touch "$deps/.complete"
fi
flock -u 9

venv="$repo/.venv"
site_of() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
if [ ! -f "$venv/.deps-$key" ]; then
    log "creating $venv on top of $deps"
    rm -rf "$venv"
    "$python" -m venv --without-pip "$venv"
    site_of "$deps" > "$(site_of "$venv")/streamscore-deps.pth"
    "$venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$repo"
    touch "$venv/.deps-$key"
fi
