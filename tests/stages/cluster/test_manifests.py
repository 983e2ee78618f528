"""The cluster stages' Kubernetes objects: names, pins, hardening, contents.

Objects are built from the outputs the real program exports for each shipped profile stack. That
the API server takes them (strict field validation) is the real tier's to show, the one oracle of
manifests: tests/real/test_server_validation.py.
"""

from __future__ import annotations

import ast
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from common import REPO_ROOT
from components.contract import StackOutputs
from components.routing import SESSION_HEADER, RoutingProfile
from policy.rules import image_is_pinned, looks_secret
from stages.archive import find_secret
from stages.cluster import manifests as cluster_jobs
from stages.cluster.manifests import (
    IMAGEIO_FFMPEG,
    PERF_JOB,
    SMOKE_JOB,
    JobSettings,
    check_pip_index_url,
    has_credentials,
    perf_manifests,
    smoke_manifests,
)
from stages.cluster.run import (
    ClusterOptions,
    check_cluster_workload,
    perf_objects,
)
from stages.core.pod_plans import (
    AIPERF_VERSION,
    DISTINCT_VIDEOS,
    PodPlace,
    aiperf_environment,
    aiperf_profile_args,
    distinct_video_args,
    smoke_pod_config,
    smoke_request_body,
)
from stages.core.workload import RECIPE_WORKLOAD, VideoUrl, dataset_rows
from stages.errors import UsageError
from tests.stages.cluster.fakes import cluster_outputs, pod_files
from tests.stages.cluster.support import MIRROR, PLAN

SETTINGS = JobSettings(run_id="20261130T120000Z-abc123", plan=PLAN)
MATCHING_SMALL = RECIPE_WORKLOAD.model_copy(
    update={"videos": 2, "questions": 2, "concurrencies": (1,)}
)
Manifest = dict[str, Any]


@pytest.fixture(params=list(RoutingProfile), ids=lambda p: p.value)
def outputs(request: pytest.FixtureRequest) -> StackOutputs:
    return cluster_outputs(request.param)


def all_manifests(outputs: StackOutputs) -> list[Manifest]:
    return smoke_manifests(outputs, SETTINGS) + perf_manifests(outputs, RECIPE_WORKLOAD, SETTINGS)


def by_kind(manifests: list[Manifest], kind: str) -> Manifest:
    return next(m for m in manifests if m["kind"] == kind)


def perf_plan(outputs: StackOutputs) -> dict[str, Any]:
    config_map = by_kind(perf_manifests(outputs, RECIPE_WORKLOAD, SETTINGS), "ConfigMap")
    plan: dict[str, Any] = json.loads(gzip.decompress(pod_files(config_map)["perf-plan.json.gz"]))
    return plan


def containers(manifests: list[Manifest]) -> list[Manifest]:
    jobs = [m for m in manifests if m["kind"] == "Job"]
    return [c for job in jobs for c in job["spec"]["template"]["spec"]["containers"]]


# --- names ---------------------------------------------------------------------------


def test_names_are_the_recipes_and_live_in_the_stacks_namespace(outputs: StackOutputs) -> None:
    names = [(m["kind"], m["metadata"]["name"]) for m in all_manifests(outputs)]

    assert names == [
        ("ConfigMap", "cosmos3-nano-reasoner-smoke"),
        ("Service", "cosmos3-nano-reasoner-smoke-media"),
        ("Job", "cosmos3-nano-reasoner-smoke"),
        ("ConfigMap", "cosmos3-nano-reasoner-perf"),
        ("Service", "cosmos3-nano-reasoner-perf-media"),
        ("Job", "cosmos3-nano-reasoner-perf"),
    ]
    assert {m["metadata"]["namespace"] for m in all_manifests(outputs)} == {outputs.namespace}


