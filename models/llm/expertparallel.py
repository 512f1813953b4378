"""Expert parallelism (EP): a MoE model's routed experts spread over N ranks, and the all-to-alls that adds.

Counted as DeepSeek-V3 and the wide-EP deployments of SGLang and vLLM serve it:
each of the N ranks holds E/N of every MoE layer's routed experts and the rest
of the model whole (attention, shared experts, norms, router, embedding,
lm_head), which it runs for its own batch (data-parallel attention): `--batch`
is one rank's. Per MoE layer a rank sends each of its tokens to the ranks
holding its top-k experts (dispatch) and gets their outputs back (combine): two
all-to-alls of S = batch × top_k × hidden elements. Per rank and call the bytes
counted are the (N−1)/N of S that leave the rank under uniform routing (the 1/N
routed to its own experts stays): models.comm's all-to-all bus factor.

Inside a node (N ≤ 8 GPUs) that crosses NVLink (xGMI on AMD); beyond, the
(N − 8)/N of S bound for other nodes crosses the network while (8 − 1)/N stays
on NVLink; the two links carry their shares at once, so a call takes the slower.

Imbalance F (the busiest rank's expert load over the mean, at least 1): the
step waits for the busiest rank, so it is the one counted. Its experts run
F × batch × top_k token copies a layer, it reads F × the mean rank's distinct
experts (at most the E/N it holds), and it receives F × S·(N−1)/N in the
dispatch (and sends as much in the combine).

Each all-to-all is on the step's path (the experts need their tokens, the next
layer the combined outputs), so the bound adds them: T ≥ ΣT + Σ all-to-all.
Two micro-batches overlapped (DeepSeek's dual micro-batch) can hide one's
all-to-alls behind the other's compute, down to T ≥ max(ΣT, Σ all-to-all).

Pure: shapes and a device profile in, numbers out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..comm import wire_bytes
from ..dtypes import DTYPES
from ..errors import BadInput
from ..links import GPUS_PER_NODE, link_name, link_on
from ..units import fmt_bytes, fmt_time
from .parallel import CommDim
from ..profile import DeviceProfile
from .step import Arch, Phase, expected_experts


class ExpertParallelError(BadInput, ValueError):
    """An --ep / --ep-imbalance the model or the other options do not allow; one line."""


@dataclass(frozen=True)
class ExpertParallel:
    """One EP rank's share of a MoE step, the busiest rank's: its experts, their load, its all-to-alls."""

    degree: int  # N
    imbalance: float  # F
    experts: int  # E, the model's routed experts per layer
    top_k: int
    moe_layers: int
    tokens: int  # the rank's tokens a step (its own batch)
    hidden: int
    elem_bytes: float  # one activation element
    mean_used: float  # distinct experts of the rank's own a layer touches, on the mean rank
    gpus_per_node: int = GPUS_PER_NODE

    @property
    def local_experts(self) -> int:
        return self.experts // self.degree

    @property
    def used(self) -> float:
        """Distinct experts the busiest rank runs a layer: F × the mean's, at most the E/N it holds."""
        return min(float(self.local_experts), self.imbalance * self.mean_used)

    @property
    def rows(self) -> float:
        """Token rows each expert it runs gets on average: F × batch × top_k copies over `used` experts."""
        return self.imbalance * self.tokens * self.top_k / self.used if self.used else 0.0

    @property
    def message_bytes(self) -> float:
        """S of one call on the busiest rank: F × batch × top_k × hidden elements."""
        return self.imbalance * self.tokens * self.top_k * self.hidden * self.elem_bytes

    @property
    def call_wire_bytes(self) -> float:
        """Bytes one dispatch (or combine) puts on the rank's links: the (N−1)/N of S that leaves it."""
        return wire_bytes("alltoall", self.degree, self.message_bytes)

    @property
    def layer_wire_bytes(self) -> float:
        """A MoE layer's dispatch and combine."""
        return 2 * self.call_wire_bytes

    def link_shares(self) -> dict[str, float]:
        """A layer's bytes per link: to the node's other ranks over the GPU link, to other nodes' over the net."""
        local = min(self.degree, self.gpus_per_node)
        per_rank = 2 * self.message_bytes / self.degree  # a layer's bytes to each other rank
        shares = {"nvlink": per_rank * (local - 1)}
        if self.degree > local:
            shares["net"] = per_rank * (self.degree - local)
        return shares

    def layer_s(self, device: DeviceProfile) -> float | None:
        """A MoE layer's two all-to-alls on the device's links, the slower link's time; None where the profile
        lacks a link they cross."""
        times = []
        for level, q in self.link_shares().items():
            _, key = link_on(device, level)
            if key is None:
                return None
            times.append(q / device.B(key))
        return max(times, default=0.0)

    def step_s(self, device: DeviceProfile) -> float | None:
        t = self.layer_s(device)
        return None if t is None else self.moe_layers * t

    def missing_links(self, device: DeviceProfile) -> list[str]:
        """The links the all-to-alls cross that the profile has no bandwidth for, by their names on screen."""
        return [link_name(name) for name, key in (link_on(device, lv) for lv in self.link_shares()) if key is None]

    def comm_dim(self, flops: float, compute_s: float) -> CommDim:
        """The rank's all-to-alls as a parallel dimension (the communication table, beside TP's and PP's)."""
        return CommDim("ep", self.degree, "alltoall", 2 * self.moe_layers, self.message_bytes, flops, compute_s)

    def to_dict(self, device: DeviceProfile) -> dict[str, Any]:
        return {"degree": self.degree, "imbalance": self.imbalance, "experts_per_rank": self.local_experts,
                "experts_run_per_layer": self.used, "rows_per_expert": self.rows, "moe_layers": self.moe_layers,
                "alltoall_message_bytes": self.message_bytes, "alltoall_wire_bytes": self.call_wire_bytes,
                "layer_wire_bytes": self.layer_wire_bytes, "layer_link_bytes": self.link_shares(),
                "alltoall_layer_s": self.layer_s(device), "alltoall_step_s": self.step_s(device),
                "missing_links": self.missing_links(device) or None}


