"""Blackwell Nsight Compute exports: FP8 and FP4 GEMMs counted by tcgen05's own tensor counters (UTCQMMA, UTCOMMA).

tests/data/ncu-blackwell.csv is written in the naming B200/B300 exports use (NVIDIA/DCGM#251): two 4096³ GEMMs,
FP8 and FP4, whose `sm__ops_path_tensor_src_*` read zero while `sm__ops_path_tensor_op_utcqmma_*` and
`…_utcomma_*` hold 2·M·N·K, beside their `_realtime` copies and `_sparsity_off` parts (which must not add to it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooftop.models.counters import counted, tensor_ops
from rooftop.models.ncu import read_ncu
from rooftop.tui.cli import main

CSV = Path(__file__).parent / "data" / "ncu-blackwell.csv"
GEMM = 2 * 4096**3  # 2·M·N·K of a 4096³ GEMM: 137,438,953,472


def test_a_blackwell_export_gives_each_gemm_its_tensor_flops_once() -> None:
    fp8, fp4 = read_ncu(CSV.open()).kernels
    assert (fp8.tensor_ops, fp8.path) == (GEMM, "fp8-tc")
    assert (fp4.tensor_ops, fp4.path) == (GEMM, "fp4-tc")
    assert fp8.dram_bytes == pytest.approx(64 * 2**20)  # rate × time, as before


def test_the_cli_places_them_on_the_b200_roofs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--ncu", str(CSV), "-d", "b200-ds", "--json"]) == 0
    ks = json.loads(capsys.readouterr().out)["kernels"]
    fp8 = ks[0]["points"][0]
    assert fp8["intensity"] == pytest.approx(GEMM / (64 * 2**20))
    assert fp8["peak"] == 4.5e15 and ks[1]["points"][0]["peak"] == 9e15  # FP8 and FP4 dense, B200 datasheet


@pytest.mark.parametrize("values, ops", [
    # Hopper: the path total and the per-instruction family (hgmma) both count the GEMM: once
    ({"sm__ops_path_tensor_src_bf16_dst_fp32.sum": GEMM,
      "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum": GEMM}, {"bf16-tc": GEMM}),
    # Blackwell: the path total reads zero, the tcgen05 counter has it; its sparsity part is inside its total
    ({"sm__ops_path_tensor_src_fp8_sparsity_off.sum": 0.0,
      "sm__ops_path_tensor_op_utcqmma_src_fp8_dst_fp32.sum": GEMM,
      "sm__ops_path_tensor_op_utcqmma_src_fp8_dst_fp32_sparsity_off.sum": GEMM}, {"fp8-tc": GEMM}),
    # only the parts: on + off is the total; the realtime copy is not read
    ({"sm__ops_path_tensor_op_utcomma_src_fp4_dst_fp32_sparsity_off.sum": 3.0,
      "sm__ops_path_tensor_op_utcomma_src_fp4_dst_fp32_sparsity_on.sum": 1.0,
      "sm__ops_path_tensor_op_utcomma_src_fp4_dst_fp32_realtime.sum": 4.0}, {"fp4-tc": 4.0}),
    # two destinations of one source add up
    ({"sm__ops_path_tensor_op_utcqmma_src_fp8_dst_fp16.sum": 2.0,
      "sm__ops_path_tensor_op_utcqmma_src_fp8_dst_fp32.sum": 5.0}, {"fp8-tc": 7.0}),
])
def test_each_tensor_op_counts_once(values: dict[str, float], ops: dict[str, float]) -> None:
    assert tensor_ops(values) == ops
    c = counted(values)  # the trace's counters read by the same rule
    assert c.flops == sum(ops.values()) and c.path == next(iter(ops))
