"""The DGD CRD as an input (testenv/crd.py): where it is found, what a missing one says, and the
warning for one that is not the tested version. The tested CRD is the one beside the clone
(../shared/reference/), as CI has it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from testenv import crd


def test_the_option_wins_then_the_variable_then_the_file_beside_the_clone(tmp_path: Path) -> None:
    given, named = tmp_path / "given.yaml", tmp_path / "named.yaml"
    given.write_text("x")
    named.write_text("x")
    assert crd.crd_path(given, {crd.ENV: str(named)}) == given
    assert crd.crd_path(None, {crd.ENV: str(named)}) == named
    assert crd.crd_path(None, {}) == crd.DEFAULT


@pytest.mark.parametrize("where", ["option", "variable"])
def test_a_missing_crd_says_where_it_looked_and_how_to_get_one(tmp_path: Path, where: str) -> None:
    absent = tmp_path / "absent.yaml"
    with pytest.raises(crd.CrdMissing) as refused:
        if where == "option":
            crd.crd_path(absent, {})
        else:
            crd.crd_path(None, {crd.ENV: str(absent)})
    message = str(refused.value)
    assert (
        str(absent) in message and ("--crd" if where == "option" else "$COSMOS3_DGD_CRD") in message
    )
    assert "kubectl get crd dynamographdeployments.nvidia.com -o yaml > dgd-crd.yaml" in message
    assert crd.TESTED in message


def test_the_command_prints_the_path_or_fails_in_a_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert crd.main([str(tmp_path / "absent.yaml")]) == 2
    assert capsys.readouterr().err.startswith("error: no DynamoGraphDeployment CRD at ")
    assert crd.main([]) == 0 and capsys.readouterr().out.strip() == str(crd.DEFAULT)


def test_the_tested_crd_says_nothing_and_another_is_used_with_a_warning_naming_both(
    tmp_path: Path,
) -> None:
    tested = crd.load_crd(crd.DEFAULT)
    assert crd.schema_note(tested, crd.DEFAULT) is None
    newer = copy.deepcopy(tested)
    (served,) = [v for v in newer["spec"]["versions"] if v["name"] == "v1beta1"]
    served["schema"]["openAPIV3Schema"]["properties"]["spec"]["description"] = "a newer operator"
    note = crd.schema_note(newer, tmp_path / "newer.yaml")
    assert note is not None and note.startswith("warning: the DynamoGraphDeployment CRD at ")
    assert (
        crd.TESTED in note and crd.TESTED_SCHEMA_SHA256[:12] in note and note.endswith("using it")
    )


def test_what_kubectl_prints_is_loaded_as_the_crd_to_install(tmp_path: Path) -> None:
    document = yaml.load(crd.DEFAULT.read_text().split("---", 1)[1], Loader=yaml.CSafeLoader)
    document["status"] = {"acceptedNames": {"kind": "DynamoGraphDeployment"}}
    document["metadata"]["resourceVersion"] = "42"
    listed = tmp_path / "list.yaml"
    listed.write_text(yaml.dump({"kind": "List", "items": [document]}, Dumper=yaml.CSafeDumper))
    loaded = crd.load_crd(listed)
    assert set(loaded) == {"apiVersion", "kind", "metadata", "spec"}
    assert crd.schema_note(loaded, listed) is None, "the same version, whatever kubectl adds"
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({"kind": "CustomResourceDefinition", "spec": {"group": "x"}}))
    with pytest.raises(crd.CrdError, match="not DynamoGraphDeployment in nvidia.com"):
        crd.load_crd(other)


def another_crd() -> dict[str, object]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "dynamocomponentdeployments.nvidia.com"},
        "spec": {"group": "nvidia.com", "names": {"kind": "DynamoComponentDeployment"}},
    }


@pytest.mark.parametrize("shape", ["list", "documents"])
def test_the_graphs_crd_is_found_after_others_in_one_file(tmp_path: Path, shape: str) -> None:
    """What `kubectl get crd -o yaml` (a List of every CRD) or `kustomize build` print."""
    document = yaml.load(crd.DEFAULT.read_text().split("---", 1)[1], Loader=yaml.CSafeLoader)
    path = tmp_path / "crds.yaml"
    if shape == "list":
        path.write_text(yaml.safe_dump({"kind": "List", "items": [another_crd(), document]}))
    else:
        path.write_text(yaml.safe_dump_all([another_crd(), document]))

    assert crd.load_crd(path)["metadata"]["name"] == crd.CRD_NAME


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda served: served.pop("schema"), "v1beta1 has no openAPIV3Schema"),
        (lambda served: served.update(schema="a string"), "v1beta1 has no openAPIV3Schema"),
    ],
)
def test_a_misshapen_crd_is_named_never_a_traceback(
    tmp_path: Path, change: Callable[[dict[str, Any]], object], named: str
) -> None:
    document = yaml.load(crd.DEFAULT.read_text().split("---", 1)[1], Loader=yaml.CSafeLoader)
    (served,) = [v for v in document["spec"]["versions"] if v["name"] == "v1beta1"]
    change(served)
    path = tmp_path / "crd.yaml"
    path.write_text(yaml.safe_dump(document))

    with pytest.raises(crd.CrdError, match=named):
        crd.load_crd(path)


@pytest.mark.parametrize("spec", [["a list"], {"group": "nvidia.com", "versions": ["v1beta1"]}])
def test_a_crd_of_the_wrong_shape_is_refused_in_a_line(tmp_path: Path, spec: object) -> None:
    path = tmp_path / "crd.yaml"
    path.write_text(yaml.safe_dump({"kind": "CustomResourceDefinition", "spec": spec}))

    with pytest.raises(crd.CrdError, match=str(path)):
        crd.load_crd(path)
