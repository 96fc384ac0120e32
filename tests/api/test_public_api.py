"""The public names are a contract (BRIEF section 3): pin them."""

from __future__ import annotations

import workflow
import workflow.engine
import worlds

BRIEF_NAMES = {
    "workflow", "step", "start", "get_run", "find_run", "list_runs",
    "set_attribute", "get_attribute", "list_attributes", "sleep", "create_hook",
    "get_run_metadata", "get_step_metadata", "now", "random", "uuid4", "continue_as_new",
    "resume_hook",
    "Unique", "Run", "RunStatus", "Worker",
    "FatalError", "RetryableError", "AttributeConflictError", "RunAlreadyStartedError",
    "NonDeterminismError", "RunFailedError", "RunCancelledError", "HookConflictError",
}  # fmt: skip


def test_workflow_exports_are_pinned() -> None:
    assert workflow.__all__ == sorted(workflow.__all__)
    assert set(workflow.__all__) == BRIEF_NAMES | {
        "Hook",
        "HookNotFoundError",
        "NotInWorkflowError",
        "QuerySyntaxError",
        "RunList",
        "decode_history",
        "encode_history",
        "list_hooks",
        "patched",
        "replay",
        "write_stream",
        "prune_runs",
        "RunMetadata",
        "RunNotFoundError",
        "StepFailedError",
        "StepMetadata",
        "WorkflowError",
    }
    for name in workflow.__all__:
        assert getattr(workflow, name) is not None


def test_worlds_exports_are_pinned() -> None:
    assert worlds.__all__ == sorted(worlds.__all__)
    assert set(worlds.__all__) == {
        "DEFAULT_URL",
        "PROTOCOL_VERSION",
        "World",
        "known_schemes",
        "open",
        "redact_url",
        "url_from_env",
    }
    assert workflow.engine.__all__ == ["Worker", "decode_history", "encode_history", "replay"]


def test_every_error_derives_from_one_root() -> None:
    errors = [getattr(workflow, n) for n in workflow.__all__ if n.endswith("Error")]
    for error in errors:
        assert issubclass(error, workflow.WorkflowError), error
    from workflow.errors import ContinueAsNew

    assert not issubclass(ContinueAsNew, Exception)


def test_other_public_packages_are_pinned() -> None:
    import cli
    import workflow.policies
    import worlds.testing

    assert cli.__all__ == ["app", "main"]
    assert worlds.testing.__all__ == [
        "ClockConformance",
        "SkewedWorldFactory",
        "WorldConformance",
        "WorldFactory",
    ]
    assert workflow.policies.__all__ == [
        "ConflictPolicy",
        "ReusePolicy",
        "start_or_cancel_run",
        "start_or_get_run",
        "start_or_resume_hook",
        "start_with_policy",
    ]
