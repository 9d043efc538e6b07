"""`policyc serve`: the monitor as an HTTP service (docs/serve.md), and `policyc serve keygen`."""

from __future__ import annotations

import os

import click

from .approvals import approvals_group
from .common import EXIT_USAGE, StartGroup, fail, internal_errors, policy_failures


class _ServeGroup(StartGroup):
    """``policyc serve POLICY ...`` starts the service; ``policyc serve keygen ...`` and the
    other subcommands run themselves."""

    usages = ("POLICY_OR_BUNDLE --keys KEYS.toml [OPTIONS]",)


@click.group("serve", cls=_ServeGroup, invoke_without_command=False)
def serve_group() -> None:
    """Run the monitor as an HTTP service (docs/serve.md); `keygen` makes keys, `reload` reloads
    the policy and keys, `approvals` lists and answers escalated calls, `openapi` prints the API's
    document."""


@serve_group.command("start", hidden=True)
@click.argument("policy", metavar="POLICY_OR_BUNDLE")
@click.option("--keys", "keys", required=True, metavar="KEYS.toml", help="Principals, roles and key hashes.")
@click.option(
    "--db",
    default="policyc-serve.db",
    show_default=True,
    help="The database, the only state: a SQLite file, or a postgresql:// URL several instances may "
    "share (its password from PGPASSWORD or PGPASSFILE, never on the command line).",
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8181, show_default=True, type=click.IntRange(0, 65535))
@click.option("--functors", metavar="MODULE", help="A Python module implementing the policy's functors.")
@click.option("--tls-cert", metavar="FILE", help="Serve HTTPS with this certificate (PEM)...")
@click.option("--tls-key", metavar="FILE", help="...and this private key (PEM).")
@click.option(
    "--tls-client-ca",
    metavar="FILE",
    help="Ask every client for a certificate signed by this CA (PEM); its subject names a "
    "principal of KEYS.toml (`subjects`).",
)
@click.option(
    "--max-body",
    default=1 << 20,
    show_default=True,
    type=click.IntRange(1),
    help="Largest request body, in bytes.",
)
@click.option(
    "--wait",
    default=5.0,
    show_default=True,
    type=click.FloatRange(0, 600),
    help="Seconds an authorization waits for its session to reach `after_seq` before it is denied.",
)
@click.option(
    "--sync",
    type=click.Choice(["normal", "full"]),
    default="normal",
    show_default=True,
    help="When a commit reaches the disk: `normal` survives the process being killed, "
    "`full` also a power cut (every commit waits for the disk).",
)
@click.option(
    "--workers",
    default=0,
    type=click.IntRange(0, 256),
    help="Deprecated: --processes N (evaluator processes behind one server cost more than they gave).",
)
@click.option(
    "--processes",
    default=1,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Full service processes on the one port, each owning a share of the sessions in a "
    "database of its own (DB, then DB's siblings NAME.p1.EXT, ...); keep the number across restarts.",
)
@click.option(
    "--instance",
    metavar="NAME",
    help="With a PostgreSQL database: this instance's name (its leases and its audit chain; default: "
    "host and process id). One running instance per name.",
)
@click.option(
    "--advertise",
    metavar="URL",
    help="With a PostgreSQL database: where the other instances reach this one (default: its "
    "scheme, --host and --port; give it when binding 0.0.0.0).",
)
@click.option(
    "--lease-ttl",
    default=10.0,
    show_default=True,
    type=click.FloatRange(0.5, 3600),
    help="With a PostgreSQL database: seconds a session's lease runs without renewal; another instance "
    "takes a session over once its owner stopped renewing it.",
)
@click.option(
    "--verify-key",
    metavar="PUB",
    help="Serve only a bundle signed with this Ed25519 public key (`policyc keygen`).",
)
@click.option(
    "--audit-key",
    metavar="KEY",
    help="Sign the audit log's checkpoints with this Ed25519 private key (`policyc keygen`'s .key), "
    "so that `policyc audit verify --key` checks its export.",
)
@click.option(
    "--audit-head",
    metavar="FILE|-",
    help="Publish the audit log's head at every checkpoint: to FILE (replaced whole; the service "
    "refuses to start on a log that does not reach the head it holds), or `-` for a line on "
    "standard output. `policyc audit verify --expect` checks an export against it.",
)
def start_command(
    policy: str,
    keys: str,
    db: str,
    host: str,
    port: int,
    functors: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    tls_client_ca: str | None,
    max_body: int,
    wait: float,
    sync: str,
    workers: int,
    processes: int,
    instance: str | None,
    advertise: str | None,
    lease_ttl: float,
    verify_key: str | None,
    audit_key: str | None,
    audit_head: str | None,
) -> None:
    with internal_errors():
        from ..runtime.audit import AuditError
        from ..serve.keys import KeysError
        from ..serve.server import PortInUse, Settings, build, run
        from ..serve.store import StoreError

        if (tls_cert is None) != (tls_key is None):
            fail("--tls-cert and --tls-key go together", EXIT_USAGE)
        if tls_client_ca is not None and tls_cert is None:
            fail(
                "--tls-client-ca needs --tls-cert and --tls-key (client certificates are a TLS matter)",
                EXIT_USAGE,
            )
        if tls_cert is not None:
            _check_tls(tls_cert, tls_key, tls_client_ca)
        if workers:  # the deprecated name of --processes (its evaluator processes are gone)
            if processes > 1:
                fail("--workers is the deprecated name of --processes: give one of them", EXIT_USAGE)
            click.echo(
                f"policyc serve: --workers is deprecated and will be removed; it is now --processes "
                f'{workers} (full service processes, a database each: docs/serve.md, "Processes")',
                err=True,
            )
            processes = workers
        settings = Settings(
            policy=policy,
            keys=keys,
            db=db,
            host=host,
            port=port,
            functors=functors,
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_client_ca=tls_client_ca,
            max_body=max_body,
            wait=wait,
            sync=sync,
            processes=processes,
            instance=instance,
            advertise=advertise,
            lease_ttl=lease_ttl,
            verify_key=verify_key,
            audit_key=audit_key,
            audit_head=audit_head,
        )
        try:
            with policy_failures():
                if processes > 1:
                    from ..serve.fleet import run_fleet

                    return run_fleet(settings)
                service = build(settings)
        except (KeysError, StoreError, AuditError) as error:
            fail(str(error), EXIT_USAGE)
        except PortInUse as error:
            fail(_in_use(error), EXIT_USAGE)
        except OSError as error:
            fail(f"cannot open `{error.filename}`: {error.strerror}", EXIT_USAGE)
        try:
            run(settings, service)
        except PortInUse as error:
            fail(_in_use(error), EXIT_USAGE)


