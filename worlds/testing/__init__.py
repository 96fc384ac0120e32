"""The conformance kit: the pytest suite every world must pass.

Every built-in world runs it in CI, and a third-party world proves itself
with one import and one fixture::

    # tests/test_my_world.py
    import pytest
    from worlds.testing import WorldConformance

    class TestMyWorld(WorldConformance):
        @pytest.fixture
        def world_factory(self, tmp_path):
            # Each call returns a NEW, unopened world object over the SAME
            # fresh, empty storage: the kit opens several at once to test
            # concurrency between connections.
            return lambda: MyWorld(f"my://{tmp_path}/store")

Then run ``pytest tests/test_my_world.py``. The tests are ``async`` and run on
asyncio through anyio's pytest plugin (installed with anyio); they talk to the
world through the ``World`` protocol only. ``world_factory`` must give fresh,
empty storage for every test (function scope), and a world that keeps its data
in one object, like ``MemoryWorld``, returns that one object from every call.

The kit takes a few seconds per world. Some tests wait for short leases
(0.2-0.6 s) to expire and for timers to fall due, so the world's clock must
be the machine's clock, give or take a few milliseconds.

A world that processes on several hosts share also takes ``ClockConformance``
(one clock decides leases and timers, whatever a worker's clock says), with a
``skewed_world_factory`` fixture: ``(seconds) -> World``, a new world object over
the same storage whose process clock runs ``seconds`` ahead.
"""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite(
    "worlds.testing._archive",
    "worlds.testing._base",
    "worlds.testing._batches",
    "worlds.testing._cancel",
    "worlds.testing._children",
    "worlds.testing._claims",
    "worlds.testing._clock",
    "worlds.testing._conditional",
    "worlds.testing._counts",
    "worlds.testing._hooks",
    "worlds.testing._idle_wait",
    "worlds.testing._liveness",
    "worlds.testing._model",
    "worlds.testing._prune",
    "worlds.testing._rates",
    "worlds.testing._reopen",
    "worlds.testing._resume",
    "worlds.testing._retention",
    "worlds.testing._reuse",
    "worlds.testing._runs",
    "worlds.testing._schedule_model",
    "worlds.testing._schedules",
    "worlds.testing._search",
    "worlds.testing._slot_history",
    "worlds.testing._slots",
    "worlds.testing._streams",
    "worlds.testing._takeovers",
    "worlds.testing._updates",
    "worlds.testing._values",
    "worlds.testing._work",
)

from worlds.testing._archive import ArchiveConformance  # noqa: E402
from worlds.testing._base import WorldFactory  # noqa: E402
from worlds.testing._batches import BatchCommitConformance  # noqa: E402
from worlds.testing._cancel import CancelConformance  # noqa: E402
from worlds.testing._children import ChildrenConformance  # noqa: E402
from worlds.testing._claims import ClaimsConformance  # noqa: E402
from worlds.testing._clock import ClockConformance, SkewedWorldFactory  # noqa: E402
from worlds.testing._conditional import ConditionalCommitConformance  # noqa: E402
from worlds.testing._counts import CountConformance  # noqa: E402
from worlds.testing._deployments import DeploymentConformance  # noqa: E402
from worlds.testing._failures import FailureHandlerConformance  # noqa: E402
from worlds.testing._holds import HoldConformance  # noqa: E402
from worlds.testing._hooks import HookConformance  # noqa: E402
from worlds.testing._idle_wait import IdleWaitConformance  # noqa: E402
from worlds.testing._key_limits import KeyLimitConformance  # noqa: E402
from worlds.testing._lifecycle import LifecycleConformance  # noqa: E402
from worlds.testing._liveness import LivenessConformance  # noqa: E402
from worlds.testing._model import ModelConformance  # noqa: E402
from worlds.testing._prune import PruneConformance  # noqa: E402
from worlds.testing._rates import PriorityConformance, RateLimitConformance  # noqa: E402
from worlds.testing._reopen import ReopenConformance  # noqa: E402
from worlds.testing._resume import ResumeConformance  # noqa: E402
from worlds.testing._retention import RetentionConformance  # noqa: E402
from worlds.testing._reuse import DebounceConformance, ReuseConformance  # noqa: E402
from worlds.testing._runs import RunsConformance  # noqa: E402
from worlds.testing._schedule_model import ScheduleModelConformance  # noqa: E402
from worlds.testing._schedules import ScheduleConformance  # noqa: E402
from worlds.testing._search import SearchConformance  # noqa: E402
from worlds.testing._slot_history import SlotHistoryConformance  # noqa: E402
from worlds.testing._slots import SlotsConformance  # noqa: E402
from worlds.testing._streams import StreamCloseConformance, StreamConformance  # noqa: E402
from worlds.testing._takeovers import TakeoverConformance  # noqa: E402
from worlds.testing._transactions import TransactionConformance  # noqa: E402
from worlds.testing._updates import UpdateConformance  # noqa: E402
from worlds.testing._values import ValueConformance  # noqa: E402
from worlds.testing._work import WorkConformance  # noqa: E402

