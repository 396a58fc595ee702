# Compiled NUMA feasibility kernel (placeholder until issue 4).
__all__ = ["KERNEL_VERSION"]

KERNEL_VERSION = 1
