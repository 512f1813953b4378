"""`rooftop llm --ep N`: routed experts over N ranks, each MoE layer's dispatch and combine all-to-alls on the link."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from rooftop.models.catalog import lookup_device
from rooftop.models.llm.expertparallel import expert_parallel
from rooftop.models.llm.step import Phase, step_bound
from rooftop.models.profile import Ceiling
from rooftop.store.hfconfig import load_arch
from rooftop.tui.cli import main

H100_DS = lookup_device("h100-sxm-ds")  # NVLink 450 GB/s one direction, no network figure
NVLINK = 450e9


def test_mixtral_ep8_alltoall_bytes_are_the_formula_by_hand(capsys: pytest.CaptureFixture[str]) -> None:
    # batch 4 × top-2 × hidden 4096 × 2 B (bf16) = 65,536 B a call; 7/8 of it leaves the rank; dispatch + combine
    assert main(["llm", "mixtral-8x7b", "-d", "h100-sxm-ds", "--batch", "4", "--ep", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    s = out["steps"][0]
    ep = s["expert_parallel"]
    assert ep["alltoall_message_bytes"] == 4 * 2 * 4096 * 2 == 65536
    assert ep["alltoall_wire_bytes"] == 65536 * 7 / 8 == 57344
    assert ep["layer_wire_bytes"] == 2 * 57344
    assert ep["alltoall_layer_s"] == pytest.approx(2 * 57344 / NVLINK)
    assert ep["alltoall_step_s"] == pytest.approx(32 * 2 * 57344 / NVLINK)  # 32 MoE layers
    # the bound grows with it: T = ΣT + the all-to-alls (the roofline binds here)
    assert s["step_time_bound_s"] == pytest.approx(s["decode_step_lower_bound_s"] + ep["alltoall_step_s"])
    assert s["tokens_per_s_upper_bound"] == pytest.approx(4 / s["step_time_bound_s"])
    dim = next(d for d in out["parallel"] if d["dim"] == "ep")  # the communication table, beside TP's and PP's
    assert (dim["collective"], dim["calls"], dim["wire_bytes"]) == ("alltoall", 64, 32 * 2 * 57344)


def test_imbalance_scales_the_busiest_ranks_experts_and_its_alltoalls() -> None:
    arch = load_arch("qwen3-30b-a3b")  # 128 experts, top-8, 48 layers
    ph = Phase("decode", 1)  # 8 tokens over the group: the mean rank touches 6.45 of its 16 experts a layer
    even = step_bound(arch, ph, H100_DS, ep=expert_parallel(arch, ph, 8))
    busy = step_bound(arch, ph, H100_DS, ep=expert_parallel(arch, ph, 8, 1.5))
    assert even.ep and busy.ep
    assert busy.ep.message_bytes == pytest.approx(1.5 * 1 * 8 * arch.hidden * 2)
    assert even.ep.used == pytest.approx(128 * (1 - (1 - 8 / 128) ** 8) / 8)
    assert busy.ep.used == pytest.approx(1.5 * even.ep.used)
    rows = {lo.name: (lo.count, a.op) for lo, a in busy.ops}
    count, gate = rows["gate"]
    assert count * gate.m == pytest.approx(arch.layers * 1.5 * 1 * 8)  # F × batch × top-k token copies a layer
    expert_bytes = arch.moe_layers * arch.expert_params * arch.part_size("experts")
    assert busy.weights_read_bytes - even.weights_read_bytes == pytest.approx(
        (busy.ep.used - even.ep.used) * expert_bytes, rel=1e-9)
    assert busy.roofline_s > even.roofline_s  # (the launch floor binds both at batch 1)


def test_the_ranks_hold_an_nth_of_the_routed_experts() -> None:
    arch = load_arch("mixtral-8x7b")
    ph = Phase("decode", 4)
    one = step_bound(arch, ph, H100_DS)
    rank = step_bound(arch, ph, H100_DS, ep=expert_parallel(arch, ph, 8))
    routed = arch.moe_layers * arch.experts * arch.expert_params * arch.part_size("experts")
    assert rank.memory.weights_bytes == pytest.approx(one.memory.weights_bytes - routed * 7 / 8)
    assert rank.memory.ranks == 8 and one.memory.fits is False and rank.memory.fits is True


def test_beyond_a_node_the_other_nodes_share_crosses_the_network() -> None:
    arch = load_arch("qwen3-30b-a3b")
    ph = Phase("decode", 16)
    ep = expert_parallel(arch, ph, 16)
    assert ep is not None
    s = 16 * 8 * arch.hidden * 2
    assert ep.link_shares() == pytest.approx({"nvlink": 2 * s * 7 / 16, "net": 2 * s * 8 / 16})
    assert ep.layer_s(H100_DS) is None and ep.missing_links(H100_DS) == ["network"]  # no profile lists a network
    assert step_bound(arch, ph, H100_DS, ep=ep).alltoall_s == 0.0  # not in T, and said so
    net = replace(H100_DS, bandwidth={**H100_DS.bandwidth, "net": Ceiling(50e9, "datasheet", "400 Gb/s NIC")})
    assert ep.layer_s(net) == pytest.approx(max(2 * s * 7 / 16 / NVLINK, 2 * s * 8 / 16 / 50e9))


def test_the_text_shows_the_alltoall_time_a_layer(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llm", "mixtral-8x7b", "-d", "h100-sxm-ds", "--batch", "4", "--ep", "8"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "EP 8: 1 of 8 routed experts a rank" in text and "255 ns a layer" in text and "added to T" in text
    assert "+ all-to-alls 0.00816 ms" in text and "EP×8 64× all-to-all" in text
    assert main(["llm", "qwen3-30b-a3b", "-d", "h100-sxm-ds", "--batch", "16", "--ep", "16"]) == 0
    assert "has no network bandwidth: the all-to-alls are not in T" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("args, says", [
    (["qwen3-30b-a3b", "--ep", "3"], "128 routed experts do not split 3 ways; give an ep that divides them (1, 2, 4,"),
    (["qwen3-30b-a3b", "--ep", "0"], "--ep 0: degrees start at 1"),
    (["qwen3-30b-a3b", "--ep", "-2"], "--ep -2: degrees start at 1"),
    (["qwen3-30b-a3b", "--ep", "8", "--ep-imbalance", "0.5"], "expert load over the mean is at least 1"),
    (["qwen3-30b-a3b", "--ep", "8", "--ep-imbalance", "inf"], "expert load over the mean is at least 1"),
    (["qwen3-30b-a3b", "--ep-imbalance", "2"], "--ep-imbalance needs --ep N > 1"),
    (["qwen2.5-7b", "--ep", "2"], "has no routed experts (a dense MLP)"),
    (["qwen3-30b-a3b", "--ep", "8", "--tp", "2"], "expert parallelism is modelled on its own"),
])
def test_bad_ep_values_are_one_line_exit_2(args: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llm", *args, "-d", "h100-sxm-ds"]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1
