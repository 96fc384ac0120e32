"""Test your workflows in milliseconds: a world, a worker and a clock that skips.

::

    from workflow.testing import TestEnvironment

    async with TestEnvironment(workflows=[checkout], steps={charge: fake_charge}) as env:
        run = await env.start(checkout, "o-1", 1999)
        assert await run.result() == "paid"     # a 30-day sleep inside returns at once

The pytest plugin (registered through the ``pytest11`` entry point, module
``workflow.testing.pytest_plugin``) gives a ``workflow_env`` fixture: an open
``TestEnvironment`` for one test.
"""

from workflow.testing._environment import TestEnvironment

__all__ = ["TestEnvironment"]
