"""A measured or claimed figure beyond the bound: the one rule, and what caps a step's tokens/s.

A time more than roofline.ABOVE_ROOF under its bound (roofline.beats) is no fact to show without
a word: the roofs, the model or the figure is wrong. `--measured-ms` holds a
step's time against ΣT; `--measured-tokens-per-s` holds a throughput claim
against the same bound, turned into tokens/s: a claim of X tok/s means a pass
through the model of tokens-per-step / X seconds, pp × the rank's step. What
caps it is said by part, each alone a floor on the step: the weights the step
reads over B, the KV cache it reads over B, the ops together (ΣT, with the
expert-parallel all-to-alls where there are any), and the eager launch floor.
The last is a floor only for kernels launched one by one: a CUDA graph lowers
it, so a claim above it alone is said, not called impossible.

Pure: numbers in, lines out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..roofline import beats

if TYPE_CHECKING:
    from .step import StepBound


@dataclass(frozen=True)
class Cap:
    """One part of a step and the tokens/s it alone allows."""

    name: str  # weights | kv | roofline | launch
    what: str  # in words, for the line
    step_s: float  # the part's floor on the rank's step

    def tokens_per_s(self, step: StepBound) -> float:
        return step.tokens_per_step / (step.pp * self.step_s) if self.step_s > 0 else float("inf")


def caps(step: StepBound) -> list[Cap]:
    """The parts that cap a step's tokens/s, each alone: weights, KV cache, all ops (ΣT), the eager launches."""
    b = step.device.B()
    out = [Cap("weights", f"the weights alone ({step.weights_read_bytes / 1e9:.3g} GB a step at "
                          f"{b / 1e12:.3g} TB/s)", step.weights_read_bytes / b),
           Cap("kv", f"the KV cache alone ({step.kv_bytes / 1e9:.3g} GB a step)", step.kv_bytes / b),
           Cap("roofline", f"the step's ops together (ΣT {step.roofline_s * 1e3:.3g} ms)", step.roofline_s)]
    if step.launch_floor_s is not None:
        out.append(Cap("launch", f"the eager launch floor ({step.kernels} kernels, {step.launch_floor_s * 1e3:.3g} ms)",
                       step.launch_floor_s))
    return out


def claim_step_s(step: StepBound, tokens_per_s: float) -> float:
    """The rank's step time a tokens/s claim means: a pass of tokens-per-step / X over pp stages."""
    return step.tokens_per_step / tokens_per_s / step.pp


def binding_cap(step: StepBound, tokens_per_s: float) -> Cap | None:
    """What the claim cannot pass: the tightest single part it beats (weights, then KV) where one alone does,
    else ΣT; the launch floor where only it is beaten; None when the claim is within every cap."""
    t = claim_step_s(step, tokens_per_s)
    by = {c.name: c for c in caps(step)}
    beaten = [c for c in (by["weights"], by["kv"]) if beats(t, c.step_s)]
    if beaten:
        return max(beaten, key=lambda c: c.step_s)
    if beats(t, by["roofline"].step_s):
        return by["roofline"]
    return by["launch"] if "launch" in by and beats(t, by["launch"].step_s) else None


def claim_lines(step: StepBound, tokens_per_s: float) -> list[str]:
    """A claim above the bound in a line naming what caps it; nothing for one within it."""
    cap = binding_cap(step, tokens_per_s)
    if cap is None:
        return []
    head = f"{tokens_per_s:,.3g} tok/s is above the bound"
    if cap.name == "launch":
        graph = (f"; from a CUDA graph the floor is {step.graph_floor_s * 1e3:.3g} ms"
                 if step.graph_floor_s is not None else "")
        return [f"{head} of launching each kernel eagerly: {cap.what} caps it at {cap.tokens_per_s(step):,.3g} tok/s"
                f" — only a CUDA graph (or fewer, fused kernels) gets past it{graph}"]
    return [f"{head}: {cap.what} cap{'' if cap.name == 'roofline' else 's'} it at {cap.tokens_per_s(step):,.3g} "
            "tok/s, which no run can beat — the figure is not this model, batch and device (or the roofs are low: "
            "give -d with its measured profile)"]


def claim_dict(step: StepBound, tokens_per_s: float) -> dict[str, Any]:
    """--json: the claim, whether it is above the bound, what caps it, and each cap in tok/s."""
    cap = binding_cap(step, tokens_per_s)
    return {"tokens_per_s": tokens_per_s, "step_s": claim_step_s(step, tokens_per_s),
            "above_bound": cap is not None and cap.name != "launch",
            "above_eager_launch_floor": cap is not None and cap.name == "launch",
            "capped_by": cap.name if cap else None,
            "caps_tokens_per_s": {c.name: c.tokens_per_s(step) for c in caps(step)}}
