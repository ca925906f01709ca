"""Each exactly-once worker's own transactional id (worker/core/transactional_ids.py): the default names the
host, and workers on one host take slots held by lock files; a given id another process holds stops the start."""

import fcntl
import hashlib
import os
import socket
import tempfile

import pytest

from worker.app import held_transactional_id
from worker.core import transactional_ids
from worker.core.errors import ConfigError
from worker.core.settings import Settings
from worker.core.transactional_ids import hold, own_transactional_id


@pytest.fixture(autouse=True)
def _fresh_locks(monkeypatch):
    """Each test starts holding nothing, and lets go of what it took."""
    monkeypatch.setattr(transactional_ids, "_HELD", {})
    yield
    for descriptor in transactional_ids._HELD.values():
        os.close(descriptor)


def held_elsewhere(directory, transactional_id):
    """Lock ``transactional_id``'s file as another process would (a second open file description conflicts
    with this process's own, as another process's does)."""
    name = f"streamscore-txn-{hashlib.sha256(transactional_id.encode()).hexdigest()[:20]}.lock"
    descriptor = os.open(directory / name, os.O_RDWR | os.O_CREAT)
    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return descriptor


def test_the_default_names_the_group_the_client_and_the_host():
    assert own_transactional_id("g", "c", host="pod-7") == "g.c.pod-7"
    assert own_transactional_id("g", "c") == f"g.c.{socket.gethostname()}"


def test_a_free_id_is_taken_as_it_is_and_taken_again_by_a_worker_built_later_in_the_same_process(tmp_path):
    assert hold("g.c.h", given=False, directory=tmp_path) == "g.c.h"
    assert hold("g.c.h", given=False, directory=tmp_path) == "g.c.h"  # a restart in-process keeps its id
    assert hold("mine", given=True, directory=tmp_path) == "mine"


def test_the_next_default_worker_on_a_host_takes_the_next_free_slot(tmp_path):
    others = [held_elsewhere(tmp_path, "g.c.h"), held_elsewhere(tmp_path, "g.c.h.1")]
    try:
        assert hold("g.c.h", given=False, directory=tmp_path) == "g.c.h.2"
    finally:
        for descriptor in others:
            os.close(descriptor)


def test_a_slot_let_go_by_its_process_is_free_again(tmp_path):
    other = held_elsewhere(tmp_path, "g.c.h")
    os.close(other)  # that worker exited (killed or not: the kernel lets go of its lock)
    assert hold("g.c.h", given=False, directory=tmp_path) == "g.c.h"


def left_by(directory, transactional_id, content):
    """The lock file of ``transactional_id`` as a process that exited left it: ``content`` its pid (killed), or
    the stopped mark."""
    name = f"streamscore-txn-{hashlib.sha256(transactional_id.encode()).hexdigest()[:20]}.lock"
    (directory / name).write_bytes(content)


def test_a_killed_workers_slot_is_taken_before_a_lower_one_a_clean_stop_freed(tmp_path):
    """A rolling change: the worker of the id stopped cleanly, the one of .1 was killed with a transaction open."""
    left_by(tmp_path, "g.c.h", transactional_ids.STOPPED)
    left_by(tmp_path, "g.c.h.1", b"4242\n")
    assert hold("g.c.h", given=False, directory=tmp_path) == "g.c.h.1"


def test_with_no_killed_workers_slot_free_the_lowest_free_one_is_taken(tmp_path):
    left_by(tmp_path, "g.c.h.1", transactional_ids.STOPPED)
    other = held_elsewhere(tmp_path, "g.c.h.2")  # a killed worker's slot, but its worker runs again
    try:
        assert hold("g.c.h", given=False, directory=tmp_path) == "g.c.h"
    finally:
        os.close(other)


def test_a_worker_that_stopped_cleanly_marks_its_slot(tmp_path):
    taken = hold("g.c.h", given=False, directory=tmp_path)
    (path,) = transactional_ids._HELD
    assert path.read_bytes() == f"{os.getpid()}\n".encode() and taken == "g.c.h"
    transactional_ids.stopped_cleanly()
    assert path.read_bytes() == transactional_ids.STOPPED


def test_a_given_id_another_worker_holds_stops_the_start_naming_the_setting(tmp_path):
    other = held_elsewhere(tmp_path, "shared")
    try:
        with pytest.raises(ConfigError, match="--transactional-id"):
            hold("shared", given=True, directory=tmp_path)
    finally:
        os.close(other)


def test_every_slot_held_stops_the_start(tmp_path):
    others = [held_elsewhere(tmp_path, "g.c.h"), held_elsewhere(tmp_path, "g.c.h.1")]
    try:
        with pytest.raises(ConfigError, match="2 workers on this host"):
            hold("g.c.h", given=False, directory=tmp_path, slots=2)
    finally:
        for descriptor in others:
            os.close(descriptor)


def test_only_an_id_the_user_set_counts_as_given():
    default = Settings.from_values(requests_topic="req", model="churn", delivery="exactly-once",
                                   client_id="w").with_derived_defaults()
    assert default.transactional_id == f"streamscore-churn.w.{socket.gethostname()}"
    assert default.delivery.transactional_id == ""
    given = Settings.from_values(requests_topic="req", model="churn", delivery="exactly-once", client_id="w",
                                 transactional_id="mine").with_derived_defaults()
    assert (given.transactional_id, given.delivery.transactional_id) == ("mine", "mine")
    # Given in the default's own form, it is still given: held as it is, never renamed to a free slot.
    own_form = Settings.from_values(requests_topic="req", model="churn", delivery="exactly-once", client_id="w",
                                    transactional_id=default.transactional_id).with_derived_defaults()
    assert own_form.delivery.transactional_id == default.transactional_id


def test_an_id_given_in_the_default_form_and_held_elsewhere_stops_the_start(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    default = Settings.from_values(requests_topic="req", model="churn", delivery="exactly-once",
                                   client_id="w").with_derived_defaults()
    descriptor = held_elsewhere(tmp_path, default.transactional_id)
    try:
        assert held_transactional_id(default) == f"{default.transactional_id}.1"
        with pytest.raises(ConfigError, match="another worker on this host runs with transactional_id"):
            held_transactional_id(default.replace(transactional_id=default.transactional_id))
    finally:
        os.close(descriptor)