def test_the_media_service_selects_exactly_this_runs_pod(outputs: StackOutputs) -> None:
    for manifests in (
        smoke_manifests(outputs, SETTINGS),
        perf_manifests(outputs, RECIPE_WORKLOAD, SETTINGS),
    ):
        service, job = by_kind(manifests, "Service"), by_kind(manifests, "Job")
        pod_labels = job["spec"]["template"]["metadata"]["labels"]

        assert service["spec"]["selector"].items() <= pod_labels.items()
        assert service["spec"]["selector"][cluster_jobs.RUN_ID_LABEL] == SETTINGS.run_id
        (port,) = service["spec"]["ports"]
        assert (port["port"], port["targetPort"]) == (8090, "media")
        (container,) = job["spec"]["template"]["spec"]["containers"]
        assert container["ports"] == [{"name": "media", "containerPort": 8090, "protocol": "TCP"}]


# --- pins, resources, hardening ------------------------------------------------------------------


def test_images_are_pinned_to_a_full_patch_tag_and_pulled_if_not_present(
    outputs: StackOutputs,
) -> None:
    for container in containers(all_manifests(outputs)):
        assert image_is_pinned(container["image"])
        assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-bookworm", container["image"])
        assert container["imagePullPolicy"] == "IfNotPresent"


def test_a_digest_can_replace_the_tag() -> None:
    digest = "python:3.11.7-slim-bookworm@sha256:" + "a" * 64
    outputs = cluster_outputs(RoutingProfile.ROUND_ROBIN)
    job = by_kind(
        smoke_manifests(outputs, JobSettings(run_id="r1", plan=PLAN, image=digest)), "Job"
    )

    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == digest


def test_the_jobs_are_bounded_and_run_once(outputs: StackOutputs) -> None:
    for job in (m for m in all_manifests(outputs) if m["kind"] == "Job"):
        spec = job["spec"]
        assert spec["backoffLimit"] == 0
        assert 0 < spec["activeDeadlineSeconds"] <= 24 * 3600
        assert spec["template"]["spec"]["restartPolicy"] == "Never"


def test_every_container_sets_requests_and_limits(outputs: StackOutputs) -> None:
    for container in containers(all_manifests(outputs)):
        for side in ("requests", "limits"):
            assert {"cpu", "memory", "ephemeral-storage"} <= set(container["resources"][side])


