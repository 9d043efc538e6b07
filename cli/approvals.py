"""``policyc serve approvals``: the escalated calls waiting at a ``policyc serve`` service, and
a person's answer to one, from the command line (docs/serve.md, "Approvals from the command
line"). The service's URL and an approver's key come from ``--url``/``--key`` or
``$POLICYC_URL``/``$POLICYC_KEY``, as ``kubectl`` and ``gh`` take theirs; every failure is one
line and status 1 (the service's refusal: an unknown id, a call already answered, a key that is
not an approver's) or 2 (no key, a URL that cannot be used)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import click

from .common import EXIT_ERRORS, EXIT_USAGE, fail, internal_errors, require_extra

COLUMNS = ("ID", "AGE", "SESSION", "CALL", "RULE", "MESSAGE")
GAP = 2
DEFAULT_URL = "http://127.0.0.1:8181"


def _connection(url: str, key: str | None) -> Any:
    require_extra("serve", "`policyc serve approvals`")
    if not key:
        fail(
            "no key: give --key KEY or set $POLICYC_KEY (a key of a principal with the `approver` role)",
            EXIT_USAGE,
        )
    if not url.startswith(("http://", "https://")):
        fail(f"--url {url}: expected http://HOST:PORT or https://HOST:PORT", EXIT_USAGE)
    from ..serve.client import connect

    return connect(url, key)


def _service_options(command: Any) -> Any:
    command = click.option(
        "--key", envvar="POLICYC_KEY", metavar="KEY", help="An approver's key (or $POLICYC_KEY)."
    )(command)
    return click.option(
        "--url",
        envvar="POLICYC_URL",
        default=DEFAULT_URL,
        show_default=True,
        metavar="URL",
        help="The service (or $POLICYC_URL).",
    )(command)


@click.group("approvals")
def approvals_group() -> None:
    """List the escalated calls waiting for a person, and approve or refuse them."""


@approvals_group.command("list")
@_service_options
@click.option("--format", "form", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--watch", is_flag=True, help="Draw the list again every --interval seconds until Ctrl-C.")
@click.option("--interval", type=click.FloatRange(0.2, 3600), default=2.0, show_default=True)
def list_command(url: str, key: str | None, form: str, watch: bool, interval: float) -> None:
    """The calls waiting for a person, oldest first: id, age, session, call, rule, message."""
    with internal_errors():
        with _connection(url, key) as service:
            try:
                _listing(service, url, form, watch, interval)
            except KeyboardInterrupt:  # Ctrl-C ends a watch, quietly
                return


def _listing(service: Any, url: str, form: str, watch: bool, interval: float) -> None:
    from ..serve.client import ServiceError

    while True:
        try:
            pending = service.approvals()
        except ServiceError as error:
            fail(str(error), EXIT_ERRORS)
        if form == "json":
            click.echo(json.dumps({"pending": pending}, indent=2, ensure_ascii=False))
        else:
            if watch:
                click.clear()
                click.echo(f"{len(pending)} waiting at {url}  ({time.strftime('%H:%M:%S')}; Ctrl-C ends)")
            show(rows(pending, time.time()))
        if not watch:
            return
        time.sleep(interval)


def rows(pending: Sequence[dict[str, Any]], now: float) -> list[tuple[str, ...]]:
    """The table's rows: one per waiting call, oldest first, every value as people's text
    shows it (policyc.runtime.render: no JSON quoting, control characters made visible)."""
    from ..runtime import render

    found = []
    for item in sorted(pending, key=lambda p: p.get("asked") or 0):
        request = item.get("request") if isinstance(item.get("request"), dict) else {}
        asked = item.get("asked")
        age = _age(now - asked) if isinstance(asked, int | float) else "?"
        messages = [m for m in request.get("messages") or [] if isinstance(m, str)]
        found.append(
            (
                render.printable(str(item.get("approval_id", ""))),
                age,
                render.printable(f"{item.get('principal', '')}/{item.get('session', '')}"),
                render.call(request.get("tool"), request.get("arguments")),
                render.printable(", ".join(str(r) for r in request.get("rules") or [])),
                render.printable(" / ".join(messages)),
            )
        )
    return found


def show(table: Sequence[tuple[str, ...]]) -> None:
    if not table:
        click.echo("no call is waiting for approval")
        return
    widths = [max(len(name), *(len(row[i]) for row in table)) for i, name in enumerate(COLUMNS)]

    def line(values: Sequence[str]) -> str:
        return (" " * GAP).join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    click.echo(line(COLUMNS))
    for row in table:
        click.echo(line(row))


def _age(seconds: float) -> str:
    """``42s``, ``5m``, ``3h``, ``2d``."""
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _answer(url: str, key: str | None, approval_id: str, approve: bool, ttl: float | None) -> None:
    with internal_errors():
        from ..serve.client import ServiceError

        with _connection(url, key) as service:
            try:
                answered = service.answer(approval_id, approve, ttl)
            except ServiceError as error:
                fail(f"{approval_id}: {error}", EXIT_ERRORS)
        word = "approved (once)" if answered.get("approved") else "refused"
        click.echo(f"{approval_id}: {word}")


@approvals_group.command("approve")
@click.argument("approval_id", metavar="ID")
@_service_options
@click.option(
    "--ttl", type=click.FloatRange(0.001, 86400), help="Seconds the approval stays usable (default 300)."
)
def approve_command(approval_id: str, url: str, key: str | None, ttl: float | None) -> None:
    """Approve the call ID once: the agent may make exactly that call again, within --ttl."""
    _answer(url, key, approval_id, True, ttl)


@approvals_group.command("refuse")
@click.argument("approval_id", metavar="ID")
@_service_options
def refuse_command(approval_id: str, url: str, key: str | None) -> None:
    """Refuse the call ID."""
    _answer(url, key, approval_id, False, None)
