"""Collectives in the op language, datasheet links as levels, and their place on the communication roofline."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rooftop.models.analysis import analyze
from rooftop.models.catalog import catalog
from rooftop.models.ops import Collective
from rooftop.models.profile import NoRoof
from rooftop.models.spec import SpecError, parse_spec

MiB = 2**20


def test_spec_parses_and_round_trips():
    op = parse_spec("allreduce n=16M bf16 world=8 level=nvlink")
    assert op == Collective(coll="allreduce", n=16 * MiB, dtype="bf16", world=8, level="nvlink")
    assert parse_spec(op.spec()) == op
    assert parse_spec("p2p 1M fp32").world == 2 and parse_spec("all_gather 4k world=4").coll == "allgather"
    assert parse_spec("reducescatter n=1G world=8 level=pcie").n == 2**30


@pytest.mark.parametrize("coll, factor", [("allreduce", 2 * 7 / 8), ("allgather", 7 / 8),
                                          ("reducescatter", 7 / 8), ("p2p", 1.0)])
def test_wire_bytes_are_nccl_tests_factors(coll, factor):
    op = parse_spec(f"{coll} n=16M bf16 world=8")
    c = op.cost()
    assert c.bytes == pytest.approx(16 * MiB * 2 * factor)
    assert c.level == "nvlink" and c.path == "fp32-fma"
    assert c.flops == (16 * MiB * 7 / 8 if coll in ("allreduce", "reducescatter") else 0)


@pytest.mark.parametrize("text, words", [
    ("allreduce n=16M bf16", "missing world"),
    ("allreduce n=16M world=1", "at least 2"),
    ("allreduce n=16M world=8 level=dram", "not a link; choose one of: nvlink, xgmi, pcie, net"),
    ("allreduce n=16Q world=8", "not a number"),
])
def test_bad_collective_specs(text, words):
    with pytest.raises(SpecError, match=words):
        parse_spec(text)


def test_datasheet_links_per_direction():
    h100 = catalog()["h100-sxm-ds"]
    assert h100.B("nvlink") == 450e9 and h100.B("pcie") == 64e9  # 900 and 128 GB/s both ways, halved
    assert "NVLink 900 GB/s" in h100.bandwidth["nvlink"].case and h100.bandwidth["nvlink"].source == "datasheet"
    assert catalog()["a100-80g-ds"].B("nvlink") == 300e9
    assert "nvlink" not in catalog()["l40s-ds"].bandwidth and catalog()["l40s-ds"].B("pcie") == 32e9
    assert "nvlink" in h100.levels()  # so the Roofline tab and `rooftop plot` draw it as a slope


def test_allreduce_on_h100_nvlink_is_comm_bound_with_alpha_zero_said():
    a = analyze(parse_spec("allreduce n=16M bf16 world=8 level=nvlink"), catalog()["h100-sxm-ds"])
    assert a.regime == "comm" and a.alpha_s == 0
    assert a.time_bound == pytest.approx(16 * MiB * 2 * 1.75 / 450e9)
    assert "α = 0" in a.launch_note()
    assert a.advice[0].startswith("comm-bound (on nvlink at 450.0 GB/s")


def test_measured_alpha_makes_small_messages_latency_bound():
    from dataclasses import replace

    dev = replace(catalog()["h100-sxm-ds"], extra={"link_alpha_s": {"nvlink": 20e-6}})
    small = analyze(parse_spec("allreduce n=1k bf16 world=8"), dev)
    assert small.regime == "latency" and small.time_bound == pytest.approx(20e-6 + 1024 * 2 * 1.75 / 450e9)
    big = analyze(parse_spec("allreduce n=1G bf16 world=8"), dev)
    assert big.regime == "comm" and "measured" in big.to_dict()["alpha_source"]


def test_a_device_without_the_link_says_what_it_has():
    with pytest.raises(NoRoof, match="no net bandwidth; it has: dram, nvlink, pcie"):
        analyze(parse_spec("allreduce n=16M world=8 level=net"), catalog()["h100-sxm-ds"])


def test_cli_op_names_link_bound_and_regime():
    out = subprocess.run([sys.executable, "-m", "rooftop.tui.cli", "op", "allreduce", "n=16M", "bf16", "world=8",
                          "level=nvlink", "-d", "h100-sxm-ds", "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    [d] = json.loads(out.stdout)
    assert d["level"] == "nvlink" and d["regime"] == "comm" and d["bandwidth"] == 450e9
    assert d["time_bound_s"] == pytest.approx(58720256 / 450e9) and d["alpha_s"] == 0


@pytest.mark.parametrize("spec", ["gemv 8192 8192 bf16 level=nvlink", "ew n=1e9 fp32 level=pcie",
                                  "attn b=8 h=32 t=8192 decode level=net"])
def test_a_kernel_on_a_link_level_is_refused(spec: str) -> None:
    """A GEMV's weights are not read over NVLink: only a collective's bytes cross a link, so a kernel op with
    level=nvlink|pcie|net is an error naming the memory levels, not an analysis against the link's slope."""
    with pytest.raises(SpecError, match="is a link between devices.*choose a memory level: dram"):
        parse_spec(spec)
