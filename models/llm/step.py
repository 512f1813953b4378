"""LLM inference on the roofline: prefill vs decode, the decode-step bound.

An architecture (from a Hugging Face config.json or a built-in) becomes, for a
phase, the list of per-layer ops — seven linear GEMMs, attention, norms and
elementwise glue — each a roofline point. Summing each op's bound gives a
lower bound on the step; dividing the bytes a step must read by B gives the
simpler bytes bound (weights without the input embedding table, plus the KV
cache of every request). The op table counts the same bytes, so ΣT ≥ Q/B.

Two things outside the roofline are said beside it: the launch floor (the
step's kernels × the device's measured launch overhead: a step cannot finish
before its kernels are issued) and whether weights and KV cache fit in the
device's memory at all.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any, Callable, Mapping, Sequence

from .. import roofline
from ..analysis import Analysis, analyze
from ..dtypes import DTYPES, lookup_dtype
from ..errors import ModelError
from .mla import Mla, mla_from_config
from ..ops import Attention, Elementwise, Gemm, Norm, Op
from ..profile import DeviceProfile
from ..safetext import safe_text
from ..units import fmt_count
from .weightformat import WeightFormat, on_device, weight_format

# models.expertparallel.ExpertParallel, which builds on this module: typed as Any here to keep imports one-way
ExpertParallel = Any

SILU_MUL_FLOPS = 5.0  # silu(g)·u per element: exp, add, divide, two multiplies
FUSED_MOE_LAUNCHES = 2  # per MoE layer in a fused-MoE kernel: grouped gate+up (activation fused in), grouped down


@dataclass(frozen=True)
class Arch:
    """The shape of a decoder-only transformer, in config.json's terms."""

    name: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool = False
    dtype: str = "bf16"
    qkv_bias: bool = False
    experts: int = 0  # routed experts per MoE layer (0: dense MLP)
    experts_per_token: int = 0
    moe_intermediate: int = 0
    shared_intermediate: int = 0  # shared-expert MLP width, if any
    dtype_note: str = ""  # why `dtype` differs from the config's torch_dtype, when it does
    sliding_window: int = 0  # keys a sliding-window layer attends to (0: none)
    sliding_layers: int = 0  # how many of the layers use the window (the rest attend to every key)
    dense_layers: int = 0  # a MoE model's first layers with a dense MLP instead (first_k_dense_replace)
    mla: Mla | None = None  # multi-head latent attention's dimensions (DeepSeek-V2/V3), or None
    mtp_layers: int = 0  # multi-token-prediction layers the checkpoint adds (num_nextn_predict_layers): not counted
    weights: WeightFormat | None = None  # the checkpoint's quantised format (quantization_config), or None

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.experts else 0

    @property
    def full_layers(self) -> int:
        return self.layers - self.sliding_layers

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    # -- parameter counts ------------------------------------------------------------

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def attention_params(self) -> int:
        if self.mla:
            return self.mla.linear_params(self.hidden, self.heads)
        p = self.hidden * self.q_dim + 2 * self.hidden * self.kv_dim + self.q_dim * self.hidden
        return p + (self.q_dim + 2 * self.kv_dim if self.qkv_bias else 0)

    @property
    def dense_mlp_params(self) -> int:
        return 3 * self.hidden * self.intermediate

    @property
    def expert_params(self) -> int:
        return 3 * self.hidden * self.moe_intermediate

    @property
    def linear_params(self) -> dict[str, int]:
        """The linear layers' weights over all layers, by the part a weight format converts."""
        moe = self.moe_layers
        return {"attention": self.layers * self.attention_params,
                "mlp": (self.layers - moe) * self.dense_mlp_params,
                "experts": moe * self.experts * self.expert_params,
                "shared": moe * 3 * self.hidden * self.shared_intermediate}

    @property
    def params(self) -> int:
        """Embedding, lm_head (untied), the layers' linear weights, norms and routers, the final norm; an MTP
        layer is not counted (it drafts tokens; the step here does not run it)."""
        head = 0 if self.tied else self.embedding_params
        norms = self.layers * (2 * self.hidden + (self.mla.norm_params if self.mla else 0))
        routers = self.moe_layers * self.hidden * self.experts
        return self.embedding_params + head + sum(self.linear_params.values()) + norms + routers + self.hidden

    @property
    def size(self) -> float:
        return DTYPES[self.dtype].size

    def part_size(self, part: str) -> float:
        """Bytes per weight of a linear part: the checkpoint's format where it converts the part, else the dtype."""
        return self.weights.bytes_per_weight if self.weights and self.weights.converts(part) else self.size

    @property
    def weights_label(self) -> str:
        """The weights' dtype as a heading says it: the format and the dtype of the rest, where quantised."""
        return f"{self.weights.wdtype}/{self.dtype}" if self.weights else self.dtype

    @property
    def weights_bytes(self) -> float:
        """Every weight at its stored size: the converted parts in their format, scales in; the rest at the dtype."""
        parts = self.linear_params
        return (self.params - sum(parts.values())) * self.size + sum(n * self.part_size(p) for p, n in parts.items())

    @property
    def embedding_bytes(self) -> float:
        return self.embedding_params * self.size

    def kv_bytes(self, tokens: int, kv_dtype: str | None = None) -> float:
        """The KV cache of one request `tokens` long: a sliding-window layer keeps only its window (a
        rolling cache), every other layer every token."""
        if self.mla:  # one latent per token and layer, shared by the heads
            return self.layers * self.mla.kv_bytes(tokens, DTYPES[kv_dtype or self.dtype].size)
        kept = self.full_layers * tokens + self.sliding_layers * min(tokens, self.sliding_window or tokens)
        return 2 * kept * self.kv_dim * DTYPES[kv_dtype or self.dtype].size

    def window_line(self) -> str:
        """The sliding window in words, empty when the model has none."""
        if not self.sliding_layers:
            return ""
        which = "every layer" if self.sliding_layers == self.layers else f"{self.sliding_layers} of {self.layers} layers"
        return (f"sliding window {self.sliding_window} tokens on {which}: those attend to and keep (a rolling "
                f"cache) at most the last {self.sliding_window} tokens")


