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

from workflow._archives import copy_world, export_runs, import_runs
from workflow._bulk import BulkResult
from workflow._hooks import Hook
from workflow._key_limits import get_key_limit, set_key_limit
from workflow._log import logger
from workflow._updates import Update
from workflow._version import VERSION
from workflow.client import (
    Run,
    RunList,
    cancel_runs,
    find_run,
    get_retention,
    get_run,
    list_hooks,
    list_runs,
    list_workers,
    prune_runs,
    release_claims,
    resume_hook,
    retry_runs,
    set_retention,
    start,
)
from workflow.context import (
    close_stream,
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
    receive_updates,
    set_attribute,
    sleep,
    sleep_until,
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
    UpdateFailedError,
    UpdateRejectedError,
    WorkflowError,
)
from workflow.transactions import get_transaction, transaction
from workflow.types import Limited, RateLimited, RunMetadata, StepMetadata, Unique
from worlds.types import RunStatus

__version__ = VERSION

__all__ = [
    "AttributeConflictError",
    "BulkResult",
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
    "Update",
    "UpdateFailedError",
    "UpdateRejectedError",
    "Worker",
    "WorkflowError",
    "cancel_runs",
    "close_stream",
    "continue_as_new",
    "copy_world",
    "create_hook",
    "decode_history",
    "encode_history",
    "export_runs",
    "find_run",
    "get_attribute",
    "get_key_limit",
    "get_retention",
    "get_run",
    "get_run_metadata",
    "get_step_metadata",
    "get_transaction",
    "hold",
    "import_runs",
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
    "receive_updates",
    "release_claims",
    "replay",
    "resume_hook",
    "retry_runs",
    "set_attribute",
    "set_key_limit",
    "set_retention",
    "sleep",
    "sleep_until",
    "start",
    "step",
    "transaction",
    "uuid4",
    "workflow",
    "write_stream",
]
