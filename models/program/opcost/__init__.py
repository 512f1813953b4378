"""rooftop's op models for recorded calls, by family; `models.shapecost.cost_op` dispatches to them
and re-exports what callers use (OpCost, element_from_kernel, op_dtype).

Conventions, named in each OpCost's `counting`:
- W (FLOP): as torch's FlopCounterMode counts it wherever it has a number
  (GEMM, convolution, attention: 2 per multiply-add); causal attention counts
  half the score matrix (Megatron's convention; FlopCounterMode counts it
  dense). Elsewhere a per-element count of rooftop's own.
- Q (bytes): compulsory traffic. Each tensor input read once, each output
  written once; an in-place op's self is read and written back; a fill only
  writes; a gather reads only what it picks; a TensorList counts every member.
- An op counts only what it does itself: the ops it calls are recorded and
  costed on their own (the workload keeps one owner per piece of work).
"""