# torch_dtype names a config.json may give (torch's names and rooftop's own)
CONFIG_DTYPES = ("bfloat16", "float16", "float32", "float64", "float8_e4m3fn")

MAX_CONFIG_INT = 2**40  # beyond any real width, layer or vocabulary count; keeps every product finite


def _config_int(cfg: Mapping[str, Any], key: str, default: int, least: int = 1) -> int:
    """An optional whole-number key: absent or null gives `default`; text, lists, booleans, NaN, inf,
    fractions and out-of-range values are a ModelError naming the key."""
    v = cfg.get(key)
    if v is None:
        return default
    if isinstance(v, float) and math.isfinite(v) and v == int(v):
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool) or not least <= v <= MAX_CONFIG_INT:
        raise ModelError(f"config key {key!r} = {_shown(v)} must be a whole number from {least} to 2^40")
    return v


def _shown(v: Any) -> str:
    """A config value for an error line as the JSON file wrote it (null, true, "text"), short and on one line."""
    try:
        text = json.dumps(v, ensure_ascii=False)
    except (TypeError, ValueError):  # not from a JSON file (a test's object): Python's form
        text = repr(v)
    text = safe_text(text)
    return text if len(text) <= 40 else text[:37] + "…"


def _config_bool(cfg: Mapping[str, Any], key: str, default: bool) -> bool:
    v = cfg.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise ModelError(f"config key {key!r} = {_shown(v)} must be true or false")
    return v


def arch_from_config(cfg: Mapping[str, Any], name: str = "") -> Arch:
    """An Arch from a Hugging Face config.json (llama, qwen2, mistral, gemma, mixtral, qwen-MoE keys).

    Every key it reads is checked: a bad value is a ModelError naming the key, never a crash.
    """
    if not isinstance(cfg, Mapping):
        raise ModelError(f"a config must be a JSON object, not {type(cfg).__name__}")
    inner = cfg.get("text_config", cfg)  # multimodal configs nest the language model
    if not isinstance(inner, Mapping):
        raise ModelError(f"config key 'text_config' = {_shown(inner)} must be an object (the language model's config)")
    outer, cfg = cfg, dict(inner)
    for key in ("torch_dtype", "dtype", "tie_word_embeddings"):  # kept beside text_config by multimodal configs
        if cfg.get(key) is None and outer.get(key) is not None:
            cfg[key] = outer[key]

    def need(*keys: str) -> int:
        for k in keys:
            if cfg.get(k) is not None:
                return _config_int(cfg, k, 0)
        raise ModelError(f"config has no {' / '.join(keys)}; is it a decoder-only transformer's config.json?")

    mla = mla_from_config(cfg, _config_int)
    hidden = need("hidden_size", "n_embd", "d_model")
    heads = need("num_attention_heads", "n_head")
    kv = _config_int(cfg, "num_key_value_heads", heads)
    head_dim = _config_int(cfg, "head_dim", 0) or hidden // heads
    experts = (_config_int(cfg, "num_local_experts", 0, 0) or _config_int(cfg, "num_experts", 0, 0)
               or _config_int(cfg, "n_routed_experts", 0, 0))
    inter = need("intermediate_size", "n_inner", "ffn_dim") if not experts or cfg.get("intermediate_size") else 0
    raw_dtype = cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"
    if not isinstance(raw_dtype, str):
        raise ModelError(f"config key 'torch_dtype' = {_shown(raw_dtype)} must be a dtype name such as \"bfloat16\"")
    dt = lookup_dtype(raw_dtype.replace("torch.", ""))
    if dt is None:
        raise ModelError(f"config key 'torch_dtype' = {_shown(raw_dtype)} is not a dtype rooftop knows; use one of "
                         f"{', '.join(CONFIG_DTYPES)} (or give --dtype)")
    if heads % kv:
        raise ModelError(f"num_key_value_heads = {kv} must divide num_attention_heads = {heads}")
    if not cfg.get("head_dim") and hidden % heads and not mla:
        raise ModelError(f"hidden_size = {hidden} is not a multiple of num_attention_heads = {heads}; give head_dim")
    moe_inter = _config_int(cfg, "moe_intermediate_size", 0, 0)
    if experts and not (moe_inter or inter):
        raise ModelError(f"config has {experts} experts but no expert width: give moe_intermediate_size (or "
                         "intermediate_size, which Mixtral-style configs use for each expert)")
    shared = _config_int(cfg, "shared_expert_intermediate_size", 0, 0)
    if not shared:
        shared = _config_int(cfg, "n_shared_experts", 0, 0) * (moe_inter or inter)
    top_k = _config_int(cfg, "num_experts_per_tok", 0, 0) or _config_int(cfg, "moe_topk", 0, 0) or (2 if experts else 0)
    if experts and not (1 <= top_k <= experts):
        raise ModelError(f"num_experts_per_tok = {top_k} must be between 1 and the {experts} experts")
    layers = need("num_hidden_layers", "n_layer", "num_layers")
    window, sliding = sliding_layers(cfg, layers)
    dense = _config_int(cfg, "first_k_dense_replace", 0, 0) if experts else 0
    if dense > layers:
        raise ModelError(f"first_k_dense_replace = {dense} is more than the {layers} layers")
    if dense and not inter:
        raise ModelError(f"first_k_dense_replace = {dense} dense layers need their MLP's width: give intermediate_size")
    fmt, fmt_note = weight_format(outer if outer.get("quantization_config") is not None else cfg)
    raw_name = cfg.get("name") or cfg.get("_name_or_path") or cfg.get("model_type") or "model"
    return Arch(
        name=safe_text(name or (raw_name if isinstance(raw_name, str) else "model")),  # a file's words: shown, never obeyed
        hidden=hidden,
        intermediate=inter,
        layers=layers,
        heads=heads,
        kv_heads=kv,
        head_dim=head_dim,
        vocab=need("vocab_size"),
        tied=_config_bool(cfg, "tie_word_embeddings", tied_by_default(cfg, outer)),
        dtype=dt.name,
        qkv_bias=_config_bool(cfg, "attention_bias", cfg.get("model_type") == "qwen2"),
        experts=experts,
        experts_per_token=top_k,
        moe_intermediate=moe_inter or (inter if experts else 0),
        shared_intermediate=shared,
        sliding_window=window,
        sliding_layers=sliding,
        dense_layers=dense,
        mla=mla,
        mtp_layers=_config_int(cfg, "num_nextn_predict_layers", 0, 0),
        weights=fmt,
        dtype_note=fmt_note,
    )


