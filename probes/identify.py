"""Name the local GPUs through NVML, without torch and without ever raising.

`rooftop op` and the app use this to pick a sensible default device: on an H200 box the reference H200
profile, on an L4 box the L4's datasheet. Any NVML failure (no library, no driver, lost GPU) simply means
"no GPU found". NVML is asked through its one door (probes/nvml.py), shared with telemetry and devinfo.
"""

from __future__ import annotations

import logging
from typing import Any

from rooftop.models.devicefamily import Placement, place_device
from rooftop.probes.nvml import ODD_VALUE, Nvml, NvmlGpu, door

log = logging.getLogger(__name__)


def _facts(nv: Nvml, gpu: NvmlGpu) -> dict[str, Any]:
    """What NVML tells of a GPU, in the words of a trace's deviceProperties (each left out if NVML cannot say)."""
    props: dict[str, Any] = {"runtime": "CUDA"}
    memory = nv.query("nvmlDeviceGetMemoryInfo", gpu.handle, gpu=gpu.index)
    try:
        props["totalGlobalMem"] = int(memory.total)
    except ODD_VALUE as exc:  # not supported (None), a bad value: the name alone then
        log.debug("NVML memory not known: %s", exc)
    capability = nv.query("nvmlDeviceGetCudaComputeCapability", gpu.handle, gpu=gpu.index)
    try:
        props["computeMajor"], props["computeMinor"] = (int(x) for x in capability)
    except ODD_VALUE as exc:  # older bindings lack the call (None), a bad value
        log.debug("NVML compute capability not known: %s", exc)
    return props


def local_gpus() -> list[tuple[str, dict[str, Any]]]:
    """Each GPU NVML sees, in index order: its name and its facts (`_facts`); [] when NVML is unavailable."""
    nv = door()
    if not nv.open():
        log.debug("%s", nv.reason)
        return []
    return [(gpu.name, _facts(nv, gpu)) for gpu in nv.gpus]


def gpu_names() -> list[str]:
    """Names of the GPUs NVML sees, in index order; [] when NVML is unavailable."""
    return [name for name, _ in local_gpus()]


def local_placement() -> Placement | None:
    """Where the catalog places this machine's GPU: the first NVML names that a profile fits, else the first
    one (with no profile, and the closest named); None when NVML finds no GPU."""
    placed = [place_device(name, props, whose="this machine's") for name, props in local_gpus()]
    return next((p for p in placed if p.profile is not None), placed[0] if placed else None)
