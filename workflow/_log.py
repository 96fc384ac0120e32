"""``workflow.logger``: a logger for workflow and step code that knows where it runs.

Every record it emits inside a run carries, as record attributes (so a JSON
formatter or ``%(run_id)s`` picks them up), ``run_id`` and ``workflow``, and in
a step ``step`` (its name), ``step_id`` and ``attempt``; outside a run they are
None. Inside a workflow it is silent while the body replays its log, so a line
logged once stays logged once when the run is replayed after a crash or on
another worker.

Replay is known exactly while the body re-issues commands recorded in its log
(steps, timers, attributes, hooks). Lines logged after a task's last command
and before the body waits for an outside event without issuing a command (a
hook payload, say) are logged again if that part is replayed on a worker that
does not hold the run in its sticky cache.
"""

from __future__ import annotations

import logging

from workflow import _runtime

__all__ = ["LOGGER_NAME", "RunContextFilter", "logger"]

LOGGER_NAME = "workflow.app"
"""The name of ``workflow.logger``: configure its level and handlers by it."""

_FIELDS = ("run_id", "workflow", "step", "step_id", "attempt")


class RunContextFilter(logging.Filter):
    """Adds the run's context to each record and drops records logged during replay."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a record logged by a replaying workflow body; else annotate it."""
        runtime = _runtime.current_or_none()
        values: dict[str, object] = dict.fromkeys(_FIELDS)
        if runtime is not None:
            if runtime.replaying:
                return False
            run = runtime.run_metadata()
            values["run_id"], values["workflow"] = run.run_id, run.workflow
            if not runtime.in_workflow:
                step = runtime.step_metadata()
                values["step"], values["step_id"] = step.step_name, step.step_id
                values["attempt"] = step.attempt
        for name, value in values.items():
            if not hasattr(record, name):  # an ``extra=`` the caller gave wins
                setattr(record, name, value)
        return True


logger = logging.getLogger(LOGGER_NAME)
"""Log from workflows and steps with this; see the module docstring."""
logger.addFilter(RunContextFilter())
