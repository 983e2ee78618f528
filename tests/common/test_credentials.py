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
import random
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
    masked_document,
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
def credentials(draw: st.DrawFn) -> tuple[str, str, tuple[str, ...]]:
    """(class, credential text, planted): canaries planted in one credential of one class."""
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
    return kind, text, (planted,)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


SECRET_ENV_NAMES = st.one_of(
    st.sampled_from(["PGPASSWORD", "MYSQL_PWD", "DB_PASS", "NGC_KEY", "HFTOKEN", "NGC_API_KEY"]),
    st.builds(
        "{}{}{}".format,
        st.sampled_from(["", "PG", "DB_", "APP_", "X", "GITLAB_", "AWS_"]),
        st.sampled_from(["PASSWORD", "PASSWD", "SECRET", "TOKEN", "APIKEY", "API_KEY"]),
        st.sampled_from(["", "_VALUE", "_1", "2"]),
    ),
    st.builds(
        "{}{}".format,
        st.sampled_from(["DB", "MYSQL", "NGC", "REGISTRY", "SMTP", "X1"]),
        st.sampled_from(["_PASS", "_PWD", "_KEY", "_AUTH", "_PAT"]),
    ),
)
"""The issue's names and their families: *PASSWORD*, *TOKEN*, *SECRET*, *_PASS, *_PWD, *_KEY."""
ENV_FORMS = [
    "{name}={value}",
    "export {name}={value}",
    "{name}: {value}",
    '{name}="{value}"',
    "--env {name}={value}",
    "-e '{name}={value}'",
    '{{"name": "{name}", "value": "{value}"}}',
    "- name: {name}\n  value: {value}\n- name: HOME\n  value: /tmp",
    '"{name}": "{value}"',
]
URL_PASSWORD_MARKS = ["/", "//", "?", "#", "@", ":", "/?#@", "%2F"]
"""What a password may hold that ends an RFC 3986 user-info: the issue's `pa/ss` and kin."""


