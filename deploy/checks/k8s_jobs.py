"""Kubernetes Jobs: a Job runs score-file; its arguments are parsed by score-file's own parser, and the Job's
shards, retries and volumes checked against them.

What the API server would refuse and no schema holds (podFailurePolicy without
restartPolicy Never, backoffLimitPerIndex without Indexed completions), and
what it would accept but get wrong: an Indexed Job whose pods do not each
score their own shard (--shard $(JOB_COMPLETION_INDEX)/N, N = completions),
a --shard naming $(JOB_COMPLETION_INDEX) in a Job that is not Indexed (where
nothing sets it), an input on no volume, an output on a volume that is read-only, that vanishes
with the pod (an emptyDir), that is inside the input, or that one node alone
may mount while pods run on several.
"""

from __future__ import annotations

import argparse
from pathlib import PurePosixPath
from typing import Any, NoReturn

from checks.common import Problems
from worker.core.errors import ConfigError
from worker.jobs.shards import parse_shard
from worker.score_file_command import add_score_file_parser

INDEX = "$(JOB_COMPLETION_INDEX)"  # the Job controller sets it in each pod of an Indexed Job
MANY_NODES = {"ReadWriteMany", "ReadOnlyMany"}


class _Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse, raising where the command would print its usage and exit 2."""

    def error(self, message: str) -> NoReturn:
        raise _Refused(message)


def score_file_args(container: dict[str, Any], where: str, problems: Problems) -> argparse.Namespace | None:
    """The container's arguments as ``python -m worker score-file`` reads them; None (a problem) if it runs
    another command or would refuse them."""
    args = [str(arg) for arg in container.get("args", [])]
    if container.get("command") or not args or args[0] != "score-file":
        problems.append(f"{where}: a Job runs the image's `python -m worker score-file ...` (args starting with "
                        f"score-file, no command), not {container.get('command', [])} {args}")
        return None
    parser = _Parser(prog="python -m worker", add_help=False)
    add_score_file_parser(parser.add_subparsers(dest="command"))
    try:
        return parser.parse_args(args)
    except _Refused as exc:
        problems.append(f"{where}: score-file would refuse its arguments: {exc}")
        return None


def check_job(job: dict[str, Any], container: dict[str, Any], args: argparse.Namespace,
              by_kind: dict[tuple[str, str], dict[str, Any]], where: str) -> Problems:
    """The Job's retries, shards and volumes against the score-file command its container runs."""
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    problems: Problems = []
    indexed = spec.get("completionMode") == "Indexed"
    if "podFailurePolicy" in spec and pod.get("restartPolicy") != "Never":
        problems.append(f"{where}: podFailurePolicy needs restartPolicy Never, not {pod.get('restartPolicy')}")
    if "backoffLimitPerIndex" in spec and not indexed:
        problems.append(f"{where}: backoffLimitPerIndex needs completionMode Indexed")
    problems += _check_shards(spec, args.shard, indexed, where)
    problems += _check_volumes(pod, container, args, spec.get("parallelism", 1), by_kind, where)
    return problems


def _check_shards(spec: dict[str, Any], shard: str | None, indexed: bool, where: str) -> Problems:
    completions = spec.get("completions", 1)
    if shard is None:
        return [f"{where}: an Indexed Job whose pods would each score the whole dataset: pass "
                f"--shard {INDEX}/{completions}"] if indexed else []
    index, _, count = shard.partition("/")
    if not indexed:  # one shard (a rerun of it, say) in a Job of its own
        if INDEX in shard:
            return [f"{where}: --shard {shard}: {INDEX} is set in the pods of an Indexed Job only "
                    "(completionMode Indexed)"]
        try:
            parse_shard(shard)
        except ConfigError as exc:
            return [f"{where}: score-file would refuse it: {exc}"]
        return []
    if index != INDEX:
        return [f"{where}: --shard {shard}: the index must be {INDEX}, each pod's own, not {index!r}"]
    try:
        parse_shard(f"0/{count}")
    except ConfigError as exc:
        return [f"{where}: --shard {shard}: {str(exc).partition(': ')[2]}"]
    shards = int(count)
    if shards > completions:
        return [f"{where}: --shard {shard}: {shards} shards but completions {completions}: shards {completions} "
                f"to {shards - 1} would never be scored"]
    if shards < completions:
        return [f"{where}: --shard {shard}: {shards} shards but completions {completions}: the pods of index "
                f"{shards} and above would be refused"]
    return []


def _check_volumes(pod: dict[str, Any], container: dict[str, Any], args: argparse.Namespace, parallelism: int,
                   by_kind: dict[tuple[str, str], dict[str, Any]], where: str) -> Problems:
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    source, target = PurePosixPath(str(args.input)), PurePosixPath(str(args.output))
    problems: Problems = []
    if target == source or source in target.parents:
        problems.append(f"{where}: OUT {target} is inside IN {source}: score-file refuses it")
    for path, what, writes in ((source, "IN", False), (target, "OUT", True)):
        mount = _mount_of(container, path)
        if mount is None:
            problems.append(f"{where}: {what} {path} is on no mounted volume: the image holds no dataset")
            continue
        volume = volumes.get(mount["name"], {})
        if writes and mount.get("readOnly"):
            problems.append(f"{where}: OUT {path} is on the read-only mount {mount['mountPath']}")
        if writes and "emptyDir" in volume:
            problems.append(f"{where}: OUT {path} is on the emptyDir {mount['name']}: the parts would vanish with "
                            "each pod")
        claim = by_kind.get(("PersistentVolumeClaim", volume.get("persistentVolumeClaim", {}).get("claimName", "")))
        modes = set(claim["spec"].get("accessModes", [])) if claim else set()
        if claim and parallelism > 1 and not modes & ({"ReadWriteMany"} if writes else MANY_NODES):
            problems.append(f"{where}: {what} {path} is on PersistentVolumeClaim/{claim['metadata']['name']} "
                            f"({', '.join(sorted(modes))}), which pods on several nodes cannot mount at once "
                            f"(parallelism {parallelism}): it needs {'ReadWriteMany' if writes else 'ReadOnlyMany'}")
    return problems


def _mount_of(container: dict[str, Any], path: PurePosixPath) -> dict[str, Any] | None:
    """The container's mount that holds ``path`` (the deepest), or None."""
    holding = [m for m in container.get("volumeMounts", [])
               if path == PurePosixPath(m["mountPath"]) or PurePosixPath(m["mountPath"]) in path.parents]
    return max(holding, key=lambda m: len(PurePosixPath(m["mountPath"]).parts), default=None)
