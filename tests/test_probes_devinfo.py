"""GPU device facts without a GPU: the CUDA driver and NVML through thin fakes, torch's properties faked.

What is faked is only what cannot exist here: libcuda, NVML and a CUDA device's properties.
"""

from __future__ import annotations

import ctypes
import sys
from types import SimpleNamespace

from fake_nvml import FakeNVML, NVMLError_LibraryNotFound, NVMLError_Unknown
from rooftop.models.units import MiB
from rooftop.probes import devinfo
from rooftop.probes.devinfo import CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, cuda_info, driver_l2_bytes, nvml_facts

H200_L2 = 60 * MiB


class FakeLibcuda:
    """cuInit / cuDeviceGet / cuDeviceGetAttribute as ctypes calls them: CUresult back, values through pointers."""

    def __init__(self, init_result: int = 0, devices: int = 1) -> None:
        self.init_result = init_result
        self.devices = devices

    def cuInit(self, flags: int) -> int:  # the driver's names
        return self.init_result

    def cuDeviceGet(self, dev: object, ordinal: int) -> int:
        if ordinal >= self.devices:
            return 101  # CUDA_ERROR_INVALID_DEVICE
        dev._obj.value = ordinal  # type: ignore[attr-defined] - a ctypes.byref
        return 0

    def cuDeviceGetAttribute(self, value: object, attrib: int, dev: ctypes.c_int) -> int:
        value._obj.value = H200_L2 if attrib == 38 else 0  # type: ignore[attr-defined]
        return 0


def test_l2_from_the_cuda_driver():
    assert CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE == 38  # cuda.h
    assert driver_l2_bytes(0, FakeLibcuda()) == H200_L2
    assert driver_l2_bytes(1, FakeLibcuda()) is None  # no such ordinal
    assert driver_l2_bytes(0, FakeLibcuda(init_result=100)) is None  # CUDA_ERROR_NO_DEVICE


def test_l2_without_a_driver_is_unknown(monkeypatch):
    """No libcuda.so.1 (a machine without the driver, faked so a GPU server answers the same): None, no error."""
    loaded = []

    def no_driver(name, *args, **kwargs):
        loaded.append(name)
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(ctypes, "CDLL", no_driver)
    assert driver_l2_bytes(0) is None
    assert loaded == ["libcuda.so.1"]  # the default path really tried the driver


def test_nvml_finds_the_gpu_by_uuid_not_by_cuda_index():
    """CUDA_VISIBLE_DEVICES=1 makes NVML's GPU 1 torch's cuda:0; NVML's index 0 is another card."""
    nv = FakeNVML(names=["NVIDIA H200", "NVIDIA H200"],
                  uuids=["GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-58f05e46-43b9-a0b3-1111-222233334444"])
    facts = nvml_facts(0, "58f05e46-43b9-a0b3-1111-222233334444", nv)  # torch prints the UUID without "GPU-"
    assert facts.index == 1
    assert facts.driver == "570.86.15"
    assert facts.clocks == {"sm_max": 1980.0, "sm_now": 1980.0, "mem_max": 3201.0, "mem_now": 3201.0}  # an H200
    assert not nv.shutdown  # NVML's door stays open for the other probes: shut down once, at exit
    assert nvml_facts(0, None, FakeNVML()).index == 0  # no UUID (old torch): NVML's order assumed
    assert nvml_facts(0, "not-a-known-uuid", nv).index == 0


def test_nvml_failures_leave_only_what_answered():
    assert nvml_facts(0, None, FakeNVML(init_error=NVMLError_LibraryNotFound())) == devinfo.NvmlFacts()
    nv = FakeNVML()
    nv.raise_on["nvmlSystemGetDriverVersion"] = NVMLError_Unknown()
    nv.raise_on["nvmlDeviceGetClockInfo"] = NVMLError_Unknown()
    facts = nvml_facts(0, None, nv)
    assert facts.driver is None and facts.index == 0
    assert facts.clocks == {"sm_max": 1980.0, "mem_max": 3201.0}  # what answered is kept


def test_a_gpu_whose_uuid_nvml_did_not_say_is_not_assumed_to_be_another():
    """One GPU's UUID unread and torch's not among the others: which NVML index it is stays unknown."""
    nv = FakeNVML(names=["NVIDIA H200", "NVIDIA H200"])
    nv.raise_on["nvmlDeviceGetUUID:1"] = NVMLError_Unknown()
    facts = nvml_facts(0, "58f05e46-43b9-a0b3-1111-222233334444", nv)
    assert facts.index is None and facts.clocks == {} and facts.driver == "570.86.15"
    assert nvml_facts(0, nv.uuids[0], nv).index == 0  # the one that did say is still found


def test_cuda_info_on_torch_without_l2_in_the_properties(monkeypatch):
    """torch < 2.5 has no L2_cache_size (pytorch#132819): the driver answers, and NVML is matched by UUID."""
    import torch

    props = SimpleNamespace(name="NVIDIA H200", major=9, minor=0, total_memory=150_110_011_392,
                            multi_processor_count=132, uuid="58f05e46-43b9-a0b3-1111-222233334444")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    monkeypatch.setattr(devinfo, "driver_l2_bytes", lambda index: H200_L2 if index == 0 else None)
    nv = FakeNVML(names=["NVIDIA H200", "NVIDIA H200"],
                  uuids=["GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-58F05E46-43B9-A0B3-1111-222233334444"])
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    info = cuda_info(0)
    assert (info.kind, info.name, info.vendor, info.compute_capability) == ("cuda", "NVIDIA H200", "nvidia", "9.0")
    assert info.units == 132 and info.l2_bytes == H200_L2
    assert info.index == 0 and info.nvml_index == 1
    assert info.driver_version == "570.86.15" and info.clocks_mhz["sm_max"] == 1980.0
    assert info.to_dict()["nvml_index"] == 1
    assert info.uuid == "GPU-58f05e46-43b9-a0b3-1111-222233334444"  # the store keys the device by it
    props.L2_cache_size = 50 * MiB  # torch ≥ 2.5: its own figure wins
    assert cuda_info(0).l2_bytes == 50 * MiB
