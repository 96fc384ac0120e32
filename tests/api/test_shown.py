"""``workflow.shown``: bidi and other invisible controls in stored values are shown as
the same escapes by ``wf``, the web UI's pages and its ``/api`` JSON."""

from __future__ import annotations

import html
import json
import os
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.testclient import TestClient
from typer.testing import CliRunner

import worlds
from cli.main import app as cli_app
from tests.api.test_ui import ui_url
from workflow import Unique, start, workflow
from workflow.shown import UNSAFE_CATEGORIES, json_dumps, visible
from workflow.ui import create_app
from worlds.protocol import World

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["ui_url"]

# a right-to-left override, a zero-width space, an escape sequence, a bell
STORED = {"file": "invoice\u202egpj.exe", "hidden": "a\u200bb", "esc": "x\x1b[2Jy\x07"}
SHOWN = {"file": "invoice\\u202egpj.exe", "hidden": "a\\u200bb", "esc": "x\\x1b[2Jy\\x07"}
RAW = ("\u202e", "\u200b", "\x1b", "\x07")


@workflow
async def shown_flow() -> None:
    return None


def test_visible_escapes_exactly_the_unsafe_characters() -> None:
    assert {key: visible(value) for key, value in STORED.items()} == SHOWN
    assert visible("plain, é, 日本, emoji 🙂") == "plain, é, 日本, emoji 🙂"
    assert visible("two\nlines") == "two\\x0alines"
    assert visible("two\nlines", keep_newlines=True) == "two\nlines"


@given(st.recursive(st.text() | st.integers() | st.none(), lambda inner: st.lists(inner)))
def test_json_dumps_decodes_to_its_input_and_holds_no_raw_unsafe_character(data: Any) -> None:
    for indent in (None, 2):
        out = json_dumps({"v": data}, indent=indent)
        assert json.loads(out) == {"v": data}
        unsafe = [c for c in out if c != "\n" and unicodedata.category(c) in UNSAFE_CATEGORIES]
        assert unsafe == [], out


@pytest.fixture
def served(ui_url: str) -> Iterator[tuple[TestClient, World, str]]:
    """The UI over a world holding one run with the stored values, seeded on the
    app's own event loop (the world's connections belong to it)."""
    world = worlds.open(ui_url)
    with TestClient(create_app(world), base_url="http://localhost") as client:

        async def seed() -> str:
            attributes: dict[str, Any] = {**STORED, "order": Unique("o-shown")}
            run = await start(shown_flow, attributes=attributes, world=world)
            return run.id

        run_id = client.portal.call(seed)  # type: ignore[union-attr]
        yield client, world, run_id
        client.portal.call(world.close)  # type: ignore[union-attr]


def _page_text(body: str) -> str:
    """What a page shows: its text with tags removed and entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def test_pages_show_the_escapes_wf_shows(served: tuple[TestClient, World, str]) -> None:
    client, _, run_id = served
    for path in ("/", f"/runs/{run_id}"):
        body = client.get(path).text
        assert not any(char in body for char in RAW), path
        shown = _page_text(body)
        for value in SHOWN.values():
            assert value in shown, (path, value)


def test_the_json_api_escapes_them_and_keeps_the_values(
    served: tuple[TestClient, World, str],
) -> None:
    client, _, run_id = served
    for path, pick in (
        ("/api/runs", lambda doc: doc["runs"][0]),
        (f"/api/runs/{run_id}", lambda doc: doc["run"]),
    ):
        response = client.get(path)
        assert response.headers["content-type"].startswith("application/json")
        assert not any(char in response.text for char in RAW), path
        assert "\\u202e" in response.text and "\\u200b" in response.text
        attributes = pick(response.json())["attributes"]
        assert {key: attributes[key] for key in STORED} == STORED, path


# A memory world lives in one process: wf cannot open it, so wf is checked on the durable two.
@pytest.mark.parametrize("world_kind", ["sqlite", "postgres"])
def test_wf_shows_the_same_escapes(served: tuple[TestClient, World, str], ui_url: str) -> None:
    before = os.getcwd()
    os.chdir(ROOT)
    try:
        result = CliRunner().invoke(
            cli_app,
            ["runs", "show", "order=o-shown", "--world", ui_url],
            env={"COLUMNS": "400", "WORKFLOW_WORLD": None},
        )
    finally:
        os.chdir(before)
    assert result.exit_code == 0, result.output
    assert not any(char in result.output for char in RAW)
    for value in SHOWN.values():
        assert value in result.output