LAYER_TYPES = {"sliding_attention": True, "full_attention": False}
# model_types whose config class ties the LM head to the embedding when the file leaves the key out (as the
# published Gemma configs do); Llama, Mistral, Qwen and Mixtral default to untied
TIED_FAMILIES = ("gemma", "gpt2", "opt")


def tied_by_default(cfg: Mapping[str, Any], outer: Mapping[str, Any]) -> bool:
    family = str(cfg.get("model_type") or outer.get("model_type") or "").lower()
    return family.startswith(TIED_FAMILIES)


def sliding_layers(cfg: Mapping[str, Any], layers: int) -> tuple[int, int]:
    """(window, how many layers use it) from a config: its `layer_types` where it has them, else the
    family's rule — Gemma-2 alternates sliding and full layers (even layers slide), Gemma-3 and others
    with `sliding_window_pattern` P have P − 1 sliding to 1 full, Qwen's apply `sliding_window` only with
    `use_sliding_window`, from layer `max_window_layers` on — else every layer when `sliding_window` is set."""
    raw = cfg.get("sliding_window")
    window = 0 if raw is None or raw is False else _config_int(cfg, "sliding_window", 0)
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers or any(t not in LAYER_TYPES for t in types):
            raise ModelError(f"config key 'layer_types' = {_shown(types)} must list {layers} entries (one per "
                             f"layer), each {' or '.join(repr(t) for t in LAYER_TYPES)}")
        sliding = sum(LAYER_TYPES[t] for t in types)
        if sliding and not window:
            raise ModelError("config key 'layer_types' names sliding_attention layers but 'sliding_window' is not set")
        return (window, sliding) if sliding else (0, 0)
    if not window:
        return 0, 0
    family = str(cfg.get("model_type") or "")
    if family.startswith("qwen"):
        if not _config_bool(cfg, "use_sliding_window", False):
            return 0, 0
        first = _config_int(cfg, "max_window_layers", layers, 0)
        sliding = max(0, layers - first)
    elif family == "gemma2":
        sliding = (layers + 1) // 2  # layers 0, 2, 4, … slide
    elif cfg.get("sliding_window_pattern") is not None or family.startswith("gemma3"):
        pattern = _config_int(cfg, "sliding_window_pattern", 6)
        sliding = layers - layers // pattern  # every pattern-th layer is full
    else:
        sliding = layers
    return (window, sliding) if sliding else (0, 0)


def builtin_models() -> dict[str, Mapping[str, Any]]:
    # one name a step: Python 3.10's Traversable.joinpath takes one
    text = resources.files("rooftop.models").joinpath("data").joinpath("llm").joinpath("models.json").read_text(
        encoding="utf-8")
    return json.loads(text)["models"]


SERVE_DTYPE = "bf16"  # what people serve a model in when its repository publishes fp32 weights


def builtin_arch(name: str) -> Arch | None:
    """A built-in architecture by name (package data), or None.

    Its config is kept as published; a model published in fp32 (Gemma-2) is served in bf16, as the
    serving stacks run it, and the Arch says so. `--dtype` (with_dtype) still overrides."""
    models = builtin_models()
    cfg = models.get(name.lower()) or next(  # its key (mistral-7b) or its name (Mistral-7B-v0.1)
        (c for c in models.values() if str(c.get("name", "")).lower() == name.lower()), None)
    if cfg is None:
        return None
    return served(arch_from_config(cfg, cfg.get("name", name)), cfg)


def served(arch: Arch, cfg: Mapping[str, Any]) -> Arch:
    """The model at the dtype people serve it in: a config that publishes fp32 weights (Gemma-2's does) is
    served in bf16, and the Arch says so; `--dtype` (with_dtype) still overrides."""
    if DTYPES[arch.dtype].size <= DTYPES[SERVE_DTYPE].size:
        return arch
    published = cfg.get("torch_dtype") or cfg.get("dtype") or (cfg.get("text_config") or {}).get("torch_dtype")
    note = f"served in {SERVE_DTYPE}, as serving stacks run it; its config.json publishes {published} (--dtype to change)"
    return replace(arch, dtype=SERVE_DTYPE, dtype_note=note)


# -- phases ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Phase:
    """prefill: `batch` prompts of `prompt` tokens; decode: one token per request at `context`."""

    kind: str  # "prefill" | "decode"
    batch: int
    prompt: int = 128
    context: int = 0  # decode: tokens already in the KV cache (default: the prompt)
    kv_dtype: str | None = None

    @property
    def tokens(self) -> int:
        """M of the linear layers: tokens sent through the weights at once."""
        return self.batch * self.prompt if self.kind == "prefill" else self.batch

    @property
    def kv_len(self) -> int:
        return self.prompt if self.kind == "prefill" else (self.context or self.prompt)


@dataclass(frozen=True)
class LayerOp:
    name: str  # q, k, v, o, gate, up, down, attention, norm, act, residual, router, experts, lm_head
    op: Op
    count: float  # how many times per step (per layer × layers, or once); MoE experts: expected, fractional
    note: str = ""  # how the count was reached, when it is not plain
    launches: float | None = None  # kernels per step where runs are fused into fewer (MoE experts); None: one a run

    @property
    def kernels(self) -> int:
        """Kernels this op issues per step as serving stacks run it: one per run, or its fused launches."""
        return math.ceil((self.count if self.launches is None else self.launches) - 1e-9)

    @property
    def eager_kernels(self) -> int:
        """Kernels per step run one by one (HF eager: a kernel per touched expert; an expert touched in part
        of the steps counts whole)."""
        return math.ceil(self.count - 1e-9)


def expected_experts(experts: int, top_k: int, tokens: int) -> float:
    """Distinct experts a layer touches for `tokens` tokens under uniform routing."""
    if not experts:
        return 0.0
    return experts * (1 - (1 - top_k / experts) ** tokens)