def test_pods_run_unprivileged_on_a_read_only_root(outputs: StackOutputs) -> None:
    for job in (m for m in all_manifests(outputs) if m["kind"] == "Job"):
        pod = job["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }
        scratch = {v["name"]: v for v in pod["volumes"]}["scratch"]
        assert "emptyDir" in scratch
        assert {"name": "scratch", "mountPath": "/tmp"} in container["volumeMounts"]


def test_perf_prefers_the_frontends_node(outputs: StackOutputs) -> None:
    job = by_kind(perf_manifests(outputs, RECIPE_WORKLOAD, SETTINGS), "Job")
    affinity = job["spec"]["template"]["spec"]["affinity"]["podAffinity"]
    (term,) = affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    expressions = {
        e["key"]: e["values"] for e in term["podAffinityTerm"]["labelSelector"]["matchExpressions"]
    }

    assert expressions == {
        "nvidia.com/dynamo-graph-deployment-name": [outputs.graph_name],
        "nvidia.com/dynamo-component-type": ["frontend"],
    }


@pytest.mark.slow
def test_no_secret_anywhere(outputs: StackOutputs) -> None:
    manifests = all_manifests(outputs)
    text = cluster_jobs.to_yaml(manifests)

    assert find_secret(text.encode()) is None
    assert find_secret(gzip.decompress(pod_files(manifests[3])["perf-plan.json.gz"])) is None
    for container in containers(manifests):
        assert not [e["name"] for e in container["env"] if looks_secret(e["name"])]
        assert all("valueFrom" not in e for e in container["env"])
    for config_map in (m for m in manifests if m["kind"] == "ConfigMap"):
        keys = [*config_map.get("data", {}), *config_map.get("binaryData", {})]
        assert not [key for key in keys if looks_secret(key)]
    assert "Secret" not in {m["kind"] for m in manifests}


# --- what the pods run ----------------------------------------------------------------------------


def test_the_smoke_pod_asks_the_lab_request_about_the_media_services_video(
    outputs: StackOutputs,
) -> None:
    config_map = by_kind(smoke_manifests(outputs, SETTINGS), "ConfigMap")
    config = json.loads(pod_files(config_map)["smoke-config.json"])
    url = f"http://{SMOKE_JOB}-media.{outputs.namespace}.svc.cluster.local:8090/smoke.mp4"

    assert config["video_url"] == url
    assert config["request_body"] == smoke_request_body(outputs.served_model, url)
    assert (config["models_url"], config["frontend_url"]) == (
        outputs.models_url,
        outputs.frontend_url,
    )
    assert config["ffmpeg_args"][-1] == "/tmp/work/media/smoke.mp4"
    assert (
        "libx264" in config["ffmpeg_args"]
        and "testsrc=duration=30:size=640x360:rate=2" in config["ffmpeg_args"]
    )


def test_perf_runs_the_builders_aiperf_arguments_per_level(outputs: StackOutputs) -> None:
    plan = perf_plan(outputs)
    media = f"http://{PERF_JOB}-media.{outputs.namespace}.svc.cluster.local:8090"

    assert [level["concurrency"] for level in plan["levels"]] == [1, 2, 4, 8, 16]
    for level in plan["levels"]:
        c = level["concurrency"]
        expected = aiperf_profile_args(
            outputs,
            RECIPE_WORKLOAD,
            c,
            Path(f"/tmp/work/c{c}/dataset.jsonl"),
            Path(f"/tmp/work/c{c}/aiperf"),
            "builtin",
            "never",
        )
        assert level["argv"] == expected
        assert level["dataset"] == dataset_rows(RECIPE_WORKLOAD, c, VideoUrl(media))
        assert level["requests"] == 4000
    assert plan["aiperf_env"] == aiperf_environment()
    assert plan["tokenizer_check"][0] == "/tmp/venv/bin/python"


def test_the_session_header_is_sent_only_with_affinity(outputs: StackOutputs) -> None:
    argv = perf_plan(outputs)["levels"][0]["argv"]
    affinity = outputs.profile is RoutingProfile.SESSION_AFFINITY

    assert ("--session-header" in argv) is affinity
    if affinity:
        assert argv[argv.index("--session-header") + 1] == SESSION_HEADER


def test_every_video_of_the_sweep_is_distinct_h264_at_2_fps(outputs: StackOutputs) -> None:
    videos = perf_plan(outputs)["videos"]
    filters = [v["ffmpeg_args"][v["ffmpeg_args"].index("-vf") + 1] for v in videos]

    assert len(videos) == 200 * 5 == len(set(filters)) == len({v["name"] for v in videos})
    assert all("libx264" in v["ffmpeg_args"] for v in videos)
    assert all("testsrc=duration=30:size=640x360:rate=2" in v["ffmpeg_args"] for v in videos)


def test_too_many_videos_are_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="distinct synthetic videos"):
        distinct_video_args("/tmp/x.mp4", 100_000)


def test_the_recipe_sweep_fits_a_config_map(outputs: StackOutputs) -> None:
    config_map = by_kind(perf_manifests(outputs, RECIPE_WORKLOAD, SETTINGS), "ConfigMap")
    size = sum(len(v) for v in pod_files(config_map).values())

    assert size < cluster_jobs.CONFIG_MAP_LIMIT_BYTES


@pytest.mark.slow
def test_a_workload_too_large_for_a_config_map_is_bad_usage() -> None:
    # Under the request bound of `check_cluster_workload`, but random pauses compress badly.
    huge = RECIPE_WORKLOAD.model_copy(
        update={"videos": 500, "questions": 80, "turn_jitter_ms": 60_000}
    )

    with pytest.raises(UsageError, match="ConfigMap would hold .* reduce the workload") as refused:
        perf_manifests(cluster_outputs(RoutingProfile.ROUND_ROBIN), huge, SETTINGS)
    assert refused.value.exit_status == 2


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ({"videos": 555}, "needs 2775 distinct videos .* at most 2774: reduce --videos"),
        ({"videos": 10**12}, "distinct videos"),
        ({"videos": 2774, "concurrencies": (1, 2)}, "needs 5548 distinct videos"),
        ({"questions": 10**9}, "cannot fit the perf ConfigMap"),
        ({"videos": 500, "questions": 161}, "402500 requests .* cannot fit the perf ConfigMap"),
    ],
)
def test_a_sweep_the_cluster_cannot_run_is_refused_before_it_is_built(
    sizes: dict[str, Any], message: str
) -> None:
    workload = RECIPE_WORKLOAD.model_copy(update=sizes)

    with pytest.raises(UsageError, match=message):
        perf_objects(cluster_outputs(RoutingProfile.ROUND_ROBIN), workload, ClusterOptions(), 60)


