"""CUDA-only checks (marked `gpu`; scripts/gpu-check.sh runs them). Skipped without a CUDA device."""

from __future__ import annotations

import dataclasses

import pytest

from rooftop.probes.fma import FmaProbe, FmaSweep
from rooftop.probes.gemm import TOLERANCE, GemmProbe, GemmSweeps, check, first_tensor, operands, unsupported
from rooftop.probes.plan import Sizes, build_plan, run_plan
from rooftop.probes.steps import run_step
from rooftop.probes.timing import Protocol

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

SHORT = Protocol(window_s=2e-3, repeats=3, max_calls=20, warmups=2)


@pytest.fixture(scope="module")
def gpu():
    from rooftop.probes.backend import select_backend

    return select_backend("cuda:0")


def test_device_facts(gpu):
    info = gpu.info
    assert info.kind == "cuda" and info.name and info.compute_capability
    assert info.units and info.units > 0 and info.memory_bytes > 0
    assert info.l2_bytes and info.l2_bytes > 0
    assert gpu.flush_bytes() >= max(128 << 20, 4 * info.l2_bytes)
    assert 0 < gpu.free_bytes() <= info.memory_bytes


def test_l2_from_the_driver_agrees_with_torch(gpu):
    """The ctypes fallback for torch < 2.5 against a real libcuda."""
    from rooftop.probes.devinfo import driver_l2_bytes

    assert driver_l2_bytes(0) == gpu.info.l2_bytes


def test_nvml_index_is_the_same_gpu(gpu):
    pynvml = pytest.importorskip("pynvml")
    if gpu.info.nvml_index is None:
        pytest.skip("NVML did not answer")
    uuid = getattr(torch.cuda.get_device_properties(0), "uuid", None)
    if uuid is None:
        pytest.skip(f"torch {torch.__version__} reports no UUID")
    pynvml.nvmlInit()
    try:
        got = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(gpu.info.nvml_index))
    finally:
        pynvml.nvmlShutdown()
    got = got.decode() if isinstance(got, bytes) else got
    assert got.lower() == f"gpu-{uuid}".lower()


def test_cuda_events_time_the_kernels_not_the_enqueue(gpu):
    """Events on the device's stream bracket the GPU work: for ~ms GEMMs their interval matches the wall
    time between two synchronisations."""
    import time

    kernel, _ = operands("bf16" if not unsupported(gpu, "bf16") else "fp32", 8192, 8192, 8192, gpu.torch_device)
    kernel()
    gpu.sync()
    events = gpu.timer.time_calls(kernel, 20)
    gpu.sync()
    t0 = time.perf_counter()
    for _ in range(20):
        kernel()
    gpu.sync()
    wall = time.perf_counter() - t0
    assert 0.8 * wall <= events <= 1.02 * wall, (events, wall)


def test_tf32_is_really_switched(gpu):
    if unsupported(gpu, "tf32"):
        pytest.skip(unsupported(gpu, "tf32"))
    assert check("tf32", gpu.torch_device) > 10 * check("fp32", gpu.torch_device)  # ~1e-3 vs ~1e-6


def test_fp8_at_decode_size(gpu):
    if unsupported(gpu, "fp8"):
        pytest.skip(unsupported(gpu, "fp8"))
    kernel, ref = operands("fp8", 1, 4096, 4096, gpu.torch_device)
    out = first_tensor(kernel()).double()
    want = ref()
    assert float((out - want).abs().max() / want.abs().max()) <= TOLERANCE["fp8"]


def test_int8_is_timed_in_its_fast_layout(gpu):
    """B column-major, as fast code calls torch._int_mm: an H200 ran 914 TOP/s at 8192³ where B
    row-major ran 125. The probe's default layout must be the faster one here too."""
    if unsupported(gpu, "int8"):
        pytest.skip(unsupported(gpu, "int8"))
    rates = {}
    for col in (True, False):
        kernel, _ = operands("int8", 4096, 4096, 4096, gpu.torch_device, b_column_major=col)
        kernel()
        gpu.sync()
        rates[col] = 10 * 2 * 4096**3 / gpu.timer.time_calls(kernel, 10)
    print(f"int8 4096³: B column-major {rates[True] / 1e12:.0f} TOP/s, row-major {rates[False] / 1e12:.0f} TOP/s")
    assert rates[True] >= rates[False]


