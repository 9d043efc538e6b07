"""`policyc compile` (a verified bundle, optionally signed and with thresholds) and
`policyc keygen` (the key pair that signs it)."""

from __future__ import annotations

import click

from .common import EXIT_USAGE, fail, internal_errors, print_diagnostics, thresholds_for_bundle


@click.command("compile")
@click.argument("path", metavar="FILE")
@click.option("-o", "--output", required=True, metavar="OUT", help="Where to write the bundle.")
@click.option("--sign-key", metavar="KEY", help="Sign the bundle with this Ed25519 private key (PEM).")
@click.option(
    "--thresholds",
    "thresholds_path",
    metavar="THRESHOLDS",
    help="Put thresholds calibrated by `policyc calibrate` in the bundle (the policy must import `risk`).",
)
def compile_command(path: str, output: str, sign_key: str | None, thresholds_path: str | None = None) -> None:
    """Compile a policy into a verified bundle (refused when it has errors)."""
    with internal_errors():
        from ..compiler.files import replace_file
        from ..compiler.loader import SourceError, load_file
        from ..compiler.pipeline import compile_program
        from ..runtime.bundle import build_bundle
        from ..runtime.errors import PolicyError
        from ..runtime.planned import planned

        try:
            program, found = load_file(path)
        except SourceError as error:
            fail(str(error), EXIT_USAGE)
        compilation = compile_program(program, found)
        if compilation.diagnostics:
            print_diagnostics(list(compilation.diagnostics))
        try:
            compiled = planned(compilation)
            plan = compiled.plan
            thresholds = thresholds_for_bundle(thresholds_path, compiled, plan)
            data = build_bundle(compiled, plan, sign_key, thresholds)
        except PolicyError as error:
            fail(f"not compiled: {error}")
        try:
            replace_file(output, data)
        except OSError as error:
            fail(f"cannot write `{output}`: {error.strerror or error}", EXIT_USAGE)
        rules = len(plan.rules)
        signed = ", signed" if sign_key else ""
        if thresholds is not None:
            roles = len(thresholds.role_to_stratum)
            signed = f", thresholds for {roles} role{'s' if roles != 1 else ''}" + signed
        click.echo(
            f"wrote {output}: {rules} rule{'s' if rules != 1 else ''}, {len(plan.relations)} relations{signed}"
        )


@click.command("keygen")
@click.argument("prefix")
@click.option(
    "--force",
    is_flag=True,
    help="Replace an existing key pair (bundles signed with the old key no longer verify with the new one).",
)
def keygen_command(prefix: str, force: bool) -> None:
    """Create an Ed25519 key pair for signing bundles: PREFIX.key (owner-only) and PREFIX.pub.

    An existing PREFIX.key or PREFIX.pub is never overwritten without --force, nor written
    through a symbolic link."""
    with internal_errors():
        from ..runtime.bundle import KeyExists, generate_keys

        try:
            private, public = generate_keys(prefix, force=force)
        except KeyExists as error:
            fail(str(error))
        except OSError as error:
            where = f" `{error.filename}`" if error.filename else ""
            fail(f"cannot write the keys{where}: {error.strerror or error}", EXIT_USAGE)
        click.echo(f"wrote {private} (keep it secret) and {public}")
