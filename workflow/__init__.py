"""Durable workflows for Python, with attributes as the idempotency primitive.

::

    from workflow import workflow, step, start, Worker

    @step
    async def charge(order_id: str) -> str: ...

    @workflow
    async def checkout(order_id: str) -> str:
        return await charge(order_id)

See the README and ``rfcs/`` for the model.
"""

from workflow._hooks import Hook
from workflow._log import logger
from workflow._version import VERSION
from workflow.client import (
    Run,
    RunList,
    find_run,
    get_run,
    list_hooks,
    list_runs,
    list_workers,
    prune_runs,
    release_claims,
    resume_hook,
    start,
)
from workflow.context import (
    continue_as_new,
    create_hook,
    get_attribute,
    get_run_metadata,
    get_step_metadata,
    hold,
    list_attributes,
    now,
    patched,
    random,
    rate_limit,
    set_attribute,
    sleep,
    uuid4,
    write_stream,
)
from workflow.decorators import step, workflow
from workflow.engine import Worker, decode_history, encode_history, replay
from workflow.errors import (
    AttributeConflictError,
    FatalError,
    HookConflictError,
    HookNotFoundError,
    NonDeterminismError,
    NotInWorkflowError,
    QuerySyntaxError,
    RateLimitExceededError,
    RetryableError,
    RunAlreadyStartedError,
    RunCancelledError,
    RunFailedError,
    RunNotFoundError,
    StepFailedError,
    UndecodableValueError,
    WorkflowError,
)
from workflow.types import Limited, RateLimited, RunMetadata, StepMetadata, Unique
from worlds.types import RunStatus

__version__ = VERSION

__all__ = [
    "AttributeConflictError",
    "FatalError",
    "Hook",
    "HookConflictError",
    "HookNotFoundError",
    "Limited",
    "NonDeterminismError",
    "NotInWorkflowError",
    "QuerySyntaxError",
    "RateLimitExceededError",
    "RateLimited",
    "RetryableError",
    "Run",
    "RunAlreadyStartedError",
    "RunCancelledError",
    "RunFailedError",
    "RunList",
    "RunMetadata",
    "RunNotFoundError",
    "RunStatus",
    "StepFailedError",
    "StepMetadata",
    "UndecodableValueError",
    "Unique",
    "Worker",
    "WorkflowError",
    "continue_as_new",
    "create_hook",
    "decode_history",
    "encode_history",
    "find_run",
    "get_attribute",
    "get_run",
    "get_run_metadata",
    "get_step_metadata",
    "hold",
    "list_attributes",
    "list_hooks",
    "list_runs",
    "list_workers",
    "logger",
    "now",
    "patched",
    "prune_runs",
    "random",
    "rate_limit",
    "release_claims",
    "replay",
    "resume_hook",
    "set_attribute",
    "sleep",
    "start",
    "step",
    "uuid4",
    "workflow",
    "write_stream",
]
