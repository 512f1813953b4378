"""Name the local GPUs through NVML, without torch and without ever raising.

`rooftop op` and the app use this to pick a sensible default device: on an H200 box the reference H200
profile, on an L4 box the L4's datasheet. Any NVML failure (no library, no driver, lost GPU) simply means
"no GPU found".
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def _facts(pynvml: Any, handle: Any) -> dict[str, Any]:
    """What NVML tells of a GPU, in the words of a trace's deviceProperties (each left out if NVML cannot say)."""
    props: dict[str, Any] = {"runtime": "CUDA"}
    try:
        props["totalGlobalMem"] = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
    except Exception as exc:  # NVMLError_NotSupported, a bad value: the name alone then
        log.debug("NVML memory not known: %s", exc)
    try:
        props["computeMajor"], props["computeMinor"] = (int(x) for x in
                                                        pynvml.nvmlDeviceGetCudaComputeCapability(handle))
    except Exception as exc:  # older bindings lack the call
        log.debug("NVML compute capability not known: %s", exc)
    return props


def local_gpus() -> list[tuple[str, dict[str, Any]]]:
    """Each GPU NVML sees, in index order: its name and its facts (`_facts`); [] when NVML is unavailable."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, …
        log.debug("NVML not available: %s", exc)
        return []
    gpus: list[tuple[str, dict[str, Any]]] = []
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            gpus.append((name.decode() if isinstance(name, bytes) else str(name), _facts(pynvml, handle)))
    except Exception as exc:  # a GPU lost mid-query: report what we have
        log.debug("NVML query failed: %s", exc)
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return gpus


def gpu_names() -> list[str]:
    """Names of the GPUs NVML sees, in index order; [] when NVML is unavailable."""
    return [name for name, _ in local_gpus()]


def local_placement():  # noqa: ANN201 - Placement | None, imported lazily
    """Where the catalog places this machine's GPU: the first NVML names that a profile fits, else the first
    one (with no profile, and the closest named); None when NVML finds no GPU."""
    from rooftop.models.devicefamily import place_device

    placed = [place_device(name, props, whose="this machine's") for name, props in local_gpus()]
    return next((p for p in placed if p.profile is not None), placed[0] if placed else None)
