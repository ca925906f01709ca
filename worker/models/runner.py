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

import random
import re
import time
from collections.abc import Sequence
from typing import Any

import structlog
import torch

from worker.core.errors import ConfigError, InvalidInput, ModelError
from worker.core.faults import FaultLog, ModelCodeFailure, describe
from worker.core.settings import check_amp, setting_names
from worker.core.wire import ERR_MODEL_ERROR, ERR_OUT_OF_MEMORY
from worker.models.base import Servable, eval_mode
from worker.models.spec import ModelInput, call_module
from worker.ports import Outcome

log = structlog.get_logger(__name__)

AMP_DTYPES = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}
MEMORY_SHARE = 0.8  # at most this share of the GPU memory still available may go to one batch


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


def autocast(device: torch.device, amp: str) -> torch.autocast:
    """The context a forward pass runs in for the ``amp`` setting (off: autocast disabled)."""
    return torch.autocast(device.type, dtype=AMP_DTYPES[amp], enabled=amp != "off")


class TorchRunner:
    """Runs a ``Servable`` under ``torch.inference_mode()`` on one device. Not thread-safe."""

    def __init__(self, model: Servable, device: str = "auto", max_batch_size: int = 64, amp: str = "off",
                 pinned: bool = True) -> None:
        """Raises ConfigError when ``amp`` does not suit the device (fp16 off CUDA).

        ``pinned=False`` copies batches to a CUDA device from pageable memory
        (what bench/gpu.py compares against); it changes nothing on CPU.
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
        self._module = eval_mode(model.module.to(self.device))

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

    def warmup(self, batch_size: int, rounds: int = 3) -> float:
        """Run a few batches of sample inputs so that the first real batch is not slow.

        On CUDA, then lowers ``safe_batch_size`` if a batch of this size leaves
        too little memory to spare. Returns the seconds the last round took:
        what a full batch costs on this device. Raises ConfigError when a batch
        of this size runs out of memory outright.
        """
        rng = random.Random(0)
        items = [self.model.prepare(self.model.sample_inputs(rng)) for _ in range(batch_size)]
        took = 0.0
        try:
            for _ in range(rounds):
                started = time.perf_counter()
                self._forward(items)
                took = time.perf_counter() - started
            if self.device.type == "cuda":
                self._fit_in_memory(items)
        except torch.cuda.OutOfMemoryError as exc:
            raise ConfigError(f"a batch of {batch_size} sample inputs runs out of memory on {self.device} in "
                              "warmup: lower max_batch_size") from exc
        except ModelCodeFailure as exc:  # the model does not take what its spec says it takes
            raise ModelError(self._warmup_failure(items, exc.cause)) from exc.cause
        return took

    def _warmup_failure(self, items: Sequence[Any], exc: Exception) -> str:
        shapes = ModelInput.of(self.model.collate(items)).shapes()
        described = getattr(self.model, "describe", None)
        spec = f" (input spec {described()['inputs']})" if described else ""
        return (f"model {self.name} failed on its warmup batch{spec}, given forward({', '.join(shapes)}): "
                f"{_cause(exc)}. Declare the inputs the model "
                "really takes in --model-config (`python -m worker inspect-model` shows what is read now)")

    def _fit_in_memory(self, items: Sequence[Any]) -> None:
        """Keep a batch's peak memory under MEMORY_SHARE of what this process could still get.

        Measured on the warm model (weights and workspaces already resident),
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
            return [Outcome(output) for output in self._forward(items)]
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

    def _forward(self, items: Sequence[Any]) -> list[Any]:
        """Raises InvalidInput, torch's OutOfMemoryError, or ModelCodeFailure naming the stage that raised."""
        stage = "collate"
        try:
            # Pinned: from torch's cache of page-locked blocks, not a fresh page-lock per batch.
            batch = ModelInput.of(self.model.collate(items)).to(self.device, non_blocking=True,
                                                                pin=self.pins_batches)
            stage = "forward"
            with torch.inference_mode(), autocast(self.device, self.amp):
                output = call_module(self._module, batch)
            stage = "split"
            outputs = self.model.split(_to_host(output) if isinstance(output, torch.Tensor) else output)
        except (InvalidInput, torch.cuda.OutOfMemoryError):
            raise
        except Exception as exc:
            raise ModelCodeFailure(stage, exc) from exc
        if len(outputs) != len(items):
            raise ModelCodeFailure("split", ModelError(f"model {self.name} returned {len(outputs)} outputs for "
                                                       f"{len(items)} inputs"))
        return outputs


def _cause(exc: Exception) -> str:
    """The exception in one line: TorchScript puts the interpreter's trace first and the cause, named, last."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    last = lines[-1][:300] if lines else ""
    return last if re.match(r"^\w+(Error|Exception): ", last) else f"{type(exc).__name__}: {last}"


def _to_host(output: torch.Tensor) -> torch.Tensor:
    """The output on the CPU in float32 when autocast left it in half precision, so replies look the same.

    Copied first, cast after: the half-precision tensor is the smaller one to move.
    """
    host = output.cpu()
    return host.float() if host.dtype in (torch.float16, torch.bfloat16) else host
