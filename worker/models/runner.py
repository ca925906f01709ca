"""Running batches through a PyTorch model.

``TorchRunner`` owns the model: loaded once, ``eval()``, placed on its device,
warmed up. ``run`` takes prepared items and returns one output per item in
input order. A batch that fails is split in halves until the failing items
are isolated, so one poisonous request cannot take its batch-mates down; a
batch that runs out of memory is split likewise and the safe size remembered.
On CUDA, warmup measures a full batch's peak memory and lowers the safe size
up front when that batch would leave too little of the GPU's memory to spare.
With ``amp`` set, the forward pass runs under ``torch.autocast`` in bf16 or
fp16, and half-precision outputs are cast back to float32 before ``split``.
On CUDA each collated batch is copied into pinned (page-locked) host memory
and from there to the device without blocking; outputs come back with one
copy per batch. On CPU the collated batch is used as it is.
"""

from __future__ import annotations

import ctypes
import gc
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import structlog
import torch

from worker.core.errors import MESSAGE_CHARS, ConfigError, InvalidInput, ModelError, describe, in_one_line
from worker.core.routes import PlainReader
from worker.core.settings import check_amp, setting_names
from worker.core.wire import ERR_MODEL_ERROR, ERR_OUT_OF_MEMORY
from worker.models.base import Servable, eval_mode
from worker.models.faults import FaultLog, ModelCodeFailure
from worker.models.spec import ModelInput, OutputWidthError, call_module
from worker.ports import Outcome

log = structlog.get_logger(__name__)

AMP_DTYPES = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}
MEMORY_SHARE = 0.8  # at most this share of the GPU memory still available may go to one batch
# Warmup's bounds, whatever max_batch_size is: its batches grow from WARMUP_FIRST_SIZE by WARMUP_GROWTH while a
# batch takes less than WARMUP_SLOW_S, and never collate more than WARMUP_INPUT_BYTES of input tensors (the
# prepared Python items behind them take several times that). 16 MiB holds a full batch of the largest allowed
# size (65,536) for a model of 64 float32 inputs; a batch of 100,000,000 churn requests had taken 19.7 GB.
WARMUP_PROBE_SIZE = 8  # items collated first, to learn how many bytes one item's inputs take
WARMUP_FIRST_SIZE = 64
WARMUP_GROWTH = 8
WARMUP_SLOW_S = 2.0
WARMUP_INPUT_BYTES = 16 * 2**20


def pick_device(setting: str) -> torch.device:
    """The torch device the ``device`` setting names (auto: the first GPU if there is one, else the CPU).

    Raises ConfigError when it names a CUDA device this machine does not have, saying which devices it has.
    """
    cuda_devices = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if setting == "auto":
        return torch.device("cuda" if cuda_devices else "cpu")
    device = torch.device(setting)
    if device.type == "cuda" and (device.index or 0) >= cuda_devices:
        raise ConfigError(f"device={setting} ({setting_names('device')}): {_cuda_devices_here(cuda_devices)}; "
                          f"valid here: {', '.join(['auto', 'cpu', *_cuda_names(cuda_devices)])}")
    return device


def _cuda_devices_here(count: int) -> str:
    if count:
        return f"this machine has {count} CUDA device{'s' if count > 1 else ''}"
    if torch.version.cuda is None:
        return f"this machine has no CUDA device (this torch build, {torch.__version__}, has no CUDA support)"
    return ("this machine has no CUDA device (torch sees none: no GPU, no NVIDIA driver, or "
            "CUDA_VISIBLE_DEVICES hides them)")


def _cuda_names(count: int) -> list[str]:
    return ["cuda", *(f"cuda:{index}" for index in range(count))] if count else []


def autocast(device: torch.device, amp: str) -> AbstractContextManager[Any]:
    """The context a forward pass runs in for the ``amp`` setting (off: none at all, as nothing around the pass
    turns autocast on: a disabled torch.autocast cost about 0.8 µs a request of the churn model's batches of 64
    in the loop, in a throwaway in-process comparison)."""
    if amp == "off":
        return nullcontext()
    return torch.autocast(device.type, dtype=AMP_DTYPES[amp])


