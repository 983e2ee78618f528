"""Building the tools and assembling an engine from them (see the package docstring)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from testenv.engine import Engine
from testenv.engine.go import Builder, EngineError, elapsed, go_environment, go_version, say
from testenv.engine.pins import (
    ALL_TOOLS,
    KWOK_STAGES,
    KWOK_VERSION,
    LANGUAGE_EXEC,
    PROVIDER_BINARY,
    PROVIDER_MODULE,
    PROVIDER_MODULE_VERSION,
    PROVIDER_SDK_MODULE,
    PROVIDER_SDK_VERSION,
    PROVIDER_VERSION,
    PULUMI_VERSION,
    TOOLS,
    WRAPPERS,
    CrdSource,
    GoTool,
    engine_key,
    provider_key,
)


def _ldflags(version_vars: Sequence[str]) -> str:
    return " ".join(["-s", "-w", *(f"-X {var}" for var in version_vars)])


def build_tool(builder: Builder, tool: GoTool, dest: Path) -> None:
    wrapper = WRAPPERS / tool.wrapper
    builder.run(f"{tool.name} download", ["go", "mod", "download"], wrapper)
    builder.run(
        f"{tool.name} build",
        ["go", "build", "-ldflags", _ldflags(tool.version_vars), "-o", str(dest), tool.package],
        wrapper,
    )


def build_provider(builder: Builder, dest: Path, key: str) -> None:
    """The provider, from its module copied into the build cache (see the module docstring)."""
    listing = builder.run(
        "provider download",
        ["go", "mod", "download", "-json", f"{PROVIDER_MODULE}@{PROVIDER_MODULE_VERSION}"],
        builder.home,
    )
    source = Path(json.loads(listing)["Dir"])
    work = builder.home / "src" / f"pulumi-kubernetes-provider-{PROVIDER_VERSION}-{key}"
    if work.exists():
        _make_writable(work)
        shutil.rmtree(work)
    shutil.copytree(source, work)
    _make_writable(work)
    for prepare in (
        ["go", "mod", "edit", f"-dropreplace={PROVIDER_SDK_MODULE}"],
        ["go", "get", f"{PROVIDER_SDK_MODULE}@{PROVIDER_SDK_VERSION}"],
    ):
        builder.run("provider prepare", prepare, work)
    command = work / "cmd" / PROVIDER_BINARY
    builder.run(
        "provider generate", ["go", "generate", "."], command, {"VERSION": f"v{PROVIDER_VERSION}"}
    )
    version_var = f"{PROVIDER_MODULE}/pkg/version.Version=v{PROVIDER_VERSION}"
    builder.run(
        "provider build",
        ["go", "build", "-ldflags", _ldflags([version_var]), "-o", str(dest), "."],
        command,
    )


def _make_writable(folder: Path) -> None:
    # The module cache is read-only; a copy of it must be made writable to edit or delete it.
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)


# ---- assembling an engine ------------------------------------------------------------------


def build(
    home: Path, out: Callable[[str], None] = say, environ: Mapping[str, str] = os.environ
) -> Engine:
    """Build what is missing and assemble the engine; a warm call only hashes files."""
    version = go_version(environ)
    engine = Engine(home / f"engine-{engine_key(version)}")
    if engine.is_complete():
        out(f"engine: ready (cached) in {engine.root}")
        return engine
    started = time.monotonic()
    slots = home / "tools"
    missing = [t.name for t in TOOLS if not (slots / _slot(t, version) / ".complete").is_file()]
    if missing:
        out(
            f"engine: building {', '.join(missing)} from the Go module proxy into {home}: about "
            "25 min the first time on 2 cores (40-50 beside other work), seconds afterwards"
        )
    builder = Builder(home, go_environment(home, environ), out)
    built = {tool.name: _cached_tool(home, tool, version, builder) for tool in TOOLS}
    pkey = provider_key(version)
    built[PROVIDER_BINARY] = _cached_build(
        home,
        f"provider-{PROVIDER_VERSION}-{pkey}",
        PROVIDER_BINARY,
        out,
        functools.partial(build_provider, builder, key=pkey),
    )
    _assemble(engine, built, home / "go" / "mod", builder)
    out(f"engine: ready in {engine.root} ({elapsed(time.monotonic() - started)})")
    return engine


def build_tools(
    home: Path,
    names: Sequence[str],
    out: Callable[[str], None] = say,
    environ: Mapping[str, str] = os.environ,
) -> dict[str, Path]:
    """Only the named tools, each into its cached slot, without assembling an engine: a new tool
    can be built (and timed) while another build fills the other slots."""
    chosen = [tool for tool in ALL_TOOLS if tool.name in names]
    if unknown := sorted(set(names) - {tool.name for tool in chosen}):
        raise EngineError(f"engine: no pinned tool named {', '.join(unknown)}")
    version = go_version(environ)
    builder = Builder(home, go_environment(home, environ), out)
    return {tool.name: _cached_tool(home, tool, version, builder) for tool in chosen}


def pinned_crds(
    home: Path,
    source: CrdSource,
    out: Callable[[str], None] = say,
    environ: Mapping[str, str] = os.environ,
) -> list[Path]:
    """The CRD files of `source` (`pins.CRD_SOURCES`), downloaded into the module cache if they
    are not there yet: seconds, nothing is built."""
    if found := located_crds(home, source):
        return found
    builder = Builder(home, go_environment(home, environ), out)
    module = f"{source.module}@{source.version}"
    builder.run(
        f"{source.module.rpartition('/')[2]}-crds download", ["go", "mod", "download", module], home
    )
    if found := located_crds(home, source):
        return found
    raise EngineError(f"engine: {module} holds no {', '.join(source.files)}")


def located_crds(home: Path, source: CrdSource) -> list[Path]:
    """The CRD files of `source` in the module cache (no `go`: the real tier runs offline), or []."""
    folder = home / "go" / "mod" / f"{source.module}@{source.version}"
    paths = [folder / name for name in source.files]
    return paths if all(path.is_file() for path in paths) else []


def _slot(tool: GoTool, go: str) -> str:
    return f"{tool.name}-{tool.version}-{tool.key(go)}"


def _cached_tool(home: Path, tool: GoTool, go: str, builder: Builder) -> Path:
    make = functools.partial(build_tool, builder, tool)
    return _cached_build(home, _slot(tool, go), tool.name, builder.out, make)


def _cached_build(
    home: Path, slot: str, name: str, out: Callable[[str], None], make: Callable[[Path], None]
) -> Path:
    folder = home / "tools" / slot
    binary = folder / name
    if (folder / ".complete").is_file() and binary.is_file():
        out(f"engine: {name} (cached)")
        return binary
    out(f"engine: building {name} ...")
    started = time.monotonic()
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{name}.partial"
    make(partial)
    partial.replace(binary)
    (folder / ".complete").write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()))
    out(f"engine: built {name} in {elapsed(time.monotonic() - started)}")
    return binary


def _assemble(engine: Engine, built: Mapping[str, Path], modules: Path, builder: Builder) -> None:
    """One folder per engine: bin/ (the CLI finds its language host beside itself), the provider
    off PATH, kwok's Stages, and a PULUMI_HOME with the provider installed as a plugin."""
    if engine.root.exists():
        shutil.rmtree(engine.root)
    engine.bin.mkdir(parents=True)
    engine.provider.parent.mkdir()
    for name, binary in built.items():
        target = engine.provider if name == PROVIDER_BINARY else engine.bin / name
        os.link(binary, target)
    exec_script = modules / "github.com/pulumi/pulumi" / f"sdk/v3@v{PULUMI_VERSION}" / "python/cmd"
    shutil.copyfile(exec_script / LANGUAGE_EXEC, engine.bin / LANGUAGE_EXEC)
    (engine.bin / LANGUAGE_EXEC).chmod(0o755)
    stages = modules / f"sigs.k8s.io/kwok@v{KWOK_VERSION}" / "kustomize" / "stage"
    for stage, target in zip(KWOK_STAGES, engine.kwok_stages, strict=True):
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(stages / stage, target)
    builder.run(
        "provider plugin install",
        [
            str(engine.tool("pulumi")),
            "plugin",
            "install",
            "resource",
            "kubernetes",
            f"v{PROVIDER_VERSION}",
            "--file",
            str(engine.provider),
        ],
        engine.root,
        engine.environment(),
    )
    (engine.root / ".complete").write_text(json.dumps({"pulumi": PULUMI_VERSION}) + "\n")
