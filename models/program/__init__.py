"""rooftop.models.program — a profiled program on the roofline: each op's W and Q from its recorded shapes
(`opcost`, `shapecost`, `opcontext`), grouped and placed against a device (`workload`), the collectives and a
distributed job (`collectives`, `job`), the critical path and its what-ifs (`depgraph`, `retime`, `critpath`,
`jobpath`), and two profiles side by side (`profilediff`).
"""
