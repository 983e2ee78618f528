"""Secrets from the cluster's own store (issue 32, part 3): a named existing Secret for the NGC key
and an existing pull secret, used instead of created; the config they refuse; a missing one
refused at preview naming it, before any object; the workers' digest of their identity."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pulumi import RunError

from components.config_parser import ConfigError
from components.live import LiveReadError
from components.names import labels
from components.settings import PROJECT, StackSettings
from tests.support import NGC_KEY, stack_settings
from tools import offline
from tools.offline import MockCluster, ProgramRun, shared_layer_outputs
from tools.stack_files import example_site_for

RunStack = Callable[..., ProgramRun]
SECRET = "kubernetes:core/v1:Secret"
DGD = "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment"
JOB = "kubernetes:batch/v1:Job"
NGC = "synced-ngc"
PULL = "synced-pull"
EXISTING_NGC: dict[str, Any] = {"ngcApiKeyFrom": NGC, "ngcApiKeyFromField": "token"}
DIGEST = "cosmos3-nano-reasoner/credentials-digest"


def secret(name: str, resource_version: str = "7") -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"{name}-uid", "resourceVersion": resource_version}}


def cluster(ngc_version: str = "7", *missing: str) -> MockCluster:
    present = {("Secret", NGC): secret(NGC, ngc_version), ("Secret", PULL): secret(PULL)}
    return MockCluster(
        {key: None if key[1] in missing else value for key, value in present.items()}
    )


def parse(
    stack: str = "dev", secrets: dict[str, str] | None = None, **overrides: Any
) -> StackSettings:
    return stack_settings(stack, secrets, **overrides)


def refused(secrets: dict[str, str] | None = None, **overrides: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        parse(secrets=secrets, **overrides)
    return str(caught.value)


def env(container: dict[str, Any]) -> dict[str, Any]:
    return {entry["name"]: entry for entry in container["env"]}


def pod_specs(run: ProgramRun) -> list[dict[str, Any]]:
    graph = [c["podTemplate"]["spec"] for c in run.one(DGD).inputs["spec"]["components"]]
    return [*graph, run.one(JOB).inputs["spec"]["template"]["spec"]]


# --- the objects ----------------------------------------------------------------------------------


def test_an_existing_ngc_secret_is_read_by_the_pods_and_never_created(run_stack: RunStack) -> None:
    run = run_stack("dev", EXISTING_NGC, secrets={}, cluster=cluster())
    # Neither created nor read into the state (`get`): nothing the program does updates or
    # deletes it.
    assert run.of_type(SECRET) == []
    ref = {"secretKeyRef": {"name": NGC, "key": "token"}}
    worker = run.one(DGD).inputs["spec"]["components"][1]["podTemplate"]["spec"]["containers"][0]
    job = run.one(JOB).inputs["spec"]["template"]["spec"]["containers"][0]
    assert env(worker)["NGC_API_KEY"]["valueFrom"] == ref
    assert env(job)["NGC_API_KEY"]["valueFrom"] == ref
    assert (run.exports["ngcSecret"], run.exports["ngcSecretField"]) == (NGC, "token")


def test_an_existing_pull_secret_is_named_by_every_pod_and_never_created(
    run_stack: RunStack,
) -> None:
    run = run_stack("dev", {"imagePullFrom": PULL}, cluster=cluster())
    assert [s.inputs["metadata"]["name"] for s in run.of_type(SECRET)] == ["ngc-api-secret"]
    for spec in pod_specs(run):
        assert spec["imagePullSecrets"] == [{"name": PULL}]
    assert run.exports["registryPullSecret"] == PULL


def test_a_profile_stack_reads_the_existing_secret_the_layer_names(run_stack: RunStack) -> None:
    layer = shared_layer_outputs(ngcSecret=NGC, ngcSecretField="token")
    run = run_stack("round-robin", stack_outputs=layer)
    worker = run.one(DGD).inputs["spec"]["components"][1]["podTemplate"]["spec"]["containers"][0]
    assert env(worker)["NGC_API_KEY"]["valueFrom"] == {
        "secretKeyRef": {"name": NGC, "key": "token"}
    }


def test_a_layer_from_before_the_field_output_reads_ngc_api_key(run_stack: RunStack) -> None:
    run = run_stack("round-robin", stack_outputs=shared_layer_outputs(ngcSecretField=None))
    worker = run.one(DGD).inputs["spec"]["components"][1]["podTemplate"]["spec"]["containers"][0]
    assert env(worker)["NGC_API_KEY"]["valueFrom"]["secretKeyRef"]["key"] == "NGC_API_KEY"


# --- refused at preview, before any object ---------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "key", "name"),
    [
        (EXISTING_NGC, "ngcApiKeyFrom", NGC),
        ({"imagePullFrom": PULL}, "imagePullFrom", PULL),
    ],
)
def test_a_missing_existing_secret_is_refused_at_preview_naming_it(
    monkeypatch: pytest.MonkeyPatch, overrides: dict[str, str], key: str, name: str
) -> None:
    runs: list[ProgramRun] = []
    original = offline.ProgramRun

    def recording() -> ProgramRun:
        runs.append(original())
        return runs[-1]

    monkeypatch.setattr(offline, "ProgramRun", recording)
    secrets = {} if key == "ngcApiKeyFrom" else {"ngcApiKey": NGC_KEY}
    with pytest.raises(RunError) as caught:
        offline.run_program(
            "dev",
            example_site_for("dev") | overrides,
            secrets=secrets,
            cluster=cluster("7", name),
            preview=True,
        )
    message = str(caught.value)
    assert (
        f"{PROJECT}:{key} names the Secret {name}, which is not in namespace cosmos3-dev" in message
    )
    assert f"`pulumi config rm {PROJECT}:{key}`" in message
    assert runs and runs[0].kubernetes_objects() == []


def test_a_preview_that_cannot_read_the_cluster_goes_on(run_stack: RunStack) -> None:
    class Unreadable(MockCluster):
        def metadata(self, ref: Any) -> dict[str, Any] | None:
            raise LiveReadError("no credentials")

    run = run_stack("dev", EXISTING_NGC, secrets={}, cluster=Unreadable(), preview=True)
    assert run.of_type(SECRET) == []


def test_up_that_cannot_read_the_existing_secret_stops(run_stack: RunStack) -> None:
    class Unreadable(MockCluster):
        def metadata(self, ref: Any) -> dict[str, Any] | None:
            raise LiveReadError("forbidden")

    with pytest.raises(
        RunError,
        match=f"cannot read Secret cosmos3-dev/{NGC}, which {PROJECT}:ngcApiKeyFrom names",
    ):
        run_stack("dev", EXISTING_NGC, secrets={}, cluster=Unreadable())


@pytest.mark.parametrize(
    ("key", "name"),
    [("ngcApiKeyFrom", "ngc-api-secret"), ("imagePullFrom", "registry-pull-secret")],
)
def test_the_secret_this_project_created_is_not_taken_as_an_existing_one(
    run_stack: RunStack, key: str, name: str
) -> None:
    """The program would stop creating it, and the engine delete it under the pods."""
    created = secret(name) | {
        "metadata": secret(name)["metadata"] | {"labels": labels("credentials")}
    }
    synced = secret(name)  # the same name, written by the user's store: taken
    config = {key: name} | ({"ngcApiKeyFromField": "NGC_API_KEY"} if key == "ngcApiKeyFrom" else {})
    secrets = {} if key == "ngcApiKeyFrom" else {"ngcApiKey": NGC_KEY}

    with pytest.raises(RunError, match=rf"{PROJECT}:{key} names the Secret {name}, which this "):
        run_stack("dev", config, secrets=secrets, cluster=MockCluster({("Secret", name): created}))
    run = run_stack("dev", config, secrets=secrets, cluster=MockCluster({("Secret", name): synced}))
    assert name not in [s.inputs["metadata"]["name"] for s in run.of_type(SECRET)]


# --- the workers restart when the existing Secret changes ------------------------------------------


def worker_digest(run: ProgramRun) -> str:
    worker = run.one(DGD).inputs["spec"]["components"][1]
    return str(worker["podTemplate"]["metadata"]["annotations"][DIGEST])


def test_a_rewritten_existing_secret_changes_the_workers_digest(run_stack: RunStack) -> None:
    before = run_stack("dev", EXISTING_NGC, secrets={}, cluster=cluster("7"))
    again = run_stack("dev", EXISTING_NGC, secrets={}, cluster=cluster("7"))
    rotated = run_stack("dev", EXISTING_NGC, secrets={}, cluster=cluster("8"))
    assert worker_digest(before) == worker_digest(again) == before.exports["credentialsDigest"]
    assert worker_digest(rotated) != worker_digest(before)


def test_a_rewritten_existing_pull_secret_changes_the_digest_keyed_with_the_ngc_key(
    run_stack: RunStack,
) -> None:
    def digest(pull_version: str) -> str:
        objects: dict[tuple[str, str], dict[str, Any] | None] = {
            ("Secret", PULL): secret(PULL, pull_version)
        }
        run = run_stack("dev", {"imagePullFrom": PULL}, cluster=MockCluster(objects))
        return worker_digest(run)

    assert digest("1") != digest("2")
    assert NGC_KEY not in json.dumps(digest("1"))


# --- config ---------------------------------------------------------------------------------------


def test_no_ngc_key_is_required_with_an_existing_secret() -> None:
    settings = parse(**EXISTING_NGC)
    assert not settings.creates_ngc_secret and settings.ngc_api_key_from_field == "token"


def test_an_ngc_key_beside_an_existing_secret_is_refused() -> None:
    message = refused(secrets={"ngcApiKey": NGC_KEY}, **EXISTING_NGC)
    assert f"{PROJECT}:ngcApiKey is set, and {PROJECT}:ngcApiKeyFrom={NGC}" in message
    assert NGC_KEY not in message


def test_a_registry_password_beside_an_existing_pull_secret_is_refused() -> None:
    secrets = {"ngcApiKey": NGC_KEY, "registryPassword": "hunter2"}
    message = refused(secrets=secrets, imagePullFrom=PULL)
    assert f"{PROJECT}:registryPassword is set, and {PROJECT}:imagePullFrom={PULL}" in message


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {
                "imagePullFrom": PULL,
                "registryServer": "mirror.example",
                "registryUsername": "r",
            },
            "imagePullFrom is set together with",
        ),
        (
            EXISTING_NGC | {"registryServer": "mirror.example", "registryUsername": "r"},
            "the mirror's credentials then come from an existing pull secret too",
        ),
        ({"ngcApiKeyFromField": "token"}, "ngcApiKeyFromField is set without"),
        (
            {"ngcApiKeyFrom": "Not_A_Name"},
            "ngcApiKeyFrom: must be a lowercase RFC 1123",
        ),
        ({"imagePullFrom": "-x"}, "imagePullFrom: must be a lowercase RFC 1123"),
        (
            {"ngcApiKeyFrom": NGC, "ngcApiKeyFromField": "a/b"},
            "ngcApiKeyFromField: must be a valid config key",
        ),
        (
            {"ngcApiKeyFrom": NGC, "ngcApiKeyFromField": ".."},
            "ngcApiKeyFromField: must not be '..'",
        ),
    ],
)
def test_existing_secret_config_that_cannot_work_is_refused(
    overrides: dict[str, Any], expected: str
) -> None:
    secrets = {"registryPassword": "pw"} if "registryServer" in overrides else {}
    assert expected in refused(secrets=secrets, **overrides)


@pytest.mark.parametrize("key", ["ngcApiKeyFrom", "imagePullFrom"])
def test_a_profile_stack_leaves_the_existing_secrets_to_the_layer(key: str) -> None:
    overrides: dict[str, Any] = {key: "synced"}
    message = refused(stack="round-robin", **overrides)
    assert f"{PROJECT}:{key} is set on a stack that reads its layer" in message


# --- no NGC key at all, where nothing downloads ----------------------------------------------------

PREFILLED: dict[str, Any] = {
    "ngcApiKeyNeeded": False,
    "modelDownload": False,
    "modelCacheMode": "existing",
}


def test_without_a_key_no_secret_is_made_and_no_pod_gets_one(run_stack: RunStack) -> None:
    run = run_stack("dev", PREFILLED, secrets={})
    assert run.of_type(SECRET) == [] and run.of_type(JOB) == []
    for component in run.one(DGD).inputs["spec"]["components"]:
        for container in component["podTemplate"]["spec"]["containers"]:
            assert "NGC_API_KEY" not in env(container)
    assert "ngcSecret" not in run.exports and "ngcSecretField" not in run.exports


def test_a_profile_stack_on_a_keyless_layer_gives_its_workers_no_key(run_stack: RunStack) -> None:
    layer = shared_layer_outputs(ngcSecret=None, ngcSecretField=None)
    run = run_stack("round-robin", stack_outputs=layer)
    worker = run.one(DGD).inputs["spec"]["components"][1]["podTemplate"]["spec"]["containers"][0]
    assert "NGC_API_KEY" not in env(worker)


@pytest.mark.parametrize(
    ("overrides", "secrets", "expected"),
    [
        ({"modelDownload": True}, {}, "something downloads the model with the key"),
        ({"modelCacheMode": "create"}, {}, "something downloads the model with the key"),
        ({"ngcApiKeyFrom": NGC}, {}, "names a Secret for it: unset one of them"),
        ({}, {"ngcApiKey": NGC_KEY}, f"{PROJECT}:ngcApiKey is set, and {PROJECT}:ngcApiKeyNeeded"),
        (
            {"registryServer": "mirror.example", "registryUsername": "r"},
            {"registryPassword": "pw"},
            f"{PROJECT}:ngcApiKeyNeeded is false with {PROJECT}:registryServer",
        ),
    ],
)
def test_no_key_is_refused_where_something_would_need_it(
    overrides: dict[str, Any], secrets: dict[str, str], expected: str
) -> None:
    message = refused(secrets=secrets, **(PREFILLED | overrides))
    assert expected in message
    assert NGC_KEY not in message


def test_no_key_and_no_download_is_accepted_without_any_secret() -> None:
    settings = parse(**PREFILLED)
    assert not settings.creates_ngc_secret


def test_a_registry_password_without_a_mirror_is_refused_as_unused() -> None:
    message = refused(secrets={"ngcApiKey": NGC_KEY, "registryPassword": "hunter2-pass"})

    assert f"{PROJECT}:registryPassword is set without {PROJECT}:registryServer" in message
    assert "hunter2-pass" not in message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("workerExtraEnv", '[{"name": "LICENSE_URL", "value": "http://lic.x"}]'),
        ("kubeContext", "site-ctx-7"),
    ],
)
def test_a_key_marked_secret_that_is_written_in_plain_text_is_refused(key: str, value: str) -> None:
    message = refused(secrets={"ngcApiKey": NGC_KEY, key: value})

    assert f"{PROJECT}:{key} is set as a secret, but the program writes it in plain text" in message
    assert f"`pulumi config set --plaintext {PROJECT}:{key} <value>`" in message
    assert value not in message
