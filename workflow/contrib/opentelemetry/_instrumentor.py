"""OpenTelemetry spans and metrics for workflow runs (see the package docstring)."""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import time
from collections.abc import Collection, Iterator, Mapping
from datetime import datetime
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from workflow import _observe

__all__ = ["WorkflowInstrumentor"]

SCOPE = "workflow.contrib.opentelemetry"
"""The instrumentation scope of every span and metric this module emits."""

_forced_ids: contextvars.ContextVar[tuple[int | None, int] | None] = contextvars.ContextVar(
    "workflow_otel_forced_ids", default=None
)


def _hash(text: str, size: int) -> int:
    """A non-zero id of ``size`` bytes derived from ``text``."""
    value = int.from_bytes(hashlib.sha256(text.encode()).digest()[:size], "big")
    return value or 1


def run_span_id(run_id: str) -> int:
    """The span id of run ``run_id``'s span: derived from the run id, so every worker
    that runs a part of the run (after a crash, in another process) knows its parent."""
    return _hash(f"span:{run_id}", 8)


def _root_trace_id(run_id: str) -> int:
    """The trace id of a run started without a trace context."""
    return _hash(f"trace:{run_id}", 16)


class _RunSpanIds:
    """Wraps the SDK tracer's id generator: inside ``_forced``, the ids given there."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def generate_span_id(self) -> int:
        forced = _forced_ids.get()
        return forced[1] if forced is not None else int(self.inner.generate_span_id())

    def generate_trace_id(self) -> int:
        forced = _forced_ids.get()
        if forced is not None and forced[0] is not None:
            return forced[0]
        return int(self.inner.generate_trace_id())

    def is_trace_id_random(self) -> bool:
        return bool(getattr(self.inner, "is_trace_id_random", lambda: False)())


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


class _Instrumentation:
    """Turns the moments ``workflow._observe`` reports into spans and metrics."""

    def __init__(self, tracer: trace.Tracer, meter: metrics.Meter, record_attributes: bool) -> None:
        self.tracer = tracer
        self.record_attributes = record_attributes
        self.runs_started = meter.create_counter(
            "workflow.runs.started", unit="{run}", description="Runs created by start()"
        )
        self.runs_closed = meter.create_counter(
            "workflow.runs.closed", unit="{run}", description="Runs closed, by status"
        )
        self.step_duration = meter.create_histogram(
            "workflow.step.duration", unit="s", description="Duration of step attempts"
        )
        self.step_retries = meter.create_counter(
            "workflow.step.retries",
            unit="{retry}",
            description="Step attempts that will be retried",
        )
        self.queue_lag = meter.create_histogram(
            "workflow.queue.lag",
            unit="s",
            description="Time from a step attempt being due to a worker starting it",
        )

    def _attributes(self, values: Mapping[str, Any]) -> dict[str, Any]:
        if not self.record_attributes:
            return {}
        found = {}
        for key, value in values.items():
            plain = getattr(value, "value", value)  # Unique(v) -> v
            if isinstance(plain, datetime):
                plain = plain.isoformat()
            if isinstance(plain, (str, int, float, bool)):
                found[f"workflow.attribute.{key}"] = plain
        return found

    # ------------------------------------------------------------------ start

    @contextlib.contextmanager
    def starting(
        self, workflow: str, attributes: Mapping[str, Any], report: _observe.StartReport
    ) -> Iterator[dict[str, str]]:
        with self.tracer.start_as_current_span(
            f"start {workflow}",
            kind=SpanKind.PRODUCER,
            attributes={"workflow.name": workflow, **self._attributes(attributes)},
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            headers: dict[str, str] = {}
            propagate.inject(headers)
            yield headers
            if report.error is not None:
                span.record_exception(report.error)
                span.set_status(Status(StatusCode.ERROR, type(report.error).__name__))
            elif report.run_id is not None:
                span.set_attribute("workflow.run_id", report.run_id)
                self.runs_started.add(1, {"workflow.name": workflow})

    # ------------------------------------------------------------------ runs

    def _run_parent(self, run_id: str, headers: Mapping[str, str]) -> otel_context.Context:
        """The context whose current span is the run's span, wherever the run goes."""
        caller = trace.get_current_span(propagate.extract(dict(headers))).get_span_context()
        trace_id = caller.trace_id if caller.is_valid else _root_trace_id(run_id)
        flags = caller.trace_flags if caller.is_valid else TraceFlags(TraceFlags.SAMPLED)
        run_span = SpanContext(
            trace_id=trace_id, span_id=run_span_id(run_id), is_remote=True, trace_flags=flags
        )
        return trace.set_span_in_context(NonRecordingSpan(run_span))

    def run_closed(self, closed: _observe.RunClosed) -> None:
        caller_context = propagate.extract(dict(closed.headers))
        caller = trace.get_current_span(caller_context).get_span_context()
        trace_id = None if caller.is_valid else _root_trace_id(closed.run_id)
        token = _forced_ids.set((trace_id, run_span_id(closed.run_id)))
        try:
            span = self.tracer.start_span(
                f"run {closed.workflow}",
                context=caller_context if caller.is_valid else otel_context.Context(),
                kind=SpanKind.CONSUMER,
                start_time=_ns(closed.created_at),
                attributes={
                    "workflow.name": closed.workflow,
                    "workflow.run_id": closed.run_id,
                    "workflow.status": closed.status,
                    **self._attributes(closed.attributes),
                },
            )
        finally:
            _forced_ids.reset(token)
        if closed.error is not None:
            span.set_status(
                Status(StatusCode.ERROR, f"{closed.error.type}: {closed.error.message}")
            )
            span.add_event(
                "exception",
                {"exception.type": closed.error.type, "exception.message": closed.error.message},
            )
        elif closed.status == "cancelled":
            span.set_status(Status(StatusCode.ERROR, "cancelled"))
        span.end(end_time=_ns(closed.closed_at))
        self.runs_closed.add(
            1, {"workflow.name": closed.workflow, "workflow.status": closed.status}
        )

    # ------------------------------------------------------------------ steps

    @contextlib.contextmanager
    def step_attempt(
        self, attempt: _observe.StepAttempt, report: _observe.AttemptReport
    ) -> Iterator[None]:
        due = attempt.headers.get(_observe.DUE_HEADER)
        if due is not None:
            lag = max(time.time() - float(due), 0.0)
            self.queue_lag.record(lag, {"workflow.step": attempt.step})
        began = time.perf_counter()
        with self.tracer.start_as_current_span(
            f"step {attempt.step}",
            context=self._run_parent(attempt.run_id, attempt.headers),
            kind=SpanKind.INTERNAL,
            attributes={
                "workflow.name": attempt.workflow,
                "workflow.run_id": attempt.run_id,
                "workflow.step": attempt.step,
                "workflow.step.number": attempt.number,
                "workflow.step.attempt": attempt.attempt,
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield
            finally:
                span.set_attribute("workflow.step.outcome", report.outcome)
                if report.error is not None:
                    span.record_exception(report.error)
                    span.set_status(Status(StatusCode.ERROR, type(report.error).__name__))
                if report.retry_at is not None:
                    span.set_attribute("workflow.step.retry_at", report.retry_at.isoformat())
                    self.step_retries.add(1, {"workflow.step": attempt.step})
                self.step_duration.record(
                    time.perf_counter() - began,
                    {"workflow.step": attempt.step, "workflow.step.outcome": report.outcome},
                )


class WorkflowInstrumentor:
    """Spans and metrics for workflow runs, following the OpenTelemetry instrumentor convention.

    ::

        WorkflowInstrumentor().instrument(tracer_provider=provider, meter_provider=meters)

    Call it in every process that starts runs or runs workers.
    """

    _instrumented = False

    def instrumentation_dependencies(self) -> Collection[str]:
        """The packages this instrumentation needs (the instrumentor convention)."""
        return ("attribute-workflows",)

    @property
    def is_instrumented(self) -> bool:
        """True between ``instrument`` and ``uninstrument``."""
        return WorkflowInstrumentor._instrumented

    def instrument(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        record_attributes: bool = False,
    ) -> None:
        """Start emitting spans and metrics (the global providers unless given).

        Args:
            tracer_provider: where spans go.
            meter_provider: where metrics go.
            record_attributes: also put the run's attributes on the start and run
                spans (``workflow.attribute.<key>``). Off by default: attributes
                are the application's data.
        """
        tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        inner = getattr(tracer, "id_generator", None)
        if inner is not None and not isinstance(inner, _RunSpanIds):
            tracer.id_generator = _RunSpanIds(inner)  # type: ignore[attr-defined]
        meter = metrics.get_meter(SCOPE, meter_provider=meter_provider)
        _observe.install(_Instrumentation(tracer, meter, record_attributes))
        WorkflowInstrumentor._instrumented = True

    def uninstrument(self) -> None:
        """Stop emitting spans and metrics."""
        _observe.uninstall()
        WorkflowInstrumentor._instrumented = False
