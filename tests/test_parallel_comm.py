"""TP and PP communication per step: I_comm and the link on which each dimension turns comm-bound."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rooftop.models.catalog import catalog
from rooftop.models.llm.parallel import parallel_comm


def test_counts_and_intensity():
    # 32 layers, hidden 4096, bf16, 2048 tokens; a step of 1e15 FLOP taking 1 s of compute on one device
    tp, pp = parallel_comm(32, 4096, "bf16", 2048, 1e15, 1.0, tp=8, pp=2)
    act = 2048 * 4096 * 2
    assert (tp.dim, tp.calls, tp.message_bytes) == ("tp", 2 * 16, act)  # 2 all-reduces × 16 layers a stage
    assert tp.wire_bytes == pytest.approx(32 * act * 2 * 7 / 8)
    assert tp.flops == pytest.approx(1e15 / 16) and tp.compute_s == pytest.approx(1 / 16)
    assert tp.intensity == pytest.approx(tp.flops / tp.wire_bytes)
    assert (pp.dim, pp.calls, pp.wire_bytes) == ("pp", 1, act)
    assert pp.intensity > tp.intensity  # seed's table: PP has the largest I_comm, TP the smallest
    # F here is 1e15 FLOP/s: the ridge on a 100 GB/s link is 1e4 FLOP/B
    assert tp.link_ridge(100e9) == pytest.approx(1e4)
    assert tp.comm_bound(100e9) == (tp.intensity < 1e4)


def test_only_dimensions_above_one_and_bad_degrees():
    assert parallel_comm(32, 4096, "bf16", 1, 1e12, 1e-3, tp=1, pp=1) == []
    [only] = parallel_comm(32, 4096, "bf16", 1, 1e12, 1e-3, tp=4, pp=1)
    assert only.dim == "tp" and only.calls == 64
    with pytest.raises(ValueError, match="more pipeline stages than the model's 32 layers"):
        parallel_comm(32, 4096, "bf16", 1, 1e12, 1e-3, tp=1, pp=64)


def test_verdict_per_link_of_a_datasheet_profile():
    h100 = catalog()["h100-sxm-ds"]
    [tp] = parallel_comm(32, 4096, "bf16", 2048, 1e15, 1.0, tp=8, pp=1)
    links = {v["level"]: v for v in tp.on_links(h100)}
    assert set(links) == {"nvlink", "pcie"}
    assert links["pcie"]["ridge"] == pytest.approx(links["nvlink"]["ridge"] * 450 / 64)  # flatter slope, ridge right
    assert links["pcie"]["comm_s"] > links["nvlink"]["comm_s"]


def llm(*args):
    return subprocess.run([sys.executable, "-m", "rooftop.tui.cli", "llm", *args], capture_output=True, text=True,
                          timeout=60)


def test_cli_llm_tp_pp_json_and_text():
    out = llm("llama-3.1-8b", "--phase", "prefill", "--prompt", "2048", "--tp", "8", "--pp", "2", "-d",
              "h100-sxm-ds", "--json")
    assert out.returncode == 0, out.stderr
    tp, pp = json.loads(out.stdout)["parallel"]
    assert tp["dim"] == "tp" and tp["calls"] == 32 and tp["message_bytes"] == 2048 * 4096 * 2
    assert tp["links"][0]["level"] == "nvlink" and tp["intensity"] < pp["intensity"]
    text = llm("llama-3.1-8b", "--tp", "8", "-d", "h100-sxm-ds")
    assert text.returncode == 0 and "communication per step" in text.stdout and "TP×8" in text.stdout
    bad = llm("llama-3.1-8b", "--pp", "99", "-d", "h100-sxm-ds")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "32 layers" in bad.stderr
