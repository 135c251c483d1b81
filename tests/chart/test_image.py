"""The image the chart runs (Dockerfile and .dockerignore), checked
statically: no container engine runs where these tests do, so nothing here
builds it. The Dockerfile is read by BuildKit's own parser (the `dockerfile`
package wraps it), then held to what the chart and the release need and to
hadolint's basic rules."""

from __future__ import annotations

import pathlib
import re
import shlex
import shutil
import subprocess
import tomllib
from typing import Any

import dockerfile
import helm_python as helm
import pytest

from conftest import ROOT, SCENARIOS, SIDECAR_BINARY, objects, render

WORKSPACE = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]
# The builder's Debian release and the distroless base built from the same
# one: the binary links that release's OpenSSL.
DEBIAN = {"bookworm": "debian12", "trixie": "debian13"}


def parse() -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The global ARGs and the stages: {image, name, cmds}."""
    global_args: dict[str, str] = {}
    stages: list[dict[str, Any]] = []
    for cmd in dockerfile.parse_file(str(ROOT / "Dockerfile")):
        if cmd.cmd == "FROM":
            name = cmd.value[2] if len(cmd.value) == 3 and cmd.value[1].upper() == "AS" else None
            stages.append({"image": cmd.value[0], "name": name, "cmds": []})
        elif not stages:
            assert cmd.cmd == "ARG", f"line {cmd.start_line}: only ARG may precede the first FROM"
            key, _, default = cmd.value[0].partition("=")
            global_args[key] = default
        else:
            stages[-1]["cmds"].append(cmd)
    return global_args, stages


def only(stage: dict[str, Any], cmd: str) -> Any:
    (found,) = [c for c in stage["cmds"] if c.cmd == cmd]
    return found


def labels(stage: dict[str, Any]) -> dict[str, str]:
    out = {}
    for c in stage["cmds"]:
        if c.cmd == "LABEL":
            for key, value in zip(c.value[::2], c.value[1::2]):
                (out[key],) = shlex.split(value)
    return out


def test_a_build_stage_then_a_minimal_runtime_of_the_same_debian() -> None:
    args, stages = parse()
    assert len(stages) >= 2
    build, runtime = stages[0], stages[-1]
    assert build["name"], "the build stage is named, for COPY --from"
    image = build["image"].replace("${RUST_VERSION}", args["RUST_VERSION"])
    m = re.fullmatch(r"docker\.io/library/rust:([0-9.]+)-(\w+)", image)
    assert m, image
    assert re.fullmatch(r"gcr\.io/distroless/cc-(debian\d+):nonroot", runtime["image"]), runtime["image"]
    assert runtime["image"].startswith(f"gcr.io/distroless/cc-{DEBIAN[m.group(2)]}:")


def test_the_builder_has_the_workspace_toolchain() -> None:
    args, _ = parse()

    def version(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.split("."))

    assert version(args["RUST_VERSION"]) >= version(WORKSPACE["package"]["rust-version"])


def test_the_image_holds_what_the_release_build_script_builds() -> None:
    _, stages = parse()
    build, runtime = stages[0], stages[-1]
    run = only(build, "RUN")
    argv = shlex.split(run.value[0])
    # The release's build step, with its defaults (release profile, host target).
    assert argv[0] == "scripts/build-release"
    assert argv[1:3] == ["--version", "${VERSION}"], argv
    out_dir = argv[3]
    assert len(argv) == 4, argv
    assert [c.value[0] for c in build["cmds"] if c.cmd == "ARG"] == ["VERSION"]

    copies = [c for c in runtime["cmds"] if c.cmd == "COPY" and c.flags == (f"--from={build['name']}",)]
    assert [c.value for c in copies] == [(f"{out_dir}/reverser-sidecar", "/usr/local/bin/reverser-sidecar")]
    entrypoint = only(runtime, "ENTRYPOINT")
    assert entrypoint.json and entrypoint.value == ("/usr/local/bin/reverser-sidecar",)
    # The chart and the injector give the subcommand as args.
    assert not [c for c in runtime["cmds"] if c.cmd == "CMD"]


def test_it_runs_as_the_charts_numeric_non_root_user(chart: helm.Chart) -> None:
    _, stages = parse()
    user = [c for c in stages[-1]["cmds"] if c.cmd == "USER"][-1].value[0]
    m = re.fullmatch(r"(\d+):(\d+)", user)
    assert m, f"USER {user} is not numeric uid:gid: the kubelet cannot verify runAsNonRoot"
    uid = int(m.group(1))
    assert uid != 0
    pods = [o["spec"]["template"]["spec"] for o in objects(render(chart, {})) if o["kind"] == "Deployment"]
    assert pods and {p["securityContext"]["runAsUser"] for p in pods} == {uid}


def test_it_has_the_oci_labels() -> None:
    _, stages = parse()
    got = labels(stages[-1])
    assert got["org.opencontainers.image.version"] == "${VERSION}"
    assert got["org.opencontainers.image.licenses"] == WORKSPACE["package"]["license"]
    assert got["org.opencontainers.image.source"].startswith("https://")
    assert got["org.opencontainers.image.title"] == "reverser-sidecar"


def test_hadolint_basics() -> None:
    text = (ROOT / "Dockerfile").read_text()
    _, stages = parse()
    names = set()
    problems = []
    # RUN --mount needs the BuildKit frontend named here.
    if not text.startswith("# syntax=docker/dockerfile:1\n"):
        problems.append("no `# syntax=docker/dockerfile:1` directive")
    for i, stage in enumerate(stages):
        image = stage["image"]
        if image not in names:
            if ":" not in image.rsplit("/", 1)[-1] and "@sha256:" not in image:
                problems.append(f"DL3006 {image}: no tag")
            if image.endswith(":latest"):
                problems.append(f"DL3007 {image}: latest")
        for c in stage["cmds"]:
            where = f"line {c.start_line}"
            if c.cmd in ("ADD", "MAINTAINER"):
                problems.append(f"{where}: {c.cmd} (DL3020/DL4000)")
            if c.cmd == "WORKDIR" and not c.value[0].startswith("/"):
                problems.append(f"DL3000 {where}: relative WORKDIR")
            if c.cmd in ("ENTRYPOINT", "CMD") and not c.json:
                problems.append(f"DL3025 {where}: {c.cmd} in shell form")
            if c.cmd == "COPY":
                for flag in c.flags:
                    if flag.startswith("--from=") and flag.removeprefix("--from=") not in names:
                        problems.append(f"DL3022 {where}: {flag} names no earlier stage")
            if c.cmd == "RUN":
                script = " ".join(c.value)
                if re.search(r"(^|[;&|]\s*)cd\s", script):
                    problems.append(f"DL3003 {where}: cd in RUN (use WORKDIR)")
                if re.search(r"\bsudo\b", script):
                    problems.append(f"DL3004 {where}: sudo")
                if "apt-get install" in script and "--no-install-recommends" not in script:
                    problems.append(f"DL3015 {where}: apt-get install without --no-install-recommends")
                if re.search(r"[^|]\|[^|]", script) and not any(s.cmd == "SHELL" for s in stage["cmds"]):
                    problems.append(f"DL4006 {where}: a pipe without SHELL pipefail")
        for cmd in ("ENTRYPOINT", "CMD"):
            if sum(c.cmd == cmd for c in stage["cmds"]) > 1:
                problems.append(f"DL4003/DL4004 stage {i}: several {cmd}")
        if stage["name"]:
            names.add(stage["name"])
    users = [c.value[0] for c in stages[-1]["cmds"] if c.cmd == "USER"]
    if not users or users[-1].split(":")[0] in ("0", "root"):
        problems.append("DL3002: the image runs as root")
    assert not problems, problems


def sidecar_commands() -> set[str]:
    if not SIDECAR_BINARY.is_file():
        pytest.skip(f"SKIP: {SIDECAR_BINARY} is not built (cargo build -p reverser-sidecar)")
    text = subprocess.run([str(SIDECAR_BINARY), "--help"], capture_output=True, text=True, check=True).stdout
    block = text.split("\nCommands:\n", 1)[1].split("\n\n", 1)[0]
    return {line.split()[0] for line in block.splitlines() if line.strip()} - {"help"}


def test_every_subcommand_the_chart_runs_is_in_the_image(chart: helm.Chart) -> None:
    used = set()
    for values in SCENARIOS.values():
        repository = chart.merge_values(values)["image"]["repository"]
        for o in objects(render(chart, values)):
            if o["kind"] != "Deployment":
                continue
            for c in o["spec"]["template"]["spec"]["containers"]:
                assert c["image"].startswith(f"{repository}:"), c["image"]
                used.add(c["args"][0])
    assert {"serve", "receive", "inject-webhook"} <= used, used
    missing = used - sidecar_commands()
    assert not missing, f"the chart runs {sorted(missing)}, which {SIDECAR_BINARY.name} --help does not list"


# What gcr.io/distroless/cc-debian12 carries: glibc, libgcc and OpenSSL 3.
RUNTIME_LIBRARIES = re.compile(r"(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|ld-linux-[\w-]+\.so\.\d|libgcc_s\.so\.1|libssl\.so\.3|libcrypto\.so\.3)")


def test_the_binary_needs_only_what_the_runtime_base_has() -> None:
    # The same sources and features as the image's build, so the same
    # dynamic libraries (zlib is compiled in: libz-sys static).
    if not SIDECAR_BINARY.is_file():
        pytest.skip(f"SKIP: {SIDECAR_BINARY} is not built (cargo build -p reverser-sidecar)")
    if not shutil.which("readelf"):
        pytest.skip("SKIP: readelf (binutils) is not installed")
    dynamic = subprocess.run(["readelf", "-d", str(SIDECAR_BINARY)], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    assert "libc.so.6" in needed, dynamic
    assert [lib for lib in needed if not RUNTIME_LIBRARIES.fullmatch(lib)] == []


def context_files() -> list[str]:
    """The tracked files `docker build .` sends, after .dockerignore
    (Docker's rules: patterns from the context root, `**` any directories,
    an excluded directory excludes its contents, the last match wins)."""
    patterns = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pat = line.lstrip("!").lstrip("/")
        rx = re.escape(pat).replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        patterns.append((re.compile(rx + r"\Z"), negate))
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    kept = []
    for path in filter(None, tracked):
        parts = path.split("/")
        candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        excluded = False
        for rx, negate in patterns:
            if any(rx.match(c) for c in candidates):
                excluded = not negate
        if not excluded and (ROOT / path).is_file():
            kept.append(path)
    return kept


def test_the_build_context_has_what_the_build_reads(tmp_path: pathlib.Path) -> None:
    kept = context_files()
    assert not [p for p in kept if p.startswith(("charts/", "docs/", "tests/", ".ci/"))], "the context carries files the build never reads"
    # Every workspace member whole (sources, build script, proto files,
    # manifests), the lock file, the build script, what the runtime stage copies.
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    needed = {p for p in tracked for m in WORKSPACE["members"] if p.startswith(f"{m}/")}
    needed |= {"Cargo.toml", "Cargo.lock", "scripts/build-release", "LICENSE", "NOTICE"}
    assert needed <= set(kept), sorted(needed - set(kept))
    # Cargo loads the workspace from the context alone, with the locked
    # versions. Not --offline: metadata reads the manifest of every locked
    # package, those of other platforms too (android_system_properties,
    # windows-sys), which a fresh machine's registry cache does not hold
    # until something fetches them; the image build fetches as well.
    for p in kept:
        (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / p, tmp_path / p)
    meta = subprocess.run(
        ["cargo", "metadata", "--locked", "--format-version", "1"], cwd=tmp_path, capture_output=True, text=True
    )
    assert meta.returncode == 0, meta.stderr
