"""rooftop.probes — measuring the machine: what GPU it has, and its ceilings.

- backend: the device (CUDA through torch, ROCm included, or the CPU) and its clock; devinfo: its facts
- timing: the reference's protocol (warm-ups, ~20 ms windows, 7 samples, median / p10 / p90 / iqr)
- bandwidth, gemm, fma (+ fma_triton), cache (+ cache_triton), launch: the probes, each a list of steps;
  steps: one step, timed, its failures kept
- plan: quick / full plans, run as an iterator of (progress, sample) that a threading.Event stops
- nvml: the one door to NVML; identify: name the local GPUs through it without torch; telemetry: the live
  sampler (NVML, else the CPU); gpm: NVML's GPU Performance Monitoring, as fractions of the roofs
- comm: collectives timed across ranks; fleet: many devices measured at once; lifeline: a spawned rank
  ends with its parent
- profiler: a user's program under torch.profiler; torchrun and rankrun: a job launched by torchrun,
  each rank profiled

torch is imported lazily, inside the functions that time kernels, so that
naming the local GPU or answering a what-if question never loads it.
Calibration (samples → ceilings) is pure and lives in rooftop.models.calibrate.
"""
