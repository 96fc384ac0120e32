"""A worker process with OpenTelemetry on, writing its spans as JSON lines.

    python -m tests.apps.otel_worker WORLD_URL SPANS_FILE

Runs ``traced_order`` until SIGTERM; used by tests/system/test_otel_processes.py.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import worlds
from workflow import Worker, step, workflow
from workflow.contrib.opentelemetry import WorkflowInstrumentor


@step
async def pick(order_id: str) -> str:
    return f"picked-{order_id}"


@step
async def pack(order_id: str) -> str:
    return f"packed-{order_id}"


@workflow
async def traced_order(order_id: str) -> str:
    return f"{await pick(order_id)}/{await pack(order_id)}"


class JsonLines(SpanExporter):
    def __init__(self, path: Path) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.path.open("a") as out:
            for span in spans:
                parent = span.parent.span_id if span.parent is not None else None
                context = span.get_span_context()
                assert context is not None
                line = {"name": span.name, "trace_id": context.trace_id}
                line.update({"span_id": context.span_id, "parent_span_id": parent})
                out.write(json.dumps(line) + "\n")
        return SpanExportResult.SUCCESS


async def main(url: str, spans: Path) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLines(spans)))
    WorkflowInstrumentor().instrument(tracer_provider=provider)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    world = worlds.open(url)
    async with world, Worker(world, [traced_order]):
        print("ready", flush=True)
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