def linear(arch: Arch, part: str) -> Callable[..., Gemm]:
    """The GEMM maker of a part's linear layers: weights in the checkpoint's format where it converts the
    part (computed in it where the device takes it: on_device), else at the model's dtype."""
    fmt = arch.weights
    if fmt is None or not fmt.converts(part):
        return lambda m, n, k, batch=1: Gemm(dtype=arch.dtype, m=m, n=n, k=k, batch=batch)
    dt = fmt.compute or arch.dtype
    wdt = None if fmt.wdtype == dt else fmt.wdtype
    return lambda m, n, k, batch=1: Gemm(dtype=dt, m=m, n=n, k=k, batch=batch, wdtype=wdt)


def attention_ops(arch: Arch, phase: Phase) -> list[LayerOp]:
    """One step's attention ops over the layers: latent attention (MLA), or q, k, v, attention (its
    sliding-window layers apart) and o."""
    m, dt, L = phase.tokens, arch.dtype, arch.layers
    gemm = linear(arch, "attention")
    if arch.mla:
        q = phase.prompt if phase.kind == "prefill" else 1
        return [LayerOp(name, op, L) for name, op in arch.mla.layer_ops(
            gemm, dt, arch.hidden, arch.heads, phase.batch, q, phase.kv_len, phase.kv_dtype)]
    ops = [LayerOp("q", gemm(m, arch.q_dim, arch.hidden), L), LayerOp("k", gemm(m, arch.kv_dim, arch.hidden), L),
           LayerOp("v", gemm(m, arch.kv_dim, arch.hidden), L)]
    if phase.kind == "prefill":
        attn = Attention(dtype=dt, b=phase.batch, h=arch.heads, kv=arch.kv_heads, d=arch.head_dim, q=phase.prompt,
                         t=phase.prompt, mode="flash", causal=True, kvdtype=phase.kv_dtype)
    else:
        attn = Attention(dtype=dt, b=phase.batch, h=arch.heads, kv=arch.kv_heads, d=arch.head_dim, q=1,
                         t=phase.kv_len, mode="decode", kvdtype=phase.kv_dtype)
    if arch.sliding_layers and arch.sliding_window < phase.kv_len:  # a window as long as the context changes nothing
        note = f"{arch.sliding_layers} of {L} layers attend through a {arch.sliding_window}-token sliding window"
        ops.append(LayerOp("attention", replace(attn, window=arch.sliding_window), arch.sliding_layers, note))
        if arch.full_layers:
            ops.append(LayerOp("attention", attn, arch.full_layers, f"the other {arch.full_layers} attend to every token"))
    else:
        ops.append(LayerOp("attention", attn, L))
    return ops + [LayerOp("o", gemm(m, arch.hidden, arch.q_dim), L)]


def moe_ops(arch: Arch, m: int, L: int, ep: ExpertParallel | None = None) -> list[LayerOp]:
    """The MoE layers' ops for `m` tokens over `L` MoE layers: router, the touched experts, shared experts; with
    `ep`, the experts and rows of the busiest expert-parallel rank."""
    dt = arch.dtype
    # One expert's GEMMs, run by the expected number of distinct experts the step's tokens touch
    # (fractional): the same count the weights total uses, so ΣT cannot fall below Q/B. Each gets the
    # average rows, tokens·k / used, a fraction: rounding it up would count FLOPs no token asks for,
    # and this way W = tokens·k·(one expert's FLOPs per token) exactly.
    used = expected_experts(arch.experts, arch.experts_per_token, m)
    rows = m * arch.experts_per_token / used
    each = L * used
    note = (f"{L} layers × {used:.3g} of {arch.experts} experts (the expected number touched, uniform routing), "
            f"{rows:.3g} row{'' if rows == 1 else 's'} each on average ({fmt_count(m, 'token')} × "
            f"top-{arch.experts_per_token})")
    if ep:
        used, rows = ep.used, ep.rows
        each = L * used
        note = (f"{L} layers × {used:.3g} of the rank's {ep.local_experts} experts (EP {ep.degree}, the busiest "
                f"rank at imbalance {ep.imbalance:g}), {rows:.3g} rows each on average")
    # Launches: a fused-MoE kernel (vLLM's, SGLang's, TensorRT-LLM's) runs every touched expert in one
    # grouped launch: FUSED_MOE_LAUNCHES a layer, gate+up with the activation, then down.
    expert, shared = linear(arch, "experts"), linear(arch, "shared")
    ops = [
        LayerOp("router", Gemm(dtype=dt, m=m, n=arch.experts, k=arch.hidden), L),
        LayerOp("gate", expert(rows, arch.moe_intermediate, arch.hidden), each, note, launches=L),
        LayerOp("up", expert(rows, arch.moe_intermediate, arch.hidden), each, note, launches=0),
        LayerOp("act", Elementwise(dtype=dt, n=rows * arch.moe_intermediate, flops=SILU_MUL_FLOPS, reads=2, writes=1),
                each, note, launches=0),
        LayerOp("down", expert(rows, arch.hidden, arch.moe_intermediate), each, note, launches=L),
    ]
    if arch.shared_intermediate:
        ops += [
            LayerOp("shared gate+up", shared(m, 2 * arch.shared_intermediate, arch.hidden), L),
            LayerOp("shared down", shared(m, arch.hidden, arch.shared_intermediate), L),
        ]
    return ops


