"""The trace of a request continues in a worker process: the context is stored with the run."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import worlds
from tests.apps.otel_worker import traced_order
from workflow import start
from workflow.contrib.opentelemetry import WorkflowInstrumentor

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    WorkflowInstrumentor().instrument(tracer_provider=provider)
    try:
        yield spans
    finally:
        WorkflowInstrumentor().uninstrument()


def worker(url: str, spans: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.apps.otel_worker", url, str(spans)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    return process


async def test_a_worker_process_continues_the_callers_trace(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    url = f"sqlite:///{tmp_path}/otel.db"
    spans_file = tmp_path / "spans.jsonl"
    process = worker(url, spans_file)
    try:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        async with worlds.open(url) as world:
            with provider.get_tracer("web").start_as_current_span("POST /orders") as request:
                run = await start(traced_order, "o-1", world=world)
            assert await run.result(timeout=60) == "picked-o-1/packed-o-1"
    finally:
        process.terminate()
        process.wait(30)
    trace_id = request.get_span_context().trace_id
    (started,) = [s for s in exporter.get_finished_spans() if s.name == "start traced_order"]
    assert started.context.trace_id == trace_id
    remote = [json.loads(line) for line in spans_file.read_text().splitlines()]
    assert sorted(s["name"] for s in remote) == ["run traced_order", "step pack", "step pick"]
    assert {s["trace_id"] for s in remote} == {trace_id}
    (run_span,) = [s for s in remote if s["name"].startswith("run ")]
    assert run_span["parent_span_id"] == started.context.span_id
    for step_span in remote:
        if step_span["name"].startswith("step "):
            assert step_span["parent_span_id"] == run_span["span_id"]
