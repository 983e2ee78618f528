"""Fresh certificates for one local control plane, made with openssl (a base tool of the machine).

A CA; the API server's serving certificate (loopback only: `127.0.0.1` and `localhost`, plus the
in-cluster names a client inside the cluster would use); an admin client certificate in
`system:masters`, which every component and the user's kubeconfig authenticate with; and the
service-account signing key pair. EC P-256 keys, 30 days: a test cluster's certificates are made
anew on every `up`, so nothing outlives the cluster that trusted it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import NamedTuple

DAYS = "30"
SERVING_NAMES = (
    "IP:127.0.0.1",
    "DNS:localhost",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    "DNS:kubernetes.default.svc.cluster.local",
)
CURVE = ("-pkeyopt", "ec_paramgen_curve:prime256v1")
FILE_NAMES = (
    "ca.crt ca.key apiserver.crt apiserver.key admin.crt admin.key "
    "service-account.key service-account.pub"
)


class Pki(NamedTuple):
    """Where one cluster's certificates and keys are (`Pki.at` its folder)."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    service_account_key: Path
    service_account_public: Path

    @classmethod
    def at(cls, folder: Path) -> Pki:
        return cls(*(folder / name for name in FILE_NAMES.split()))


def make_pki(folder: Path) -> Pki:
    """Every certificate and key of one cluster, in `folder` (private keys 0600)."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    pki = Pki.at(folder)
    ca = ["-x509", "-days", DAYS, "-addext", "basicConstraints=critical,CA:TRUE"]
    ca += ["-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"]
    _new_key(pki.ca_key, pki.ca_cert, "/CN=cosmos3-local-ca", *ca)
    serving = ["extendedKeyUsage=serverAuth", "subjectAltName=" + ",".join(SERVING_NAMES)]
    _signed(pki, pki.serving_key, pki.serving_cert, "/CN=kube-apiserver", serving)
    admin = "/O=system:masters/CN=cosmos3-admin"
    _signed(pki, pki.admin_key, pki.admin_cert, admin, ["extendedKeyUsage=clientAuth"])
    _openssl("genpkey", "-algorithm", "EC", *CURVE, "-out", pki.service_account_key)
    _openssl("pkey", "-in", pki.service_account_key, "-pubout", "-out", pki.service_account_public)
    for key in (pki.ca_key, pki.serving_key, pki.admin_key, pki.service_account_key):
        key.chmod(0o600)
    return pki


def _new_key(key: Path, out: Path, subject: str, *options: str) -> None:
    """A new key in `key` and a request for `subject` in `out` (with `-x509`: a certificate)."""
    new_key: list[str | Path] = ["-new", "-nodes", "-newkey", "ec", *CURVE, "-keyout", key]
    _openssl("req", *new_key, "-out", out, "-subj", subject, *options)


def _signed(pki: Pki, key: Path, cert: Path, subject: str, extensions: list[str]) -> None:
    request = key.with_suffix(".csr")
    _new_key(key, request, subject)
    extfile = key.with_suffix(".ext")
    extfile.write_text(
        "\n".join(["basicConstraints=CA:FALSE", "keyUsage=critical,digitalSignature", *extensions])
        + "\n"
    )
    ca: list[str | Path] = ["-CA", pki.ca_cert, "-CAkey", pki.ca_key, "-CAcreateserial"]
    _openssl("x509", "-req", "-in", request, *ca, "-out", cert, "-days", DAYS, "-extfile", extfile)
    request.unlink()
    extfile.unlink()


def _openssl(*args: str | Path) -> None:
    result = subprocess.run(
        ["openssl", *map(str, args)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {result.stderr.strip()}")