def phase_ops(arch: Arch, phase: Phase, ep: ExpertParallel | None = None) -> list[LayerOp]:
    """The ops of one step, each with how many times it runs (layers × per-layer count); with `ep`, the busiest
    expert-parallel rank's experts."""
    m, dt, L = phase.tokens, arch.dtype, arch.layers
    ops: list[LayerOp] = [LayerOp("norm", Norm(dtype=dt, rows=m, cols=arch.hidden), 2 * L), *attention_ops(arch, phase),
                          LayerOp("residual", Elementwise(dtype=dt, n=m * arch.hidden, flops=1, reads=2, writes=1), 2 * L)]
    moe, dense = arch.moe_layers, L - arch.moe_layers
    if arch.experts:
        ops += moe_ops(arch, m, moe, ep)
    if dense:
        gemm = linear(arch, "mlp")
        note = f"the first {dense} of {L} layers have a dense MLP" if arch.experts else ""
        ops += [
            LayerOp("gate", gemm(m, arch.intermediate, arch.hidden), dense, note),
            LayerOp("up", gemm(m, arch.intermediate, arch.hidden), dense, note),
            LayerOp("act", Elementwise(dtype=dt, n=m * arch.intermediate, flops=SILU_MUL_FLOPS, reads=2, writes=1),
                    dense, note),
            LayerOp("down", gemm(m, arch.hidden, arch.intermediate), dense, note),
        ]
    # Logits for the last token of each request only (what generation needs).
    ops += [
        LayerOp("final norm", Norm(dtype=dt, rows=phase.batch, cols=arch.hidden), 1),
        LayerOp("lm_head", Gemm(dtype=dt, m=phase.batch, n=arch.vocab, k=arch.hidden), 1),
    ]
    return ops


GiB = 2**30


def _gib(n: float) -> str:
    g = n / GiB
    return f"{g:.1f}" if g >= 0.1 else f"{g:.2g}"


@dataclass(frozen=True)
class MemoryFit:
    """What a serving instance must hold in device memory: every weight (all experts, the input embedding
    table) and the KV cache of every request at its full length. Activations and workspace come on top."""

    weights_bytes: float
    kv_bytes: float
    device_bytes: float | None  # None: the profile does not say how much memory the device has
    ranks: int = 1  # GPUs the model is split over: the figures are one GPU's share

    @property
    def needed_bytes(self) -> float:
        return self.weights_bytes + self.kv_bytes

    @property
    def fits(self) -> bool | None:
        return None if self.device_bytes is None else self.needed_bytes <= self.device_bytes

    def describe(self, device: str) -> str:
        """One short line (it has to fit the app's tab at 80 columns too)."""
        per = f" per GPU (1 of {self.ranks})" if self.ranks > 1 else ""
        need = (f"held{per} weights {_gib(self.weights_bytes)} + KV {_gib(self.kv_bytes)} = "
                f"{_gib(self.needed_bytes)} GiB")
        if self.device_bytes is None:
            return f"memory: {need}; {device}'s memory size is unknown: not checked"
        have = f"{device}'s {_gib(self.device_bytes)} GiB"
        if self.fits:
            return f"fits: {need} of {have}"
        over = [what for what, b in (("the weights", self.weights_bytes), ("the KV cache", self.kv_bytes))
                if b > self.device_bytes]
        why = f" ({' and '.join(over)} alone exceed{'s' if over == ['the KV cache'] else ''} it)" if over else ""
        return f"does not fit: {need} > {have}{why}; the bound assumes it does"

    @property
    def weights_fit(self) -> bool | None:
        return None if self.device_bytes is None else self.weights_bytes <= self.device_bytes


