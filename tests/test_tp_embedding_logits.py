"""TP's traffic beyond its per-layer all-reduces: the vocab-parallel embedding's all-reduce and the gather
of the lm_head's vocab-split logits, counted in `llm --tp`."""

from __future__ import annotations

import json

import pytest
from rooftop.models.llm.parallel import parallel_comm
from rooftop.tui.cli import main


def test_tp_counts_the_embedding_all_reduce_and_the_logits_gather() -> None:
    # Llama-3.1-8B shape, a decode step of 64 requests over TP 8
    [tp] = parallel_comm(32, 4096, "bf16", 64, 1e12, 1e-3, tp=8, pp=1, vocab=128256, logits_rows=64)
    act = 64 * 4096 * 2
    emb, logits = tp.extra
    assert (emb.name, emb.collective, emb.calls, emb.message_bytes) == ("embedding", "allreduce", 1, act)
    assert emb.wire_bytes == pytest.approx(act * 2 * 7 / 8)
    assert (logits.name, logits.collective, logits.message_bytes) == ("logits", "allgather", 64 * 128256 * 2)
    assert logits.wire_bytes == pytest.approx(64 * 128256 * 2 * 7 / 8)
    assert tp.layer_wire_bytes == pytest.approx(64 * act * 2 * 7 / 8)
    assert tp.wire_bytes == pytest.approx(tp.layer_wire_bytes + emb.wire_bytes + logits.wire_bytes)
    assert tp.intensity == pytest.approx(tp.flops / tp.wire_bytes)


def test_with_pipeline_stages_the_busier_end_stage_is_counted() -> None:
    [tp, _] = parallel_comm(32, 4096, "bf16", 2048, 1e15, 1.0, tp=8, pp=2, vocab=128256, logits_rows=1)
    [only] = tp.extra  # the first stage embeds 2048 tokens; the last gathers one row of logits
    assert only.name == "embedding"
    [tp, _] = parallel_comm(32, 4096, "bf16", 8, 1e15, 1.0, tp=8, pp=2, vocab=128256, logits_rows=8)
    assert [x.name for x in tp.extra] == ["logits"]


def test_prefill_embedding_is_a_few_percent_of_tp_traffic() -> None:
    [tp] = parallel_comm(32, 4096, "bf16", 2048, 1e15, 1.0, tp=8, pp=1, vocab=128256, logits_rows=1)
    share = sum(x.wire_bytes for x in tp.extra) / tp.wire_bytes
    assert 0.01 < share < 0.05


def test_llm_tp_json_and_text_show_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llm", "llama-3.1-8b", "--tp", "8", "-d", "h100-sxm-ds", "--batch", "64", "--json"]) == 0
    [tp] = json.loads(capsys.readouterr().out)["parallel"]
    assert [x["name"] for x in tp["extra"]] == ["embedding", "logits"]
    assert tp["extra"][1]["message_bytes"] == 64 * 128256 * 2
    assert tp["wire_bytes"] == pytest.approx(tp["layer_wire_bytes"] + sum(x["wire_bytes"] for x in tp["extra"]))
    assert main(["llm", "llama-3.1-8b", "--tp", "8", "-d", "h100-sxm-ds", "--batch", "64"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "+ embedding" in out and "+ logits" in out  # a row each under TP (the table wraps at 80 columns)
