"""Name the local GPUs through NVML, without torch and without ever raising.

`rooftop op` uses this to pick a sensible default device: on an H200 box the
reference H200 profile. Any NVML failure (no library, no driver, lost GPU)
simply means "no GPU found".
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def gpu_names() -> list[str]:
    """Names of the GPUs NVML sees, in index order; [] when NVML is unavailable."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, …
        log.debug("NVML not available: %s", exc)
        return []
    names: list[str] = []
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            names.append(name.decode() if isinstance(name, bytes) else str(name))
    except Exception as exc:  # a GPU lost mid-query: report what we have
        log.debug("NVML query failed: %s", exc)
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return names


def local_reference_profile():  # noqa: ANN201 - DeviceProfile | None, imported lazily
    """The catalog's reference profile for the first local GPU NVML names, or None."""
    from rooftop.models.catalog import find_by_name

    for name in gpu_names():
        found = find_by_name(name)
        if found is not None:
            return found
    return None
