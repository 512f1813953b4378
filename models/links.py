"""The links a collective crosses: their levels, their names on screen, and which one joins a vendor's GPUs.

A collective's bytes cross a link, never DRAM: the GPU-to-GPU link of a node
(NVLink on NVIDIA, xGMI — Infinity Fabric — on AMD), the host link (PCIe) or
the network to other nodes. A device profile keeps each link's slope under
its level's name. An AMD GPU has no NVLink: on an AMD device `nvlink` and
`xgmi` name its one GPU-to-GPU link (a profile written before xgmi was a level
kept its Infinity Fabric figure under nvlink), and it is shown as xgmi.

Pure: names and look-ups, no I/O.
"""

from __future__ import annotations

from typing import Any

LINK_LEVELS = ("nvlink", "xgmi", "pcie", "net")  # a collective's levels (models.paths.LEVELS has them all)
LINK_NAMES = {"nvlink": "NVLink", "xgmi": "xGMI (Infinity Fabric)", "pcie": "PCIe", "net": "network"}
GPU_LINKS = {"amd": "xgmi"}  # vendor → its GPU-to-GPU link; every other vendor's is nvlink
GPU_LINK_LEVELS = ("nvlink", "xgmi")
GPUS_PER_NODE = 8  # where nothing says otherwise: the usual GPU server


def gpu_link(vendor: str) -> str:
    """The level of the link between one node's GPUs for a vendor (`amd`, `nvidia`, or '' when unknown)."""
    return GPU_LINKS.get((vendor or "").lower(), "nvlink")


def link_name(level: str) -> str:
    """A link's name on screen: `xgmi` is "xGMI (Infinity Fabric)"; a level rooftop does not know, as given."""
    return LINK_NAMES.get(level, level)


def link_on(device: Any, level: str) -> tuple[str, str | None]:
    """(the level's name on `device`, the key its slope is kept under, None where the profile has none): on an
    AMD device nvlink is its xgmi, kept under either name."""
    bandwidth = getattr(device, "bandwidth", {}) or {}
    if level in GPU_LINK_LEVELS and gpu_link(getattr(device, "vendor", "")) == "xgmi":
        return "xgmi", next((k for k in ("xgmi", "nvlink") if k in bandwidth), None)
    return level, level if level in bandwidth else None
