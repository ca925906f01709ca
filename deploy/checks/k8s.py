"""Kubernetes: render each kustomization, validate every object (kubernetes-validate, strict; the
ScaledObject against KEDA's CRD schema), and cross-check the objects with each other and the worker's settings."""

from __future__ import annotations

import base64
import copy
import importlib.metadata
import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from checks.common import Problems, worker_settings
from checks.image import default_extras, image_env
from checks.k8s_jobs import check_job, score_file_args
from worker.core.clients import CLIENTS
from worker.core.settings import Settings

# The Kubernetes version the objects are validated against. They use GA APIs
# only (v1, apps/v1, policy/v1), which later versions keep.
KUBERNETES_VERSION = "1.33.0"
KEDA_SCHEMA = Path(__file__).resolve().parent.parent / "schemas" / "keda-scaledobject-v1alpha1.json"
PARTITIONS_ANNOTATION = "streamscore/requests-topic-partitions"
# A Kubernetes resource quantity: a decimal number, then an optional binary (Ki..Ei) or
# decimal (n, u, m, k, M..E) suffix or exponent. The OpenAPI schema accepts any string.
QUANTITY = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?(\d+(\.\d*)?|\.\d+))?")


def check_kustomization(directory: Path, dockerfile: Path, problems: Problems) -> str:
    objects = render(directory, problems)
    for obj in objects:
        where = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        if obj.get("kind") == "ScaledObject":
            problems += [f"{where}: {e}" for e in validate_scaled_object(obj)]
            continue
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            problems.append(f"{where}: {'.'.join(map(str, exc.path)) or '(top)'}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            problems.append(f"{where}: {exc.message}")
    rendered_by = "own render (no kubectl)"
    if shutil.which("kubectl") and not problems:  # a broken render already says so; kubectl would repeat it
        problems += _compare_with_kubectl(directory, objects)
        rendered_by = "render = kubectl kustomize"
    problems += cross_check(objects, image_env(dockerfile), default_extras(dockerfile))
    version = importlib.metadata.version("kubernetes-validate")
    kinds = ", ".join(sorted(o.get("kind", "?") for o in objects))
    return (f"{len(objects)} objects ({kinds}), {rendered_by}: kubernetes-validate {version} strict, "
            f"k8s {KUBERNETES_VERSION}; KEDA CRD schema; cross-checks")


KUSTOMIZATION_KEYS = {"apiVersion", "kind", "resources", "patches", "images", "namespace"}
# Strategic-merge keys of the lists these manifests patch; any other list is replaced whole.
MERGE_KEYS = {"containers": "name", "initContainers": "name", "env": "name", "volumes": "name",
              "volumeMounts": "mountPath", "ports": "containerPort"}


def render(directory: Path, problems: Problems) -> list[dict[str, Any]]:
    """The objects of a kustomization: its resources (files or kustomization folders), patched, images set.

    Only what these manifests use is implemented; any other kustomization field is a problem rather than
    silently ignored.
    """
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
    where = f"{directory.name}/kustomization.yaml"
    if (spec.get("apiVersion"), spec.get("kind")) != ("kustomize.config.k8s.io/v1beta1", "Kustomization"):
        problems.append(f"{where}: not a kustomize.config.k8s.io/v1beta1 Kustomization")
    for key in sorted(set(spec) - KUSTOMIZATION_KEYS):
        problems.append(f"{where}: field {key} is not supported by deploy/check.py (it would go unchecked)")
    objects: list[dict[str, Any]] = []
    for resource in spec.get("resources", []):
        path = (directory / resource).resolve()
        if (path / "kustomization.yaml").is_file():
            objects += render(path, problems)
        elif path.is_file():
            objects += [o for o in yaml.safe_load_all(path.read_text()) if o]
        else:
            problems.append(f"{where}: resource {resource} does not exist")
    for patch in spec.get("patches", []):
        _apply_patch(directory, patch, objects, problems)
    for image in spec.get("images", []):
        if not _set_image(objects, image):
            problems.append(f"{where}: images entry {image.get('name')} matches no container image")
    if "namespace" in spec:
        for obj in objects:
            obj.setdefault("metadata", {})["namespace"] = spec["namespace"]
    return objects


def _apply_patch(directory: Path, patch: dict[str, Any], objects: list[dict[str, Any]], problems: Problems) -> None:
    if "path" not in patch or set(patch) - {"path", "target"}:
        problems.append(f"{directory.name}: patch {patch}: only `path:` strategic-merge patches are supported")
        return
    path = directory / patch["path"]
    if not path.is_file():
        problems.append(f"{directory.name}: patch {patch['path']} does not exist")
        return
    body = yaml.safe_load(path.read_text())
    target = patch.get("target") or {"kind": body.get("kind"), "name": body.get("metadata", {}).get("name")}
    matches = [o for o in objects if o.get("kind") == target.get("kind")
               and o.get("metadata", {}).get("name") == target.get("name")]
    if not matches:
        problems.append(f"{directory.name}: patch {patch['path']} applies to nothing "
                        f"(no {target.get('kind')} named {target.get('name')})")
    for obj in matches:
        merged = strategic_merge(obj, body)
        obj.clear()
        obj.update(merged)


def strategic_merge(base: Any, patch: Any, key: str = "") -> Any:
    """Kubernetes' strategic merge for maps and the keyed lists of MERGE_KEYS; null deletes a key."""
    if isinstance(base, dict) and isinstance(patch, dict):
        merged = copy.deepcopy(base)
        for k, v in patch.items():
            if v is None:
                merged.pop(k, None)
            else:
                merged[k] = strategic_merge(merged[k], v, k) if k in merged else copy.deepcopy(v)
        return merged
    if isinstance(base, list) and isinstance(patch, list) and key in MERGE_KEYS:
        merge_key, merged = MERGE_KEYS[key], copy.deepcopy(base)
        for item in patch:
            same = [i for i, old in enumerate(merged) if old.get(merge_key) == item.get(merge_key)]
            if same:
                merged[same[0]] = strategic_merge(merged[same[0]], item)
            else:
                merged.append(copy.deepcopy(item))
        return merged
    return copy.deepcopy(patch)


def _set_image(objects: list[dict[str, Any]], image: dict[str, str]) -> bool:
    found = False
    for container in _containers(objects):
        name, _, tag = str(container.get("image", "")).partition(":")
        if name == image.get("name"):
            container["image"] = f"{image.get('newName', name)}:{image.get('newTag', tag)}"
            found = True
    return found


def _containers(objects: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for obj in objects:
        pod = obj.get("spec", {}).get("template", {}).get("spec", {})
        yield from pod.get("containers", []) + pod.get("initContainers", [])


def validate_scaled_object(obj: dict[str, Any]) -> Problems:
    """KEDA's CRD schema, made strict like the API server's field validation: unknown fields are errors."""
    schema = _strict(json.loads(KEDA_SCHEMA.read_text()))
    if obj.get("apiVersion") != "keda.sh/v1alpha1":
        return [f"apiVersion {obj.get('apiVersion')}: the vendored schema is keda.sh/v1alpha1"]
    validator = jsonschema.Draft7Validator(schema)
    return [f"{'.'.join(map(str, e.path)) or '(top)'}: {e.message}" for e in validator.iter_errors(obj)]


def _strict(schema: Any) -> Any:
    if isinstance(schema, dict):
        schema = {k: _strict(v) for k, v in schema.items()}
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        schema = [_strict(v) for v in schema]
    return schema


def cross_check(objects: list[dict[str, Any]], image: dict[str, str], extras: set[str]) -> Problems:
    """What no schema sees: the objects agree with each other and with the worker's settings and command line,
    and the image a container runs installs the extras its settings need (``extras``: the image's by default;
    a tag ``<version>-<word>-...`` adds the words that name extras, as deploy/docker/Dockerfile's header builds
    ``0.1.0-text``).

    A Deployment runs the streaming worker (its settings must name Kafka and Redis); a Job runs score-file,
    its arguments parsed by score-file's own parser (deploy/checks/k8s_jobs.py).
    """
    problems: Problems = []
    by_kind: dict[tuple[str, str], dict[str, Any]] = {
        (o.get("kind", ""), o.get("metadata", {}).get("name", "")): o for o in objects}
    for (kind, name), workload in by_kind.items():
        if kind not in ("Deployment", "Job"):
            continue
        pod = workload["spec"]["template"]["spec"]
        for container in pod["containers"]:
            where = f"{kind}/{name} container {container['name']}"
            args = score_file_args(container, where, problems) if kind == "Job" else None
            if kind == "Job" and args is None:
                continue
            env = dict(image)
            for source in container.get("envFrom", []):
                env |= _env_source(by_kind, source, where, problems)
            env |= {e["name"]: e.get("value", "") for e in container.get("env", []) if "valueFrom" not in e}
            with tempfile.TemporaryDirectory() as stand_in:
                env = _with_mounted_files(env, _mounted_secret_keys(pod, container, by_kind), Path(stand_in))
                settings = worker_settings(env, where, problems, args=args, services=kind == "Deployment")
            if settings is None:
                continue
            problems += _check_container(pod, container, settings, where)
            problems += _check_extras(container, settings, extras, where)
            if args is not None:
                problems += check_job(workload, container, args, by_kind, where)
                continue
            problems += _check_pod(pod, container, settings, workload, where)
            problems += _check_scaler(by_kind, name, settings)
        if kind == "Deployment":
            problems += _check_disruption_budgets(by_kind, name, workload)
    return problems


def _check_disruption_budgets(by_kind: dict[tuple[str, str], dict[str, Any]], name: str,
                              deployment: dict[str, Any]) -> Problems:
    labels = deployment["spec"]["template"]["metadata"].get("labels", {})
    problems: Problems = []
    for (kind, other), pdb in by_kind.items():
        selector = pdb.get("spec", {}).get("selector", {}).get("matchLabels", {})
        if kind == "PodDisruptionBudget" and not selector.items() <= labels.items():
            problems.append(f"PodDisruptionBudget/{other} selects {selector}, not Deployment/{name}'s pods")
    return problems


def _mounted_secret_keys(pod: dict[str, Any], container: dict[str, Any],
                         by_kind: dict[tuple[str, str], dict[str, Any]]) -> set[str]:
    """The path of every file the container sees from a Secret volume of this kustomization."""
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod.get("volumes", []) if "secret" in v}
    paths = set()
    for mount in container.get("volumeMounts", []):
        found = by_kind.get(("Secret", secrets.get(mount["name"], "")))
        if found is not None:
            keys = {**found.get("data", {}), **found.get("stringData", {})}
            paths |= {f"{mount['mountPath'].rstrip('/')}/{key}" for key in keys}
    return paths


def _with_mounted_files(env: dict[str, str], mounted: set[str], stand_in: Path) -> dict[str, str]:
    """``env`` with each value naming a mounted Secret file replaced by a placeholder file's path, so that
    the worker's settings check finds it; a file setting naming a key the Secret lacks still fails."""
    replaced = dict(env)
    for name, value in env.items():
        if value in mounted:
            path = stand_in / value.lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("placeholder\n")
            replaced[name] = str(path)
    return replaced


def _env_source(by_kind: dict[tuple[str, str], dict[str, Any]], source: dict[str, Any], where: str,
                problems: Problems) -> dict[str, str]:
    if "configMapRef" in source:
        found = by_kind.get(("ConfigMap", source["configMapRef"]["name"]))
        data = found.get("data", {}) if found else None
    else:
        found = by_kind.get(("Secret", source["secretRef"]["name"]))
        data = None if not found else {
            **{k: base64.b64decode(v).decode() for k, v in found.get("data", {}).items()},
            **found.get("stringData", {})}
    if data is None:
        problems.append(f"{where}: envFrom {source} names no object of this kustomization")
        return {}
    return {str(k): str(v) for k, v in data.items()}


def _check_pod(pod: dict[str, Any], container: dict[str, Any], settings: Settings, deployment: dict[str, Any],
               where: str) -> Problems:
    """A streaming worker's pod: its grace period, probes and scrape annotation."""
    problems: Problems = []
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if grace <= settings.operations.shutdown_timeout_s:
        problems.append(f"{where}: terminationGracePeriodSeconds {grace} is not above "
                        f"STREAMSCORE_SHUTDOWN_TIMEOUT_S {settings.operations.shutdown_timeout_s:g}")
    ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        http = container.get(probe, {}).get("httpGet", {})
        port = ports.get(http.get("port"), http.get("port"))
        if http.get("path") != path or port != settings.operations.http_port:
            problems.append(f"{where}: {probe} must GET {path} on {settings.operations.http_port}, not "
                            f"{http.get('path')} on {port}")
    annotations = deployment["spec"]["template"]["metadata"].get("annotations", {})
    if annotations.get("prometheus.io/port") != str(settings.operations.http_port):
        problems.append(f"{where}: prometheus.io/port annotation {annotations.get('prometheus.io/port')} "
                        f"is not STREAMSCORE_HTTP_PORT {settings.operations.http_port}")
    return problems


def _check_container(pod: dict[str, Any], container: dict[str, Any], settings: Settings, where: str) -> Problems:
    """Any container of the worker's image: not root, resources that are quantities, a GPU for a CUDA device."""
    problems: Problems = []
    security = pod.get("securityContext", {}) | container.get("securityContext", {})
    if not security.get("runAsNonRoot"):
        problems.append(f"{where}: runAsNonRoot is not set")
    for kind, amounts in container.get("resources", {}).items():
        for resource, amount in amounts.items():
            if not QUANTITY.fullmatch(str(amount)):
                problems.append(f"{where}: resources.{kind}.{resource} {amount!r} is not a quantity")
    gpus = container.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
    if settings.model.device.startswith("cuda") != bool(gpus):
        problems.append(f"{where}: STREAMSCORE_DEVICE={settings.model.device} but nvidia.com/gpu limit {gpus}")
    return problems


def needed_extras(settings: Settings) -> dict[str, str]:
    """The pyproject extras these settings need, each with the setting that needs it."""
    needed = {}
    client = CLIENTS[settings.kafka.kafka_client]
    if client.extra:
        needed[client.extra] = f"kafka_client={settings.kafka.kafka_client}"
    for name in ("request_format", "reply_format"):
        value = getattr(settings.formats, name)
        if any(word in value for word in ("avro", "protobuf")):
            needed["formats"] = f"{name}={value}"
    if settings.operations.otel:
        needed["otel"] = "otel=true"
    models = [entry.model_settings(settings.model).model for entry in settings.models.entries] or [
        settings.model.model]
    if "minilm" in models:
        needed["text"] = "model minilm"
    return needed


def _check_extras(container: dict[str, Any], settings: Settings, extras: set[str], where: str) -> Problems:
    image = container.get("image", "")
    named = image.partition("@")[0]  # repo:tag@sha256:...: the tag is before the digest
    tag_words = set(named.rpartition(":")[2].split("-")[1:]) if ":" in named.rpartition("/")[2] else set()
    installed = extras | tag_words
    return [f"{where}: {why} needs the {extra} extra, which image {image} does not install: build it with "
            f"--build-arg EXTRAS={extra} and tag it -{extra} (deploy/docker/Dockerfile's header)"
            for extra, why in needed_extras(settings).items() if extra not in installed]


def _check_scaler(by_kind: dict[tuple[str, str], dict[str, Any]], deployment: str, settings: Settings) -> Problems:
    problems: Problems = []
    scalers = [o for (kind, _), o in by_kind.items()
               if kind == "ScaledObject" and o["spec"]["scaleTargetRef"]["name"] == deployment]
    for scaler in scalers:
        where = f"ScaledObject/{scaler['metadata']['name']}"
        spec = scaler["spec"]
        partitions = scaler["metadata"].get("annotations", {}).get(PARTITIONS_ANNOTATION)
        if partitions is None or not partitions.isdigit():
            problems.append(f"{where}: annotation {PARTITIONS_ANNOTATION} (the topic's partition count) is missing")
        elif spec.get("maxReplicaCount", 100) > int(partitions):
            problems.append(f"{where}: maxReplicaCount {spec.get('maxReplicaCount')} is above the "
                            f"{partitions} partitions: the extra consumers would sit idle")
        for trigger in spec.get("triggers", []):
            if trigger.get("type") != "kafka":
                continue
            meta = trigger.get("metadata", {})
            kafka = settings.kafka
            expected = {"bootstrapServers": kafka.kafka_bootstrap_servers, "consumerGroup": kafka.group,
                        "topic": kafka.requests_topic}
            for key, value in expected.items():
                if meta.get(key) != value:
                    problems.append(f"{where}: kafka trigger {key} {meta.get(key)!r} is not the worker's {value!r}")
            if not str(meta.get("lagThreshold", "")).isdigit() or int(meta["lagThreshold"]) < 1:
                problems.append(f"{where}: kafka trigger lagThreshold {meta.get('lagThreshold')!r} is not a count")
            if meta.get("allowIdleConsumers", "false") != "false":
                problems.append(f"{where}: allowIdleConsumers would run consumers with no partition")
    return problems


def _compare_with_kubectl(directory: Path, objects: list[dict[str, Any]]) -> Problems:
    """kubectl's kustomize must render what render() did (else render() is wrong). Offline: it reads files only."""
    done = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True, text=True, timeout=60)
    if done.returncode:
        return [f"kubectl kustomize: {done.stderr.strip()}"]

    def keyed(objs: list[dict[str, Any]]) -> dict[str, str]:
        return {f"{o.get('kind')}/{o.get('metadata', {}).get('name')}": json.dumps(o, sort_keys=True) for o in objs}

    theirs, ours = keyed([o for o in yaml.safe_load_all(done.stdout) if o]), keyed(objects)
    differ = sorted(k for k in theirs.keys() | ours.keys() if theirs.get(k) != ours.get(k))
    return [f"kubectl kustomize renders {k} differently from deploy/check.py's render()" for k in differ]
