"""OpenTelemetry for workflows: ``pip install 'attribute-workflows[otel]'``.

::

    from workflow.contrib.opentelemetry import WorkflowInstrumentor
    WorkflowInstrumentor().instrument(tracer_provider=provider, meter_provider=meters)

Spans (scope ``workflow.contrib.opentelemetry``):

- ``start <workflow>`` in the caller of ``start`` (and the start policies), with
  ``workflow.run_id``; its trace context is stored with the run's arguments, so
  the run and its steps join the caller's trace in whatever process runs them.
- ``run <workflow>``: one per run, from its creation to its close, emitted by the
  worker whose commit closed it, with ``workflow.status`` (an error status for
  failed and cancelled runs). Its span id is derived from the run id, so steps
  run by any worker, before or after a crash, are its children.
- ``step <name>``: one per attempt, with ``workflow.step``, ``workflow.step.attempt``,
  ``workflow.step.outcome``, the exception of a failed attempt and
  ``workflow.step.retry_at`` of one that will be retried. Spans the step body
  opens are its children.

Replay emits nothing: each span comes from the one process that lived the
moment. With ``record_attributes=True`` the run's attributes are added to the
start and run spans as ``workflow.attribute.<key>``.

Metrics: ``workflow.runs.started`` and ``workflow.runs.closed`` (by
``workflow.status``) counters, ``workflow.step.duration`` (s) histogram,
``workflow.step.retries`` counter, and ``workflow.queue.lag`` (s): from a step
attempt being due to a worker starting it.
"""

try:
    import opentelemetry.trace  # noqa: F401
except ImportError as missing:
    raise ImportError(
        "workflow.contrib.opentelemetry needs the OpenTelemetry API: "
        "pip install 'attribute-workflows[otel]'"
    ) from missing

from workflow.contrib.opentelemetry._instrumentor import WorkflowInstrumentor

__all__ = ["WorkflowInstrumentor"]
