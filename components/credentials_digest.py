"""A rotated credential reaches the workers: a digest of the Secrets' data marks their pods.

Nothing restarts the workers when a Secret they read changes, so the digest of what the Secrets
hold goes into their pod template (`names.CREDENTIALS_ANNOTATION`): a new key is a new template,
which the operator rolls out. It is an HMAC keyed with the NGC key itself, so neither the key nor
a weak registry password can be found from it by trying candidates; the shared stack exports it in
plain text (`credentialsDigest`) for the profile stacks.
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
