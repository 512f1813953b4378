"""fp32 GEMMs and convolutions that ran on TF32 tensor cores (allow_tf32, cuDNN's default) are placed on tf32-tc,
by what their kernels' names say: the name rule over kernel names copied from the shared real traces, a group
whose kernels disagree placed by the time share, and the DLRM rank (A100, fp32 GEMMs on CUTLASS `tensorop_s1688`)
end to end through `rooftop profile --trace … --json`."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from helpers.kineto import H100, KinetoTrace

from rooftop.models.catalog import lookup_device
from rooftop.models.trace.kernelfamily import FP32, TF32, fp32_math
from rooftop.models.program.workload import build_workload
from rooftop.store.tracefile import load_trace
from rooftop.tui.cli import main

DLRM = Path(__file__).parent / "data" / "real-traces" / "trace_filter_sampled_rank-1.json.gz"

# kernel names as the shared traces hold them (the DLRM ranks, the A100 ResNet job, the V100 ResNet-50, the H100 and
# H200 inference runs, the MI250 and MI300X jobs), with what each says of fp32 math
REAL = {
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1>"
    "(cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1::Params)": TF32,
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>"
    "(cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4::Params)": TF32,
    "sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4_warpsize2x2x1_"
    "g1_tensor16x8x8_execute_kernel_cudnn_train": TF32,
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_"
    "g1_tensor16x8x8_execute_kernel_cudnn_infer": TF32,
    "void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_64x128_32x3_nhwc_align4>"
    "(cutlass_tensorop_s1688dgrad_optimized_tf32_64x128_32x3_nhwc_align4::Params)": TF32,
    "_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22ImplicitGemmMulti"
    "stageINS_4gemm9GemmShapeILi128ELi128ELi32EEENS4_52Conv2dWgradOutputGradientTileAccessIteratorOptimizedINS_11Matr"
    "ixShapeILi128ELi32EEENS_10tfloat32_tENS_9transform29PitchLinearWarpRakedThreadMapINS_16PitchLinearShapeILi128E":
        TF32,
    "ampere_sgemm_128x64_nn": FP32,
    "ampere_sgemm_32x32_sliced1x4_tn": FP32,
    "volta_sgemm_64x64_nt": FP32,
    "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_tn_align1>"
    "(cutlass_80_simt_sgemm_128x32_8x5_tn_align1::Params)": FP32,
    "void gemvNSP_kernel<float, float, float, float, 1, 16, 4, 1024, cublasGemvParams<cublasGemvTensorStridedBatched"
    "<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float> >": FP32,
    "void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>(int, int, int, float "
    "const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, int, float const*, "
    "float const*, bool, int, int)": FP32,
    "cudnn_infer_ampere_scudnn_128x64_relu_xregs_large_nn_v1": FP32,
    "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_EPS0": FP32,
    # helpers and other dtypes' GEMMs say nothing of fp32 math
    "void splitKreduce_kernel<float, float, float, float, true, false, false>(cublasSplitKParams<float>, float const*, "
    "float const*, float*, float const*, float const*, float const*, float const*, float*, void*, long, float*, "
    "int*)": "",
    "nvjet_sm90_tst_192x8_64x8_4x1_v_bz_TNT": "",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_"
    "cublas": "",
    "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_35_16x128x128_1x4x1_cga1x1x1_kernel0_0": "",
}


@pytest.mark.parametrize("name", REAL)
def test_a_kernel_name_says_which_unit_did_its_fp32_math(name: str) -> None:
    assert fp32_math(name) == REAL[name]


def test_a_tensorop_name_over_a_half_type_is_no_tf32_and_amd_xf32_is() -> None:
    # CUTLASS's `s` is the accumulator: over bf16 / fp16 elements the kernel is a half GEMM. No shared trace has a
    # Tensile XF32 kernel; this name follows Tensile's naming (an fp32 `Cijk_*_S*` with its XF32 math type).
    assert fp32_math("void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>") == ""
    assert fp32_math("cutlass_tensorop_s16816gemm_f16_256x128_32x3_nn_align8") == ""
    assert fp32_math("Cijk_Ailk_Bljk_S_B_Bias_HA_S_SAV_UserArgs_MT128x128x32_MI32x32x4_XF32_SN_K1") == TF32


def _disagreeing(tmp_path: Path) -> Path:
    """Two fp32 mm groups whose kernels disagree: one mostly in TF32 kernels, one mostly in FP32 ones; and a third
    only in FP32 kernels."""
    t = KinetoTrace(device=H100)
    tensorop = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1>(Params)"
    sgemm = "ampere_sgemm_128x64_nn"
    for i, (n, first, second) in enumerate([(1024, tensorop, sgemm), (2048, sgemm, tensorop), (512, sgemm, sgemm)]):
        for j, (kernel, dur) in enumerate([(first, 30.0), (second, 10.0)]):
            ts = 1000.0 * (2 * i + j)
            ext = t.op("aten::mm", ts, 50.0, [[n, n], [n, n]], ["float", "float"])
            t.kernel(kernel, ts + 5, ts + 20, dur, ext)
            t.kernel("void splitKreduce_kernel<float, float, float, float, true, false, false>", ts + 6, ts + 60,
                     40.0, ext)  # a helper: no vote, though it is the longest kernel of the pair
    return t.write(tmp_path / "tf32-mixed.json")


def test_a_group_whose_kernels_disagree_is_placed_by_the_time_share_and_says_so(tmp_path: Path) -> None:
    w = build_workload(load_trace(_disagreeing(tmp_path)), lookup_device("h100"))
    by = {g.shapes[0][0]: g for g in w.groups if g.op == "aten::mm"}
    assert by[1024].path == "tf32-tc"
    assert "fp32 on TF32 tensor cores (from its kernels' names): 75.0% of its matrix kernels' time" in by[1024].counting
    assert by[2048].path == "fp32-matmul"
    assert "fp32 on the FP32 path (from its kernels' names): only 25.0%" in by[2048].counting
    assert by[512].path == "fp32-matmul" and "TF32" not in by[512].counting


@pytest.fixture(scope="module")
def dlrm() -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = main(["profile", "--trace", str(DLRM), "--json", "--no-save", "-d", "a100"])
    assert rc == 0
    return json.loads(out.getvalue())


def test_the_dlrm_rank_s_fp32_gemms_read_tf32_and_none_is_above_its_roof(dlrm: dict) -> None:
    gemms = [o for o in dlrm["ops"] if o["dtype"] == "fp32" and o["model"] == "gemm"]
    tf32 = [o for o in gemms if o["path"] == "tf32-tc"]
    assert len(tf32) > 100  # the rank's mm / addmm / bmm on cutlass_80_tensorop_s1688gemm kernels
    assert all("fp32 on TF32 tensor cores (from its kernels' names)" in o["counting"] for o in tf32)
    assert any(o["path"] == "fp32-matmul" for o in gemms)  # its ampere_sgemm_* / gemv GEMMs stay on FP32
    over = [(o["op"], o["shapes"], o["fraction_of_roof"]) for o in gemms if (o["fraction_of_roof"] or 0) > 1.5]
    assert over == []
    s = dlrm["summary"]
    assert s["mfu_path"] == "tf32-tc"
    assert not [o for o in s["headline"]["left_out"] if o["dtype"] == "fp32" and o["op"].endswith("mm")]
    # every GEMM FLOP is counted now, read against the TF32 roof (before: a third of them, against FP32's)
    a100 = lookup_device("a100")
    assert s["mfu"] == pytest.approx(sum(o["flops"] for o in dlrm["ops"]) / s["span_s"] / a100.F("tf32-tc"),
                                     rel=1e-9)
    top = [t for t in dlrm["top_kernels"] if "tensorop_s1688gemm" in t["name"] and t["path"]]
    assert top and all(t["path"] == "tf32-tc" for t in top)
