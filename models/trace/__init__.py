"""rooftop.models.trace — reading a trace: its device activities, CPU ops, streams and steps (`read`), a graph
replay joined to its capture (`capture`), kernels launched before the window (`spillover`), the collectives the
CPU side recorded (`commtrace`), the device's timeline and idle causes (`timeline`), launch-queue depth
(`launchqueue`), and what a kernel's name and grid say (`kernelfamily`, `kernelgrid`).

Nothing here knows an op's cost (that is `rooftop.models.program`): a trace reads the same whether or not its ops
have a W model.
"""
