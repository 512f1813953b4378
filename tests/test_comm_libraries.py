"""Every communication library on a link roof, never DRAM or compute: torch's symmetric memory (a B200 vLLM rank),
vLLM's custom all-reduce, DeepEP's dispatch and combine, PyTorch 2.1's nameless record_param_comms beside its
nccl:* ranges (a V100 DLRM rank), RCCL on an MI300X job (its link is xGMI). Each trace is built in the format
torch.profiler writes, from the names the real traces of those jobs carry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.kineto import B200, H100, MI300X, V100, KinetoTrace
from inprocess import run_main
from rooftop.models.catalog import lookup_device
from rooftop.models.program.collectives import rank_collectives
from rooftop.models.program.job import exposed
from rooftop.models.trace.read import parse_trace

MULTIMEM = ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, "
            "unsigned int**, unsigned long, unsigned long)")
GEMM = "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT"
CUSTOM_AR = ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, "
             "vllm::Signal*, __nv_bfloat16*, int, int)")
DISPATCH = "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*, int*, int4*)"
NOTIFY = "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int, int const*, int*, int, int, int)"
COMBINE = "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(__nv_bfloat16*, float*, int4 const*, int)"
RCCL = "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)"
TP8 = {"backend": "nccl", "rank": 0, "world_size": 8, "pg_count": 2,
       "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": 8, "ranks": list(range(8))},
                     {"pg_name": "1", "pg_desc": "undefined", "pg_size": 8, "ranks": list(range(8))}]}


def _mm(t: KinetoTrace, ts: float, kts: float, kdur: float) -> None:
    ext = t.op("aten::mm", ts, 10, [[888, 2880], [2880, 2880]], ["c10::BFloat16", "c10::BFloat16"])
    t.kernel(GEMM, ts + 2, kts, kdur, ext)


def _json(*args: str) -> dict:
    out = run_main("profile", *args, "--json", "--no-save")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _union(kernels: list[dict]) -> float:
    return exposed([(k["ts"] * 1e-6, (k["ts"] + k["dur"]) * 1e-6) for k in kernels], [])[0]


def _kernels(t: KinetoTrace, *names: str) -> list[dict]:
    return [e for e in t.events if e["cat"] == "kernel" and e["name"] in names]


# -- a B200 vLLM rank: vllm::all_reduce around symm_mem::multimem_all_reduce_ ------------------------------------------


@pytest.fixture(scope="module")
def b200(tmp_path_factory) -> tuple[KinetoTrace, Path]:
    t = KinetoTrace(B200, **TP8)
    for i in range(6):
        base = 1000.0 * i
        _mm(t, base, base + 20, 150)
        t.op("vllm::all_reduce", base + 200, 300, [[888, 2880], []], ["c10::BFloat16", ""])
        ext = t.op("symm_mem::multimem_all_reduce_", base + 250, 25, [[2557440], [], []], ["c10::BFloat16", "", ""])
        t.kernel(MULTIMEM, base + 260, base + 280, 30 + i, ext)
    return t, t.write(tmp_path_factory.mktemp("b200") / "vllm-b200-rank0.json")


def test_symm_mem_all_reduce_is_on_the_nvlink_roof_not_dram(b200):
    t, path = b200
    doc = _json("--trace", str(path), "-d", "b200-ds")
    [g] = [o for o in doc["ops"] if o["op"] == "symm_mem::multimem_all_reduce_"]
    assert g["regime"] == "comm" and g["bound_s"] is None and g["fraction_of_roof"] is None
    assert g["bytes"] == 0 and g["flops"] == 0  # its bytes cross the link: none counted as DRAM traffic
    assert doc["summary"]["bytes"] == sum(o["bytes"] for o in doc["ops"] if o["op"] == "aten::mm")
    [r] = doc["ranks"]
    assert r["comm_s"] == pytest.approx(_union(_kernels(t, MULTIMEM)))
    assert r["compute_s"] == pytest.approx(_union(_kernels(t, GEMM)))
    [c] = doc["collectives"]  # six calls once each: the vllm::all_reduce around each is no second one
    nvlink = lookup_device("b200-ds").B("nvlink")
    times = [k["dur"] * 1e-6 for k in _kernels(t, MULTIMEM)]
    assert (c["op"], c["via"], c["calls"], c["group_size"], c["link"]) == ("allreduce", "symm_mem", 6, 8, "nvlink")
    assert c["bytes"] == 2557440 * 2 and c["time_s"] == pytest.approx(sum(times))
    busbw = c["bytes"] / (sum(times) / 6) * 2 * 7 / 8
    assert c["busbw"] == pytest.approx(busbw) and c["fraction_of_link"] == pytest.approx(busbw / nvlink)
    text = run_main("profile", "--trace", str(path), "-d", "b200-ds", "--no-save", "--wide").stdout
    assert "allreduce (symm_mem)" in text and "symm_mem moves the data between one node's GPUs" in text


# -- vLLM's custom all-reduce, eager and in a graph replay -------------------------------------------------------------


def test_vllm_custom_all_reduce_on_the_link_and_a_replayed_one_time_only(tmp_path):
    t = KinetoTrace(H100, **TP8)
    for i in range(4):
        base = 1000.0 * i
        _mm(t, base, base + 20, 100)
        t.op("vllm::all_reduce", base + 200, 100, [[4, 7168], []], ["c10::BFloat16", ""])
        ext = t.op("_C_custom_ar::all_reduce", base + 210, 40, [[], [4, 7168], [4, 7168], [], []],
                   ["Scalar", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"])
        t.kernel(CUSTOM_AR, base + 220, base + 230, 8, ext)
    t.kernel(CUSTOM_AR, 5000, 5010, 9, launch="cudaGraphLaunch")  # replayed: no op of this trace launched it
    doc = _json("--trace", str(t.write(tmp_path / "vllm-h100.json")), "-d", "h100-sxm-ds")
    [g] = [o for o in doc["ops"] if o["op"] == "_C_custom_ar::all_reduce"]
    assert g["regime"] == "comm" and g["bound_s"] is None and g["bytes"] == 0
    by = {(c["op"], c["via"], c["bytes"]): c for c in doc["collectives"]}
    eager = by[("allreduce", "custom all-reduce", 4 * 7168 * 2)]
    assert eager["calls"] == 4 and eager["link"] == "nvlink" and eager["fraction_of_link"] > 0
    replay = by[("allreduce", "custom all-reduce", None)]  # its size is in no op: time only, on the link
    assert replay["calls"] == 1 and replay["time_s"] == pytest.approx(9e-6) and replay["link"] == "nvlink"
    assert replay["algbw"] is None and replay["fraction_of_link"] is None and replay["expected_s"] is None
    assert len(doc["collectives"]) == 2
    assert doc["ranks"][0]["comm_s"] == pytest.approx((4 * 8 + 9) * 1e-6)
    text = run_main("profile", "--trace", str(tmp_path / "vllm-h100.json"), "-d", "h100-sxm-ds", "--no-save",
                    "--wide").stdout
    [row] = [x for x in text.splitlines() if x.startswith("allreduce (custom all-reduce)") and " ? " in x]
    # no fraction of the link, said as every percent the run does not hold ("—" here before), and no α-β time
    assert " nvlink " in row and row.rstrip().endswith(" n/a") and "—" not in row
    assert "size ? = the trace does not record it" in text


# -- DeepEP: dispatch and combine kernels, launched under annotations, no op --------------------------------------


def test_deepep_dispatch_and_combine_are_communication_not_compute(tmp_path):
    t = KinetoTrace(H100, backend="nccl", rank=0, world_size=8)
    for i in range(3):
        base = 2000.0 * i
        t.op("dispatch(F)", base, 100, cat="user_annotation")
        t.kernel(NOTIFY, base + 10, base + 20, 15)
        t.kernel(DISPATCH, base + 30, base + 40, 120)
        _mm(t, base + 400, base + 420, 300)
        t.op("combine(F)", base + 800, 100, cat="user_annotation")
        t.kernel(COMBINE, base + 810, base + 650, 200)  # overlaps the expert GEMM by 70 µs
    path = t.write(tmp_path / "deepep.json")
    doc = _json("--trace", str(path), "-d", "h100-sxm-ds")
    [r] = doc["ranks"]
    comm = _kernels(t, NOTIFY, DISPATCH, COMBINE)
    assert r["comm_s"] == pytest.approx(_union(comm)) and r["comm_s"] > 0
    assert r["compute_s"] == pytest.approx(_union(_kernels(t, GEMM)))  # DeepEP's kernels are no compute
    assert r["comm_exposed_s"] == pytest.approx(r["comm_s"] - 3 * 70e-6)
    # among the op groups, DeepEP's kernels are communication: on no DRAM or compute roof
    assert sum(o["time_s"] for o in doc["ops"] if o["regime"] == "comm") == pytest.approx(
        sum(k["dur"] for k in comm) * 1e-6)
    assert all(o["regime"] != "comm" for o in doc["ops"] if o["op"] == "aten::mm")
    by = {c["via"]: c for c in doc["collectives"]}
    assert set(by) == {"DeepEP dispatch", "DeepEP combine"}
    assert by["DeepEP dispatch"]["calls"] == 6 and by["DeepEP dispatch"]["time_s"] == pytest.approx(3 * 135e-6)
    assert by["DeepEP combine"]["time_s"] == pytest.approx(3 * 200e-6)
    for c in by.values():  # the sizes are in no record: time only, on the GPU link, no fraction of it
        assert c["op"] == "alltoall" and c["bytes"] is None and c["link"] == "nvlink"
        assert c["fraction_of_link"] is None and c["busbw"] is None


def test_deepep_kernels_are_collectives_of_their_own():
    t = KinetoTrace(H100, backend="nccl", rank=0, world_size=2)
    t.kernel(DISPATCH, 10, 20, 50)
    t.kernel("void deep_ep::internode_ll::combine<8>(void*)", 100, 110, 30)
    colls = rank_collectives(parse_trace(t.doc()))
    assert [(c.collective, c.via, c.bytes, c.intra_node, c.time_s) for c in colls] == [
        ("alltoall", "DeepEP dispatch", None, True, pytest.approx(50e-6)),
        ("alltoall", "DeepEP combine", None, False, pytest.approx(30e-6))]  # low-latency mode: over the network


# -- PyTorch 2.1 (a V100 DLRM rank): record_param_comms without a name, the sizes in the nccl:* ranges -------------


def _dlrm_collective(t: KinetoTrace, ts: float, c10d: tuple[str, list, list], backend: str, dims: list,
                     kernel: str, kdur: float) -> None:
    """As PyTorch 2.1 records one: c10d's op, record_param_comms with its inputs but no collective name, the
    backend's nccl:* range with the tensor's shape, and the NCCL kernel launched inside them."""
    t.op(c10d[0], ts, 90, c10d[1], c10d[2])
    listed = c10d[2][0] == "TensorList"  # an all-reduce's tensors: a TensorList, its shapes not recorded
    t.op("record_param_comms", ts + 4, 80, [[] if listed else dims[0]] + [[]] * 6,
         [c10d[2][0], "Scalar", "Scalar", "Scalar", "", "", ""])
    t.op(backend, ts + 10, 60, dims, ["float"], cat="user_annotation")
    t.kernel(kernel, ts + 20, ts + 40, kdur)


def test_pytorch_2_1_sizes_from_the_nccl_ranges_and_the_gathered_output(tmp_path):
    t = KinetoTrace(V100, backend="nccl", rank=0, world_size=8)
    _dlrm_collective(t, 0, ("c10d::allreduce_", [[], [], [], []], ["TensorList", "", "", "Scalar"]),
                     "nccl:all_reduce", [[394241]],
                     "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", 250)
    _dlrm_collective(t, 1000, ("c10d::alltoall_base_", [[6144], [6144], [], [], [], []],
                               ["float", "float", "", "", "", "Scalar"]), "nccl:all_to_all", [[6144]],
                     "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", 120)
    _dlrm_collective(t, 2000, ("c10d::_allgather_base_", [[8 * 1024], [1024], []], ["float", "float", ""]),
                     "nccl:_all_gather_base", [[1024]],
                     "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", 40)
    colls = rank_collectives(parse_trace(t.doc()))
    assert [(c.collective, c.bytes, c.group_size, c.kernels) for c in colls] == [
        ("allreduce", 394241 * 4, 8, 1), ("alltoall", 6144 * 4, 8, 1),
        ("allgather", 8 * 1024 * 4, 8, 1)]  # S: the gathered whole (c10d's output), not the range's input
    doc = _json("--trace", str(t.write(tmp_path / "dlrm-rank0.json")), "-d", "v100-32")
    assert {(c["op"], c["bytes"]) for c in doc["collectives"]} == {
        ("allreduce", 394241 * 4), ("alltoall", 6144 * 4), ("allgather", 8 * 1024 * 4)}
    assert all(c["via"] == "" and c["link"] == "nvlink" for c in doc["collectives"])
    assert all(o["regime"] == "comm" and o["bytes"] == 0 for o in doc["ops"]
               if o["op"].startswith(("c10d::", "record_param_comms")))


# -- an MI300X job: RCCL over xGMI ----------------------------------------------------------------------------------


def _mi300x_rank(rank: int, device: dict) -> KinetoTrace:
    t = KinetoTrace(device, backend="nccl", rank=rank, world_size=2, nccl_version="2.21.5",
                    pg_config=[{"pg_name": "0", "pg_desc": "default_pg", "pg_size": 2, "ranks": [0, 1]}])
    for i in range(3):
        base = 1000.0 * i
        t.op("c10d::allreduce_", base, 100)
        ext = t.op("record_param_comms", base + 5, 90, **{
            "Collective name": "allreduce", "In msg nelems": 1 << 22, "Out msg nelems": 1 << 22, "dtype": "BFloat16",
            "Group size": 2, "Process Group Ranks": "[0, 1]", "Process Group Name": "0"})
        t.kernel(RCCL, base + 10, base + 20 + 3 * rank, 80 - 3 * rank, ext, launch="hipLaunchKernel")
    return t


@pytest.mark.parametrize("device", [MI300X, {**MI300X, "name": ""}], ids=["named", "empty-name"])
def test_mi300x_job_crosses_xgmi_not_nvlink(tmp_path, device):
    paths = [_mi300x_rank(r, device).write(tmp_path / f"rank-{r}.json") for r in (0, 1)]
    args = ["--trace", *map(str, paths), "-d", "mi300x-ds"]
    doc = _json(*args)
    [c] = doc["collectives"]
    dev = lookup_device("mi300x-ds")
    figure = dev.bandwidth.get("xgmi") or dev.bandwidth["nvlink"]  # kept under nvlink before xgmi was a level
    assert (c["link"], c["calls"], c["ranks"], c["bytes"]) == ("xgmi", 6, 2, (1 << 22) * 2)
    assert c["link_bandwidth"] == pytest.approx(figure.value) and c["fraction_of_link"] > 0
    assert "xGMI (Infinity Fabric)" in c["link_why"]
    text = run_main("profile", *args, "--no-save", "--wide").stdout
    assert "link roofs: xGMI (Infinity Fabric): mi300x-ds" in text.replace("\n", " ")
    assert "nvlink" not in text.lower()
    given = _json(*args, "--link", "nvlink")  # an AMD GPU's GPU link is its xGMI, whatever it is called
    assert [x["link"] for x in given["collectives"]] == ["xgmi"]
    assert _json(*args, "--link", "xgmi")["collectives"][0]["link_bandwidth"] == pytest.approx(figure.value)


def test_xgmi_as_an_ops_level_where_the_device_has_that_link():
    from dataclasses import replace

    from rooftop.models.analysis import analyze
    from rooftop.models.profile import Ceiling, NoRoof
    from rooftop.models.spec import parse_spec

    op = parse_spec("allreduce n=16M bf16 world=8 level=xgmi")
    mi = lookup_device("mi300x-ds")
    amd = replace(mi, bandwidth={k: v for k, v in mi.bandwidth.items() if k != "nvlink"}
                  | {"xgmi": Ceiling(448e9, "datasheet")})
    for dev in (mi, amd):  # its xGMI kept under either name
        a = analyze(op, dev)
        assert a.cost.level == "xgmi" and a.bandwidth == (dev.bandwidth.get("xgmi") or dev.bandwidth["nvlink"]).value
    assert analyze(parse_spec("allreduce n=16M bf16 world=8"), amd).cost.level == "xgmi"  # the default: its GPU link
    with pytest.raises(NoRoof):  # an NVIDIA GPU has no xGMI
        analyze(op, lookup_device("h100-sxm-ds"))
    out = run_main("op", "allreduce n=16M bf16 world=8 level=xgmi", "-d", "mi300x-ds")
    assert out.returncode == 0, out.stderr
    assert "xgmi" in out.stdout


def test_a_peer_copy_on_an_amd_gpu_crosses_its_xgmi():
    from rooftop.models.program.workload import build_workload

    t = KinetoTrace(MI300X)
    t.events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy PtoP (Device -> Device)", "pid": 0, "tid": 7,
                     "ts": 10, "dur": 100, "args": {"bytes": 1 << 26, "device": 0, "stream": 7}})
    dev = lookup_device("mi300x-ds")
    [x] = build_workload(parse_trace(t.doc()), dev).transfers
    assert x.level == "xgmi" and x.bandwidth == (dev.bandwidth.get("xgmi") or dev.bandwidth["nvlink"]).value
    [h] = build_workload(parse_trace(t.doc()), lookup_device("h100-sxm-ds")).transfers
    assert h.level == "nvlink"