@dataclass(frozen=True)
class Warmup:
    """What warmup measured: ``warmed_s`` for a batch of ``warmed_size``, and what a full batch of
    ``batch_size`` costs (``batch_s``: the same when the whole batch was warmed, else scaled in proportion)."""

    batch_size: int
    warmed_size: int
    warmed_s: float

    @property
    def batch_s(self) -> float:
        return self.warmed_s * self.batch_size / self.warmed_size

    @property
    def estimated(self) -> bool:
        return self.warmed_size < self.batch_size


def free_memory() -> None:
    """Give back what models let go held: their tensors go with their last reference (a collection finds those
    held in cycles); on CUDA the allocator's cache returns them to the device, and on glibc ``malloc_trim``
    returns the freed heap to the system (see return_large_blocks for what the trim alone leaves)."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def return_large_blocks() -> None:
    """From now on every allocation of 1 MiB or more (a layer's weights) gets pages of its own, which go back to
    the system when it is freed: so that letting a model go frees its memory. glibc's default raises that
    threshold after the first large free, and later weights then come from the heap, which keeps what it freed
    (bench/model_budget.py, 4 models of 134 MB in room for 2: 1,037-1,053 MiB at the end without this, 940 with
    it, 1,209-1,241 with all loaded). Nothing on other C libraries."""
    if _LIBC is not None:
        _LIBC.mallopt(M_MMAP_THRESHOLD, 1 << 20)


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter


def _glibc() -> ctypes.CDLL | None:
    """The C library, when it is glibc (it has malloc_trim); None elsewhere (musl, macOS)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


_LIBC = _glibc()


class TorchRunner:
    """Runs a ``Servable`` under ``torch.inference_mode()`` on one device. Not thread-safe."""

    def __init__(self, model: Servable, device: str = "auto", max_batch_size: int = 64, amp: str = "off",
                 pinned: bool = True, timer: Callable[[], float] = time.perf_counter) -> None:
        """Raises ConfigError when ``amp`` does not suit the device (fp16 off CUDA) or the device is not there.

        ``pinned=False`` copies batches to a CUDA device from pageable memory
        (what bench/gpu.py compares against); it changes nothing on CPU.
        ``timer`` times warmup's batches (seconds, monotonic).
        """
        self.model = model
        self.faults = FaultLog()
        self.cost = getattr(model, "cost", None)  # text models: tokens per prepared item
        self.name = model.name
        self.version = model.version
        self.device = pick_device(device)
        check_amp(amp, self.device.type)  # again here: device "auto" is only now known
        self.amp = amp
        # Only from page-locked memory can the copy to the GPU be an asynchronous DMA; from pageable memory the
        # driver stages it through a pinned buffer of its own, synchronously. Pinning exists only with CUDA.
        self.pins_batches = pinned and self.device.type == "cuda"
        self.safe_batch_size = max_batch_size
        self.last_warmup: Warmup | None = None
        self._timer = timer
        self._module = eval_mode(model.module.to(self.device))

    @property
    def memory_bytes(self) -> int:
        """The bytes the module's parameters and buffers take on its device (what letting it go frees)."""
        tensors = (*self._module.parameters(), *self._module.buffers())
        return sum(tensor.numel() * tensor.element_size() for tensor in tensors)

    def sample_outputs(self) -> Any:
        """The outputs of the reply to a sample request (what a reply schema is made from). Raises ModelError
        when the model fails on it."""
        outcome = self.run([self.prepare(self.model.sample_inputs(random.Random(0)))])[0]
        if not outcome.ok:
            raise ModelError(f"model {self.name} failed on a sample request: {outcome.error_code}: "
                             f"{outcome.error_message}")
        return outcome.output

    @property
    def read_plain(self) -> PlainReader | None:
        """The model's reader of plain requests (worker/core/routes.py), when it has one: it reads a request's
        value into its id and inputs, from which ``item`` makes what ``prepare`` would, or refuses it for the
        full path (and ``prepare``) to decide."""
        return getattr(self.model, "read_plain", None)

    def prepare(self, inputs: Any) -> Any:
        """The model's item for one request's JSON ``inputs``; raises InvalidInput, or whatever the model's own
        ``prepare`` raised (noted in ``faults``: the caller answers that request model_error)."""
        try:
            return self.model.prepare(inputs)
        except InvalidInput:
            raise
        except Exception as exc:
            self.faults.record("prepare", exc)
            raise

    def warmup(self, batch_size: int, rounds: int = 3) -> Warmup:
        """Run batches of sample inputs so that the first real batch is not slow, and time them.

        The batches grow from 64 items by factors of 8 up to ``batch_size``, but
        never collate more than WARMUP_INPUT_BYTES of inputs (per item as in a
        batch of 8), and stop growing once a batch takes WARMUP_SLOW_S: so
        warmup's memory and time stay bounded whatever ``batch_size`` is. The
        largest batch runs ``rounds`` times; its last time, scaled in
        proportion to ``batch_size``, is the cost of a full batch (an upper
        bound: per item, larger batches cost no more). On CUDA, then lowers
        ``safe_batch_size`` if a full batch would leave too little memory to
        spare. Raises ConfigError when a batch runs out of memory outright,
        ModelError when the model does not take its own sample inputs.
        """
        rng = random.Random(0)
        items: list[Any] = []
        try:
            self._grow(items, min(batch_size, WARMUP_PROBE_SIZE), rng)
            limit = min(batch_size, max(1, WARMUP_INPUT_BYTES // self._input_bytes(items)))
            size = min(limit, WARMUP_FIRST_SIZE)
            del items[size:]
            self._grow(items, size, rng)
            log.debug("warmup_started", model=self.name, device=str(self.device), batch_size=batch_size,
                      largest_warmup_batch=limit)
            self._forward(items)  # untimed: the first call initialises lazily
            took = self._timed(items)
            while size < limit and took < WARMUP_SLOW_S:
                size = min(limit, size * WARMUP_GROWTH)
                self._grow(items, size, rng)
                took = self._timed(items)
            for _ in range(rounds - 1):
                took = self._timed(items)
            if self.device.type == "cuda":
                self._fit_in_memory(items)
        except torch.cuda.OutOfMemoryError as exc:
            raise ConfigError(f"a batch of {len(items)} sample inputs runs out of memory on {self.device} in "
                              "warmup: lower max_batch_size") from exc
        except ModelCodeFailure as exc:  # the model does not take what its spec says it takes
            raise ModelError(self._warmup_failure(items, exc)) from exc.cause
        self.last_warmup = Warmup(batch_size, len(items), took)
        log.debug("warmup_finished", batch_size=batch_size, warmed_size=len(items),
                  warmed_ms=round(took * 1000, 3), batch_ms=round(self.last_warmup.batch_s * 1000, 3))
        return self.last_warmup

    def _grow(self, items: list[Any], size: int, rng: random.Random) -> None:
        """Raises ModelError when the model's own ``prepare`` refuses, or fails on, its own sample inputs."""
        for _ in range(size - len(items)):
            try:
                items.append(self.model.prepare(self.model.sample_inputs(rng)))
            except Exception as exc:
                said = exc.message if isinstance(exc, InvalidInput) else in_one_line(exc)
                raise ModelError(f"model {self.name} failed to prepare its own sample inputs in warmup: "
                                 f"{said[:MESSAGE_CHARS]}. Its sample_inputs must make inputs its prepare "
                                 "takes") from exc

    def _input_bytes(self, items: Sequence[Any]) -> int:
        """Bytes per item of a collated batch of ``items`` (at least 1). Raises ModelCodeFailure."""
        try:
            batch = ModelInput.of(self.model.collate(items))
        except (InvalidInput, torch.cuda.OutOfMemoryError):
            raise
        except Exception as exc:
            raise ModelCodeFailure("collate", exc) from exc
        total = sum(t.numel() * t.element_size() for t in (*batch.args, *batch.kwargs.values()))
        return max(1, -(-total // len(items)))

    def _timed(self, items: Sequence[Any]) -> float:
        started = self._timer()
        self._forward(items)
        return self._timer() - started

    def _warmup_failure(self, items: Sequence[Any], failure: ModelCodeFailure) -> str:
        """What failed and what to do: a failure splitting the output asks for the outputs the model returns,
        any other (collating, the forward pass) for the inputs it takes."""
        shapes = ModelInput.of(self.model.collate(items)).shapes()
        side = "outputs" if failure.stage == "split" else "inputs"
        described = getattr(self.model, "describe", None)
        declared = described().get(side) if described else None
        spec = f" ({side[:-1]} spec {declared})" if declared is not None else ""
        if side == "outputs" and not isinstance(failure.cause, OutputWidthError):  # no output spec reads it
            advice = ("A declared output spec reads one tensor, a row an item ([outputs] names or labels, or "
                      "none); a model that returns anything else needs a factory whose Servable splits it "
                      "(docs/models.md)")
        else:
            really = "really returns" if side == "outputs" else "really takes"
            advice = (f"Declare the {side} the model {really} in --model-config (`python -m worker "
                      "inspect-model` shows what is read now)")
        return (f"model {self.name} failed on its warmup batch{spec}, given forward({', '.join(shapes)}): "
                f"{in_one_line(failure.cause)[:MESSAGE_CHARS]}. {advice}")

    def _fit_in_memory(self, items: Sequence[Any]) -> None:
        """Keep a batch's peak memory under MEMORY_SHARE of what this process could still get.

        Measured on the warm model (weights and workspaces already resident) with
        ``items`` (fewer than a full batch when warmup's bounds stopped short),
        and scaled as if memory grew in proportion to batch size. The margin is
        for real inputs larger than the samples (longer texts) and for other
        processes on the same GPU; an out-of-memory batch is still split at run time.
        """
        torch.cuda.reset_peak_memory_stats(self.device)
        resident = torch.cuda.memory_allocated(self.device)
        self._forward(items)
        batch_bytes = torch.cuda.max_memory_allocated(self.device) - resident
        free, _total = torch.cuda.mem_get_info(self.device)
        # What torch's allocator holds but does not use (the batch's own blocks, now freed) is ours too.
        spare = free + torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(self.device)
        fits = int(len(items) * MEMORY_SHARE * spare / max(batch_bytes, 1))
        if fits < self.safe_batch_size:
            self._lower_safe_batch_size(fits, "batch_size_lowered_for_memory", batch_bytes=batch_bytes,
                                        spare_bytes=spare)

    def _lower_safe_batch_size(self, size: int, event: str, **details: int) -> None:
        """From now on ``run`` cuts batches to ``size`` items (at least 1); the size never goes back up."""
        self.safe_batch_size = max(1, min(self.safe_batch_size, size))
        log.warning(event, safe_batch_size=self.safe_batch_size, **details)

    def run(self, items: Sequence[Any]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for start in range(0, len(items), self.safe_batch_size):
            outcomes.extend(self._run_isolating(items[start:start + self.safe_batch_size]))
        return outcomes

    def _run_isolating(self, items: Sequence[Any]) -> list[Outcome]:
        try:
            outputs, suspects = self._forward(items)
            outcomes = [Outcome(output) for output in outputs]
            for row in suspects:  # NaN or infinity in the model's output: is it still in what the reply carries?
                if holds_not_finite(outputs[row]):
                    outcomes[row] = NOT_FINITE
            return outcomes
        except InvalidInput as exc:
            if len(items) == 1:
                return [Outcome(None, exc.code, exc.message)]
        except torch.cuda.OutOfMemoryError:
            if len(items) == 1:
                return [Outcome(None, ERR_OUT_OF_MEMORY, "the model ran out of memory on this request alone")]
            self._lower_safe_batch_size(len(items) // 2, "batch_out_of_memory", batch_size=len(items))
            torch.cuda.empty_cache()
        except ModelCodeFailure as exc:  # any failure of the model's code: isolate the items that cause it
            if len(items) == 1:
                self.faults.record(exc.stage, exc.cause)
                return [Outcome(None, ERR_MODEL_ERROR, describe(exc.stage, exc.cause))]
        middle = len(items) // 2
        return self._run_isolating(items[:middle]) + self._run_isolating(items[middle:])

    def _forward(self, items: Sequence[Any]) -> tuple[list[Any], list[int]]:
        """Each item's output, and the rows whose raw output (before ``split``) holds NaN or infinity. Raises
        InvalidInput, torch's OutOfMemoryError, or ModelCodeFailure naming the stage that raised."""
        stage = "collate"
        try:
            # Pinned: from torch's cache of page-locked blocks, not a fresh page-lock per batch.
            batch = ModelInput.of(self.model.collate(items)).to(self.device, non_blocking=True,
                                                                pin=self.pins_batches)
            stage = "forward"
            with torch.inference_mode(), autocast(self.device, self.amp):
                output = call_module(self._module, batch)
            stage = "split"
            host = _to_host(output) if isinstance(output, torch.Tensor) else output
            suspects = not_finite_rows(host, len(items))
            outputs = self.model.split(host)
        except (InvalidInput, torch.cuda.OutOfMemoryError):
            raise
        except Exception as exc:
            raise ModelCodeFailure(stage, exc) from exc
        if len(outputs) != len(items):
            raise ModelCodeFailure("split", ModelError(f"model {self.name} returned {len(outputs)} outputs for "
                                                       f"{len(items)} inputs"))
        return outputs, suspects


NOT_FINITE = Outcome(None, ERR_MODEL_ERROR, "the model's output for this request holds NaN or infinity, which "
                                            "a reply's JSON cannot carry")


def holds_not_finite(value: Any) -> bool:
    """Whether a reply's outputs hold a number that is NaN or infinite, at any depth."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, Mapping):
        return any(map(holds_not_finite, value.values()))
    if isinstance(value, (list, tuple)):
        return any(map(holds_not_finite, value))
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return not bool(torch.isfinite(value).all())
    return False


def not_finite_rows(output: Any, rows: int) -> list[int]:
    """The rows of a batch's output (a tensor, or a mapping or sequence of them, each a row a request) that hold
    NaN or infinity: JSON has no such numbers, and a reply would carry null in their place, unless ``split``
    makes them finite (a softmax over logits masked with minus infinity), which ``holds_not_finite`` of the
    row's reply outputs then tells. When every value is
    finite, the common case, the check is the tensor's sum (about 4 µs a batch of 64 rows, where
    ``torch.isfinite`` took 14, in-process timeit); a sum that is not finite (a value that is not, or an
    overflow) is looked at row by row."""
    if isinstance(output, Mapping):
        tensors = list(output.values())
    elif isinstance(output, (list, tuple)):
        tensors = list(output)
    else:
        tensors = [output]
    bad: set[int] = set()
    for tensor in tensors:
        if not (isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and tensor.dim() >= 1
                and len(tensor) == rows):
            continue
        if math.isfinite(tensor.sum().item()):
            continue
        finite = torch.isfinite(tensor).reshape(rows, -1).all(dim=1)
        bad.update((~finite).nonzero().flatten().tolist())
    return sorted(bad)


def _to_host(output: torch.Tensor) -> torch.Tensor:
    """The output on the CPU in float32 when autocast left it in half precision, so replies look the same.

    Copied first, cast after: the half-precision tensor is the smaller one to move.
    """
    host = output.cpu()
    return host.float() if host.dtype in (torch.float16, torch.bfloat16) else host
