"""``patched(name)`` in workflow code: a marker command that a log may lack.

A run that reaches the call under the new code records a ``PatchMarker`` and
takes the new branch; a run whose log holds the marker here takes it too; a
run whose log holds other commands here passed this point under the old code
and takes the old branch. The answer is fixed per name for the rest of the
run. Markers nobody asks about are passed over (``Recorder.next_recorded``), so
the call may be deleted once no open run took the old branch.
"""

from __future__ import annotations

from workflow.engine._recorder import Recorder
from worlds.types import PatchMarker

__all__ = ["Patches"]


class Patches:
    """One run's answers to ``patched``, by patch name."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder
        self._answers: dict[str, bool] = {}

    def patched(self, name: str) -> bool:
        """True for a run that is new here or recorded the marker; False for one
        that passed this point before the patch."""
        if name in self._answers:
            return self._answers[name]
        taken = self._recorder.take_marker(name)
        if taken is None:
            self._recorder.outbox.events.append(PatchMarker(name=name))
            taken = True
        self._answers[name] = taken
        return taken
