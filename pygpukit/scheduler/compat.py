"""The 0.2.x scheduler objects, backed by the same Rust scheduler as ``pygpukit.scheduler``.

    MemoryPool(quota=..., enable_eviction=True).allocate(4096)
    QosPolicyEvaluator(total_memory=..., total_bandwidth=1.0).evaluate(
        QosTaskMeta.guaranteed(id, name, bytes))        # also .burstable(...), .best_effort(...)
    PartitionManager(PartitionConfig(total_memory=...)).create_partition(
        id, name, PartitionLimits().memory(bytes).compute(0.5))

``QosPolicyEvaluator`` and ``PartitionManager`` plan against a private CPU-simulation scheduler
(``pygpukit._core.Scheduler(-1, capacity=total_memory)``): the admission arithmetic is the
scheduler's own, so their answers are the ones ``create_context`` would give on a device of that
size. They do not touch a GPU; ``pygpukit.scheduler.create_context`` makes real contexts.
"""

from __future__ import annotations

import enum
from typing import Any

from pygpukit import _core, runtime
from pygpukit.errors import AdmissionError
from pygpukit.scheduler._args import nonneg_int, number
from pygpukit.scheduler._args import share as share_arg

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

#: 0.2.x ``MemoryPool``: the Rust pool (``pygpukit._core.Pool``). ``enable_eviction=True`` runs
#: the OOM ladder on an allocation failure: trim the device's BestEffort pools and retry, then
#: trim every pool (each down to the memory held for its reservation), synchronize the device
#: and retry once. Cached memory goes back to the driver as whole unused chunks
#: (cuMemPoolTrimTo), not block by block in least-recently-used order per size class as 0.2.x
#: did. Host pools (no GPU) cache nothing.
MemoryPool = _core.Pool

#: 0.2.x ``PartitionError``: a partition that does not fit is refused by admission.
PartitionError = AdmissionError


class QosClass(enum.Enum):
    """Kubernetes QoS tiers; ``priority`` is 0.2.x's scheduling weight (100, 50, 0)."""

    Guaranteed = "guaranteed"
    Burstable = "burstable"
    BestEffort = "best_effort"

    @property
    def priority(self) -> int:
        return {"guaranteed": 100, "burstable": 50, "best_effort": 0}[self.value]


class QosTaskMeta:
    """A task's QoS request: ``guaranteed(id, name, memory)``, ``burstable(id, name,
    memory_request, burst_ratio)`` (limit = request x ratio), ``best_effort(id, name)``."""

    def __init__(
        self,
        id: str,
        name: str,
        qos_class: QosClass,
        memory_request: int = 0,
        memory_limit: int | None = None,
        burst_ratio: float = 1.0,
        priority: int = 0,
    ) -> None:
        if not isinstance(id, str) or not id:
            raise ValueError(f"task id must be a non-empty string, got {id!r}")
        if not isinstance(qos_class, QosClass):
            raise TypeError(f"qos_class must be a QosClass, got {qos_class!r}")
        self.id = id
        self.name = str(name)
        self.qos_class = qos_class
        self.memory_request = nonneg_int("memory_request", memory_request)
        self.memory_limit = (
            None if memory_limit is None else nonneg_int("memory_limit", memory_limit)
        )
        self.burst_ratio = float(burst_ratio)
        self.priority = int(priority)

    @staticmethod
    def guaranteed(id: str, name: str, memory: int) -> QosTaskMeta:
        m = nonneg_int("memory", memory)
        return QosTaskMeta(id, name, QosClass.Guaranteed, m, m)

    @staticmethod
    def burstable(id: str, name: str, memory_request: int, burst_ratio: float = 2.0) -> QosTaskMeta:
        m = nonneg_int("memory_request", memory_request)
        if (
            isinstance(burst_ratio, bool)
            or not isinstance(burst_ratio, (int, float))
            or not (burst_ratio >= 1.0)
        ):
            raise ValueError(f"burst_ratio must be a number >= 1, got {burst_ratio!r}")
        return QosTaskMeta(
            id, name, QosClass.Burstable, m, int(m * burst_ratio), float(burst_ratio)
        )

    @staticmethod
    def best_effort(id: str, name: str) -> QosTaskMeta:
        return QosTaskMeta(id, name, QosClass.BestEffort)

    def effective_priority(self) -> int:
        return self.priority + self.qos_class.priority

    def __repr__(self) -> str:
        return (
            f"QosTaskMeta({self.id!r}, {self.qos_class.name}, request={self.memory_request}, "
            f"limit={self.memory_limit})"
        )