def test_the_video_limit_is_the_generators() -> None:
    limit = DISTINCT_VIDEOS

    assert distinct_video_args("/tmp/x.mp4", limit - 1)
    with pytest.raises(ValueError, match=f"at most {limit} distinct"):
        distinct_video_args("/tmp/x.mp4", limit)
    check_cluster_workload(
        RECIPE_WORKLOAD.model_copy(update={"videos": limit, "concurrencies": (1,)})
    )


# --- a pip index URL with credentials -------------------------------------------------------------
# MIRROR: tests/stages/cluster/support.py (tests/real/test_server_validation.py uses it too).


def pip_settings(url: str) -> JobSettings:
    return JobSettings(run_id="r1", plan=PLAN, pip_index_url=url)


@pytest.mark.parametrize("build", ["smoke", "perf"])
def test_a_pip_url_with_credentials_reaches_the_pod_through_a_secret(
    outputs: StackOutputs, build: str
) -> None:
    settings = pip_settings(MIRROR)
    if build == "smoke":
        manifests = smoke_manifests(outputs, settings)
    else:
        manifests = perf_manifests(outputs, MATCHING_SMALL, settings)
    job = manifests[-1]["metadata"]["name"]

    assert [m["kind"] for m in manifests] == ["Secret", "ConfigMap", "Service", "Job"]
    secret = manifests[0]
    assert secret["metadata"]["name"] == f"{job}-pip"
    assert secret["metadata"]["namespace"] == outputs.namespace
    assert secret["stringData"] == {"PIP_INDEX_URL": MIRROR}
    assert set(secret) <= {"apiVersion", "kind", "metadata", "type", "data", "stringData"}
    (env,) = [e for e in containers(manifests)[0]["env"] if e["name"] == "PIP_INDEX_URL"]
    assert env == {
        "name": "PIP_INDEX_URL",
        "valueFrom": {"secretKeyRef": {"name": f"{job}-pip", "key": "PIP_INDEX_URL"}},
    }
    assert "pw-0123456789" not in json.dumps(manifests[1:])


def test_the_yaml_of_a_dry_run_masks_every_secret_value(outputs: StackOutputs) -> None:
    manifests = smoke_manifests(outputs, pip_settings(MIRROR))

    text = cluster_jobs.to_yaml(manifests)

    assert "pw-0123456789" not in text and "ci-bot" not in text
    assert yaml.safe_load_all(text).__next__()["stringData"] == {"PIP_INDEX_URL": "<secret>"}
    assert find_secret(text.encode()) is None
    assert manifests[0]["stringData"]["PIP_INDEX_URL"] == MIRROR  # what is sent is unchanged


@pytest.mark.parametrize(
    "url", ["https://pypi.example.com/simple", "http://10.0.0.5:3141/root/pypi"]
)
def test_a_pip_url_without_credentials_stays_plain_env(outputs: StackOutputs, url: str) -> None:
    manifests = smoke_manifests(outputs, pip_settings(url))

    assert "Secret" not in {m["kind"] for m in manifests}
    assert {"name": "PIP_INDEX_URL", "value": url} in containers(manifests)[0]["env"]


@pytest.mark.parametrize(
    ("url", "credentials"),
    [
        ("https://user:pass@mirror/simple", True),
        ("https://token@mirror/simple", True),  # a token as the user is a secret too
        ("https://mirror/simple", False),
        ("https://mirror/simple?x=a@b", False),
    ],
)
def test_which_pip_urls_carry_credentials(url: str, credentials: bool) -> None:
    assert has_credentials(url) is credentials


