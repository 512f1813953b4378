"""Hostile LLM configs (`rooftop llm CONFIG`): a generated config.json, built from the published Mistral-7B
and Gemma-2-9B configs with keys changed, added or dropped, gives an answer or one line with exit 2, never
a traceback, an internal error (exit 1), or `nan`/`inf` in the answer. Failing examples are pinned."""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rooftop.tui.cli import main

CONFIGS = Path(__file__).parent / "data" / "configs"
BASES = {p.stem: json.loads(p.read_text()) for p in sorted(CONFIGS.glob("*.json"))}
KEYS = ["hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "num_key_value_heads",
        "vocab_size", "head_dim", "torch_dtype", "sliding_window", "layer_types", "max_window_layers",
        "use_sliding_window", "num_local_experts", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
        "shared_expert_intermediate_size", "n_shared_experts", "tie_word_embeddings", "attention_bias",
        "model_type", "sliding_window_pattern", "text_config", "name", "dtype"]
NOT_A_NUMBER = re.compile(r"(?<![A-Za-z])(nan|inf)(?![A-Za-z])", re.IGNORECASE)

values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.integers(0, 70000),
              st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
              st.sampled_from(["bfloat16", "float32", "torch.float16", "int4", "gemma2", "qwen2", "mixtral",
                               "sliding_attention", "full_attention"])),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)),
    max_leaves=6,
)
changes = st.dictionaries(st.sampled_from(KEYS), st.one_of(values, st.just("<drop>")), min_size=1, max_size=4)


def config_of(base: str, change: dict[str, Any]) -> dict[str, Any]:
    cfg = dict(BASES[base])
    for k, v in change.items():
        if v == "<drop>":
            cfg.pop(k, None)
        else:
            cfg[k] = v
    return cfg


def answer(cfg: Any, *flags: str) -> tuple[int, str, str]:
    """`rooftop llm FILE -d h100` on the config written as a file, in-process."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.json"
        path.write_text(json.dumps(cfg))  # Python's json writes NaN and Infinity, as some tools do
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(["llm", str(path), "-d", "h100", *flags])
            except SystemExit as exc:
                rc = int(exc.code or 0)
    return rc, out.getvalue(), err.getvalue()


def check(cfg: Any, *flags: str) -> None:
    rc, out, err = answer(cfg, *flags)
    assert rc in (0, 2), (cfg, flags, err)
    assert "internal error" not in err and "Traceback" not in err, (cfg, err)
    if rc == 2:
        assert err.count("\n") == 1 and not out, (cfg, err)
    else:
        shown = out if "--json" not in flags else json.dumps(json.loads(out))  # strict JSON: no NaN
        assert not NOT_A_NUMBER.search(shown), (cfg, [ln for ln in shown.splitlines() if NOT_A_NUMBER.search(ln)])


def test_the_published_configs_give_an_answer() -> None:
    for cfg in BASES.values():
        rc, out, err = answer(cfg)
        assert rc == 0 and "decode" in out, err


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(BASES)), changes, st.sampled_from([(), ("--json",), ("--phase", "prefill"),
                                                                 ("--batch", "64", "--context", "8192")]))
@example("mistral-7b-v0.1", {"num_local_experts": 8}, ())  # experts without widths: refused, not 0-wide
@example("mistral-7b-v0.1", {"torch_dtype": "int4"}, ())  # an unknown dtype: refused, not bf16
@example("mistral-7b-v0.1", {"hidden_size": math.nan}, ())
@example("mistral-7b-v0.1", {"sliding_window": 2**70}, ())
@example("gemma-2-9b", {"layer_types": ["sliding_attention"]}, ())
@example("gemma-2-9b", {"text_config": {"hidden_size": 8}}, ())
@example("mistral-7b-v0.1", {"num_key_value_heads": 3}, ())
@example("mistral-7b-v0.1", {"head_dim": 1, "hidden_size": 7}, ("--json",))
def test_a_hostile_config_gives_an_answer_or_one_line(base: str, change: dict[str, Any], flags: tuple) -> None:
    check(config_of(base, change), *flags)


@settings(max_examples=10, deadline=None)
@given(values)
@example(None)
@example([])
@example(2**80)
def test_a_config_that_is_not_an_object_is_one_line(cfg: Any) -> None:
    check(cfg)
