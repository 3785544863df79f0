"""The 0.2.x module name of PyGPUkit's Rust scheduler objects, kept so that scripts written
against it run unchanged: ``import _pygpukit_rust as rust; rust.MemoryPool(...)``. Everything
here is ``pygpukit.scheduler``'s (the same Rust core); new code imports from there."""

from pygpukit.scheduler import (
    MemoryPool,
    Partition,
    PartitionConfig,
    PartitionError,
    PartitionLimits,
    PartitionManager,
    QosClass,
    QosEvaluation,
    QosPolicyEvaluator,
    QosTaskMeta,
)

__all__ = [
    "MemoryPool",
    "Partition",
    "PartitionConfig",
    "PartitionError",
    "PartitionLimits",
    "PartitionManager",
    "QosClass",
    "QosEvaluation",
    "QosPolicyEvaluator",
    "QosTaskMeta",
]