@dataclass(frozen=True)
class StepBound:
    """What the roofline says about one prefill or decode step on one device."""

    arch: Arch
    phase: Phase
    device: DeviceProfile
    ops: tuple[tuple[LayerOp, Analysis], ...]
    weights_read_bytes: float  # weight bytes a step must read (no input embedding table)
    kv_bytes: float  # KV cache read (decode) or written (prefill) per step; sliding layers: their window
    measured_s: float | None = None
    tp: int = 1  # tensor-parallel ranks: with tp × pp > 1 every figure but the model's is one rank's
    pp: int = 1  # pipeline stages
    ep: ExpertParallel | None = None  # expert-parallel ranks: the figures are the busiest rank's
    claimed_tokens_per_s: float | None = None  # a throughput claim to hold against the bound (models.claims)

    @property
    def ranks(self) -> int:
        return self.tp * self.pp

    def _total(self, attr: str) -> float:
        """An analysis quantity summed over the step (each op times how often it runs)."""
        return sum(getattr(a, attr) * lo.count for lo, a in self.ops)

    @property
    def flops(self) -> float:
        return self._total("flops")

    @property
    def bytes(self) -> float:
        return self._total("bytes")

    @property
    def bytes_bound_s(self) -> float:
        """The step's bytes (weights + KV) over B."""
        return (self.weights_read_bytes + self.kv_bytes) / self.device.B()

    @property
    def lower_bound_s(self) -> float:
        """Σ over the step's ops of max(W/F, Q/B): never below bytes_bound_s (the ops count the same bytes)."""
        return self._total("time_lower_bound")

    @property
    def compute_s(self) -> float:
        return self._total("time_compute")

    # -- kernels and their launches ------------------------------------------------------

    @property
    def kernels(self) -> int:
        """An estimate of the kernels a step issues: one per modelled op run, a MoE layer's experts in
        FUSED_MOE_LAUNCHES fused launches (as serving stacks run them). Real frameworks issue more (rotary
        embedding, casts, copies, KV-cache writes): it makes the launch floor a floor."""
        return sum(lo.kernels for lo, _ in self.ops)

    @property
    def eager_kernels(self) -> int:
        """The kernels HF eager issues: a MoE layer's experts one by one (three GEMMs and an activation each)."""
        return sum(lo.eager_kernels for lo, _ in self.ops)

    @property
    def eager_moe_floor_s(self) -> float | None:
        """The launch floor of the experts run one by one, where that differs (MoE) and the launch is known."""
        if self.eager_kernels == self.kernels or self.launch_s is None:
            return None
        return self.eager_kernels * self.launch_s

    @property
    def launch_s(self) -> float | None:
        """Seconds per kernel launched eagerly (one by one), where the profile has the figure."""
        lo = self.device.launch_overhead
        return lo.value if lo else None

    @property
    def launch_source(self) -> str:
        """Where the launch figure comes from: the device's own, or whose it borrows (said so)."""
        lo = self.device.launch_overhead
        if lo is None:
            return ""
        return lo.case if lo.source == "typical" else f"{lo.source} for {self.device.id}"

    @property
    def graph_launch_s(self) -> float | None:
        """Seconds per kernel replayed from a CUDA graph, where it was measured."""
        v = self.device.extra.get("launch_graph_s")
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None

    @property
    def launch_floor_s(self) -> float | None:
        """Eager: the step cannot end before its kernels are issued, one launch each."""
        return self.kernels * self.launch_s if self.launch_s is not None else None

    @property
    def graph_floor_s(self) -> float | None:
        """What CUDA graphs would give: the same kernels at the graph's per-kernel cost."""
        return self.kernels * self.graph_launch_s if self.graph_launch_s is not None else None

    @property
    def alltoall_s(self) -> float:
        """The expert-parallel all-to-alls a step waits for (0 without EP, or where the links are not known)."""
        return (self.ep.step_s(self.device) or 0.0) if self.ep else 0.0

    @property
    def roofline_s(self) -> float:
        """ΣT, plus the expert-parallel all-to-alls the step waits for."""
        return self.lower_bound_s + self.alltoall_s

    @property
    def time_bound_s(self) -> float:
        """T ≥ max(ΣT (+ all-to-alls), launch floor): the roofline and the eager launches, whichever binds."""
        return max(self.roofline_s, self.launch_floor_s or 0.0)

    @property
    def binds(self) -> str:
        return "launch" if (self.launch_floor_s or 0.0) > self.roofline_s else "roofline"

    # -- memory ---------------------------------------------------------------------------

    @property
    def memory(self) -> MemoryFit:
        """What one GPU holds: the whole model, or with tp × pp > 1 one rank's share of it."""
        held = shard(self.arch, self.tp).weights_bytes / self.pp
        if self.ep:  # the rank holds E/N of each MoE layer's routed experts
            a = self.arch
            held -= (self.ep.experts - self.ep.local_experts) * a.moe_layers * a.expert_params * a.part_size("experts")
        return MemoryFit(held, self.kv_bytes_held, self.device.memory_bytes, self.ranks * (self.ep.degree if self.ep else 1))

    @property
    def kv_bytes_held(self) -> float:
        """The KV cache kept for the batch: every request at its full length (read or written per step)."""
        return self.kv_bytes

    # -- throughput -----------------------------------------------------------------------

    @property
    def tokens_per_step(self) -> int:
        return self.phase.batch if self.phase.kind == "decode" else self.phase.batch * self.phase.prompt

    @property
    def pass_s(self) -> float:
        """The bound on one pass through the model: a token crosses all pp stages in turn, so it is pp × the
        rank's T — all layers at 1/tp (inter-stage sends and TP all-reduces not included: shown beside)."""
        return self.pp * self.time_bound_s

    @property
    def tokens_per_s(self) -> float:
        """The ceiling on tokens/s for this batch: a step takes at least T (roofline or launch floor) on each
        of the pp stages it passes. Other batches in flight on the other stages can add to it."""
        return self.tokens_per_step / self.pass_s

    @property
    def explained(self) -> float | None:
        """The share of a measured step time the roofline bound accounts for."""
        return self.lower_bound_s / self.measured_s if self.measured_s else None

    def measured_lines(self) -> list[str]:
        """A measured step faster than its bound (explained above 100%, rest negative) is not a fact to show
        without a word: the roofs, the model or the time is wrong."""
        if not self.measured_s or not roofline.beats(self.measured_s, self.lower_bound_s):
            return []
        return [f"faster than the bound: measured {self.measured_s * 1e3:.3g} ms against ΣT "
                f"{self.lower_bound_s * 1e3:.3g} ms, which no step can beat — the roofs are low for this device "
                "(give -d with its measured profile), or the time is not one whole step at this batch and context"]

    def to_dict(self) -> dict[str, Any]:
        mem = self.memory
        return {
            "model": self.arch.name,
            "device": self.device.id,
            "phase": self.phase.kind,
            "tp": self.tp,
            "pp": self.pp,
            "per_rank": self.ranks > 1,  # every byte, FLOP, time and memory figure is one rank's (params: the model's)
            "batch": self.phase.batch,
            "prompt": self.phase.prompt,
            "context": self.phase.kv_len,
            "dtype": self.arch.dtype,
            "dtype_note": self.arch.dtype_note or None,
            "sliding_window": self.arch.sliding_window or None,
            "sliding_layers": self.arch.sliding_layers,
            **arch_dict(self.arch),
            "kv_dtype": self.phase.kv_dtype or self.arch.dtype,
            "params": self.arch.params,
            "weights_bytes": self.arch.weights_bytes,
            "embedding_bytes": self.arch.embedding_bytes,
            "weights_read_bytes": self.weights_read_bytes,
            "kv_bytes": self.kv_bytes,
            "step_flops": self.flops,
            "step_bytes": self.bytes,
            "bytes_bound_s": self.bytes_bound_s,
            f"{self.phase.kind}_step_lower_bound_s": self.lower_bound_s,
            "step_compute_s": self.compute_s,
            "kernels": self.kernels,
            "kernels_estimated": True,
            "kernels_eager_moe": self.eager_kernels,
            "launch_floor_eager_moe_s": self.eager_moe_floor_s,
            "launch_source": self.launch_source or None,
            "launch_overhead_s": self.launch_s,
            "launch_floor_s": self.launch_floor_s,
            "graph_launch_s": self.graph_launch_s,
            "graph_floor_s": self.graph_floor_s,
            "step_time_bound_s": self.time_bound_s,
            "pass_time_bound_s": self.pass_s,
            "binds": self.binds,
            "tokens_per_s_upper_bound": self.tokens_per_s,
            "memory_bytes": mem.needed_bytes,
            "memory_weights_bytes": mem.weights_bytes,
            "memory_kv_bytes": mem.kv_bytes,
            "device_memory_bytes": mem.device_bytes,
            "fits": mem.fits,
            "measured_s": self.measured_s,
            "explained_fraction": self.explained,
            "outside_roofline_s": (self.measured_s - self.lower_bound_s) if self.measured_s else None,
            **self._ep_dict(),
            "ops": [
                {"name": lo.name, "count": lo.count, "kernels": lo.kernels, **({"note": lo.note} if lo.note else {}),
                 **a.to_dict()} for lo, a in self.ops
            ],
        }

    def _ep_dict(self) -> dict[str, Any]:
        """--json: the expert-parallel rank's all-to-alls, where there are any (a tokens/s claim: models.claims)."""
        out: dict[str, Any] = {"alltoall_s": self.alltoall_s, "roofline_s": self.roofline_s}
        if self.ep:
            out["expert_parallel"] = self.ep.to_dict(self.device)
        return out


