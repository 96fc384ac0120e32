"""``wf start``: start a run of a workflow from a shell, optionally under a start policy."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from workflow import Limited, Run, RunCancelledError, RunFailedError, Unique, start
from workflow.policies import ConflictPolicy, ReusePolicy, start_with_policy
from worlds.quoting import quoted

from ._codec_option import CodecOption, with_codec
from ._modules import load_module
from ._output import err_console, print_json, progress, run_to_json
from ._resolve import (
    EXIT_USAGE,
    CliError,
    WorldOption,
    execute,
    open_world,
    parse_pair,
    usage_errors,
)

__all__ = ["POLICIES", "start_command"]

POLICIES: dict[str, tuple[ConflictPolicy, ReusePolicy, bool]] = {
    "get": (ConflictPolicy.USE_EXISTING, ReusePolicy.REJECT_DUPLICATE, False),
    "cancel": (ConflictPolicy.TERMINATE_EXISTING, ReusePolicy.ALLOW_DUPLICATE, False),
    "fail": (ConflictPolicy.FAIL, ReusePolicy.REJECT_DUPLICATE, True),
}
"""Each ``--policy`` as ``start_with_policy``'s (conflict, reuse, error_when_already_started).

``get`` is ``start_or_get_run`` and ``cancel`` is ``start_or_cancel_run``
(the same options); ``fail`` refuses whenever a run, running or closed,
holds the pair. ``--reuse`` replaces the policy's reuse option.
"""
REUSE = {policy.value.replace("_", "-"): policy for policy in ReusePolicy}


def unique_pairs(
    attr: list[str], unique: list[str]
) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    """The ``--attr`` and ``--unique`` pairs; a key given twice is a usage error."""
    seen: dict[str, str] = {}
    pairs: list[tuple[str, str, Any]] = []
    for option, items in (("--attr", attr), ("--unique", unique)):
        for item in items:
            key, value = parse_pair(item, option)
            if key in seen:
                raise CliError(
                    f"attribute {quoted(key)} is given twice ({seen[key]} and {option} "
                    f"{quoted(item)}); a run has one value per key",
                    EXIT_USAGE,
                )
            seen[key] = f"{option} {quoted(item)}"
            pairs.append((option, key, value))
    attributes = {key: value for option, key, value in pairs if option == "--attr"}
    return attributes, [(key, value) for option, key, value in pairs if option == "--unique"]


def limited_pairs(limit: list[str], taken: set[str]) -> dict[str, Limited[Any]]:
    """The ``--limit KEY=VALUE:N`` options as ``Limited`` values; usage errors otherwise."""
    limited: dict[str, Limited[Any]] = {}
    for item in limit:
        pair, sep, count = item.rpartition(":")
        if not sep or not count.isdigit() or int(count) < 1:
            raise CliError(f"--limit takes KEY=VALUE:N with N >= 1, got {quoted(item)}", EXIT_USAGE)
        key, value = parse_pair(pair, "--limit")
        if key in taken or key in limited:
            raise CliError(
                f"attribute {quoted(key)} is given twice (--limit {quoted(item)}); "
                "a run has one value per key",
                EXIT_USAGE,
            )
        with usage_errors():
            limited[key] = Limited(value, int(count))
    return limited


def load_workflow(target: str) -> Any:
    """The ``@workflow`` function named by ``MODULE:WORKFLOW`` (MODULE a name or a .py path)."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise CliError(
            f"expected MODULE:WORKFLOW, like myapp.flows:checkout; got {quoted(target)}", 2
        )
    module = load_module(module_name)
    found = getattr(module, attribute, None)
    if found is None:
        raise CliError(f"{quoted(module_name)} has no attribute {quoted(attribute)}")
    return found


def parse_args(values: list[str]) -> list[Any]:
    """Each ARG as a JSON value: ``42``, ``'"text"'``, ``'{"a": 1}'``."""
    parsed = []
    for n, text in enumerate(values, 1):
        try:
            parsed.append(json.loads(text))
        except ValueError:
            raise CliError(
                f"ARG {n} is not JSON: {quoted(text)} (quote strings for the shell: '\"text\"')",
                EXIT_USAGE,
            ) from None
        except RecursionError:
            raise CliError(f"ARG {n} is nested too deeply to accept", EXIT_USAGE) from None
    return parsed


async def _wait(run: Run[Any], timeout: float | None) -> Any:
    with progress() as bar:
        task = bar.add_task(f"waiting for run {run.id}", total=None)
        try:
            return await run.result(timeout=timeout)
        finally:
            bar.update(task, completed=1)


