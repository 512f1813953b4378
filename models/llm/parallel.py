"""An LLM step split over tensor (TP) and pipeline (PP) parallel ranks: each dimension's communication.

The communication roofline: a dimension moving Q_comm bytes over a link of
bandwidth B while its rank does W FLOP has I_comm = W / Q_comm and is
comm-bound on that link when I_comm < I*_link = F / B (P = min(F, I_comm·B)).
F is the step's own compute roof: its FLOPs over the sum of each op's W/F, so
the link's ridge is where the transfer takes as long as the rank's compute.

Counted as Megatron-LM splits a decoder layer: TP all-reduces the activations
(tokens × hidden) twice per layer, after attention's output projection and
after the MLP's down projection; each rank holds layers/PP layers. Around the
layers TP adds two transfers a step: the vocab-parallel embedding's all-reduce
(tokens × hidden) and the gather of the lm_head's vocab-split logits (one row
per request × vocab); with PP the first stage has the one, the last the other,
and the heavier is counted (the busiest rank). PP sends the
activations once across each stage boundary per step (p2p; each rank at most
once). Wire bytes per rank follow nccl-tests' bus factors (models.comm).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..comm import wire_bytes
from ..dtypes import DTYPES
from ..errors import BadValue
from ..links import LINK_LEVELS
from ..profile import DeviceProfile


@dataclass(frozen=True)
class Transfer:
    """A collective a dimension runs besides its per-layer ones (TP's embedding all-reduce, logits gather)."""

    name: str
    collective: str  # models.comm names
    calls: int
    message_bytes: float
    degree: int

    @property
    def wire_bytes(self) -> float:
        return self.calls * wire_bytes(self.collective, self.degree, self.message_bytes)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "collective": self.collective, "calls": self.calls,
                "message_bytes": self.message_bytes, "wire_bytes": self.wire_bytes}


@dataclass(frozen=True)
class CommDim:
    """One parallel dimension's communication per step, as one rank sees it."""

    dim: str  # "tp" | "pp"
    degree: int
    collective: str  # allreduce | sendrecv (models.comm names)
    calls: int  # per rank per step
    message_bytes: float  # S of one call
    flops: float  # W per rank per step
    compute_s: float  # the rank's Σ W/F per step
    extra: tuple[Transfer, ...] = ()  # the step's other collectives in this dimension

    @property
    def layer_wire_bytes(self) -> float:
        """The per-layer collectives' bytes on this rank's link per step."""
        return self.calls * wire_bytes(self.collective, self.degree, self.message_bytes)

    @property
    def wire_bytes(self) -> float:
        """Q_comm: bytes this rank puts on its link per step, the extra transfers included."""
        return self.layer_wire_bytes + sum(t.wire_bytes for t in self.extra)

    @property
    def intensity(self) -> float:
        """I_comm = W / Q_comm in FLOP per byte on the wire."""
        return self.flops / self.wire_bytes if self.wire_bytes else float("inf")

    def link_ridge(self, bandwidth: float) -> float:
        """I*_link = F / B with F the step's compute roof (W over Σ W/F)."""
        return (self.flops / self.compute_s) / bandwidth

    def comm_s(self, bandwidth: float) -> float:
        return self.wire_bytes / bandwidth

    def comm_bound(self, bandwidth: float) -> bool:
        return self.intensity < self.link_ridge(bandwidth)

    def on_links(self, device: DeviceProfile) -> list[dict[str, Any]]:
        """Each link the device has (nvlink or xgmi, pcie, net): its B, ridge, transfer time and verdict."""
        out = []
        for level in LINK_LEVELS:
            if level in device.bandwidth:
                b = device.B(level)
                out.append({"level": level, "bandwidth": b, "ridge": self.link_ridge(b), "comm_s": self.comm_s(b),
                            "comm_bound": self.comm_bound(b)})
        return out

    def to_dict(self, device: DeviceProfile) -> dict[str, Any]:
        return {"dim": self.dim, "degree": self.degree, "collective": self.collective, "calls": self.calls,
                "message_bytes": self.message_bytes, "wire_bytes": self.wire_bytes, "flops": self.flops,
                "compute_s": self.compute_s, "intensity": self.intensity, "links": self.on_links(device),
                "layer_wire_bytes": self.layer_wire_bytes, "extra": [t.to_dict() for t in self.extra]}


def parallel_comm(layers: int, hidden: int, dtype: str, tokens: int, step_flops: float, step_compute_s: float,
                  tp: int, pp: int, per_rank: bool = False, vocab: int = 0, logits_rows: int = 0) -> list[CommDim]:
    """TP's and PP's communication per rank for one step (only the dimensions with degree > 1).

    step_flops and step_compute_s are the whole step's, split evenly over the tp·pp ranks; or, with
    `per_rank`, already one rank's (models.llm's step with tp, pp counts the rank's own ops). With a
    `vocab`, TP also counts the embedding all-reduce and the gather of `logits_rows` rows of logits."""
    if tp < 1 or pp < 1:
        raise BadValue(f"--tp {tp} / --pp {pp}: degrees start at 1")
    if pp > layers:
        raise BadValue(f"--pp {pp} is more pipeline stages than the model's {layers} layers")
    ranks = tp * pp
    flops, compute_s = (step_flops, step_compute_s) if per_rank else (step_flops / ranks, step_compute_s / ranks)
    act = tokens * hidden * DTYPES[dtype].size
    out = []
    if tp > 1:
        extra: list[Transfer] = []
        if vocab:
            extra = [Transfer("embedding", "allreduce", 1, act, tp),
                     Transfer("logits", "allgather", 1, logits_rows * vocab * DTYPES[dtype].size, tp)]
            if pp > 1:  # the first stage embeds, the last gathers the logits: the busier one
                extra = [max(extra, key=lambda t: t.wire_bytes)]
        out.append(CommDim("tp", tp, "allreduce", 2 * -(-layers // pp), act, flops, compute_s, tuple(extra)))
    if pp > 1:
        out.append(CommDim("pp", pp, "sendrecv", 1, act, flops, compute_s))
    return out