def arch_dict(arch: Arch) -> dict[str, Any]:
    """The JSON of what the model's figures assume beyond its shape: MLA, the weight format, MTP layers."""
    fmt, mla = arch.weights, arch.mla
    return {
        "attention": f"mla-{mla.convention}" if mla else ("gqa" if arch.kv_heads < arch.heads else "mha"),
        "kv_elements_per_token_layer": mla.latent_dim if mla else 2 * arch.kv_dim,
        "weight_format": fmt.wdtype if fmt else arch.dtype,
        "weight_format_parts": list(fmt.parts) if fmt else None,
        "weight_bits": fmt.bits if fmt else 8 * arch.size,
        "gemm_dtype": (fmt.compute or arch.dtype) if fmt else arch.dtype,
        "dense_layers": arch.dense_layers if arch.experts else None,
        "mtp_layers": arch.mtp_layers,
        "mtp_counted": False,
    }


def arch_lines(arch: Arch) -> list[str]:
    """What the model's figures assume beyond its shape: the dtype it is served at, its sliding window."""
    extra = [arch.mla.describe() if arch.mla else "", arch.weights.describe(tuple(p for p, n in arch.linear_params.items() if n)) if arch.weights else "",
             f"{arch.dense_layers} dense layers, then {arch.moe_layers} MoE" if arch.dense_layers else "",
             (f"its {arch.mtp_layers} multi-token-prediction layer{'s' * (arch.mtp_layers > 1)} (num_nextn_predict_"
              "layers) not counted: not in the parameters, the weights or the step") if arch.mtp_layers else ""]
    return [line for line in (arch.dtype_note, arch.window_line(), *extra) if line]


def _ms(t: float) -> str:
    return f"{t * 1e3:.3g} ms"


def launch_line(step: StepBound) -> str:
    """The launch floor beside the roofline bound, and which binds."""
    n, dev = step.kernels, step.device.id
    head = f"launch: ≈{n} kernels a step (an estimate: one per modelled op; frameworks issue more)"
    if step.launch_floor_s is None:
        return f"{head}; launch overhead not measured for {dev}: T ≥ ΣT {_ms(step.lower_bound_s)}, the roofline alone"
    if step.eager_kernels != n:
        head += f", a MoE layer's experts in {FUSED_MOE_LAUNCHES} fused launches"
    # a launch floor: the device has its launch overhead
    borrowed = f" ({step.launch_source})" if step.device.launch_overhead.source == "typical" else ""  # type: ignore[union-attr]
    sigma = _ms(step.lower_bound_s) + (f" + all-to-alls {_ms(step.alltoall_s)}" if step.alltoall_s else "")
    line = (f"{head} × {step.launch_s * 1e6:.3g} µs eager{borrowed} = {_ms(step.launch_floor_s)}; T ≥ max(ΣT "  # type: ignore[operator]
            f"{sigma}, launch floor {_ms(step.launch_floor_s)}) = {_ms(step.time_bound_s)}: "
            + ("the launches bind, not the roofline" if step.binds == "launch" else "the roofline binds"))
    if step.eager_moe_floor_s is not None:
        line += (f"; HF eager runs each touched expert on its own: ≈{step.eager_kernels} kernels, a floor of "
                 f"{_ms(step.eager_moe_floor_s)}")
    if step.graph_floor_s is not None:
        line += (f"; from a CUDA graph ({step.graph_launch_s * 1e6:.3g} µs a kernel) the floor would be "  # type: ignore[operator]
                 f"{_ms(step.graph_floor_s)}")
    return line


def rank_line(step: StepBound) -> str:
    """What a per-rank step means for a token, and where the communication is."""
    parts = ([f"1/{step.tp} of each layer (TP {step.tp})"] if step.tp > 1 else []) + (
        [f"1/{step.pp} of the layers, embedding and lm_head (PP {step.pp})"] if step.pp > 1 else [])
    line = f"per rank: {' and '.join(parts)}, its share of the KV cache; T = {_ms(step.time_bound_s)} a rank"
    if step.pp > 1:
        line += (f"; a token passes all {step.pp} stages in turn, so its pass takes ≥ {step.pp} × T = "
                 f"{_ms(step.pass_s)} (all layers at 1/{step.tp}): tok/s≤ uses that; other batches in flight on "
                 f"the other stages can add throughput, not cut the latency")
    return line + "; the ranks' communication is not in T: it is counted beside (communication per step)"


def weights_read_bytes(arch: Arch, phase: Phase, ep: ExpertParallel | None = None) -> float:
    """Weights a step streams: all but the input embedding table (one row per token is read),
    and for MoE only the experts the step's tokens are routed to (with `ep`, those the busiest rank runs)."""
    body = arch.weights_bytes - (0 if arch.tied else arch.embedding_bytes)  # tied: the table is read as the lm_head
    if arch.experts:
        used = ep.used if ep else expected_experts(arch.experts, arch.experts_per_token, phase.tokens)
        body -= arch.moe_layers * (arch.experts - used) * arch.expert_params * arch.part_size("experts")
    return body


def check_parallel(arch: Arch, tp: int, pp: int) -> None:
    """A ModelError in one line unless the model splits `tp` × `pp` ways.

    Tensor parallelism gives each rank whole query heads, so tp must divide them. KV heads fewer than tp
    are replicated, as vLLM does (each rank keeps one KV head): then tp must be a multiple of the KV heads;
    more KV heads than tp must divide by it. Pipeline stages need at least a layer each.
    """
    if tp < 1 or pp < 1:
        raise ModelError(f"--tp {tp} / --pp {pp}: degrees start at 1")
    if arch.heads % tp:
        ok = ", ".join(str(d) for d in range(1, arch.heads + 1) if arch.heads % d == 0)
        raise ModelError(f"--tp {tp}: {arch.name}'s {arch.heads} query heads do not split {tp} ways; "
                         f"give a tp that divides them ({ok})")
    kv = arch.kv_heads
    if (kv >= tp and kv % tp) or (kv < tp and tp % kv):
        raise ModelError(f"--tp {tp}: {arch.name}'s {kv} KV heads neither split {tp} ways nor replicate evenly "
                         f"(tp must divide {kv} or be a multiple of it)")
    if pp > arch.layers:
        raise ModelError(f"--pp {pp} is more pipeline stages than the model's {arch.layers} layers")


