"""The HTTP surface on a loopback port: each path, its status code, content type and body."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import orjson
import pytest

from tests.fakes import FakeClock
from worker.core.errors import ConfigError
from worker.core.stats import ServedModel, WorkerStats
from worker.surface.http import HttpSurface


def get(surface: HttpSurface, path: str, accept: str | None = None) -> tuple[int, str, bytes]:
    request = urllib.request.Request(f"http://127.0.0.1:{surface.port}{path}",
                                     headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


@pytest.fixture
def served() -> Iterator[tuple[HttpSurface, WorkerStats, FakeClock, list[bool]]]:
    stats, clock, stopping = WorkerStats(), FakeClock(), [False]
    surface = HttpSurface(0, stats, clock, 60.0, lambda: stopping[0], host="127.0.0.1")
    surface.start()
    yield surface, stats, clock, stopping
    surface.close()


def test_metrics_in_the_prometheus_text_format_or_openmetrics_on_request(served):
    surface, stats, _, _ = served
    stats.consumed = 3
    status, content_type, body = get(surface, "/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    assert b"\nstreamscore_requests_total 3.0\n" in body
    status, content_type, body = get(surface, "/metrics", accept="application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text") and body.endswith(b"# EOF\n")


def test_probes_follow_the_stats_the_clock_and_the_stop(served):
    surface, stats, clock, stopping = served
    assert get(surface, "/healthz")[:2] == (200, "application/json")
    status, _, body = get(surface, "/readyz")
    assert status == 503 and orjson.loads(body)["status"] == "not_ready"
    stats.serve((ServedModel("churn", "churn", "v1", "cpu", 0.5),), [("churn", "v1")])
    stats.last_iteration = clock.monotonic()
    stats.record_generation(1)
    assert get(surface, "/readyz")[0] == 200
    clock.advance(61)
    status, _, body = get(surface, "/healthz")
    assert status == 503 and orjson.loads(body)["status"] == "stuck"
    assert get(surface, "/readyz")[0] == 503
    stats.last_iteration = clock.monotonic()
    stopping[0] = True
    status, _, body = get(surface, "/readyz")
    assert status == 503 and orjson.loads(body)["reasons"] == ["stopping: finishing the work in hand"]
    assert get(surface, "/healthz")[0] == 200


def test_an_unknown_path_is_404_and_lists_the_paths(served):
    status, _, body = get(served[0], "/metricz")
    assert status == 404 and orjson.loads(body)["paths"] == ["/metrics", "/healthz", "/readyz"]


def test_a_port_in_use_is_a_config_error_naming_the_setting():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        surface = HttpSurface(taken.getsockname()[1], WorkerStats(), FakeClock(), 60.0, host="127.0.0.1")
        with pytest.raises(ConfigError, match="--http-port"):
            surface.start()


def test_close_releases_the_port():
    surface = HttpSurface(0, WorkerStats(), FakeClock(), 60.0, host="127.0.0.1")
    surface.start()
    port = surface.port
    surface.close()
    again = HttpSurface(port, WorkerStats(), FakeClock(), 60.0, host="127.0.0.1")
    again.start()
    again.close()


def test_by_default_the_probes_answer_on_ipv6_and_ipv4_alike():
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    surface = HttpSurface(0, WorkerStats(), FakeClock(), 60.0)
    surface.start()
    try:
        for host in ("[::1]", "127.0.0.1"):
            with urllib.request.urlopen(f"http://{host}:{surface.port}/healthz", timeout=10) as response:
                assert response.status == 200
    finally:
        surface.close()


def test_head_answers_what_get_would_without_a_body(served):
    request = urllib.request.Request(f"http://127.0.0.1:{served[0].port}/healthz", method="HEAD")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert (response.status, response.headers["Content-Type"], response.read()) == (200, "application/json", b"")
        assert int(response.headers["Content-Length"]) > 0
