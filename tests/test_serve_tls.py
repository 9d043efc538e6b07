"""`policyc serve` over HTTPS with client certificates (mutual TLS), on 127.0.0.1: a certificate
signed by the `--tls-client-ca` names the principal whose `subjects` list its subject; without a
certificate, or with one of another CA, the handshake fails; a certificate that names nobody
needs a key; a key and a certificate of different principals are refused."""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from .support.commands import policyc_path
from .support.service import Server, new_key
from .test_serve import POLICY


def _name(common: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Example"),
            x509.NameAttribute(NameOID.COMMON_NAME, common),
        ]
    )


def _issue(folder: Path, stem: str, subject: str, issuer: tuple | None, ca: bool = False) -> tuple:
    """A key and certificate (files ``stem.pem``, ``stem.key``), signed by ``issuer`` or itself."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    signer_key, signer_name = issuer if issuer else (key, _name(subject))
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(signer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
        )
    certificate = builder.sign(signer_key, hashes.SHA256())
    (folder / f"{stem}.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (folder / f"{stem}.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return key, _name(subject)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("tls")
    (folder / "policy.dl").write_text(POLICY, "utf-8")
    ca = _issue(folder, "ca", "policyc test CA", None, ca=True)
    other_ca = _issue(folder, "other-ca", "another CA", None, ca=True)
    _issue(folder, "server", "127.0.0.1", ca)
    _issue(folder, "runner", "ci-runner", ca)
    _issue(folder, "stranger", "stranger", ca)
    _issue(folder, "forged", "ci-runner", other_ca)
    key, table = new_key("person", "agent")
    (folder / "keys.toml").write_text(
        table + '\n[principals.ci]\nroles = ["agent"]\nsubjects = ["CN=ci-runner,O=Example"]\n', "utf-8"
    )
    server = Server(
        folder,
        "--tls-cert",
        str(folder / "server.pem"),
        "--tls-key",
        str(folder / "server.key"),
        "--tls-client-ca",
        str(folder / "ca.pem"),
        scheme="https",
    )
    yield server, folder, key
    server.stop()


def _client(server: Server, folder: Path, cert: str | None, key: str | None = None) -> httpx.Client:
    import ssl

    context = ssl.create_default_context(cafile=str(folder / "ca.pem"))
    if cert is not None:
        context.load_cert_chain(str(folder / f"{cert}.pem"), str(folder / f"{cert}.key"))
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=server.url, verify=context, headers=headers, timeout=10)


def test_a_certificate_of_the_ca_names_its_principal(tls) -> None:
    server, folder, _ = tls
    with _client(server, folder, "runner") as runner:
        created = runner.post("/v1/sessions", json={"session": "s1"})
        assert created.status_code == 201, created.text
        assert runner.get("/metrics").status_code == 200
    with _client(server, folder, "stranger") as stranger:  # the same CA, a subject of nobody
        refused = stranger.post("/v1/sessions", json={"session": "s1"})
        assert refused.status_code == 401
        assert "CN=stranger,O=Example" in refused.json()["error"]["message"]


def test_no_certificate_or_another_cas_fails_the_handshake(tls) -> None:
    server, folder, key = tls
    for cert in (None, "forged"):
        with _client(server, folder, cert, key) as client, pytest.raises(httpx.TransportError):
            client.get("/metrics")


def test_a_key_and_a_certificate_must_name_the_same_principal(tls) -> None:
    server, folder, key = tls
    with _client(server, folder, "runner", key) as both:
        refused = both.post("/v1/sessions", json={"session": "s2"})
        assert refused.status_code == 401 and "different principals" in refused.json()["error"]["message"]
    with _client(server, folder, "stranger", key) as keyed:  # a certificate of nobody, and a key
        assert keyed.post("/v1/sessions", json={"session": "s2"}).status_code == 201
    with _client(server, folder, "runner") as runner:  # the key's session is not the certificate's
        assert (
            runner.post(
                "/v1/sessions/s2/events", json={"events": [{"id": "e", "kind": "user_message"}]}
            ).status_code
            == 404
        )


def test_unusable_certificate_files_are_refused_before_it_starts(tmp_path: Path) -> None:
    (tmp_path / "policy.dl").write_text(POLICY, "utf-8")
    _, table = new_key("a")
    (tmp_path / "keys.toml").write_text(table, "utf-8")
    ca = _issue(tmp_path, "ca", "CA", None, ca=True)
    _issue(tmp_path, "server", "127.0.0.1", ca)
    (tmp_path / "junk.pem").write_text("not a certificate", "utf-8")
    base = [policyc_path(), "serve", str(tmp_path / "policy.dl"), "--keys", str(tmp_path / "keys.toml")]
    base += ["--db", str(tmp_path / "m.db"), "--port", "0"]
    cases = {
        "--tls-client-ca needs --tls-cert": ["--tls-client-ca", str(tmp_path / "ca.pem")],
        "not a usable certificate and key": [
            "--tls-cert",
            str(tmp_path / "junk.pem"),
            "--tls-key",
            str(tmp_path / "server.key"),
        ],
        "not a usable CA certificate": [
            "--tls-cert",
            str(tmp_path / "server.pem"),
            "--tls-key",
            str(tmp_path / "server.key"),
            "--tls-client-ca",
            str(tmp_path / "junk.pem"),
        ],
    }
    for message, options in cases.items():
        done = subprocess.run(base + options, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and message in done.stderr, (options, done.stderr)
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "m.db").exists(), "nothing was opened before the files were checked"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('roles = ["agent"]', "no keys (add the SHA-256"),
        ('subjects = ["ci-runner"]', "is not a certificate subject"),
        ('subjects = "CN=x"', "subjects: expected a list of strings"),
    ],
)
def test_bad_subjects_are_refused_with_their_table(entry: str, message: str) -> None:
    from policyc.serve.keys import KeysError, parse_keys

    with pytest.raises(KeysError, match="keys.toml: \\[principals.ci\\]:? .*" + message.replace("(", "\\(")):
        parse_keys(f"[principals.ci]\n{entry}\n", "keys.toml")
    with pytest.raises(KeysError, match="also names `a`"):
        parse_keys('[principals.a]\nsubjects = ["CN=x"]\n[principals.b]\nsubjects = ["CN=x"]\n', "keys.toml")
