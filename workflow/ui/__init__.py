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

import importlib.util

_MISSING = [name for name in ("starlette", "jinja2") if importlib.util.find_spec(name) is None]
if _MISSING:
    raise ImportError(
        f"workflow.ui needs {' and '.join(_MISSING)}, which the 'ui' extra installs: "
        "pip install 'attribute-workflows[ui]'"
    )

from workflow.ui._app import create_app  # noqa: E402 - after the dependency check

__all__ = ["create_app"]
