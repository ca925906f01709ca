"""The README's Quick start, run verbatim in a fresh clone: it must score its request and print an ok reply."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess

import orjson
import pytest

from tests.integration.kit import REPO

SERVICES = REPO / "deploy" / "local" / "services.sh"


def quick_start_block() -> str:
    """The first ``sh`` block under the README's "## Quick start" heading, as a newcomer copies it."""
    section = (REPO / "README.md").read_text(encoding="utf-8").split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"^```sh\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert found, "the Quick start has no ```sh block"
    return found.group(1)


def test_the_quick_start_block_is_what_a_newcomer_runs():
    block = quick_start_block()
    assert block.splitlines()[0].startswith("make up")  # it starts from nothing but the clone
    assert "python -m producer score" in block


@pytest.mark.timeout(900)
def test_the_quick_start_run_verbatim_in_a_fresh_clone_prints_an_ok_reply(tmp_path):
    status = subprocess.run([str(SERVICES), "status"], capture_output=True, text=True, check=False).stdout
    if status.count("running (pid") != 3:
        pytest.skip("this session's services are not the local ones: the Quick start's `make up` would start a "
                    "second set on the same ports")
    clone = tmp_path / "streamscore"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=120)
    # The clone's `make up` finds the services this session runs (their state folder) and only prints their
    # addresses; its .venv/ is built on the machine's cached dependencies, as on any second checkout.
    env = {key: value for key, value in os.environ.items()
           if key not in ("KAFKA_BOOTSTRAP_SERVERS", "REDIS_URL", "SCHEMA_REGISTRY_URL", "VIRTUAL_ENV", "PYTHONPATH")}
    env["STREAMSCORE_STATE_DIR"] = os.environ.get("STREAMSCORE_STATE_DIR") or str(REPO / ".local-services")
    # Files, not pipes: the worker the block leaves running in the background holds them open.
    out_path, err_path = tmp_path / "stdout", tmp_path / "stderr"
    with out_path.open("w") as out_file, err_path.open("w") as err_file:
        shell = subprocess.Popen(["bash", "-c", quick_start_block()], cwd=clone, env=env, stdout=out_file,
                                 stderr=err_file, start_new_session=True)
        try:
            shell.wait(timeout=600)
        finally:
            # The block leaves its worker running, as a newcomer's terminal would: stop it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell.pid, signal.SIGTERM)
    out, err = out_path.read_text(), err_path.read_text()
    assert shell.returncode == 0, f"the Quick start failed (exit {shell.returncode}):\n{out}\n{err[-4000:]}"
    reply = orjson.loads(out[out.index("{"):])
    assert (reply["status"], reply["model"]) == ("ok", "churn"), reply
    assert 0.0 <= reply["outputs"]["churn_probability"] <= 1.0
