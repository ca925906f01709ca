"""`make deploy-check` (deploy/check.py): the recipes under deploy/ pass, and a broken copy of each kind fails."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECK = REPO / "deploy" / "check.py"


def _check(root: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHECK), "--root", str(root)], capture_output=True, text=True,
                          timeout=120)


def test_the_deploy_recipes_pass() -> None:
    done = _check()
    assert done.returncode == 0, done.stdout + done.stderr
    checked = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("ok")]
    assert checked == ["deploy/docker/Dockerfile", "deploy/compose/compose.yaml", "deploy/k8s/base/",
                       "deploy/k8s/overlays/gpu/", "deploy/k8s/score-file-job/",
                       "deploy/grafana/streamscore-dashboard.json"]


BREAKAGES = {
    "a Deployment field of the wrong type": (
        "k8s/base/deployment.yaml", "terminationGracePeriodSeconds: 45", 'terminationGracePeriodSeconds: "45"',
        "terminationGracePeriodSeconds: '45' is not of type 'integer'"),
    "a dashboard query on a metric the worker does not export": (
        "grafana/streamscore-dashboard.json", "streamscore_rebalances_total", "streamscore_rebalance_total",
        "streamscore_rebalance_total is not exported by the worker"),
    "a dashboard query on a stage the worker does not have": (
        "grafana/streamscore-dashboard.json", 'stage=\\"compute\\"', 'stage=\\"model\\"',
        "stage='model': the worker exports ['batch_wait', 'compute', 'queue_wait']"),
    "more replicas than partitions": (
        "k8s/base/scaledobject.yaml", "maxReplicaCount: 12", "maxReplicaCount: 16",
        "maxReplicaCount 16 is above the 12 partitions"),
    "a ScaledObject field KEDA does not have": (
        "k8s/base/scaledobject.yaml", "pollingInterval: 15", "pollingIntervalSeconds: 15",
        "'pollingIntervalSeconds' was unexpected"),
    "a setting the worker does not know": (
        "k8s/base/configmap.yaml", "STREAMSCORE_MAX_WAIT_MS:", "STREAMSCORE_MAX_WAIT:",
        "unknown setting STREAMSCORE_MAX_WAIT"),
    "a Kafka client the image does not install": (
        "k8s/base/configmap.yaml", "  STREAMSCORE_MODEL: churn\n",
        "  STREAMSCORE_MODEL: churn\n  STREAMSCORE_KAFKA_CLIENT: confluent\n",
        "kafka_client=confluent needs the confluent extra, which image streamscore:0.1.0 does not install"),
    "a model the image does not install": (
        "k8s/base/configmap.yaml", "  STREAMSCORE_MODEL: churn\n", "  STREAMSCORE_MODEL: minilm\n",
        "model minilm needs the text extra, which image streamscore:0.1.0 does not install"),
    "a grace period below the shutdown deadline": (
        "compose/compose.yaml", "stop_grace_period: 45s", "stop_grace_period: 20s",
        "stop_grace_period 20 s is not above STREAMSCORE_SHUTDOWN_TIMEOUT_S 30 s"),
    "a compose key that does not exist": (
        "compose/compose.yaml", "    restart: \"no\"", "    restarts: \"no\"",
        "'restarts' was unexpected"),
    "a password file the Secret does not hold": (
        "k8s/base/configmap.yaml", "/etc/streamscore/secrets/kafka-password", "/etc/streamscore/secrets/kafka-pw",
        "KAFKA_SASL_PASSWORD_FILE=/etc/streamscore/secrets/kafka-pw: no such file"),
    "an unpinned pip install": (
        "docker/Dockerfile", '"torch==${TORCH_VERSION}"', "torch", "DL3013"),
    "fewer shards than the Job's indexes": (
        "k8s/score-file-job/job.yaml", '"$(JOB_COMPLETION_INDEX)/8"', '"$(JOB_COMPLETION_INDEX)/6"',
        "--shard $(JOB_COMPLETION_INDEX)/6: 6 shards but completions 8: the pods of index 6 and above would be "
        "refused"),
    "more shards than the Job's indexes": (
        "k8s/score-file-job/job.yaml", "completions: 8", "completions: 4",
        "8 shards but completions 4: shards 4 to 7 would never be scored"),
    "a score-file flag that does not exist": (
        "k8s/score-file-job/job.yaml", '"--no-progress"', '"--progress"',
        "score-file would refuse its arguments: unrecognized arguments: --progress"),
    "replies written to an emptyDir": (
        "k8s/score-file-job/job.yaml", '"/data/out", "--shard"', '"/tmp/out", "--shard"',
        "OUT /tmp/out is on the emptyDir tmp: the parts would vanish with each pod"),
    "a replies volume that one node alone can mount": (
        "k8s/score-file-job/pvc.yaml", '["ReadWriteMany"]', '["ReadWriteOnce"]',
        "PersistentVolumeClaim/streamscore-replies (ReadWriteOnce), which pods on several nodes cannot mount"),
    "a pod failure policy with pods restarted in place": (
        "k8s/score-file-job/job.yaml", "restartPolicy: Never", "restartPolicy: OnFailure",
        "podFailurePolicy needs restartPolicy Never, not OnFailure"),
}


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_a_broken_copy_fails_and_says_why(tmp_path: Path, breakage: str) -> None:
    path, old, new, message = BREAKAGES[breakage]
    shutil.copytree(REPO / "deploy", tmp_path / "deploy", ignore=shutil.ignore_patterns("__pycache__", "local"))
    for name in ("pyproject.toml", "README.md", "worker", "producer"):  # the image's build context
        (tmp_path / name).symlink_to(REPO / name)
    target = tmp_path / "deploy" / path
    text = target.read_text()
    assert old in text, f"{path} no longer contains {old!r}: update this test"
    target.write_text(text.replace(old, new))

    done = _check(tmp_path)

    assert done.returncode == 1, done.stdout
    failed = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("FAIL")]
    # The overlay includes the base: a broken base fails both; every other file stays ok.
    expected = (["deploy/k8s/base/", "deploy/k8s/overlays/gpu/"] if path.startswith("k8s/base/")
                else [f"deploy/{Path(path).parent}/"] if path.startswith("k8s/") else ["deploy/" + path])
    assert failed == expected, done.stdout
    assert message in done.stdout, done.stdout
