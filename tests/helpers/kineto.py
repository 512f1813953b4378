"""Kineto traces built event by event, in the format torch.profiler writes (as the real ones in
tests/data/real-traces/ have it): `cpu_op` and `user_annotation` ranges on a CPU thread, each kernel launched by a
`cuda_runtime` call whose correlation and External id tie it to its kernel and op, `deviceProperties` and
`distributedInfo`. For traces of libraries no shared trace holds (symm_mem, custom all-reduce, DeepEP, RCCL)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PID, TID = 4242, 4242


class KinetoTrace:
    """One rank's trace; times in µs from 0."""

    def __init__(self, device: dict[str, Any] | None = None, **distributed: Any) -> None:
        self.events: list[dict[str, Any]] = []
        self.device = device
        self.distributed = distributed
        self._ids = 0

    def _next(self) -> int:
        self._ids += 1
        return self._ids

    def op(self, name: str, ts: float, dur: float, dims: list | None = None, types: list | None = None,
           cat: str = "cpu_op", **args: Any) -> int:
        """A CPU range (`cpu_op`, or `user_annotation` with cat=); its External id."""
        ext = self._next()
        a: dict[str, Any] = {"External id": ext, **args}
        if dims is not None:
            a["Input Dims"], a["Input type"] = dims, types if types is not None else [""] * len(dims)
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": TID, "ts": ts, "dur": dur,
                            "args": a})
        return ext

    def kernel(self, name: str, launch_ts: float, ts: float, dur: float, ext: int | None = None, stream: int = 7,
               launch: str = "cudaLaunchKernel", launch_dur: float = 2.0, **args: Any) -> None:
        """A kernel and the runtime call (on the CPU thread, at `launch_ts`, `launch_dur` long) that launched it."""
        corr = self._next()
        link = {} if ext is None else {"External id": ext}
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": launch, "pid": PID, "tid": TID,
                            "ts": launch_ts, "dur": launch_dur, "args": {"correlation": corr, **link}})
        self.events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                            "args": {"correlation": corr, "stream": stream, "device": 0, **link, **args}})

    def doc(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schemaVersion": 1, "traceEvents": self.events}
        if self.device is not None:
            out["deviceProperties"] = [{"id": 0, **self.device}]
        if self.distributed:
            out["distributedInfo"] = self.distributed
        return out

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.doc()))
        return path


B200 = {"name": "NVIDIA B200", "totalGlobalMem": 191503138816, "computeMajor": 10, "computeMinor": 0,
        "warpSize": 32, "numSms": 148}
H100 = {"name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045870592, "computeMajor": 9, "computeMinor": 0,
        "warpSize": 32, "numSms": 132}
V100 = {"name": "Tesla V100-SXM2-32GB", "totalGlobalMem": 34079899648, "computeMajor": 7, "computeMinor": 0,
        "warpSize": 32, "numSms": 80}
MI300X = {"name": "AMD Instinct MI300X", "totalGlobalMem": 205822885888, "computeMajor": 9, "computeMinor": 4,
          "warpSize": 64, "numSms": 304}
