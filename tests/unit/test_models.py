import random

import pytest
import torch

from worker.core.errors import ConfigError, InvalidInput, ModelError
from worker.models import load_model
from worker.models.base import DeclaredModel
from worker.models.runner import TorchRunner, pick_device
from worker.models.spec import VectorInputs, parse_outputs


def test_churn_is_deterministic_and_a_probability():
    first, second = load_model("churn"), load_model("churn")
    rng = random.Random(3)
    items = [first.prepare(first.sample_inputs(rng)) for _ in range(32)]
    out_a = TorchRunner(first, "cpu").run(items)
    out_b = TorchRunner(second, "cpu").run(items)
    assert [o.output for o in out_a] == [o.output for o in out_b]
    probabilities = [o.output["churn_probability"] for o in out_a]
    assert all(0.0 <= p <= 1.0 for p in probabilities)
    assert len(set(probabilities)) > 1  # the model actually depends on its inputs


def test_batched_results_equal_one_at_a_time():
    runner = TorchRunner(load_model("churn"), "cpu", max_batch_size=64)
    rng = random.Random(5)
    items = [runner.prepare(load_model("churn").sample_inputs(rng)) for _ in range(20)]
    together = [o.output["churn_probability"] for o in runner.run(items)]
    alone = [runner.run([item])[0].output["churn_probability"] for item in items]
    assert together == pytest.approx(alone, abs=1e-6)


def test_amp_bf16_on_cpu_stays_close_to_float32_and_replies_in_float32():
    model = load_model("churn")
    rng = random.Random(7)
    items = [model.prepare(model.sample_inputs(rng)) for _ in range(64)]
    exact = [o.output["churn_probability"] for o in TorchRunner(model, "cpu").run(items)]
    bf16 = [o.output["churn_probability"] for o in TorchRunner(model, "cpu", amp="bf16").run(items)]
    assert bf16 != exact  # autocast did run in bfloat16 ...
    assert bf16 == pytest.approx(exact, abs=1e-2)  # ... with bfloat16's 8 significant bits
    assert all(type(p) is float for p in bf16)


@pytest.mark.parametrize("setting, cuda_devices, message", [
    ("cuda", 0, r"^device=cuda \(--device, STREAMSCORE_DEVICE\): this machine has no CUDA device .*; "
                r"valid here: auto, cpu$"),
    ("cuda:0", 0, r"^device=cuda:0 \(--device, STREAMSCORE_DEVICE\): this machine has no CUDA device"),
    ("cuda:7", 2, r"^device=cuda:7 \(--device, STREAMSCORE_DEVICE\): this machine has 2 CUDA devices; "
                  r"valid here: auto, cpu, cuda, cuda:0, cuda:1$"),
    ("cuda:1", 1, r"has 1 CUDA device; valid here: auto, cpu, cuda, cuda:0$"),
])
def test_a_cuda_device_the_machine_lacks_is_refused_naming_the_setting_and_what_is_there(
        monkeypatch, setting, cuda_devices, message):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda_devices > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: cuda_devices)
    with pytest.raises(ConfigError, match=message):
        pick_device(setting)


