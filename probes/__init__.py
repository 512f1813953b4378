"""rooftop.probes — measuring the machine: what GPU it has, and (later) its ceilings.

torch is imported lazily, inside the functions that time kernels, so that
naming the local GPU or answering a what-if question never loads it.
"""