def start_command(
    target: Annotated[
        str, typer.Argument(metavar="MODULE:WORKFLOW", help="The @workflow to start.")
    ],
    args: Annotated[
        list[str] | None,
        typer.Argument(metavar="ARGS...", help="Arguments, each a JSON value.", show_default=False),
    ] = None,
    attr: Annotated[
        list[str], typer.Option("--attr", "-a", help="KEY=VALUE attribute (repeatable).")
    ] = [],  # noqa: B006 - typer reads the default, never mutates it
    unique: Annotated[
        list[str],
        typer.Option("--unique", "-u", help="KEY=VALUE claimed uniquely across the world."),
    ] = [],  # noqa: B006
    limit: Annotated[
        list[str],
        typer.Option(
            "--limit",
            "-l",
            metavar="KEY=VALUE:N",
            help="At most N open runs hold KEY=VALUE; this run waits (pending) for a slot "
            "when all are held (repeatable).",
        ),
    ] = [],  # noqa: B006
    delay: Annotated[
        float | None,
        typer.Option(min=0, help="Keep the run pending this many seconds before it starts."),
    ] = None,
    priority: Annotated[
        int,
        typer.Option(
            help="Among runs waiting for the same slots or rate tokens, lower numbers "
            "are admitted first (first in, first out within a number).",
        ),
    ] = 0,
    policy: Annotated[
        str | None,
        typer.Option(
            help="With one --unique, what to do when a run holds the pair: "
            "get = return the holder, running or closed (start_or_get_run); "
            "cancel = cancel a running holder, take over from a closed one, start "
            "(start_or_cancel_run); fail = exit 1 if any run, running or closed, holds it. "
            "Without --policy a held pair is a conflict (exit 1).",
            show_default=False,
        ),
    ] = None,
    reuse: Annotated[
        str | None,
        typer.Option(
            help="With --policy: replace its rule for a CLOSED holder: allow-duplicate "
            "(start anew), allow-duplicate-failed-only (only after failed or cancelled), "
            "reject-duplicate (refuse).",
            show_default=False,
        ),
    ] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the result and print it.")] = False,
    timeout: Annotated[
        float | None, typer.Option(help="With --wait: give up after this many seconds.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
    world: WorldOption = None,
    codec: CodecOption = None,
) -> None:
    """Start a run of MODULE:WORKFLOW with JSON ARGS; a worker executes it.

    Values in --attr/--unique are JSON numbers, true/false/null, or else strings.

    Examples:

        wf start examples.quickstart:checkout '"o-1"' 2 1250 --unique order=o-1 --attr customer=c-9

        wf start myapp:charge '"o-1"' --unique order=o-1 --policy get --wait

        wf start myapp:report '"acme"' --limit tenant=acme:3 --delay 30

        wf start myapp:report '"acme"' --limit tenant=acme:3 --priority -1
    """

    async def body() -> tuple[Run[Any], bool, Any, bool]:
        if policy is not None and policy not in POLICIES:
            raise CliError(f"--policy must be one of {', '.join(POLICIES)}", EXIT_USAGE)
        if reuse is not None and (policy is None or reuse not in REUSE):
            raise CliError(
                f"--reuse takes one of {', '.join(REUSE)} and needs --policy", EXIT_USAGE
            )
        fn = load_workflow(target)
        call_args = parse_args(args or [])
        attributes, pairs = unique_pairs(attr, unique)
        attributes.update(limited_pairs(limit, {*attributes, *(key for key, _ in pairs)}))
        if policy is not None and len(pairs) != 1:
            raise CliError("--policy needs exactly one --unique KEY=VALUE", EXIT_USAGE)
        async with with_codec(open_world(world), codec) as opened:
            if policy is None:
                attributes.update({key: Unique(value) for key, value in pairs})
                with usage_errors():
                    run: Run[Any] = await start(
                        fn,
                        *call_args,
                        attributes=attributes,
                        delay=delay,
                        priority=priority,
                        world=opened,
                    )
            else:
                if delay is not None or priority:
                    raise CliError("--delay and --priority do not go with --policy", EXIT_USAGE)
                key, value = pairs[0]
                conflict, reuse_policy, error = POLICIES[policy]
                with usage_errors():
                    run = await start_with_policy(
                        fn,
                        *call_args,
                        key=key,
                        value=value,
                        conflict=conflict,
                        reuse=REUSE[reuse] if reuse is not None else reuse_policy,
                        error_when_already_started=error,
                        attributes=attributes,
                        world=opened,
                    )
            started = run.record is not None  # a policy's existing run comes without one
            await run.status()  # read the record, for --json
            if not wait:
                return run, started, None, False
            try:
                return run, started, await _wait(run, timeout), True
            except (RunFailedError, RunCancelledError) as exc:
                raise CliError(str(exc)) from None

    run, started, result, waited = execute(body)
    if as_json:
        out: dict[str, Any] = {"id": run.id}
        if run.record is not None:
            out = run_to_json(run.record)
        out["started"] = started
        if waited:
            out["result"] = result
        print_json(out)
        return
    sys.stdout.write(run.id + "\n")
    if not started:
        err_console.print(f"the policy returned the existing run {run.id}; nothing started")
    if waited:
        err_console.print("result:")
        sys.stdout.write(json.dumps(result, default=str) + "\n")
