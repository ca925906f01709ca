"""The surface's settings: --http-port (per child with --processes) and --liveness-timeout-s."""

import argparse
import sys

import pytest

from worker.app import check_poll_interval
from worker.core.errors import ConfigError
from worker.core.settings import Settings, add_flags
from worker.supervisor import child_commands


def parse(argv):
    parser = argparse.ArgumentParser()
    add_flags(parser)
    return parser.parse_args(argv)


def test_http_is_off_by_default_and_set_by_env_or_flag():
    assert Settings.from_sources(None, {}).operations.http_port == 0
    assert Settings.from_sources(None, {"STREAMSCORE_HTTP_PORT": "9100"}).operations.http_port == 9100
    flagged = Settings.from_sources(parse(["--http-port", "9200"]), {"STREAMSCORE_HTTP_PORT": "9100"})
    assert flagged.operations.http_port == 9200
    assert Settings.from_sources(None, {}).operations.liveness_timeout_s == 60.0


@pytest.mark.parametrize("env, named", [
    ({"STREAMSCORE_HTTP_PORT": "-1"},
     r"http_port \(--http-port, STREAMSCORE_HTTP_PORT\) must be 0 .off. or a TCP port up to 65535, got -1"),
    ({"STREAMSCORE_HTTP_PORT": "65536"}, "http_port .* must be 0 .off. or a TCP port up to 65535, got 65536"),
    ({"STREAMSCORE_SHUTDOWN_TIMEOUT_S": "0"},
     r"shutdown_timeout_s \(--shutdown-timeout-s, STREAMSCORE_SHUTDOWN_TIMEOUT_S\) must be above 0, got 0.0"),
    ({"STREAMSCORE_HTTP_PORT": "http"}, "STREAMSCORE_HTTP_PORT='http' is not a valid int"),
    ({"STREAMSCORE_HTTP_PORT": "65535", "STREAMSCORE_PROCESSES": "2"}, "choose http_port <= 65534"),
    ({"STREAMSCORE_LIVENESS_TIMEOUT_S": "0"},
     r"liveness_timeout_s \(--liveness-timeout-s, STREAMSCORE_LIVENESS_TIMEOUT_S\) must be above 0"),
])
def test_bad_surface_settings_name_the_setting(env, named):
    with pytest.raises(ConfigError, match=named):
        Settings.from_sources(None, env)


def test_the_highest_port_serves_one_process():
    assert Settings.from_sources(None, {"STREAMSCORE_HTTP_PORT": "65535"}).operations.http_port == 65535


def test_with_processes_child_i_serves_on_http_port_plus_i():
    commands = child_commands(["--http-port", "9100"], 3, "w", "cpu", 0, http_port=9100)
    ports = []
    for command in commands:
        assert command[:4] == [sys.executable, "-m", "worker", "run"]
        ports.append(parse(command[4:]).http_port)  # the last --http-port wins, as in the child
    assert ports == [9100, 9101, 9102]


def test_without_http_port_children_get_no_port():
    assert all("--http-port" not in command for command in child_commands([], 2, "w", "cpu", 0))


def test_a_poll_worth_of_batches_must_fit_in_half_the_liveness_timeout_when_serving():
    env = {"STREAMSCORE_MAX_POLL_RECORDS": "500", "STREAMSCORE_MAX_BATCH_SIZE": "50",
           "STREAMSCORE_LIVENESS_TIMEOUT_S": "10"}
    plain = Settings.from_sources(None, env)
    check_poll_interval(plain, plain.batching, batch_s=0.6)  # 6 s of batches, but no HTTP: no probe
    serving = Settings.from_sources(None, {**env, "STREAMSCORE_HTTP_PORT": "9100"})
    check_poll_interval(serving, serving.batching, batch_s=0.4)  # 4 s: within half of 10 s
    with pytest.raises(ConfigError, match="raise --liveness-timeout-s"):
        check_poll_interval(serving, serving.batching, batch_s=0.6)


def test_each_child_of_a_static_member_takes_its_own_instance_id():
    commands = child_commands([], 2, "w", "cpu", 0, group_instance_id="pod-7")
    assert [command[command.index("--group-instance-id") + 1] for command in commands] == ["pod-7-0", "pod-7-1"]
    assert all("--group-instance-id" not in command for command in child_commands([], 2, "w", "cpu", 0))
