"""A rotated credential reaches the workers: a digest of the Secrets' data marks their pods.

Nothing restarts the workers when a Secret they read changes, so the digest of what the Secrets
hold goes into their pod template (`names.CREDENTIALS_ANNOTATION`): a new key is a new template,
which the operator rolls out. It is an HMAC keyed with the NGC key itself, so neither the key nor
a weak registry password can be found from it by trying candidates; the shared stack exports it in
plain text (`credentialsDigest`) for the profile stacks.

A Secret that exists already (`ngcApiKeyFrom`, `imagePullFrom`) goes in by its identity, not
its value: its uid and resourceVersion, read as metadata at every preview and `up`, change
whenever anyone writes it, so a rotation by the cluster's secret store restarts the workers at the
next `pulumi up`.
"""

from __future__ import annotations

import hashlib
import hmac
import json

DIGEST_CHARACTERS = 16


def credentials_digest(ngc_api_key: str, docker_config_json: str | None) -> str:
    """16 hex characters that change whenever the NGC key or the mirror's credentials do."""
    data = json.dumps({"ngc": ngc_api_key, "registry": docker_config_json or ""}, sort_keys=True)
    mac = hmac.new(ngc_api_key.encode(), data.encode(), hashlib.sha256)
    return mac.hexdigest()[:DIGEST_CHARACTERS]


def existing_credentials_digest(ngc_secret: str, pull_secret: str | None) -> str:
    """The digest when the NGC key is in a Secret this program does not create
    (`ngcApiKeyFrom`), or there is none (`ngcApiKeyNeeded` false, `ngc_secret` empty): of
    each existing Secret's identity (`secret_identity`), since the program never reads their
    values. No HMAC: an identity is no secret, and the settings refuse a mirror password from
    stack config without an NGC key from it, so nothing secret goes in."""
    data = json.dumps({"ngc": ngc_secret, "registry": pull_secret or ""}, sort_keys=True)
    return hashlib.sha256(data.encode()).hexdigest()[:DIGEST_CHARACTERS]


def secret_identity(namespace: str, name: str, metadata: dict[str, object]) -> str:
    """An existing Secret as its digest sees it: its uid and resourceVersion, which the API server
    changes on every write to it (a rotated value among them, and a Secret deleted and made
    again), read from its metadata alone."""
    return f"{namespace}/{name} uid={metadata.get('uid')} resourceVersion={metadata.get('resourceVersion')}"
