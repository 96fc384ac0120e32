"""``wf ui``: a local web app over any world, searched with the run filter language.

::

    import worlds
    from workflow.ui import create_app

    app = create_app(worlds.open("sqlite:///app.db"), token=None, read_only=False)
    # serve with any ASGI server (uvicorn), or mount it in an existing ASGI app

Pages: ``/`` (runs, filtered by ``?q=``), ``/runs/{id}`` (claims, chain,
timeline), ``/runs/by/{key}/{value}`` (redirects to the holder of a unique
pair); JSON: ``/api/runs`` and ``/api/runs/{id}`` (the shapes of
``wf runs list --json`` and ``wf runs show --json``). See ``rfcs/0010-web-ui.md``.

Needs the ``ui`` extra: ``pip install 'attribute-workflows[ui]'``.
"""

from __future__ import annotations

try:
    import jinja2  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:
    raise ImportError(
        f"workflow.ui needs {exc.name or 'starlette and jinja2'}, which the 'ui' extra "
        "installs: pip install 'attribute-workflows[ui]'"
    ) from exc

from workflow.ui._app import create_app

__all__ = ["create_app"]
