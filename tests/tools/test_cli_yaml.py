"""Stack and project files are read as the Pulumi CLI reads them (`tools.stack_files`): YAML 1.2's
core schema, a scalar config value as its text, and a broken file refused by name, never a
traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common import REPO_ROOT
from common.input_files import InputFileError
from tests.tally import record
from tools import stack_files
from tools.stack_files import StackFileError, config_values, project_config

FAMILY = "stack files (YAML as the CLI reads it)"
KEY = "cosmos3-nano-reasoner:namespace"

# Each scalar as written, and what the CLI hands the program: its text (YAML 1.1 would turn
# `on` into True, `0o17` into a string, `017` into 15, `2026-01-02` into a date).
SCALARS = [
    ("on", "on"),
    ("off", "off"),
    ("yes", "yes"),
    ("no", "no"),
    ("y", "y"),
    ("n", "n"),
    ("On", "On"),
    ("true", "true"),
    ("True", "True"),
    ("false", "false"),
    ("017", "017"),
    ("0o17", "0o17"),
    ("0x1F", "0x1F"),
    ("1_000", "1_000"),
    ("1e308", "1e308"),
    ("2026-01-02", "2026-01-02"),
    ("1:20", "1:20"),
    (".inf", ".inf"),
    ("~", ""),
    ("null", ""),
    ("", ""),
    ('"on"', "on"),
    ("'yes'", "yes"),
    ("cosmos3-dev", "cosmos3-dev"),
    ('"kube-system"', "kube-system"),
    ("8", "8"),
    ("-1", "-1"),
]


@pytest.mark.parametrize(("written", "text"), SCALARS)
def test_a_scalar_reaches_the_program_as_written(tmp_path: Path, written: str, text: str) -> None:
    path = tmp_path / "Pulumi.s.yaml"
    path.write_text(f"config:\n  {KEY}: {written}\n")
    record(FAMILY)
    assert config_values(path) == {KEY: text}


@pytest.mark.parametrize(
    ("written", "value"),
    [
        (
            "[on, off, yes, 017, 0o17, 0x1F, 2026-01-02, ~]",
            ["on", "off", "yes", 17, 15, 31, "2026-01-02", None],
        ),
        ("[true, False, 1.5, .nan]", [True, False, 1.5, "nan"]),
        ("{a: on, b: [no]}", {"a": "on", "b": ["no"]}),
    ],
)
def test_lists_and_maps_are_typed_by_yaml_1_2(tmp_path: Path, written: str, value: object) -> None:
    path = tmp_path / "Pulumi.s.yaml"
    path.write_text(f"config:\n  k: {written}\n")
    got = config_values(path)["k"]
    record(FAMILY)
    if value == [True, False, 1.5, "nan"]:
        assert got[:3] == [True, False, 1.5] and got[3] != got[3]  # NaN
    else:
        assert got == value


BROKEN = [
    (b"config:\n  a: 1\n  a: 2\n", "a is set twice"),
    (b"config: [1, 2]\n", "`config:` must be a mapping"),
    (b"- a\n- b\n", "must be a YAML mapping"),
    (b"config:\n  a: [unclosed\n", "is not valid YAML (line"),
    (b"config:\n\ta: 1\n", "is not valid YAML"),
    (b"\xff\xfe\x00binary", "is not UTF-8 text"),
    (b"config:\n  a: \x00\n", "holds NUL bytes"),
    (b"config:\n  ? [a, b]\n  : 1\n", "key is a text"),
    (b"config: &x\n  a: *x\n", "is not valid YAML"),
    (b"a: " + b"[" * 10_000 + b"]" * 10_000, "nests deeper than 100 levels"),
]


@pytest.mark.parametrize(("content", "message"), BROKEN)
def test_a_broken_stack_file_is_refused_naming_it(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "Pulumi.s.yaml"
    path.write_bytes(content)
    record(FAMILY)
    with pytest.raises((StackFileError, InputFileError)) as refused:
        config_values(path)
    assert str(path) in str(refused.value) and message in str(refused.value)


def test_an_empty_stack_file_or_config_holds_no_config(tmp_path: Path) -> None:
    for content in ("", "config:\n", "# only a comment\n", "config: ~\n", "encryptionsalt: x\n"):
        path = tmp_path / "Pulumi.s.yaml"
        path.write_text(content)
        record(FAMILY)
        assert config_values(path) == {}


def test_secure_values_stay_as_the_cli_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.s.yaml"
    path.write_text("config:\n  p:ngcApiKey:\n    secure: v1:abc\n")
    assert config_values(path) == {"p:ngcApiKey": {"secure": "v1:abc"}}


def test_the_project_file_keeps_typed_defaults() -> None:
    declared = project_config(REPO_ROOT / "Pulumi.yaml")
    assert declared["createNamespace"]["default"] is True
    assert declared["workerReplicas"]["default"] == 8


stack_texts = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(str.encode),
    st.lists(
        st.sampled_from(
            [
                "config:",
                "  a: 1",
                "  - x",
                "a: [",
                "? b",
                "  c: on",
                "\t",
                "&a",
                "*a",
                "!!binary x",
                "%YAML 1.1",
                "---",
                "...",
            ]
        ),
        max_size=8,
    ).map(lambda lines: "\n".join(lines).encode()),
)


@pytest.mark.slow
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=stack_texts)
def test_any_stack_file_reads_or_is_refused_by_name(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "Pulumi.s.yaml"
    path.write_bytes(content)
    record(FAMILY)
    try:
        config = config_values(path)
    except (StackFileError, InputFileError) as refused:
        assert str(path) in str(refused)
    else:
        assert isinstance(config, dict) and all(isinstance(key, str) for key in config)


def test_the_render_refuses_a_broken_stack_file_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tools import render

    (tmp_path / "Pulumi.yaml").write_bytes((REPO_ROOT / "Pulumi.yaml").read_bytes())
    (tmp_path / "Pulumi.dev.yaml").write_text(
        "config:\n  cosmos3-nano-reasoner:namespace: on\n  x: [\n"
    )
    monkeypatch.setattr(stack_files, "REPO_ROOT", tmp_path)

    assert render.main(["--stack", "dev", "--example-site", "--out", str(tmp_path / "r")]) == 2
    record(FAMILY)
    assert f"{tmp_path / 'Pulumi.dev.yaml'} is not valid YAML (line 4" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_namespace_on_is_the_text_on_and_renders_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "Pulumi.yaml").write_bytes((REPO_ROOT / "Pulumi.yaml").read_bytes())
    (tmp_path / "Pulumi.dev.yaml").write_text("config:\n  cosmos3-nano-reasoner:namespace: on\n")
    monkeypatch.setattr(stack_files, "REPO_ROOT", tmp_path)

    assert stack_files.cli_config("dev")[KEY] == "on"
