"""Launch overhead: back-to-back tiny kernels, and on CUDA the same kernels replayed from a graph.

The plain figure is the host's enqueue rate (what a Python loop of small ops
pays per op: ~µs on a GPU, torch's dispatch on a CPU); the graph replay shows
the GPU-side floor per kernel.
"""

from __future__ import annotations

import dataclasses

from rooftop.models.sample import Sample

from .backend import Backend, Unsupported
from .steps import Step

GRAPH_KERNELS = 100  # kernels captured in one graph; time per kernel = replay time / this
N = 1  # elements of the tiny tensor


def template(family: str, kernels: int = 1) -> Sample:
    shape = {"n": N} if family == "launch" else {"n": N, "kernels": kernels}
    return Sample(
        family=family,
        dtype="fp32",
        shape=shape,
        flops=float(N),
        bytes=8.0 * N,
        footprint_bytes=4.0 * N,
        cache="warm",
        path=None,
        conditions={"kernel": "x.add_(1.0)"},
    )


def _plain(backend: Backend) -> Sample:
    # deferred: torch, only when a probe runs
    import torch

    x = torch.zeros(N, device=backend.torch_device)
    stats = backend.measure(lambda: x.add_(1.0))
    return dataclasses.replace(template("launch"), stats=stats)


def _graph(backend: Backend) -> Sample:
    # deferred: torch, only when a probe runs
    import torch

    if not backend.is_cuda:
        raise Unsupported("CUDA graphs need a CUDA device")
    x = torch.zeros(N, device=backend.torch_device)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up off the default stream, as capture requires
        for _ in range(3):
            x.add_(1.0)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_KERNELS):
            x.add_(1.0)
    stats = backend.measure(graph.replay)
    per_kernel = dataclasses.replace(
        stats,
        median_s=stats.median_s / GRAPH_KERNELS,
        p10_s=stats.p10_s / GRAPH_KERNELS,
        p90_s=stats.p90_s / GRAPH_KERNELS,
        min_s=stats.min_s / GRAPH_KERNELS,
    )
    return dataclasses.replace(template("launch_graph", GRAPH_KERNELS), stats=per_kernel)


def steps(backend: Backend) -> list[Step]:
    out = [Step("launch x.add_ (plain)", template("launch"), lambda: _plain(backend))]
    if backend.is_cuda:
        out.append(Step("launch x.add_ (CUDA graph)", template("launch_graph", GRAPH_KERNELS), lambda: _graph(backend)))
    return out
