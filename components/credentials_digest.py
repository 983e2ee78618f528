"""A rotated credential reaches the workers: a digest of the Secrets' data marks their pods.

The workers read `NGC_API_KEY` from `ngc-api-secret` when their container starts, and pull through
`registry-pull-secret`; nothing restarts them when a Secret changes. So the digest of what those
Secrets hold goes into the workers' pod template (`names.CREDENTIALS_ANNOTATION`, in
`components.graph_manifest`): a new key is a new template, which the operator rolls out to every
worker, and the preview of a profile stack shows which graph restarts. The Secrets themselves are
updated in place (the provider's `enableSecretMutable`, components/provider.py), so no pod that
starts meanwhile finds one missing. The download Job reads the key the same way, at its next run.

The digest is an HMAC keyed with the NGC key itself: it says that something changed, and nothing
more; neither the key nor a weak registry password can be found from it by trying candidates,
without the NGC key. It is no secret: the shared stack exports it (`credentialsDigest`) for the
profile stacks, in plain text, so that their previews stay readable.
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