class QosEvaluation:
    """The evaluator's answer: ``kind`` is admit, throttle (Burstable admitted with less
    headroom than asked: ``allowed_memory``), queue (BestEffort with nothing unreserved) or
    reject (``reason`` says why, with the numbers)."""

    def __init__(
        self,
        task: QosTaskMeta,
        kind: str,
        reserved_memory: int = 0,
        allowed_memory: int | None = None,
        reason: str = "",
        position: int = 0,
    ) -> None:
        self.task = task
        self.kind = kind
        self.qos_class = task.qos_class
        self.reserved_memory = reserved_memory
        self.allowed_memory = allowed_memory
        self.reason = reason
        self.position = position
        self.priority = task.effective_priority()

    @property
    def admitted(self) -> bool:
        return self.kind in ("admit", "throttle")

    def is_admitted(self) -> bool:
        return self.kind == "admit"

    def is_throttled(self) -> bool:
        return self.kind == "throttle"

    def is_queued(self) -> bool:
        return self.kind == "queue"

    def is_rejected(self) -> bool:
        return self.kind == "reject"

    def __repr__(self) -> str:
        extra = f", reason={self.reason!r}" if self.reason else ""
        reserved = self.reserved_memory
        return f"QosEvaluation({self.kind}, {self.task.id!r}, reserved={reserved}{extra})"


class QosPolicyEvaluator:
    """Admission of QoS tasks against ``total_memory`` bytes (and a bandwidth budget kept for
    0.2.x's stats). ``evaluate`` changes nothing; ``reserve(evaluation)`` records an admitted
    task (a context in the private scheduler) and ``release(task)`` frees it."""

    def __init__(self, total_memory: int, total_bandwidth: float = 1.0) -> None:
        self.total_memory = nonneg_int("total_memory", total_memory)
        self.total_bandwidth = number("total_bandwidth", total_bandwidth)
        if not self.total_bandwidth > 0:
            raise ValueError(f"total_bandwidth must be > 0, got {total_bandwidth!r}")
        self.core = _core.Scheduler(-1, capacity=self.total_memory)
        self._reserved: dict[str, QosTaskMeta] = {}
        self._queued = 0

    def _spec(self, t: QosTaskMeta, limit: int | None = None) -> dict[str, Any]:
        if t.qos_class is QosClass.Guaranteed:
            return {"qos": "guaranteed", "limit": max(t.memory_request, 1)}
        if t.qos_class is QosClass.Burstable:
            lim = t.memory_limit if limit is None else limit
            return {"qos": "burstable", "reservation": t.memory_request, "limit": max(lim or 1, 1)}
        return {"qos": "best_effort"}

    def evaluate(self, task: QosTaskMeta) -> QosEvaluation:
        if not isinstance(task, QosTaskMeta):
            raise TypeError(f"evaluate expects a QosTaskMeta, got {type(task).__name__}")
        unreserved = int(self.core.snapshot()["unreserved"])
        try:
            self.core.evaluate(task.id, **self._spec(task))
        except AdmissionError as e:
            return QosEvaluation(task, "reject", reason=str(e))
        if task.qos_class is QosClass.Guaranteed:
            return QosEvaluation(task, "admit", task.memory_request, task.memory_request)
        if task.qos_class is QosClass.Burstable:
            limit = task.memory_limit or task.memory_request
            allowed = min(limit, unreserved)
            kind = "throttle" if allowed < limit else "admit"
            return QosEvaluation(task, kind, task.memory_request, allowed)
        if unreserved == 0:
            return QosEvaluation(task, "queue", position=self._queued)
        return QosEvaluation(task, "admit", 0, unreserved)

    def reserve(self, evaluation: QosEvaluation) -> None:
        """Record an admitted (or throttled) task's reservation; count a queued one."""
        t = evaluation.task
        if evaluation.kind == "queue":
            self._queued += 1
            return
        if not evaluation.admitted:
            raise ValueError(f"task {t.id!r} was rejected: {evaluation.reason}")
        limit = evaluation.allowed_memory if evaluation.kind == "throttle" else None
        self.core.create_context(t.id, **self._spec(t, limit), pace=None, default_pace=False)
        self._reserved[t.id] = t

    def release(self, task: QosTaskMeta | str) -> None:
        """Free a reserved task's memory (by task or id); a queued BestEffort leaves the queue."""
        tid = task if isinstance(task, str) else task.id
        if tid in self._reserved:
            self.core.remove_context(tid)
            del self._reserved[tid]
        elif self._queued:
            self._queued -= 1
        else:
            raise KeyError(f"no reserved or queued task {tid!r}")

    def stats(self) -> dict[str, Any]:
        snap = self.core.snapshot()
        by = {"guaranteed": 0, "burstable": 0}
        for c in snap["contexts"]:
            if c["qos"] in by:
                by[c["qos"]] += int(c["reservation"])
        return {
            "total_memory": self.total_memory,
            "total_bandwidth": self.total_bandwidth,
            "guaranteed_memory": by["guaranteed"],
            "burstable_memory": by["burstable"],
            "available_memory": int(snap["unreserved"]),
            "best_effort_queue": self._queued,
            "reserved_tasks": len(self._reserved),
        }

    def reset(self) -> None:
        for tid in list(self._reserved):
            self.release(tid)
        self._queued = 0


