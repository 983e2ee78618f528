"""The one masker (`common.credentials`): a credential is masked by its shape, whatever
surrounds it, and ordinary text passes unchanged.

The oracle is never the masker's own pattern: each case plants a canary (a random token made
here) inside a credential of one class, wraps it in generated text, and searches the masked text
for the canary itself.
"""

from __future__ import annotations

import base64
import io
import json
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.credentials import (
    MASK,
    credential_kind,
    credential_kind_in_bytes,
    mask,
    mask_url,
    mask_values,
    masked_output,
)
from tests.tally import flag, record

FAMILY = "secrets (masker)"
canaries = st.text("abcdef0123456789", min_size=24, max_size=40).map(lambda h: f"Cn{h}Zq")
"""A token no ordinary text holds: letters and digits only, so it fits every credential class."""
hosts = st.sampled_from(
    [
        "mirror.example.com",
        "10.0.0.5:3141",
        "s3.eu-west-1.amazonaws.com",
        "[::1]:8080",
        "pypi.internal",
    ]
)
query_names = st.sampled_from(
    [
        "token",
        "access_token",
        "TOKEN",
        "api_key",
        "api-key",
        "apikey",
        "key",
        "secret",
        "client_secret",
        "password",
        "passwd",
        "pwd",
        "signature",
        "sig",
        "X-Amz-Signature",
        "X-Amz-Credential",
        "X-Amz-Security-Token",
        "x-goog-signature",
        "auth",
        "private_token",
        "session_token",
        "refresh_token",
        "my_api_key",
        "db_password",
    ]
)


def _jwt(canary: str) -> str:
    payload = base64.urlsafe_b64encode(json.dumps({"sub": canary}).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.{payload}.c2lnbmF0dXJl{canary[:6]}"


@st.composite
def credentials(draw: st.DrawFn) -> tuple[str, str, str]:
    """(class, credential text, canary): a canary planted in one credential of one class."""
    canary = draw(canaries)
    host = draw(hosts)
    scheme = draw(st.sampled_from(["https", "http", "postgres", "s3", "git+https", "redis"]))
    user = draw(st.sampled_from(["ci", "robot", "u", "x-access-token", "admin"]))
    pem_kind = draw(st.sampled_from(["RSA ", "EC ", "OPENSSH ", ""]))
    upper = canary.upper().replace("Z", "9")[:16].ljust(16, "7")
    shapes = {
        "user:password@": (f"{scheme}://{user}:{canary}@{host}/simple", canary),
        "token@": (f"{scheme}://{canary}@{host}/repo.git", canary),
        "query": (f"https://{host}/k?a=1&{draw(query_names)}={canary}&b=2", canary),
        "fragment": (f"https://{host}/cb#state=1&access_token={canary}", canary),
        "ngc": (f"nvapi-{canary}", canary),
        "aws": (f"{draw(st.sampled_from(['AKIA', 'ASIA']))}{upper}", upper),
        "bearer": (f"Authorization: Bearer {canary}.{canary[:8]}", canary),
        "jwt": (_jwt(canary), canary),
        "pem": (
            f"-----BEGIN {pem_kind}PRIVATE KEY-----\nMIIEv{canary}\n{canary}==\n-----END",
            canary,
        ),
        "github": (f"ghp_{canary}{canary}"[:40], canary[:30]),
        "huggingface": (f"hf_{canary}{canary}"[:37], canary[:30]),
        "slack": (f"xoxb-{canary}", canary),
    }
    kind = draw(st.sampled_from(sorted(shapes)))
    text, planted = shapes[kind]
    return kind, text, planted


surroundings = st.sampled_from(
    [
        "{}",
        "value: {}",
        '{{"env": "{}"}}',
        "PIP_INDEX_URL={} pip install",
        "'{}'",
        "({})",
        "error: cannot reach {}, retrying",
        "- {}\n- next",
        "<{}>",
        "url={};next",
        "{}\n",
    ]
)
words = st.text("abcdefghijklmnopqrstuvwxyz .,:-_/=\n", max_size=30)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(case=credentials(), around=surroundings, before=words, after=words)
def test_a_planted_credential_never_survives_the_masker(
    case: tuple[str, str, str], around: str, before: str, after: str
) -> None:
    kind, credential, canary = case
    text = before + " " + around.format(credential) + " " + after

    masked = mask(text)

    record(FAMILY)
    flag(FAMILY, "secret", canary in masked)
    assert canary not in masked, (kind, text)
    assert credential_kind(text) is not None, (kind, text)
    assert credential_kind_in_bytes(text.encode()) is not None
    assert MASK in masked
    assert canary not in json.dumps(mask_values({"k": [text, {text: 1}]}))


ORDINARY = [
    "output_tokens=128 concurrency=4 requests=160",
    "GET http://127.0.0.1:8000/v1/models 200",
    "http://cosmos3-nano-reasoner-agg-h200-round-robin-frontend.ns.svc.cluster.local:8000",
    "git@github.com:org/repo.git",
    "git+ssh://git@github.com/org/repo",
    "https://ci-bot:****@pypi.example.com/simple",
    "Bearer tokens are described in RFC 6750",
    "nvapi-key goes into ngcApiKey",
    "kubectl --context h200-cluster -n cosmos3-nano-reasoner port-forward service/x 8000:8000",
    "https://example.com/search?q=token&page=2",
    "NIM_MAX_NUM_BATCHED_TOKENS=8192",
    "http://host:8080/path@v2",
    "AKIA is how an AWS access key id starts",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_passes_unchanged(text: str) -> None:
    record(FAMILY)
    assert mask(text) == text
    assert credential_kind(text) is None


def test_a_url_keeps_everything_but_its_credentials() -> None:
    url = "https://u:" + "pw-123@host:9/p/a?x=1&X-Amz-Signature=abc&y=2#frag"
    assert mask_url(url) == f"https://{MASK}@host:9/p/a?x=1&X-Amz-Signature={MASK}&y=2#frag"


def test_masked_output_masks_what_is_printed_then_restores_the_streams() -> None:
    out, err = io.StringIO(), io.StringIO()
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        with masked_output():
            print("key nvapi-" + "0123456789abcdefghij0123")
            print("url https://a:" + "b-secret-1@h/x", file=sys.stderr)
    finally:
        restored = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = stdout, stderr

    assert restored == (out, err)
    assert out.getvalue() == f"key {MASK}\n"
    assert err.getvalue() == f"url https://{MASK}@h/x\n"
