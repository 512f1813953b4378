"""rooftop.probes — measuring the machine: what GPU it has, and its ceilings.

- backend: the device (CUDA through torch, ROCm included, or the CPU) and its clock; devinfo: its facts
- timing: the reference's protocol (warm-ups, ~20 ms windows, 7 samples, median / p10 / p90 / iqr)
- bandwidth, gemm, fma (+ fma_triton), launch: the probes, each a list of steps
- plan: quick / full plans, run as an iterator of (progress, sample) that a threading.Event stops
- identify: name the local GPUs through NVML without torch

torch is imported lazily, inside the functions that time kernels, so that
naming the local GPU or answering a what-if question never loads it.
Calibration (samples → ceilings) is pure and lives in rooftop.models.calibrate.
"""
