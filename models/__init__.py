"""rooftop.models — the roofline as pure math and data.

Units, dtypes, compute paths and memory levels, device profiles and the built-in
catalog, op cost models (W, Q, path), the op-spec language, analysis and advice.
No torch, no textual, no I/O beyond reading this package's own data.
"""