def _in_use(error: OSError) -> str:
    return f"{error.filename} is in use (another policyc serve?); choose --port"


def _check_tls(cert: str, key: str | None, ca: str | None) -> None:
    """Refuse, before anything starts, certificate files that TLS cannot use."""
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as error:
        fail(f"--tls-cert {cert} / --tls-key {key}: not a usable certificate and key ({error})", EXIT_USAGE)
    if ca is not None:
        try:
            context.load_verify_locations(ca)
        except (OSError, ssl.SSLError) as error:
            fail(f"--tls-client-ca {ca}: not a usable CA certificate ({error})", EXIT_USAGE)


@serve_group.command("reload")
@click.option(
    "--db", default="policyc-serve.db", show_default=True, help="The database of the running service."
)
@click.option("--instance", metavar="NAME", help="With a PostgreSQL database: the instance to reload.")
def reload_command(db: str, instance: str | None) -> None:
    """Make the running service read its policy again: new sessions run it, existing ones keep theirs."""
    with internal_errors():
        from ..serve.server import ask_reload
        from ..serve.store import StoreError
        from ..serve.stores import SCHEMES

        if not db.startswith(SCHEMES) and not os.path.isfile(db):
            fail(f"{db}: no database of policyc serve there", EXIT_USAGE)
        try:
            outcome = ask_reload(db, instance=instance)
        except (OSError, TimeoutError, StoreError) as error:
            fail(str(error), EXIT_USAGE)
        click.echo(outcome["message"])
        if not outcome["ok"]:
            fail("the service runs the policy it ran before")


@serve_group.command("openapi")
@click.option("--markdown", is_flag=True, help="The API reference of docs/serve.md instead of the document.")
def openapi_command(markdown: bool) -> None:
    """Print the service's OpenAPI document (what `GET /openapi.json` answers), or its API reference."""
    import json

    from ..serve.openapi import document

    if markdown:
        from ..serve.reference import markdown as reference

        click.echo(reference(document()), nl=False)
    else:
        click.echo(json.dumps(document(), indent=2))


@serve_group.command("keygen")
@click.option("--principal", required=True, help="Who the key is for.")
@click.option("--role", "roles", multiple=True, help="A role of the principal (repeat for several).")
@click.option(
    "--append",
    "append",
    metavar="KEYS.toml",
    help="Add the principal's table to this keys file (atomically) and print only the key.",
)
@click.option("--force", is_flag=True, help="With --append: replace the principal's table if it has one.")
def keygen_command(principal: str, roles: tuple[str, ...], append: str | None, force: bool) -> None:
    """Make a key for PRINCIPAL: prints the key once, and the KEYS.toml table to add (with
    --append, adds the table to the file and prints the key alone)."""
    with internal_errors():
        from ..serve.keyfile import append_key, table
        from ..serve.keys import KeysError, new_key

        if force and append is None:
            fail("--force goes with --append", EXIT_USAGE)
        key, digest = new_key()
        if append is not None:
            try:
                append_key(append, principal, roles, digest, force)
            except KeysError as error:
                fail(str(error), EXIT_USAGE)
            except OSError as error:
                fail(f"cannot write `{append}`: {error.strerror or error}", EXIT_USAGE)
            click.echo(key)
            click.echo(
                f"policyc serve: added `{principal}` to {append}; a running service takes it at "
                "`policyc serve reload --db DB` (or SIGHUP)",
                err=True,
            )
            return
        click.echo(f"key (shown once): {key}")
        click.echo("add to KEYS.toml:")
        click.echo(table(principal, roles, digest), nl=False)


serve_group.add_command(approvals_group)