@pytest.mark.parametrize("dtype", ["fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8"])
def test_gemm_kernels_are_correct(gpu, dtype):
    why = unsupported(gpu, dtype)
    if why:
        pytest.skip(why)
    assert check(dtype, gpu.torch_device) <= TOLERANCE[dtype]


def test_gemm_sweep_restores_tf32(gpu):
    old = torch.get_float32_matmul_precision()
    backend = dataclasses.replace(gpu, protocol=SHORT)
    probe = GemmProbe(backend, GemmSweeps(squares=(1024,), nk=1024, ms=(16,), dtypes=("fp32", "tf32", "bf16"),
                                          cold_squares=(1024,)))
    samples = [run_step(s) for s in probe.steps()]
    assert all(s.stats is not None for s in samples if not unsupported(gpu, s.dtype)), [s.skipped for s in samples]
    assert torch.get_float32_matmul_precision() == old


def test_triton_fma_sweep_on_the_gpu(gpu):
    pytest.importorskip("triton")
    backend = dataclasses.replace(gpu, protocol=SHORT)
    probe = FmaProbe(backend, FmaSweep(reps=(1, 64)), n=1 << 22)
    samples = [run_step(s) for s in probe.steps()]
    for s in samples:
        assert s.stats is not None, s.skipped
        assert s.conditions["method"] == "triton" and s.max_error is not None


def test_tiny_plan_with_cuda_graph_launch(gpu):
    sizes = Sizes(SHORT, (64 << 10, 256 << 20), GemmSweeps((512,), 512, (16,), ("bf16",)), FmaSweep((1,), ("fp32",)),
                  fma_elements=1 << 20)
    samples = [s for _, s in run_plan(build_plan(gpu, "quick", sizes=sizes))]
    fams = {s.family: s for s in samples}
    assert fams["launch_graph"].stats is not None
    assert fams["launch_graph"].stats.median_s < fams["launch"].stats.median_s
    assert fams["read_reduce"].stats is not None


def test_cache_probes_see_the_l2_and_the_l1_under_its_limit(gpu):
    """The cache probes on the real device: every program's sum checked, the L2 (4 MiB) faster than the
    HBM (4 × L2), and the L1 faster than the L2 yet under SMs × 128 B × max SM clock (else its loads were
    hoisted). On the reference H200: L2 ≈ 10.9 TB/s, HBM ≈ 4.5 TB/s, L1 limit 33.4 TB/s."""
    pytest.importorskip("triton")
    from rooftop.models.hierarchy import l1_limit
    from rooftop.probes.cache import CacheSweep, steps

    backend = dataclasses.replace(gpu, protocol=SHORT)
    l2 = gpu.info.l2_bytes
    sweep = CacheSweep(l2_sets=(4 << 20, 4 * l2), l1_regions=(16 << 10,), min_read=1 << 30)
    got = [run_step(s) for s in steps(backend, sweep)]
    for s in got:
        assert s.stats is not None, s.skipped
        assert s.max_error is not None and s.max_error <= 1e-4
    l2_in, l2_out, l1 = (s.bandwidth for s in got)
    print(f"l2_read 4 MiB {l2_in / 1e9:.0f} GB/s, {4 * l2 / 2**20:.0f} MiB {l2_out / 1e9:.0f} GB/s; "
          f"l1_read {l1 / 1e9:.0f} GB/s")
    assert l2_in > 1.3 * l2_out
    limit = l1_limit(gpu.info.hardware())
    assert l1 > l2_in and (limit is None or l1 <= limit)