class PartitionLimits:
    """A partition's limits, built by chaining: ``PartitionLimits().memory(b).compute(0.5)``."""

    def __init__(self) -> None:
        self.memory_limit: int | None = None
        self.compute_share: float | None = None
        self.bandwidth_share: float | None = None

    def memory(self, nbytes: int) -> PartitionLimits:
        self.memory_limit = nonneg_int("memory", nbytes)
        return self

    def compute(self, share: float) -> PartitionLimits:
        self.compute_share = share_arg("compute", share)
        return self

    def bandwidth(self, share: float) -> PartitionLimits:
        self.bandwidth_share = share_arg("bandwidth", share)
        return self

    def __repr__(self) -> str:
        return (
            f"PartitionLimits(memory={self.memory_limit}, compute={self.compute_share}, "
            f"bandwidth={self.bandwidth_share})"
        )


class PartitionConfig:
    """``total_memory`` bytes to partition, and the SM count compute shares are planned against
    (default: the GPU's SMs when there is one, else 100)."""

    def __init__(self, total_memory: int, sm_count: int | None = None) -> None:
        self.total_memory = nonneg_int("total_memory", total_memory)
        if sm_count is None:
            sm_count = (
                int(runtime.device("cuda:0").properties["sm_count"])
                if runtime.is_cuda_available()
                else 100
            )
        self.sm_count = nonneg_int("sm_count", sm_count)


class Partition:
    """A created partition: its id, name, limits, and the SMs its compute share planned."""

    def __init__(
        self, id: str, name: str, limits: PartitionLimits, planned_sms: int | None
    ) -> None:
        self.id = id
        self.name = name
        self.limits = limits
        self.planned_sms = planned_sms

    @property
    def memory(self) -> int | None:
        return self.limits.memory_limit

    @property
    def compute(self) -> float | None:
        return self.limits.compute_share

    def __repr__(self) -> str:
        return (
            f"Partition({self.id!r}, {self.name!r}, memory={self.memory}, compute={self.compute}, "
            f"sms={self.planned_sms})"
        )


class PartitionManager:
    """Partitions of a device's memory (reserved, Guaranteed) and SMs (exclusive shares),
    admitted by the scheduler's arithmetic; a partition that does not fit raises
    PartitionError (AdmissionError) naming the numbers. The scheduler's SM rule applies: a
    partition without a compute share runs on every SM not reserved, so create the partitions
    with compute shares first (one asking for SMs after it is refused, and says so)."""

    def __init__(self, config: PartitionConfig) -> None:
        if not isinstance(config, PartitionConfig):
            raise TypeError(f"PartitionManager expects a PartitionConfig, got {config!r}")
        self.config = config
        self.core = _core.Scheduler(-1, capacity=config.total_memory, sim_sms=config.sm_count)
        self._parts: dict[str, Partition] = {}

    def create_partition(self, id: str, name: str, limits: PartitionLimits) -> Partition:
        if not isinstance(limits, PartitionLimits):
            raise TypeError(f"limits must be a PartitionLimits, got {limits!r}")
        mem = limits.memory_limit
        kw: dict[str, Any] = {"qos": "guaranteed", "limit": mem} if mem else {"qos": "best_effort"}
        ctx = self.core.create_context(
            id, sm_share=limits.compute_share, pace=None, default_pace=False, **kw
        )
        part = Partition(id, str(name), limits, ctx.planned_sms)
        self._parts[id] = part
        return part

    def get_partition(self, id: str) -> Partition:
        try:
            return self._parts[id]
        except KeyError:
            raise KeyError(f"no partition {id!r}") from None

    def delete_partition(self, id: str) -> None:
        self.get_partition(id)
        self.core.remove_context(id)
        del self._parts[id]

    def list_partitions(self) -> list[Partition]:
        return list(self._parts.values())

    def partition_ids(self) -> list[str]:
        return list(self._parts)

    def stats(self) -> dict[str, Any]:
        snap = self.core.snapshot()
        return {
            "total_memory": self.config.total_memory,
            "reserved_memory": int(snap["reserved"]),
            "available_memory": int(snap["unreserved"]),
            "sm_count": self.config.sm_count,
            "free_sms": snap["sm_free"],
            "partitions": len(self._parts),
        }