@st.composite
def credentials_round_four(draw: st.DrawFn) -> tuple[str, str, tuple[str, ...]]:
    """(class, text, planted): issue 30's shapes, each with its secret parts as the oracle (a
    base64 blob is searched as it travels, encoded)."""
    canary, second = draw(canaries), draw(canaries)
    user = draw(st.sampled_from(["ci", "robot", "u", "ci.bot", "x-access-token"]))
    host = draw(hosts | st.sampled_from(["host", "mirror:3141", "localhost:8080"]))
    mark = draw(st.sampled_from(URL_PASSWORD_MARKS))
    basic = _b64(f"{user}:{canary}")
    legacy = _b64(f"{canary[:26].ljust(26, 'x')}:{draw(st.uuids())}")
    docker = json.dumps(
        {"auths": {"nvcr.io": {"auth": basic, "password": canary, "identitytoken": second}}}
    )
    registry = draw(st.sampled_from(["nvcr.io", "registry.example.com:5000", "10.0.0.5"]))
    env_form = draw(st.sampled_from(ENV_FORMS))
    shapes = {
        "url password with a mark": (
            f"https://{user}:{canary}{mark}{second}@{host}/simple",
            (canary, second),
        ),
        "url token with a slash": (
            f"https://{canary}/{second}@{draw(hosts)}/repo.git",
            (canary, second),
        ),
        "secret env name": (
            env_form.format(name=draw(SECRET_ENV_NAMES), value=canary),
            (canary,),
        ),
        "login in an image": (
            f"{user}:{canary}{draw(st.sampled_from(['', mark]))}{second}@{registry}/team/img:1.0",
            (canary, second),
        ),
        "registry server": (f"--docker-server={user}:{canary}@{registry}", (canary,)),
        "basic header": (f'curl -H "Authorization: Basic {basic}" https://x.io', (basic,)),
        "basic alone": (f"sent Basic {basic} to the mirror", (basic,)),
        "authorization any scheme": (f"Authorization: Token {canary}", (canary,)),
        "bearer short": (f"Authorization: Bearer {canary[:10]}", (canary[:10],)),
        "docker config json": (docker, (canary, second, basic)),
        "docker config base64": (_b64(docker), (_b64(docker),)),
        "curl -u": (
            (
                f"curl -sS {draw(st.sampled_from(['-u ', '-u', '--user ', '--user=']))}"
                f"{user}:{canary} https://x.io"
            ),
            (canary,),
        ),
        "gitlab token": (f"PRIVATE-TOKEN: glpat-{canary}", (canary,)),
        "gitlab token alone": (f"token glpat-{canary} expired", (canary,)),
        "legacy ngc key after an option": (
            f"ngc config set {draw(st.sampled_from(['--apikey', '--api-key', '--apikey=']))} "
            f"{legacy}".replace("= ", "="),
            (legacy,),
        ),
        "legacy ngc key alone": (f"key {legacy} ok", (legacy,)),
        "credential field": (
            draw(
                st.sampled_from(
                    [
                        '{{"password": "{}"}}',
                        "registryPassword: {}",
                        "X-Api-Key: {}",
                        "client_secret={}",
                        "'apiKey': '{}'",
                        "identitytoken: {}",
                    ]
                )
            ).format(canary),
            (canary,),
        ),
        "credential option": (
            draw(
                st.sampled_from(
                    ["--password {}", "--token={}", "--api-key '{}'", "--db-password {}"]
                )
            ).format(canary),
            (canary,),
        ),
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
@given(
    case=credentials() | credentials_round_four(), around=surroundings, before=words, after=words
)
def test_a_planted_credential_never_survives_the_masker(
    case: tuple[str, str, tuple[str, ...]], around: str, before: str, after: str
) -> None:
    kind, credential, planted = case
    text = before + " " + around.format(credential) + " " + after

    masked = mask(text)

    survived = [secret for secret in planted if secret in masked]
    record(FAMILY)
    flag(FAMILY, "secret", len(survived))
    assert not survived, (kind, text, masked)
    assert credential_kind(text) is not None, (kind, text)
    assert credential_kind_in_bytes(text.encode()) is not None
    assert MASK in masked
    as_values = json.dumps(mask_values({"k": [text, {text: 1}]}))
    assert not [secret for secret in planted if secret in as_values], (kind, text)


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
DIGEST = "sha256:3f9a1c0e5b7d2468ace13579bdf02468ace13579bdf02468ace13579bdf0246a"
LOOK_ALIKES = [
    f"nvcr.io/nim/nvidia/cosmos3-nano-reasoner:1.0.0@{DIGEST}",
    f"python:3.12-slim@{DIGEST}",
    f"docker://nvcr.io/nim/x@{DIGEST}",
    "https://registry.npmjs.org/@scope/pkg",
    "https://mirror/simple?x=a@b",
    "mail ops@example.com, or mailto:ops@example.com",
    "git@github.com:org/repo.git and ssh://git@host/x",
    "TIKTOKEN_CACHE_DIR=/tmp/cache CLUSTER_TOKENIZER=builtin MAX_TOKENS=128",
    "PWD=/home/ci OLDPWD=/",
    "NGC_API_KEY: ${{ secrets.NGC_API_KEY }}",
    "export PGPASSWORD=$DB_PASS; export NGC_API_KEY=...",
    ': "${NGC_API_KEY:?set the repository secret NGC_API_KEY}"',
    'pulumi config set --secret ngcApiKey "$NGC_API_KEY"',
    "docker run -u 1000:1000 img; docker login --password-stdin nvcr.io",
    "usage: tool [-h] [--password PASSWORD] [--api-key API_KEY]",
    "secretName: ngc-api-secret\nngcSecret: ngc-api-secret\ncredentialsDigest: 3f9a1c",
    "eos_token: </s>\npad_token: <pad>",
    '{"password": null, "token": ""}\npassword: <your password>',
    "- name: HOME\n  value: /tmp/home\n- name: NGC_API_KEY\n  valueFrom: {secretKeyRef: {}}",
    "Basic authentication is off; basic usage",
    "--tokenizer builtin --output-tokens 128 --prefix-tokens 64",
    "~ data: NGC_API_KEY: [secret] => [secret]",
    "automountServiceAccountToken: false",
]
"""Legal text shaped like a credential, left as it is: a digest after `@`, `@` in a dotted
host's path, a user without a password, a variable's reference, a placeholder, a uid:gid."""


@pytest.mark.parametrize("text", ORDINARY + LOOK_ALIKES)
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


CANARY = "Cn7f3a9d2e41b8c6Zq"
ROUND_FOUR = {
    "url password holding /": (f"https://user:pa/ss{CANARY}@host/", f"pa/ss{CANARY}"),
    "url password holding # ? @": (f"https://u:p#?@{CANARY}@mirror.io/x", f"@{CANARY}"),
    "url token holding /": (f"https://{CANARY}/x@registry.example.com/r", CANARY),
    "PGPASSWORD": (f"PGPASSWORD={CANARY} psql -h db", CANARY),
    "MYSQL_PWD": (f"export MYSQL_PWD='{CANARY}'", CANARY),
    "DB_PASS": (f"DB_PASS: {CANARY}", CANARY),
    "NGC_KEY": (f'{{"name": "NGC_KEY", "value": "{CANARY}"}}', CANARY),
    "HFTOKEN": (f"- name: HFTOKEN\n  value: {CANARY}", CANARY),
    "image login": (f"ci:{CANARY}@nvcr.io/nim/nvidia/x:1.0", CANARY),
    "registry server": (f"registryServer: ci:{CANARY}@registry.example.com:5000", CANARY),
    "basic header": ("Authorization: Basic " + _b64(f"ci:{CANARY}"), _b64(f"ci:{CANARY}")),
    "bearer token": (f"-H 'Authorization: Bearer {CANARY[:9]}'", CANARY[:9]),
    "docker config": (f'{{"auths": {{"nvcr.io": {{"auth": "{CANARY}"}}}}}}', CANARY),
    "docker identitytoken": (f'"identitytoken": "{CANARY}"', CANARY),
    "curl -u": (f"curl -u ci:{CANARY} https://x.io", CANARY),
    "gitlab token": (f"glpat-{CANARY}xyz", CANARY),
    "legacy NGC key after --apikey": (f"ngc config set --apikey {CANARY}", CANARY),
    "legacy NGC key after --api-key=": (f"--api-key={CANARY}", CANARY),
}


@pytest.mark.parametrize("text", [text for text, _ in ROUND_FOUR.values()], ids=list(ROUND_FOUR))
def test_each_shape_of_issue_30_is_masked_and_named(text: str) -> None:
    secret = next(secret for shape, secret in ROUND_FOUR.values() if shape == text)
    record(FAMILY)
    masked = mask(text)
    flag(FAMILY, "secret", secret in masked)
    assert secret not in masked and MASK in masked
    kind = credential_kind(text)
    assert kind is not None and secret not in kind


def test_a_url_password_with_slashes_keeps_the_host_and_path() -> None:
    url = "https://user:" + "pa/ss@w?rd#1@mirror.example.com:8443/simple/?token=x"
    assert mask_url(url) == f"https://{MASK}@mirror.example.com:8443/simple/?token={MASK}"


def test_named_values_are_masked_in_structured_data_too() -> None:
    data = {
        "password": "hunter2-" + CANARY,
        "NGC_API_KEY": CANARY,
        "env": [{"name": "PGPASSWORD", "value": CANARY}, {"name": "HOME", "value": "/tmp"}],
        "ngcSecret": "ngc-api-secret",
        "max_tokens": 128,
    }
    masked = mask_values(data)
    assert CANARY not in json.dumps(masked)
    assert masked["env"][1] == {"name": "HOME", "value": "/tmp"}
    assert (masked["ngcSecret"], masked["max_tokens"]) == ("ngc-api-secret", 128)


def test_a_document_is_masked_as_json_when_it_is_json() -> None:
    clean = b'{"a": 1}\n'
    assert masked_document(clean) is clean
    masked = masked_document(json.dumps({"url": f"https://u:{CANARY}@h.io/"}).encode())
    assert json.loads(masked) == {"url": f"https://{MASK}@h.io/"}
    text = masked_document(f"log: PGPASSWORD={CANARY}\n".encode())
    assert text == f"log: PGPASSWORD={MASK}\n".encode()


@settings(max_examples=200, deadline=None)
@given(
    case=credentials() | credentials_round_four(), around=surroundings, before=words, after=words
)
def test_masking_twice_changes_nothing_and_the_kind_agrees(
    case: tuple[str, str, tuple[str, ...]], around: str, before: str, after: str
) -> None:
    text = before + " " + around.format(case[1]) + " " + after
    once = mask(text)
    assert mask(once) == once
    assert credential_kind(once) is None


def test_a_mask_escaped_for_markdown_is_already_masked() -> None:
    """report.md escapes what came from input after masking it (`&lt;secret&gt;`); masking the
    whole report again must not put a raw `<secret>` tag back."""
    escaped = (
        "https://&lt;secret&gt;@mirror.example.com/simple and"
        " https://h.example.com/x?token=&lt;secret&gt; and"
        ' "password": "&lt;secret&gt;"'
    )

    assert mask(escaped) == escaped


def test_a_url_glued_to_a_number_is_still_masked() -> None:
    password = "Cn7f3a9d2e41" + "b8c6Zq"  # assembled: a canary
    text = f"retry 3 of 0https://ci:{password}@mirror.example.com/simple"

    assert password not in mask(text) and credential_kind(text) is not None


@pytest.mark.parametrize(
    "line", [b"DB_PASS=s3cr3t", "PGPASSWORD=p\u00e4ssw\u00f6rt-geheim-2024".encode()]
)
def test_a_stray_byte_elsewhere_in_a_text_file_leaves_its_credentials_found(
    line: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DB_PASS", raising=False)  # by its shape, not by the environment's value
    monkeypatch.delenv("PGPASSWORD", raising=False)
    text = b"level 1 done\n" + line + b"\nlevel 2 done\n"

    assert credential_kind_in_bytes(text) is not None
    assert credential_kind_in_bytes(text + b"caf\xe9\n") is not None  # one Latin-1 line


def test_binary_data_between_newline_bytes_is_not_read_as_text_lines() -> None:
    """Read whole as Latin-1, one random 60 kB file in twelve looked like a credential."""
    files = [random.Random(seed).randbytes(60_000) for seed in range(24)]

    assert [credential_kind_in_bytes(data) for data in files] == [None] * 24
