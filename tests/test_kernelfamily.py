"""Kernel families by name, on kernel names taken from real public traces (cuDNN, cuBLAS, CUTLASS, hipBLASLt,
aiter, SGLang, vLLM, NCCL, Triton, ATen)."""

import pytest

from rooftop.models.trace.kernelfamily import ABOUT, FAMILIES, kernel_family

REAL = {
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)": "comm",
    "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)": "comm",
    "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, int)": "comm",
    "void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, 8>(c10::BFloat16*, unsigned long)":
        "comm",
    "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, "
    "unsigned int**, unsigned long, unsigned long)": "comm",  # a B200 vLLM rank's symm_mem all-reduce
    "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "comm",
    "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)": "comm",  # RCCL on an MI300X DDP job
    "void vllm::reshape_and_cache_flash_kernel<__hip_bfloat16, __hip_bfloat16, (vllm::Fp8KVCacheDataType)0>":
        "copy",
    "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false>>": "attention",
    "kernel_unified_attention_2d": "attention",
    "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_35_16x128x128_1x4x1_cga1x1x1_kernel":
        "attention",
    "void paged_attention_ll4mi_QKV_mfma16_kernel<0, __hip_bfloat16, __hip_bfloat16>": "attention",
    "_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu": "moe",
    "void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>(int, int, int)": "conv",
    "volta_scudnn_128x128_stridedB_splitK_small_nn_v1": "conv",
    "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, float const*)": "conv",
    "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5_warpsize2x2x1": "conv",
    "nvjet_sm90_tst_192x8_64x8_4x1_v_bz_TNT": "gemm",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off": "gemm",
    "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT16x16x256_MI16x16x1_SN_LDSB1_AFC1": "gemm",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1>(cutlass_80_tensorop_s1688gemm)": "gemm",
    "volta_sgemm_64x64_nt": "gemm",
    "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float>": "gemm",
    "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256ELi16ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiii": "norm",
    "_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePassINS_27Rmsnorm2dFwdPipeline": "norm",
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnTensorStruct, float const*)": "norm",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float)": "norm",
    "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true>(float*, float const*)":
        "softmax",
    "void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float, false, long, 2ul>":
        "embedding",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float>>>":
        "reduce",
    "void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int, int>::Policy800, false>":
        "reduce",
    "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*)": "reduce",
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 1, 128, 1>(float*)": "copy",
    "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>": "copy",
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, at::detail::Array<char*, 3>>":
        "elementwise",
    "_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_ES3_S5_EEEEv":
        "elementwise",
    "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*)": "elementwise",
    "triton_poi_fused_add_mul_0": "elementwise",
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::TensorListMetadata<4>>":
        "elementwise",
    "void convert_fp8_kernel<float>(float const*, unsigned char*)": "elementwise",
    "cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)": "other",
}


@pytest.mark.parametrize("name, family", REAL.items(), ids=[n[:40] for n in REAL])
def test_a_real_kernel_name_reads_as_its_family(name, family):
    assert kernel_family(name) == family


def test_every_family_is_described_and_other_is_last():
    assert FAMILIES[-1] == "other"
    assert all(ABOUT[f] for f in FAMILIES)
    assert {kernel_family(n) for n in REAL} <= set(FAMILIES)
