"""Where the probes run: a CUDA device through torch (ROCm builds count) or the CPU.

The backend gives the probes one clock, one way to synchronise, an L2 flush
for cold points, a memory check, and the device facts recorded with every run.
The CUDA parts are kept thin: everything else is shared with the CPU path.
torch is imported inside functions only.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable

from rooftop.models.errors import BadInput
from rooftop.models.sample import TimeStats
from rooftop.models.units import MiB

from .devinfo import (  # noqa: F401 - re-exported: the device facts are part of a backend
    CacheLevel,
    DeviceInfo,
    busy_cpus,
    busy_note,
    cpu_info,
    cuda_info,
    parse_cpu_list,
    parse_size,
    sysfs_caches,
)
from .timing import CPU_PROTOCOL, GPU_PROTOCOL, CpuTimer, Protocol, Timer, measure


class BackendError(BadInput):
    """The requested device does not exist or cannot be used; a one-line message for the user."""


class Unsupported(Exception):
    """This point cannot run here (dtype, shape or memory); recorded as a skipped sample with the reason."""


class CudaTimer:
    """CUDA events around the calls (thin: the protocol is shared with the CPU).

    The events go on the measured device's current stream, where torch queues the kernels of
    tensors on that device, whichever device is current in the calling thread.
    """

    def __init__(self, device: Any) -> None:
        # deferred: torch, only when a probe runs
        import torch

        self._torch = torch
        self._device = device

    def sync(self) -> None:
        self._torch.cuda.synchronize(self._device)

    def time_calls(self, fn: Callable[[], object], calls: int) -> float:
        torch = self._torch
        stream = torch.cuda.current_stream(self._device)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record(stream)
        for _ in range(calls):
            fn()
        end.record(stream)
        end.synchronize()
        return start.elapsed_time(end) / 1e3  # elapsed_time is in milliseconds


@dataclass
class Backend:
    """One device the probes run on."""

    spec: str  # "cpu" or "cuda:N"
    info: DeviceInfo
    protocol: Protocol
    timer: Timer
    cancel: threading.Event | None = None  # set by run_plan; probes stop between samples when it is set
    _flush_buf: Any = None
    _scratch: Any = None  # the bandwidth sweep's arrays, taken once for all its points (see scratch)

    def measure(self, fn: Callable[[], object], before_sample: Callable[[], object] | None = None) -> TimeStats:
        """Time fn by this backend's protocol and clock (see timing.measure)."""
        return measure(fn, self.timer, self.protocol, before_sample, self.cancel)

    @property
    def is_cuda(self) -> bool:
        return self.info.kind == "cuda"

    @property
    def torch_device(self) -> Any:
        # deferred: torch, only when a probe runs
        import torch

        return torch.device(self.spec)

    def sync(self) -> None:
        self.timer.sync()

    def activate(self) -> None:
        """Make this GPU the calling thread's current device: Triton launches and new CUDA streams
        go to the current device, and a TUI worker thread does not inherit the main thread's."""
        if self.is_cuda:
            # deferred: torch, only when a probe runs
            import torch

            torch.cuda.set_device(self.torch_device)

    def free_bytes(self) -> int:
        """Memory free for new tensors now (on a GPU, with what torch's allocator holds unused)."""
        if self.is_cuda:
            # deferred: torch, only when a probe runs
            import torch

            dev = self.torch_device
            cached = torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev)
            return int(torch.cuda.mem_get_info(dev)[0] + cached)
        # deferred: psutil (~15 ms), only when free memory is asked for
        import psutil

        return int(psutil.virtual_memory().available)

    def check_fits(self, nbytes: float) -> None:
        """Unsupported when a working set would not fit comfortably (CPU: half the free RAM)."""
        free = self.free_bytes()
        limit = free * (0.85 if self.is_cuda else 0.5)
        if nbytes > limit:
            raise Unsupported(f"out of memory: needs {nbytes / MiB:.0f} MiB, {free / MiB:.0f} MiB free")

    def flush_bytes(self) -> int:
        """The eviction buffer for cold points: at least max(128 MiB, 4 × L2)."""
        return max(128 * MiB, 4 * (self.info.l2_bytes or 0))

    def flush(self) -> None:
        """Evict the caches by writing a buffer larger than them (outside the timed interval)."""
        # deferred: torch, only when a probe runs
        import torch

        if self._flush_buf is None:
            self._flush_buf = torch.empty(self.flush_bytes() // 4, dtype=torch.int32, device=self.torch_device)
        self._flush_buf.zero_()

    def scratch(self, nbytes: int, reserve: int = 0) -> Any:
        """A flat float32 buffer of at least `nbytes`, kept until release() so a sweep takes its memory once.

        Taking fresh pages is what a large working set costs on a CPU: 4 GiB of first touches took 2–9 s
        on a 2-core VM, against 0.15 s for one pass over them. A buffer too small for `nbytes` is replaced
        by one of `reserve` bytes (the sweep's largest set) when that fits, so the sweep grows it once; on a
        CPU its pages are touched only as the sets reach them. Unsupported when `nbytes` does not fit.
        """
        # deferred: torch, only when a probe runs
        import torch

        if self._scratch is not None and self._scratch.numel() * 4 >= nbytes:
            return self._scratch
        self._scratch = None
        size = max(nbytes, reserve)
        try:
            self.check_fits(size)
        except Unsupported:
            size = nbytes
            self.check_fits(size)
        self._scratch = torch.empty(-(-size // 4), dtype=torch.float32, device=self.torch_device)
        return self._scratch

    def release(self) -> None:
        """Drop the flush buffer, the sweep's buffer and cached blocks between probes."""
        self._flush_buf = None
        self._scratch = None
        if self.is_cuda:
            # deferred: torch, only when a probe runs
            import torch

            torch.cuda.empty_cache()


def parse_device(spec: str | None) -> tuple[str, int | None]:
    """'cpu' → ('cpu', None); 'cuda' / 'cuda:N' → ('cuda', N); BackendError otherwise."""
    if spec is None:
        return "auto", None
    s = spec.strip().lower()
    if s == "cpu":
        return "cpu", None
    m = re.fullmatch(r"cuda(?::(\d+))?", s)
    if not m:
        raise BackendError(f"--device {spec!r}: expected cpu, cuda or cuda:N")
    return "cuda", int(m.group(1) or 0)


def select_backend(spec: str | None = None, threads: int | None = None) -> Backend:
    """The backend for --device (cuda:N or cpu); by default the first GPU, else the CPU.

    `threads` sets torch's CPU threads for the CPU backend (process-wide). By
    default the CPU backend keeps torch's count unless other work holds some
    CPUs at the start: then it uses the idle ones only (busy_note says so).
    """
    # deferred: torch, only when a probe runs
    import torch

    kind, index = parse_device(spec)
    if kind == "auto":
        kind, index = ("cuda", 0) if torch.cuda.is_available() else ("cpu", None)
    if threads is not None:
        most = 4 * (os.cpu_count() or 1)
        if not 1 <= threads <= most:
            raise BackendError(f"--threads {threads}: give 1 to {most} (this machine has {os.cpu_count()} CPUs)")
        if kind != "cpu":
            raise BackendError("--threads applies to the CPU backend only (--device cpu)")
        torch.set_num_threads(threads)
    if kind == "cpu":
        default = torch.get_num_threads()
        info = dataclasses.replace(cpu_info(), default_threads=default)
        idle = max(1, (os.cpu_count() or 1) - (info.busy_cpus or 0))
        if threads is None and idle < default:
            torch.set_num_threads(idle)
            info = dataclasses.replace(info, units=idle)
        return Backend("cpu", info, CPU_PROTOCOL, CpuTimer())
    if not torch.cuda.is_available():
        raise BackendError(f"--device {spec}: torch sees no CUDA device here (torch {torch.__version__})")
    count = torch.cuda.device_count()
    if index is None or index >= count:
        raise BackendError(f"--device {spec}: there are {count} CUDA device(s), cuda:0 … cuda:{count - 1}")
    torch.cuda.set_device(index)
    device = torch.device(f"cuda:{index}")
    return Backend(f"cuda:{index}", cuda_info(index), GPU_PROTOCOL, CudaTimer(device))