@pytest.mark.parametrize(
    "url",
    [
        "ftp://u:hunter2@mirror/x",
        "u:hunter2@mirror/x",
        "https://u:hunter2@",
        "https://u:hunter2@[::1",
        "https://u:hunter2@a b/",
        "https://u:hunter2@mirror/\n",
    ],
)
def test_a_pip_url_must_be_http_with_a_host(url: str) -> None:
    with pytest.raises(ValueError) as refused:
        check_pip_index_url(url)
    assert "hunter2" not in str(refused.value)


def test_the_pod_installs_the_labs_aiperf_lock_and_the_projects_ffmpeg_pin() -> None:
    outputs = cluster_outputs(RoutingProfile.ROUND_ROBIN)
    manifests = perf_manifests(outputs, RECIPE_WORKLOAD, SETTINGS)
    lock = pod_files(by_kind(manifests, "ConfigMap"))["requirements-aiperf.lock"].decode()
    script = containers(manifests)[0]["args"][0]

    assert f"aiperf=={AIPERF_VERSION}" in lock.splitlines()
    assert lock == (REPO_ROOT / "stages" / "requirements-aiperf.lock").read_text()
    assert "--no-deps -r /config/requirements-aiperf.lock" in script
    assert IMAGEIO_FFMPEG in (REPO_ROOT / "requirements-stages.lock").read_text().splitlines()
    assert "exec python -m stages.incluster.perf_pod /config/perf-plan.json.gz" in script


def test_the_volume_lays_out_every_config_map_key_as_the_program_expects(
    outputs: StackOutputs,
) -> None:
    for manifests in (
        smoke_manifests(outputs, SETTINGS),
        perf_manifests(outputs, RECIPE_WORKLOAD, SETTINGS),
    ):
        config_map, job = by_kind(manifests, "ConfigMap"), by_kind(manifests, "Job")
        volume = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}["program"]
        keys = {*config_map.get("data", {}), *config_map.get("binaryData", {})}

        assert {item["key"] for item in volume["configMap"]["items"]} == keys
        assert volume["configMap"]["name"] == config_map["metadata"]["name"]
        program = pod_files(config_map)
        entry = job["metadata"]["name"].rsplit("-", 1)[1] + "_pod.py"
        for name in ("pod_common.py", "processes.py", entry):
            path = f"stages/incluster/{name}"
            assert program[path] == (REPO_ROOT / "stages" / "incluster" / name).read_bytes()


def top_level_imports(source: str) -> set[str]:
    """The top-level packages a module imports (absolute imports only)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_the_pod_program_needs_only_the_standard_library() -> None:
    for path in (REPO_ROOT / "stages" / "incluster").glob("*.py"):
        imported = top_level_imports(path.read_text())

        assert imported - set(sys.stdlib_module_names) <= {"stages"}, path.name


def test_the_dry_run_yaml_reads_back_as_the_same_objects(outputs: StackOutputs) -> None:
    manifests = all_manifests(outputs)

    assert list(yaml.safe_load_all(cluster_jobs.to_yaml(manifests))) == manifests


def test_a_run_id_must_be_a_label_value() -> None:
    assert cluster_jobs.check_run_id("20261130T120000Z-abc123") == "20261130T120000Z-abc123"
    with pytest.raises(ValueError, match="label value"):
        cluster_jobs.check_run_id("run/1")
    with pytest.raises(UsageError, match="--run-id: run id 'run/1'"):
        ClusterOptions(run_id="run/1").job_settings(60, 60)


def test_a_loopback_place_keeps_the_pod_program_on_loopback() -> None:
    place = PodPlace(work_dir="/w", listen_host="127.0.0.1", listen_port=1234, ffmpeg="/f")
    config = smoke_pod_config(
        cluster_outputs(RoutingProfile.ROUND_ROBIN), "http://127.0.0.1:1234", place, 5
    )

    assert (config["listen_host"], config["listen_port"], config["ffmpeg"]) == (
        "127.0.0.1",
        1234,
        "/f",
    )
    assert config["ffmpeg_args"][-1] == "/w/media/smoke.mp4"
