"""The sticky cache: suspended workflow instances kept between their tasks.

The next task of a cached run reads only the events after the instance's last
sequence number, so a run with n steps costs O(n) replay work, not O(n^2)
(``rfcs/0001-execution-model.md``). Least recently used instances are evicted
(and disposed) past the cache's size.
"""

from __future__ import annotations

import collections

from workflow.engine._instance import WorkflowInstance

__all__ = ["StickyCache"]


class StickyCache:
    """Suspended workflow instances by run id, at most ``size`` of them."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._instances: collections.OrderedDict[str, WorkflowInstance] = collections.OrderedDict()

    def peek(self, run_id: str) -> WorkflowInstance | None:
        """The cached instance of ``run_id``, left in the cache."""
        return self._instances.get(run_id)

    def take(self, run_id: str) -> WorkflowInstance | None:
        """The cached instance of ``run_id``, out of the cache (its task runs now)."""
        return self._instances.pop(run_id, None)

    def keep(self, instance: WorkflowInstance) -> None:
        """Cache ``instance`` as its run's newest, evicting the least recently used."""
        self._instances[instance.run_id] = instance
        while len(self._instances) > self.size:
            _, evicted = self._instances.popitem(last=False)
            evicted.dispose()

    def clear(self) -> None:
        """Dispose of every cached instance."""
        for instance in self._instances.values():
            instance.dispose()
        self._instances.clear()