def shard(arch: Arch, tp: int) -> Arch:
    """One tensor-parallel rank's slice of every layer (Megatron-LM's split): its query heads, its KV
    heads (one, replicated, when tp exceeds them), 1/tp of the MLP and of every expert's width, and
    1/tp of the vocabulary (vocab-parallel embedding and lm_head). Norms and the router stay whole."""
    if tp == 1:
        return arch
    part = lambda n: -(-n // tp)  # noqa: E731 - uneven widths are padded up, as the frameworks do
    return replace(arch, heads=arch.heads // tp, kv_heads=max(1, arch.kv_heads // tp),
                   intermediate=part(arch.intermediate), moe_intermediate=part(arch.moe_intermediate),
                   shared_intermediate=part(arch.shared_intermediate), vocab=part(arch.vocab))


def llm_doc(arch: Arch, device: DeviceProfile, steps: Sequence[StepBound], dims: Sequence[Any] = (),
            flips: Mapping[str, Any] | None = None, split: Any = None,
            step_dict: Callable[[StepBound], dict[str, Any]] = StepBound.to_dict) -> dict[str, Any]:
    """The one document `rooftop llm --json` prints, and the LLM report (CLI and app) is made of: the steps (each
    by `step_dict`: the CLI's judges a tokens/s claim too), a --tp/--pp split's communication (`dims`), the
    compute-bound batches (`flips`), an Amdahl split."""
    return {
        "model": arch.name,
        "device": device.id,
        "steps": [step_dict(s) for s in steps],
        **({"parallel": [d.to_dict(device) for d in dims]} if dims else {}),
        "compute_bound_batch": dict(flips) if flips else None,
        "amdahl": {"before_ms": dict(split.before), "after_ms": dict(split.after), "speedup": split.speedup}
        if split else None,
    }


def step_bound(arch: Arch, phase: Phase, device: DeviceProfile, measured_s: float | None = None,
               tp: int = 1, pp: int = 1, ep: ExpertParallel | None = None,
               claimed_tokens_per_s: float | None = None) -> StepBound:
    """The step on one device, or with tp × pp > 1 on one rank: its slice of each layer (`shard`) and
    1/pp of the layers, embedding and lm_head — an average stage; the heaviest differs by a layer and
    the embedding or lm_head."""
    check_parallel(arch, tp, pp)
    if ep and tp * pp > 1:
        raise ModelError(f"--ep {ep.degree} with --tp {tp} / --pp {pp}: expert parallelism is modelled on its own "
                         "(each rank runs attention for its own batch); give --tp 1 --pp 1 with --ep")
    arch = replace(arch, weights=on_device(arch.weights, device.peak.__contains__))
    rank = shard(arch, tp)
    ops = [replace(lo, count=lo.count / pp, launches=None if lo.launches is None else lo.launches / pp)
           for lo in phase_ops(rank, phase, ep)]
    analysed = tuple((lo, analyze(lo.op, device)) for lo in ops)
    kv = phase.batch * rank.kv_bytes(phase.kv_len, phase.kv_dtype) / pp
    return StepBound(arch, phase, device, analysed, weights_read_bytes(rank, phase, ep) / pp, kv, measured_s, tp, pp,
                     ep, claimed_tokens_per_s)


def compute_bound_batch(arch: Arch, device: DeviceProfile, context: int, kv_dtype: str | None = None,
                        linear_only: bool = False, limit: int = 1 << 20) -> int | None:
    """The smallest decode batch whose step is compute-bound (W/F ≥ Q/B), or None below `limit`.

    linear_only: the seven linear layers alone (I ≈ batch); otherwise the
    whole step, where each request's KV cache keeps attention memory-bound.
    """
    arch = replace(arch, weights=on_device(arch.weights, device.peak.__contains__))

    def compute_bound(b: int) -> bool:
        ph = Phase("decode", b, prompt=context, context=context, kv_dtype=kv_dtype)
        ops = [lo for lo in phase_ops(arch, ph) if not linear_only or isinstance(lo.op, Gemm)]
        done = [(analyze(lo.op, device), lo.count) for lo in ops]  # once per op, not once per term
        return sum(a.time_compute * n for a, n in done) >= sum(a.time_memory * n for a, n in done)

    return roofline.first_at_least(compute_bound, limit)


@dataclass(frozen=True)
class Amdahl:
    """An end-to-end breakdown: which parts sped up and what the whole gained (Amdahl's law)."""

    before: Mapping[str, float]
    after: Mapping[str, float]

    @property
    def total_before(self) -> float:
        return sum(self.before.values())

    @property
    def total_after(self) -> float:
        return sum(self.after.values())

    @property
    def speedup(self) -> float:
        return self.total_before / self.total_after


def amdahl(parts: Mapping[str, float], speedups: Mapping[str, float]) -> Amdahl:
    """Divide each part by its speed-up; a part with none stays as it was."""
    unknown = set(speedups) - set(parts)
    if unknown:
        raise ModelError(f"speed-up for unknown part(s) {', '.join(sorted(unknown))}; parts are: {', '.join(parts)}")
    for name, v in {**parts, **speedups}.items():
        if not (v > 0 and math.isfinite(v)):
            raise ModelError(f"{name} = {v!r}: times and speed-ups must be positive")
    return Amdahl(dict(parts), {k: v / speedups.get(k, 1.0) for k, v in parts.items()})


def with_dtype(arch: Arch, dtype: str) -> Arch:
    """The same model at another weight dtype (--dtype): what it was served at before, and the checkpoint's
    quantised format, no longer apply."""
    return replace(arch, dtype=dtype, dtype_note="", weights=None)
