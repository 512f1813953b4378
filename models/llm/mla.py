"""Multi-head latent attention (DeepSeek-V2/V3, Kimi K2): its weights, its KV cache, its W and Q.

MLA caches one compressed latent per token and layer, kv_lora_rank + qk_rope_head_dim elements (576
for DeepSeek-V3), shared by every head: not K and V per head. The heads' keys and values are that
latent up-projected by kv_b_proj. Two published ways to attend:

- absorbed (FlashMLA's decode, DeepSeek's inference code): kv_b_proj's key half is folded into the
  query and its value half applied after, so attention runs in the latent space, every head against
  the one cached latent (multi-query attention with a 576-wide key and a 512-wide value). Q reads the
  latent once; W scores kv_lora + rope and mixes kv_lora per head and key.
- expanded (the Hugging Face code, prefill in the serving stacks): every cached latent is up-projected
  to per-head K (nope + rope) and V each step, then ordinary multi-head attention on them: fewer
  FLOPs per head and key, but the expansion's GEMM and the per-head K and V it writes and reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping

from ..dtypes import DTYPES
from ..errors import ModelError
from ..ops import Attention, Cost, Gemm, Norm, Op
from ..paths import matmul_path

CONVENTIONS = ("absorbed", "expanded")

GemmMaker = Callable[..., Gemm]  # (m, n, k, batch=1) → a linear layer's GEMM at the attention weights' dtype


@dataclass(frozen=True)
class LatentAttention(Op):
    """Attention in the latent space (MLA absorbed): h query heads against one cached latent per key.

    Scores use `latent + rope` elements, the output mixes `latent`; the cache holds latent + rope per
    key, read once for all heads. W = 2·b·h·pairs·(latent + rope) + 2·b·h·pairs·latent; Q = the
    queries (latent + rope per head) read, the cache read, the output (latent per head) written.
    """

    kind: ClassVar[str] = "mla"
    b: int = 1
    h: int = 1
    latent: int = 512  # kv_lora_rank
    rope: int = 64  # qk_rope_head_dim
    q: int = 1
    t: int = 1
    causal: bool = False
    kvdtype: str | None = None

    @property
    def pairs(self) -> float:
        """Query-key pairs per head, counted as attention counts them (the causal triangle in prefill)."""
        return Attention(b=self.b, h=1, d=1, q=self.q, t=self.t, causal=self.causal).pairs

    def cost(self) -> Cost:
        s, skv = DTYPES[self.dtype].size, DTYPES[self.kvdtype or self.dtype].size
        width = self.latent + self.rope
        q_read = self.b * self.h * self.q * width * s
        cache = self.b * self.t * width * skv
        o_write = self.b * self.h * self.q * self.latent * s
        return Cost(
            flops=2.0 * self.b * self.h * self.pairs * (width + self.latent),
            bytes=q_read + cache + o_write,
            path=matmul_path(self.dtype),
            level=self.level,
            terms=(("Q read (latent + rope a head)", q_read), ("latent cache read (one for all heads)", cache),
                   ("O write (latent a head)", o_write)),
            counting="W = 2·b·h·pairs·(latent + rope) scores + 2·b·h·pairs·latent mix; Q = queries and the "
                     "latent cache read once, the latent output written",
        )

    def spec(self) -> str:
        s = f"mla b={self.b} h={self.h} latent={self.latent} rope={self.rope} q={self.q} t={self.t} {self.dtype}"
        if self.causal:
            s += " causal"
        if self.kvdtype and self.kvdtype != self.dtype:
            s += f" kvdtype={self.kvdtype}"
        return s + self._level_suffix()

    def describe(self) -> str:
        kvd = f" (KV {self.kvdtype})" if self.kvdtype and self.kvdtype != self.dtype else ""
        return (f"latent attention b={self.b} h={self.h} latent={self.latent}+{self.rope} q={self.q} t={self.t}"
                f"{' causal' if self.causal else ''} {self.dtype}{kvd}")


@dataclass(frozen=True)
class Mla:
    """An MLA layer's dimensions, in config.json's terms, and which way it attends."""

    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    q_lora_rank: int = 0  # 0: the query is projected straight from the hidden state (DeepSeek-V2-Lite)
    convention: str = "absorbed"

    @property
    def latent_dim(self) -> int:
        """Elements cached per token and layer: the compressed latent and the shared rotary key."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    def linear_params(self, hidden: int, heads: int) -> int:
        """q (or q_a, q_b), kv_a_proj_with_mqa, kv_b_proj and o_proj: the layer's attention weights."""
        q = (hidden * self.q_lora_rank + self.q_lora_rank * heads * self.qk_head_dim if self.q_lora_rank
             else hidden * heads * self.qk_head_dim)
        kv_a = hidden * self.latent_dim
        kv_b = self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim)
        return q + kv_a + kv_b + heads * self.v_head_dim * hidden

    @property
    def norm_params(self) -> int:
        """The latent's RMSNorms, q_a_layernorm and kv_a_layernorm (kept at the model's dtype)."""
        return self.q_lora_rank + self.kv_lora_rank

    def kv_bytes(self, tokens: int, size: float) -> float:
        """One layer's cache for `tokens` tokens: one latent each, for every head."""
        return tokens * self.latent_dim * size

    def describe(self) -> str:
        how = ("absorbed: attention in the latent space against the cached latent, kv_b_proj folded into the "
               "query and output" if self.convention == "absorbed" else
               "expanded: each step up-projects every cached latent to per-head K and V (kv_b_proj), then "
               "multi-head attention")
        return (f"multi-head latent attention, {how}; KV cache one latent of {self.kv_lora_rank} + "
                f"{self.qk_rope_head_dim} = {self.latent_dim} elements per token and layer (--mla "
                f"{'expanded' if self.convention == 'absorbed' else 'absorbed'} for the other convention)")

    def layer_ops(self, gemm: GemmMaker, dtype: str, hidden: int, heads: int, batch: int, q: int, t: int,
                  kvdtype: str | None) -> list[tuple[str, Op]]:
        """One layer's attention ops for `batch` requests of `q` new tokens over `t` keys (decode: q = 1)."""
        m = batch * q
        ops: list[tuple[str, Op]] = (
            [("q_a", gemm(m, self.q_lora_rank, hidden)), ("q norm", Norm(dtype=dtype, rows=m, cols=self.q_lora_rank)),
             ("q_b", gemm(m, heads * self.qk_head_dim, self.q_lora_rank))] if self.q_lora_rank
            else [("q", gemm(m, heads * self.qk_head_dim, hidden))])
        ops += [("kv_a", gemm(m, self.latent_dim, hidden)),
                ("kv norm", Norm(dtype=dtype, rows=m, cols=self.kv_lora_rank))]
        prefill = q > 1
        if self.convention == "absorbed":
            ops += [
                ("q absorb", gemm(m, self.kv_lora_rank, self.qk_nope_head_dim, batch=heads)),
                ("attention", LatentAttention(dtype=dtype, b=batch, h=heads, latent=self.kv_lora_rank,
                                              rope=self.qk_rope_head_dim, q=q, t=t, causal=prefill, kvdtype=kvdtype)),
                ("v up", gemm(m, self.v_head_dim, self.kv_lora_rank, batch=heads)),
            ]
        else:
            # K and V of two widths: d = their mean counts both matmuls' FLOPs and both reads exactly
            ops += [
                ("kv_b", gemm(batch * t, heads * (self.qk_nope_head_dim + self.v_head_dim), self.kv_lora_rank)),
                ("attention", Attention(dtype=dtype, b=batch, h=heads, kv=heads,
                                        d=(self.qk_head_dim + self.v_head_dim) // 2, q=q, t=t,
                                        mode="flash" if prefill else "decode", causal=prefill, kvdtype=kvdtype)),
            ]
        return ops + [("o", gemm(m, hidden, heads * self.v_head_dim))]


MLA_KEYS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def mla_from_config(cfg: Mapping[str, Any], read_int: Callable[..., int]) -> Mla | None:
    """The MLA dimensions of a config that has `kv_lora_rank`, else None; `read_int(cfg, key, default,
    least)` checks each key as the config reader does."""
    if not cfg.get("kv_lora_rank"):
        return None
    nope, rope, v = (read_int(cfg, k, 0) for k in MLA_KEYS[1:])
    if not (nope and rope and v):
        missing = [k for k in MLA_KEYS[1:] if not cfg.get(k)]
        raise ModelError(f"config has kv_lora_rank (multi-head latent attention) but no {' / '.join(missing)}")
    return Mla(read_int(cfg, "kv_lora_rank", 0), nope, rope, v, read_int(cfg, "q_lora_rank", 0, 0))
