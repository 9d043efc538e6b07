"""The language server reads what an editor sends within bounds: a message that claims to be
larger than the limit is skipped, never read into memory whole."""

from __future__ import annotations

import json
import subprocess

from .conftest import policyc_command


def _message(payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def test_an_oversized_message_is_skipped_and_the_server_goes_on() -> None:
    initialize = _message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})
    shutdown = _message({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    exit_ = _message({"jsonrpc": "2.0", "method": "exit"})
    huge = b"Content-Length: 99999999999\r\n\r\n" + b"x" * 4096
    done = subprocess.run(
        [*policyc_command(), "lsp"],
        input=huge,
        capture_output=True,
        timeout=60,
    )
    assert b"Traceback" not in done.stderr and b"MemoryError" not in done.stderr
    assert b"over the limit" in done.stderr, done.stderr
    # a server that skipped a message still answers the next ones (here the stream ended
    # inside the skipped message: it stops like at the end of any input)
    done = subprocess.run(
        [*policyc_command(), "lsp"],
        input=b"Content-Length: 70000000\r\n\r\n" + b"y" * 70_000_000 + initialize + shutdown + exit_,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert b'"id": 1' in done.stdout.replace(b'"id":1', b'"id": 1') and b"capabilities" in done.stdout
    assert b"over the limit" in done.stderr


def test_an_endless_header_line_is_read_in_pieces() -> None:
    done = subprocess.run(
        [*policyc_command(), "lsp"], input=b"X" * 20_000_000, capture_output=True, timeout=60
    )
    assert b"Traceback" not in done.stderr and b"MemoryError" not in done.stderr
