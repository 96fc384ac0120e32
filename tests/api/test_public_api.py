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
        "Limited",
        "NotInWorkflowError",
        "hold",
        "QuerySyntaxError",
        "RateLimited",
        "RateLimitExceededError",
        "rate_limit",
        "RunList",
        "decode_history",
        "encode_history",
        "list_hooks",
        "list_workers",
        "logger",
        "patched",
        "replay",
        "write_stream",
        "sleep_until",
        "close_stream",
        "transaction",
        "get_transaction",
        "prune_runs",
        "release_claims",
        "get_key_limit",
        "set_key_limit",
        "RunMetadata",
        "RunNotFoundError",
        "StepFailedError",
        "StepMetadata",
        "UndecodableValueError",
        "Update",
        "UpdateFailedError",
        "UpdateRejectedError",
        "receive_updates",
        "WorkflowError",
        "BulkResult",
        "cancel_runs",
        "retry_runs",
        "set_retention",
        "get_retention",
        "copy_world",
        "export_runs",
        "import_runs",
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
        "start_or_debounce",
        "start_or_get_run",
        "start_or_resume_hook",
        "start_with_policy",
        "update_with_start",
    ]


def test_ui_and_views_are_pinned() -> None:
    import workflow.ui
    import workflow.views

    assert workflow.ui.__all__ == ["create_app"]
    assert workflow.views.__all__ == sorted(workflow.views.__all__)
    assert workflow.views.__all__ == [
        "EVENTS_SHOWN",
        "EventWindow",
        "HookSummary",
        "RunDetails",
        "StepSummary",
        "decode_payload",
        "event_summary",
        "event_to_json",
        "format_age",
        "format_duration",
        "format_value",
        "gather_details",
        "run_to_json",
        "to_builtins",
    ]


def test_schedules_exports_are_pinned() -> None:
    import workflow.schedules

    assert workflow.schedules.__all__ == sorted(workflow.schedules.__all__)
    assert set(workflow.schedules.__all__) == {
        "Overlap",
        "Schedule",
        "ScheduleExistsError",
        "ScheduleInfo",
        "ScheduleNotFoundError",
        "create_schedule",
        "get_schedule",
        "list_schedules",
    }
    for name in workflow.schedules.__all__:
        if name.endswith("Error"):
            assert issubclass(getattr(workflow.schedules, name), workflow.WorkflowError)


def test_ecosystem_packages_are_pinned() -> None:
    import workflow.contrib.opentelemetry
    import workflow.sync
    import workflow.testing
    import worlds.codec

    assert workflow.testing.__all__ == ["TestEnvironment"]
    assert workflow.sync.__all__ == ["SyncClient", "SyncRun", "SyncRunList"]
    assert workflow.contrib.opentelemetry.__all__ == ["WorkflowInstrumentor"]
    assert worlds.codec.__all__ == ["MARKER", "TEXT_PREFIX", "CodecWorld", "PayloadCodec"]


def test_deployments_exports_are_pinned() -> None:
    import workflow.deployments

    assert workflow.deployments.__all__ == [
        "DeploymentRecord",
        "drained",
        "get_deployment",
        "list_deployments",
    ]
