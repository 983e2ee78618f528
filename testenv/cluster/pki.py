"""Fresh certificates for one local control plane, made with openssl (a base tool of the machine).

A CA; the API server's serving certificate (loopback only: `127.0.0.1` and `localhost`, plus the
in-cluster names a client inside the cluster would use); an admin client certificate in
`system:masters`, which every component and the user's kubeconfig authenticate with; and the
service-account signing key pair. EC P-256 keys, 30 days: a test cluster's certificates are made
anew on every `up`, so nothing outlives the cluster that trusted it.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

DAYS = "30"
SERVING_NAMES = (
    "IP:127.0.0.1",
    "DNS:localhost",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    "DNS:kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True)
class Pki:
    folder: Path

    @property
    def ca_cert(self) -> Path:
        return self.folder / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.folder / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.folder / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.folder / "apiserver.key"

    @property
    def admin_cert(self) -> Path:
        return self.folder / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.folder / "admin.key"

    @property
    def service_account_key(self) -> Path:
        return self.folder / "service-account.key"

    @property
    def service_account_public(self) -> Path:
        return self.folder / "service-account.pub"


def make_pki(folder: Path) -> Pki:
    """Every certificate and key of one cluster, in `folder` (private keys 0600)."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    pki = Pki(folder)
    _openssl(
        "req",
        "-x509",
        "-new",
        "-nodes",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-keyout",
        pki.ca_key,
        "-out",
        pki.ca_cert,
        "-days",
        DAYS,
        "-subj",
        "/CN=cosmos3-local-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
    )
    _signed(
        pki,
        pki.serving_key,
        pki.serving_cert,
        "/CN=kube-apiserver",
        ["extendedKeyUsage=serverAuth", "subjectAltName=" + ",".join(SERVING_NAMES)],
    )
    _signed(
        pki,
        pki.admin_key,
        pki.admin_cert,
        "/O=system:masters/CN=cosmos3-admin",
        ["extendedKeyUsage=clientAuth"],
    )
    _openssl(
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-out",
        pki.service_account_key,
    )
    _openssl("pkey", "-in", pki.service_account_key, "-pubout", "-out", pki.service_account_public)
    for key in (pki.ca_key, pki.serving_key, pki.admin_key, pki.service_account_key):
        key.chmod(0o600)
    return pki


def _signed(pki: Pki, key: Path, cert: Path, subject: str, extensions: list[str]) -> None:
    request = key.with_suffix(".csr")
    _openssl(
        "req",
        "-new",
        "-nodes",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-keyout",
        key,
        "-out",
        request,
        "-subj",
        subject,
    )
    extfile = key.with_suffix(".ext")
    extfile.write_text(
        "\n".join(["basicConstraints=CA:FALSE", "keyUsage=critical,digitalSignature", *extensions])
        + "\n"
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        request,
        "-CA",
        pki.ca_cert,
        "-CAkey",
        pki.ca_key,
        "-CAcreateserial",
        "-out",
        cert,
        "-days",
        DAYS,
        "-extfile",
        extfile,
    )
    request.unlink()
    extfile.unlink()


def _openssl(*args: str | Path) -> None:
    result = subprocess.run(
        ["openssl", *map(str, args)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {result.stderr.strip()}")
