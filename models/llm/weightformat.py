"""A checkpoint's weight format, from its config's `quantization_config`: the bytes Q counts per weight.

A quantised checkpoint stores its linear layers' weights narrow, each with its scales: fp8 with one
fp32 scale per 128×128 block (DeepSeek-V3), MXFP4 at 4.25 bits (gpt-oss's experts), NVFP4 at 4.5 bits,
AWQ / GPTQ int4 with an fp16 scale and a 4-bit zero per group. The embedding table, the norms, the
MoE router and the lm_head stay at the model's dtype, as the checkpoints keep them; a config's
`modules_to_not_convert` (or `ignore`, `exclude_modules`) keeps more parts there (gpt-oss: attention,
so only its experts are MXFP4).

The GEMM computes in the format where the device has its tensor-core path (fp8 on Hopper, the FP4
formats on Blackwell), else at the activations' dtype with the weights unpacked in the kernel
(weight-only): the faster roof a kernel could use, so T stays a lower bound.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from ..dtypes import grouped_dtype, weight_dtype, weight_size
from ..errors import ModelError
from ..paths import matmul_path

# The linear-layer parts a format can convert; everything else stays at the model's dtype.
PARTS = ("attention", "mlp", "experts", "shared")
PART_NAMES = {"attention": "attention", "mlp": "the dense MLPs", "experts": "the experts",
              "shared": "the shared experts"}
# What a modules_to_not_convert entry names, by the words in it (Hugging Face module paths); the first
# that matches (mlp.shared_experts names the shared experts, not the routed ones).
_PART_WORDS = (("attn", "attention"), ("shared_expert", "shared"), ("experts", "experts"))
METHODS = ("fp8", "mxfp4", "modelopt (NVFP4 / FP8)", "awq", "gptq")


@dataclass(frozen=True)
class WeightFormat:
    """How a checkpoint stores the weights of its linear layers."""

    method: str  # quant_method as the config names it
    wdtype: str  # the weights' format (a weight_dtype name: fp8-b128x128, mxfp4, nvfp4, int4-g128)
    native: str | None  # the dtype a GEMM can compute in on tensor cores that take it; None: weight-only
    parts: tuple[str, ...] = PARTS  # the parts stored in the format
    compute: str | None = None  # the GEMM's dtype on the device at hand (on_device); None: the model's

    @property
    def bytes_per_weight(self) -> float:
        return weight_size(self.wdtype)

    @property
    def bits(self) -> float:
        return 8 * self.bytes_per_weight

    def converts(self, part: str) -> bool:
        return part in self.parts

    def describe(self, present: tuple[str, ...] = PARTS) -> str:
        """One line: the format, its bits with scales, what it covers of the `present` parts, where the
        GEMMs compute."""
        label = weight_dtype(self.wdtype).label  # type: ignore[union-attr]
        ours = [p for p in present if p in self.parts]
        which = "every linear layer" if ours == list(present) else " and ".join(PART_NAMES[p] for p in ours)
        where = (f"GEMMs on the {self.compute} tensor cores" if self.compute
                 else "weight-only: GEMMs at the activations' dtype, weights unpacked in the kernel")
        return (f"weights {self.method} ({label}: {self.bits:.4g} bits a weight, scales in) on {which}; "
                f"embeddings, norms, router and lm_head at the model's dtype; {where}")


def on_device(fmt: WeightFormat | None, has_path: Any) -> WeightFormat | None:
    """The format with its GEMMs' dtype chosen for a device: its native dtype where `has_path(path)`."""
    if fmt is None or fmt.native is None:
        return fmt
    return replace(fmt, compute=fmt.native if has_path(matmul_path(fmt.native)) else None)


def weight_format(cfg: Mapping[str, Any]) -> tuple[WeightFormat | None, str]:
    """The format a config's `quantization_config` names, or None; and a note when it names one rooftop
    does not read (then the weights are counted at the model's dtype, and the note says so)."""
    q = cfg.get("quantization_config")
    if q is None:
        return None, ""
    if not isinstance(q, Mapping):
        raise ModelError("config key 'quantization_config' must be an object")
    method = str(q.get("quant_method") or "").lower()
    algo = str(q.get("quant_algo") or "").lower()
    if method == "fp8" or (method == "modelopt" and algo == "fp8") or method == "fbgemm_fp8":
        fmt = WeightFormat(method, _fp8_blocks(q.get("weight_block_size")), "fp8")
    elif method == "mxfp4":
        fmt = WeightFormat(method, "mxfp4", "mxfp4")
    elif method == "nvfp4" or (method == "modelopt" and algo == "nvfp4"):
        fmt = WeightFormat("nvfp4", "nvfp4", "nvfp4")
    elif method in ("awq", "gptq"):
        fmt = WeightFormat(method, _int_groups(q), None)
    else:
        shown = method or algo or "(none given)"
        return None, (f"quantization_config quant_method {shown!r} not read (rooftop reads {', '.join(METHODS)}): "
                      "weights counted at the model's dtype")
    return replace(fmt, parts=tuple(p for p in PARTS if p not in _kept(q))), ""


def _fp8_blocks(block: Any) -> str:
    """fp8 weights: one fp32 scale per block of weight_block_size, else per tensor (not counted)."""
    if block is None:
        return "fp8"
    ok = isinstance(block, list) and len(block) == 2 and all(
        isinstance(b, int) and not isinstance(b, bool) and 1 <= b <= 1 << 16 for b in block)
    if not ok:
        raise ModelError(f"quantization_config 'weight_block_size' = {block!r} must be two whole numbers, "
                          "rows and columns of a scale block (DeepSeek-V3: [128, 128])")
    return f"fp8-b{block[0]}x{block[1]}"


def _int_groups(q: Mapping[str, Any]) -> str:
    """AWQ / GPTQ: `bits` (4 or 8) with one fp16 scale and a zero per `group_size` (-1: per channel)."""
    bits, group = q.get("bits", q.get("w_bit", 4)), q.get("group_size", q.get("q_group_size", 128))
    if bits not in (4, 8) or isinstance(bits, bool):
        raise ModelError(f"quantization_config 'bits' = {bits!r}: rooftop counts 4- and 8-bit AWQ / GPTQ weights")
    if group == -1:
        return f"int{bits}-ch"
    name = f"int{bits}-g{group}"
    if isinstance(group, bool) or not isinstance(group, int) or grouped_dtype(name) is None:
        raise ModelError(f"quantization_config 'group_size' = {group!r} must be a whole number of weights "
                          "per scale (128 is usual) or -1 (per channel)")
    return name


def _kept(q: Mapping[str, Any]) -> set[str]:
    """The parts a config keeps unconverted: modules_to_not_convert (Hugging Face), ignore
    (compressed-tensors), exclude_modules (ModelOpt); entries naming embeddings, lm_head or the router
    name what stays unconverted anyway."""
    names: list[Any] = []
    for key in ("modules_to_not_convert", "ignore", "exclude_modules", "ignored_layers"):
        v = q.get(key)
        if isinstance(v, list):
            names += v
    kept: set[str] = set()
    for n in names:
        if isinstance(n, str):
            kept |= {next((part for word, part in _PART_WORDS if word in n.lower()), "")} - {""}
    return kept