def expert_parallel(arch: Arch, phase: Phase, degree: int, imbalance: float = 1.0) -> ExpertParallel | None:
    """The busiest EP rank of `degree` for this model and step; None for degree 1 (no EP). An ExpertParallelError
    in one line for a degree or imbalance the model does not allow."""
    if degree < 1:
        raise ExpertParallelError(f"--ep {degree}: degrees start at 1")
    if not (math.isfinite(imbalance) and imbalance >= 1):
        raise ExpertParallelError(f"--ep-imbalance {imbalance:g}: the busiest rank's expert load over the mean is "
                                  "at least 1 (1: balanced)")
    if degree == 1:
        if imbalance != 1:
            raise ExpertParallelError("--ep-imbalance needs --ep N > 1: with one rank there is no busiest one")
        return None
    if not arch.experts:
        raise ExpertParallelError(f"--ep {degree}: {arch.name} has no routed experts (a dense MLP); expert "
                                  "parallelism needs a MoE model")
    if arch.experts % degree:
        ok = ", ".join(str(d) for d in range(1, arch.experts + 1) if arch.experts % d == 0)
        raise ExpertParallelError(f"--ep {degree}: {arch.name}'s {arch.experts} routed experts do not split "
                                  f"{degree} ways; give an ep that divides them ({ok})")
    mean = expected_experts(arch.experts, arch.experts_per_token, degree * phase.tokens) / degree
    return ExpertParallel(degree, imbalance, arch.experts, arch.experts_per_token, arch.moe_layers, phase.tokens,
                          arch.hidden, DTYPES[arch.dtype].size, mean)


def ep_line(ep: ExpertParallel, device: DeviceProfile) -> str:
    """The all-to-alls per layer and what they add to T, in a line."""
    links = " + ".join(f"{fmt_bytes(q)} over {link_name(link_on(device, lv)[0])}" for lv, q in ep.link_shares().items())
    head = (f"EP {ep.degree}: {ep.local_experts} of {ep.experts} routed experts a rank, the busiest running "
            f"{ep.used:.3g} a layer ({ep.rows:.3g} rows each; imbalance {ep.imbalance:g}); a MoE layer's dispatch and "
            f"combine all-to-alls send {fmt_bytes(ep.layer_wire_bytes)} ((N−1)/N of 2 × {fmt_bytes(ep.message_bytes)}: "
            f"{links})")
    t = ep.layer_s(device)
    if t is None:
        return (f"{head}; {device.id} has no {' or '.join(ep.missing_links(device))} bandwidth: the all-to-alls are "
                "not in T (give -d with a profile that has it)")
    return (f"{head}: {fmt_time(t)} a layer, {fmt_time(t * ep.moe_layers)} over {ep.moe_layers} MoE layers, added to T "
            "(each waits on the one before; two overlapped micro-batches can hide them behind compute)")
