"""Optional parts live behind extras; a missing one is an ImportError that names its extra."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def run_without(modules: list[str], code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter where importing any of ``modules`` fails."""
    blocked = "".join(f"sys.modules[{name!r}] = None\n" for name in modules)
    program = f"import sys\n{blocked}{textwrap.dedent(code)}"
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("modules", "code", "extra"),
    [
        (
            ["asyncpg"],
            "import worlds\nworlds.open('postgresql://localhost/db')",
            "attribute-workflows[postgres]",
        ),
        (
            ["opentelemetry", "opentelemetry.trace"],
            "import workflow.contrib.opentelemetry",
            "attribute-workflows[otel]",
        ),
    ],
)
def test_a_missing_extra_is_named(modules: list[str], code: str, extra: str) -> None:
    done = run_without(modules, code)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError:"), done.stderr
    assert extra in last


def test_the_core_works_without_any_extra() -> None:
    """Pydantic is optional: without it, dataclasses and plain values still round-trip."""
    done = run_without(
        ["asyncpg", "opentelemetry", "pydantic", "cryptography", "fastapi"],
        """
        import asyncio
        from dataclasses import dataclass
        import worlds
        from workflow import Worker, start, step, workflow

        @dataclass
        class Parcel:
            grams: int

        @step
        async def weigh(n: int) -> Parcel:
            return Parcel(n * 100)

        @workflow
        async def ship(n: int) -> Parcel:
            parcel = await weigh(n)
            assert isinstance(parcel, Parcel)
            return parcel

        async def main() -> None:
            world = worlds.open("memory://")
            async with world, Worker(world, [ship]):
                run = await start(ship, 3, world=world)
                print(await run.result(timeout=20))

        asyncio.run(main())
        assert "pydantic" not in sys.modules or sys.modules["pydantic"] is None
        """,
    )
    assert done.returncode == 0, done.stderr
    assert "Parcel(grams=300)" in done.stdout