__all__ = ["ClockConformance", "SkewedWorldFactory", "WorldConformance", "WorldFactory"]


class WorldConformance(
    LifecycleConformance,
    RunsConformance,
    WorkConformance,
    IdleWaitConformance,
    LivenessConformance,
    DeploymentConformance,
    ClaimsConformance,
    SearchConformance,
    CountConformance,
    TakeoverConformance,
    PruneConformance,
    RetentionConformance,
    HookConformance,
    CancelConformance,
    ChildrenConformance,
    ResumeConformance,
    UpdateConformance,
    StreamConformance,
    StreamCloseConformance,
    FailureHandlerConformance,
    ReopenConformance,
    ValueConformance,
    SlotsConformance,
    SlotHistoryConformance,
    HoldConformance,
    KeyLimitConformance,
    RateLimitConformance,
    PriorityConformance,
    ReuseConformance,
    DebounceConformance,
    ModelConformance,
    ConditionalCommitConformance,
    BatchCommitConformance,
    ScheduleConformance,
    ScheduleModelConformance,
    TransactionConformance,
    ArchiveConformance,
):
    """Every conformance test, as methods a ``Test...`` subclass collects.

    Subclass it in a test module and define a ``world_factory`` fixture that
    returns a zero-argument callable giving a new, unopened world object over
    shared, fresh storage. The class provides ``anyio_backend`` ("asyncio")
    and a ``world`` fixture: one world from the factory, opened with
    ``async with`` and closed after the test.

    The tests are grouped by concern: ``async with`` again, nested or in
    sequence (``LifecycleConformance``), runs and their logs (``RunsConformance``),
    the work queue and ``wait`` (``WorkConformance``), an idle poller's
    ``wait_idle`` ending when a poll could find something
    (``IdleWaitConformance``), worker liveness:
    heartbeats, takeover after death, no takeover in a world-wide stall, fencing
    (``LivenessConformance``), pinned deployments: leasing by build id, new runs
    on the newest build, ``pin="latest"``, a build's workflow names
    (``DeploymentConformance``), unique claims
    (``ClaimsConformance``), ``list_runs`` (``SearchConformance``), ``count_runs``
    and ``list_key_slots`` (``CountConformance``), policy
    takeovers, fencing, continue-as-new and pruning (``TakeoverConformance``),
    what pruning deletes, releases and keeps, in which order (``PruneConformance``),
    retention per status, listed prunes and pins (``RetentionConformance``),
    hooks (``HookConformance``), graceful cancellation and deadlines
    (``CancelConformance``), limited pairs: slots, waiting and promotion
    (``SlotsConformance``), their history per minute and its pruning
    (``SlotHistoryConformance``), ``hold`` slots inside workflows (``HoldConformance``),
    rate limits (``RateLimitConformance``), waiting priority (``PriorityConformance``),
    key limits with weights and burst (``KeyLimitConformance``),
    reuse windows and tombstones (``ReuseConformance``), debounced
    starts (``DebounceConformance``),
    the whole range of values the SDK accepts
    (``ValueConformance``), a
    hypothesis state machine checked against a model (``ModelConformance``),
    conditional commits (``ConditionalCommitConformance``), group commit
    (``BatchCommitConformance``), schedule storage and leasing
    (``ScheduleConformance``, with a state machine in ``ScheduleModelConformance``),
    child runs and their parents (``ChildrenConformance``), start-or-resume by
    unique pair (``ResumeConformance``), updates and update-with-start
    (``UpdateConformance``), run streams (``StreamConformance``), closing them
    (``StreamCloseConformance``), failure handlers started by a failing commit
    (``FailureHandlerConformance``), retry and fork (``ReopenConformance``) and a
    world's full dump and load (``ArchiveConformance``).
    """
