"""rooftop.models.llm — an LLM inference step on the roofline: the model's shape from its config and the step
bound (`step`), multi-head latent attention (`mla`), checkpoint weight formats (`weightformat`), its split over
tensor, pipeline and expert parallel ranks (`parallel`, `expertparallel`), and measured claims against the bound
(`claims`).
"""