def test_a_cuda_device_the_machine_has_is_taken_as_it_is(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert (pick_device("cuda:1"), pick_device("cuda"), pick_device("auto")) == (
        torch.device("cuda:1"), torch.device("cuda"), torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick_device("auto") == torch.device("cpu")


def test_amp_fp16_is_refused_when_the_device_resolves_to_cpu():
    device = "cpu" if torch.cuda.is_available() else "auto"  # "auto" is only resolved by the runner
    with pytest.raises(ConfigError, match="amp=fp16 needs a CUDA device"):
        TorchRunner(load_model("churn"), device, amp="fp16")


@pytest.mark.parametrize("pinned_forced", [False, True])
def test_batches_are_pinned_only_for_cuda(monkeypatch, pinned_forced):
    pinned = []

    def pin_memory(tensor: torch.Tensor) -> torch.Tensor:
        pinned.append(tensor.shape)
        return tensor  # without CUDA there is nothing to pin into

    monkeypatch.setattr(torch.Tensor, "pin_memory", pin_memory)
    model = load_model("churn")
    runner = TorchRunner(model, "cpu")
    assert not runner.pins_batches
    if pinned_forced:  # what a CUDA device turns on: the same code path, checked here without one
        runner.pins_batches = True
    rng = random.Random(1)
    assert all(o.ok for o in runner.run([model.prepare(model.sample_inputs(rng)) for _ in range(3)]))
    assert pinned == ([torch.Size([3, 16])] if pinned_forced else [])


class Picky(torch.nn.Module):
    """Fails any batch that contains a negative first feature."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (x[:, 0] < 0).any():
            raise RuntimeError("negative input")
        return x.sum(dim=1, keepdim=True)


def test_a_failing_item_is_isolated_and_the_rest_are_scored_in_order():
    runner = TorchRunner(DeclaredModel(Picky(), "picky", "1", VectorInputs(2)), "cpu")
    items = [[1.0, 1.0], [2.0, 2.0], [-1.0, 0.0], [3.0, 3.0], [-5.0, 1.0]]
    outcomes = runner.run(items)
    assert [o.output for o in outcomes] == [[2.0], [4.0], None, [6.0], None]
    assert [o.error_code for o in outcomes] == [None, None, "model_error", None, "model_error"]
    assert "negative input" in outcomes[2].error_message


def test_a_torchscript_models_error_is_told_by_what_it_raised_not_its_trace(tmp_path):
    """A loaded TorchScript program's error text starts with the interpreter's trace of its serialized code, often
    longer than a reply's message; what the model raised comes last."""
    torch.jit.script(Picky()).save(str(tmp_path / "picky.pt"))
    loaded = torch.jit.load(str(tmp_path / "picky.pt"))
    runner = TorchRunner(DeclaredModel(loaded, "picky", "1", VectorInputs(2)), "cpu")
    failed = runner.run([[-1.0, 0.0]])[0]
    assert failed.error_message == "forward raised RuntimeError: negative input", failed.error_message


class Logarithm(torch.nn.Module):
    """log of each feature: NaN for a negative one, minus infinity for zero."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x)


class Pair(torch.nn.Module):
    """Two outputs a row: the features, and their logarithms."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, torch.log(x)


def test_an_output_with_nan_or_infinity_is_a_model_error_for_its_request_alone():
    """JSON has no NaN or infinity: a reply would carry null under status ok."""
    runner = TorchRunner(DeclaredModel(Logarithm(), "log", "1", VectorInputs(2)), "cpu")
    outcomes = runner.run([[1.0, 1.0], [-1.0, 1.0], [1.0, 0.0], [1.0, float("inf")], [1.0, 1.0]])
    assert [o.error_code for o in outcomes] == [None, "model_error", "model_error", "model_error", None]
    assert outcomes[0].output == [0.0, 0.0] and outcomes[4].output == [0.0, 0.0]
    assert "NaN or infinity" in outcomes[1].error_message


class Masked(torch.nn.Module):
    """Logits with the second label masked out (minus infinity) where the first feature is negative."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        masked = torch.full_like(x, float("-inf"))
        return torch.where(x[:, :1] < 0, torch.stack([x[:, 0], masked[:, 1]], dim=1), x)


def test_infinity_that_the_split_makes_finite_is_answered_ok():
    """A softmax over labels turns a masked logit (minus infinity) into a probability of 0."""
    model = DeclaredModel(Masked(), "masked", "1", VectorInputs(2),
                          parse_outputs({"labels": ["a", "b"], "softmax": True}, "masked.json"))
    outcomes = TorchRunner(model, "cpu").run([[-1.0, 3.0], [1.0, 2.0]])
    assert [o.error_code for o in outcomes] == [None, None]
    assert outcomes[0].output["scores"] == {"a": 1.0, "b": 0.0}, outcomes[0].output


def test_a_row_of_any_of_several_outputs_with_nan_is_told_apart():
    model = DeclaredModel(Pair(), "pair", "1", VectorInputs(1))
    model.split = lambda output: [list(row) for row in zip(output[0].tolist(), output[1].tolist(), strict=True)]
    outcomes = TorchRunner(model, "cpu").run([[1.0], [-1.0], [2.0]])
    assert [o.error_code for o in outcomes] == [None, "model_error", None]


def test_chunks_larger_than_the_safe_batch_size():
    runner = TorchRunner(DeclaredModel(Picky(), "picky", "1", VectorInputs(2)), "cpu", max_batch_size=2)
    outcomes = runner.run([[float(i), 0.0] for i in range(5)])
    assert [o.output for o in outcomes] == [[0.0], [1.0], [2.0], [3.0], [4.0]]


class Roomy(torch.nn.Module):
    """Runs out of (pretend) GPU memory on batches larger than ``room``."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if len(x) > self.room:
            raise torch.cuda.OutOfMemoryError(f"{len(x)} rows do not fit")
        return x.sum(dim=1, keepdim=True)


def test_out_of_memory_splits_the_batch_and_remembers_the_safe_size():
    runner = TorchRunner(DeclaredModel(Roomy(room=3), "roomy", "1", VectorInputs(1)), "cpu", max_batch_size=8)
    outcomes = runner.run([[float(i)] for i in range(8)])
    assert [o.output for o in outcomes] == [[float(i)] for i in range(8)]
    assert runner.safe_batch_size == 2  # 8 -> 4 -> 2: halved until a batch fit
    runner.run([[1.0]] * 8)
    assert runner.safe_batch_size == 2  # never raised again


def test_a_warmup_batch_that_runs_out_of_memory_names_the_setting():
    runner = TorchRunner(DeclaredModel(Roomy(room=3), "roomy", "1", VectorInputs(1)), "cpu", max_batch_size=8)
    with pytest.raises(ConfigError, match="batch of 8 sample inputs runs out of memory.*lower max_batch_size"):
        runner.warmup(8)


@pytest.mark.parametrize("batch_bytes, spare_bytes, safe_batch_size", [
    (1_000, 100_000, 64),  # plenty of room: unchanged
    (1_000, 1_000, 51),    # 64 items x 0.8 x 1,000 / 1,000: the full batch fit, but with no margin
    (1_000, 1_200, 61),
])
def test_the_gpu_memory_check_lowers_the_safe_batch_size(monkeypatch, batch_bytes, spare_bytes, safe_batch_size):
    # The check runs only on CUDA; here its arithmetic runs against counters faked from the figures above.
    resident = 5_000
    for name, fake in {"reset_peak_memory_stats": lambda device: None,
                       "memory_allocated": lambda device: resident,
                       "max_memory_allocated": lambda device: resident + batch_bytes,
                       "memory_reserved": lambda device: resident + batch_bytes,
                       "mem_get_info": lambda device: (spare_bytes - batch_bytes, 10**12)}.items():
        monkeypatch.setattr(torch.cuda, name, fake)
    model = load_model("churn")
    runner = TorchRunner(model, "cpu", max_batch_size=64)
    rng = random.Random(2)
    runner._fit_in_memory([model.prepare(model.sample_inputs(rng)) for _ in range(64)])
    assert runner.safe_batch_size == safe_batch_size


def test_tensor_model_checks_input_length():
    model = DeclaredModel(Picky(), "picky", "1", VectorInputs(2))
    with pytest.raises(InvalidInput) as caught:
        model.prepare([1.0])
    assert caught.value.code == "wrong_input_length"


def test_a_torchscript_linear_model_is_served_at_its_own_width(tmp_path):
    path = tmp_path / "doubler.pt"
    torch.jit.script(torch.nn.Linear(3, 1)).save(str(path))
    scripted = load_model(str(path))
    assert scripted.name == "doubler" and len(scripted.version) == 12
    assert TorchRunner(scripted, "cpu").run([[1.0, 2.0, 3.0]])[0].ok


@pytest.mark.parametrize("spec, message", [
    ("no-such-model", "unknown model"),
    ("/nonexistent/model.pt", "does not exist"),
    ("nonexistent_module:make", "cannot import"),
])
def test_bad_model_specs_say_what_is_wrong(spec, message):
    with pytest.raises(ModelError, match=message):
        load_model(spec)


class Timed(torch.nn.Module):
    """Records each batch's size; each batch "takes" ``per_item_s`` per item of a fake clock."""

    def __init__(self, clock: list[float], per_item_s: float) -> None:
        super().__init__()
        self.clock, self.per_item_s = clock, per_item_s
        self.sizes: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.sizes.append(len(x))
        self.clock[0] += len(x) * self.per_item_s
        return x[:, :1]


def timed_runner(width: int, per_item_s: float, batch_size: int) -> tuple[TorchRunner, Timed]:
    clock = [0.0]
    module = Timed(clock, per_item_s)
    runner = TorchRunner(DeclaredModel(module, "timed", "1", VectorInputs(width)), "cpu", batch_size,
                         timer=lambda: clock[0])
    return runner, module


def test_a_small_batch_is_warmed_up_whole_and_timed():
    runner, module = timed_runner(width=16, per_item_s=0.001, batch_size=64)
    warmup = runner.warmup(64)
    assert module.sizes == [64, 64, 64, 64]  # one untimed (the first call initialises lazily), three timed
    assert (warmup.warmed_size, warmup.batch_size) == (64, 64)
    assert warmup.batch_s == pytest.approx(0.064) and warmup.warmed_s == pytest.approx(0.064)


def test_warmup_never_collates_more_than_its_input_budget_and_extrapolates_the_rest():
    from worker.models.runner import WARMUP_INPUT_BYTES

    width = 2**14  # 64 KiB of float32 per item: the budget holds 256 of them
    runner, module = timed_runner(width=width, per_item_s=0.001, batch_size=65_536)
    warmup = runner.warmup(65_536)
    assert max(module.sizes) * width * 4 <= WARMUP_INPUT_BYTES
    assert module.sizes == [64, 64, 256, 256, 256]  # the sizes climbed to the budget, then timed three times
    assert warmup.warmed_size == 256 and warmup.warmed_s == pytest.approx(0.256)
    assert warmup.batch_s == pytest.approx(65.536)  # in proportion: a full batch costs 256 times as much


def test_warmup_stops_climbing_once_a_batch_is_slow():
    from worker.models.runner import WARMUP_SLOW_S

    per_item_s = WARMUP_SLOW_S / 512  # a batch of 512 takes WARMUP_SLOW_S
    runner, module = timed_runner(width=16, per_item_s=per_item_s, batch_size=65_536)
    warmup = runner.warmup(65_536)
    assert module.sizes == [64, 64, 512, 512, 512]  # 64, then 8 times as many: slow, so no further
    assert warmup.batch_s == pytest.approx(65_536 * per_item_s)
