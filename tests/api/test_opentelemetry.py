"""OpenTelemetry: spans for start, run and step attempts, one trace across workers, metrics."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from workflow import (
    RunFailedError,
    Unique,
    Worker,
    create_hook,
    resume_hook,
    sleep,
    start,
    step,
    workflow,
)
from workflow.contrib.opentelemetry import WorkflowInstrumentor
from workflow.policies import start_or_get_run
from worlds.protocol import World

pytestmark = pytest.mark.anyio


@dataclass
class Telemetry:
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader
    tracer: trace.Tracer

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.finished() if s.name.startswith(prefix)]

    def metric_points(self, name: str) -> list[Any]:
        data = self.metrics.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    instrumentor = WorkflowInstrumentor()
    instrumentor.instrument(tracer_provider=provider, meter_provider=meters, record_attributes=True)
    app_tracers.append(provider.get_tracer("the-app"))
    try:
        yield Telemetry(exporter, reader, app_tracers[-1])
    finally:
        app_tracers.pop()
        instrumentor.uninstrument()


attempts: dict[str, int] = {}
app_tracers: list[trace.Tracer] = [trace.get_tracer("the-app")]
"""The application's tracer, on the test's provider while ``telemetry`` is in force."""


@step(retry_delay=0)
async def charge(order_id: str) -> str:
    attempts[order_id] = attempts.get(order_id, 0) + 1
    if attempts[order_id] == 1:
        raise ConnectionError("card network down")
    with app_tracers[-1].start_as_current_span("call the bank"):
        return f"pay-{order_id}"


@step
def ship(order_id: str) -> str:
    return f"ship-{order_id}"


@workflow
async def checkout(order_id: str) -> str:
    payment = await charge(order_id)
    return f"{payment}/{await ship(order_id)}"


@step(max_retries=0)
async def refuse(order_id: str) -> None:
    raise ValueError(f"no {order_id}")


@workflow
async def doomed(order_id: str) -> None:
    await refuse(order_id)


@step
async def note(what: str) -> str:
    return what


@workflow
async def approval(order_id: str) -> str:
    first = await note("asked")
    answer: str = await create_hook(f"approve-{order_id}")
    return f"{first}/{await note(answer)}"


async def test_one_trace_from_the_request_to_every_step_attempt(
    world: World, telemetry: Telemetry
) -> None:
    attempts.clear()
    # cache_size=0: every workflow task replays the run, and replay must emit nothing
    async with Worker(world, [checkout], cache_size=0):
        with telemetry.tracer.start_as_current_span("POST /orders") as request:
            run = await start(checkout, "o-1", world=world, attributes={"order": Unique("o-1")})
        assert await run.result(timeout=20) == "pay-o-1/ship-o-1"
    trace_id = request.get_span_context().trace_id
    assert {s.context.trace_id for s in telemetry.finished()} == {trace_id}
    (started,) = telemetry.named("start ")
    (run_span,) = telemetry.named("run ")
    steps = telemetry.named("step ")
    assert started.name == "start checkout"
    assert started.parent is not None
    assert started.parent.span_id == request.get_span_context().span_id
    assert started.attributes is not None
    assert started.attributes["workflow.run_id"] == run.id
    assert started.attributes["workflow.attribute.order"] == "o-1"
    assert run_span.parent is not None and run_span.parent.span_id == started.context.span_id
    assert run_span.attributes is not None
    assert run_span.attributes["workflow.status"] == "completed"
    assert run_span.attributes["workflow.attribute.order"] == "o-1"
    described = sorted(
        (s.name, s.attributes["workflow.step.attempt"], s.attributes["workflow.step.outcome"])
        for s in steps
        if s.attributes is not None
    )
    assert described == [
        ("step charge", 1, "retrying"),
        ("step charge", 2, "completed"),
        ("step ship", 1, "completed"),
    ]
    for span in steps:
        assert span.parent is not None and span.parent.span_id == run_span.context.span_id
    failed_attempt = next(s for s in steps if s.status.status_code is StatusCode.ERROR)
    assert any(e.name == "exception" for e in failed_attempt.events)
    (bank,) = telemetry.named("call the bank")  # the step body's own span nests under it
    good_charge = next(
        s for s in steps if s.name == "step charge" and s.status.status_code is not StatusCode.ERROR
    )
    assert bank.parent is not None and bank.parent.span_id == good_charge.context.span_id


async def test_a_run_resumed_by_another_worker_continues_its_trace(
    world: World, telemetry: Telemetry
) -> None:
    with telemetry.tracer.start_as_current_span("request") as request:
        run = await start(approval, "o-2", world=world)
    async with Worker(world, [approval]):
        with anyio.fail_after(20):
            while not await world.list_hooks(run.id):
                await anyio.sleep(0.02)
    # the first worker is gone; a new one (no cache, as after a crash) finishes the run
    async with Worker(world, [approval]):
        await resume_hook("approve-o-2", "yes", world=world)
        assert await run.result(timeout=20) == "asked/yes"
    trace_id = request.get_span_context().trace_id
    (run_span,) = telemetry.named("run approval")
    steps = telemetry.named("step note")
    assert len(steps) == 2
    assert {s.context.trace_id for s in [run_span, *steps]} == {trace_id}
    assert {s.parent.span_id for s in steps if s.parent} == {run_span.context.span_id}


async def test_failures_are_recorded_and_counted(world: World, telemetry: Telemetry) -> None:
    async with Worker(world, [doomed, checkout]):
        run = await start(doomed, "o-3", world=world)
        with pytest.raises(RunFailedError):
            await run.result(timeout=20)
        attempts.clear()
        again = await start_or_get_run(checkout, "o-4", key="order", value="o-4", world=world)
        await again.result(timeout=20)
    (run_span,) = telemetry.named("run doomed")
    assert run_span.status.status_code is StatusCode.ERROR
    assert run_span.status.description is not None
    assert "no o-3" in run_span.status.description
    (failed_step,) = telemetry.named("step refuse")
    assert failed_step.status.status_code is StatusCode.ERROR
    started = {
        p.attributes["workflow.name"]: p.value
        for p in telemetry.metric_points("workflow.runs.started")
    }
    assert started == {"doomed": 1, "checkout": 1}
    closed = {
        (p.attributes["workflow.name"], p.attributes["workflow.status"]): p.value
        for p in telemetry.metric_points("workflow.runs.closed")
    }
    assert closed == {("doomed", "failed"): 1, ("checkout", "completed"): 1}
    retries = {
        p.attributes["workflow.step"]: p.value
        for p in telemetry.metric_points("workflow.step.retries")
    }
    assert retries == {"charge": 1}
    durations = {
        (p.attributes["workflow.step"], p.attributes["workflow.step.outcome"]): p.count
        for p in telemetry.metric_points("workflow.step.duration")
    }
    assert durations == {
        ("refuse", "failed"): 1,
        ("charge", "retrying"): 1,
        ("charge", "completed"): 1,
        ("ship", "completed"): 1,
    }
    lags = {
        p.attributes["workflow.step"]: p.count
        for p in telemetry.metric_points("workflow.queue.lag")
    }
    assert lags == {"refuse": 1, "charge": 2, "ship": 1}


async def test_nothing_is_emitted_once_uninstrumented(world: World, telemetry: Telemetry) -> None:
    WorkflowInstrumentor().uninstrument()
    attempts.clear()
    async with Worker(world, [checkout]):
        run = await start(checkout, "o-5", world=world)
        await run.result(timeout=20)
    assert [s.name for s in telemetry.finished()] == ["call the bank"]  # the app's own span


@workflow
async def sleeps_forever(order_id: str) -> None:
    await sleep(3600)


async def test_a_run_its_deadline_closes_has_its_run_span(
    world: World, telemetry: Telemetry
) -> None:
    async with Worker(world, [sleeps_forever]):
        with telemetry.tracer.start_as_current_span("request") as request:
            run = await start(sleeps_forever, "o-6", world=world, timeout=0.5)
        with pytest.raises(RunFailedError, match="TimeoutError"):
            await run.result(timeout=20)
    (run_span,) = telemetry.named("run sleeps_forever")
    assert run_span.context.trace_id == request.get_span_context().trace_id
    assert run_span.status.status_code is StatusCode.ERROR
    assert run_span.attributes is not None
    assert run_span.attributes["workflow.status"] == "failed"
