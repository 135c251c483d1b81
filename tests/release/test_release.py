"""scripts/release, run for real.

The host release is built once through scripts/build-release with the `dev`
profile: the release profile's thin LTO takes many minutes on a small
machine, and `scripts/test` has just built the dev binaries, so cargo has
nothing left to do; packaging and manifests do not depend on the profile.
Each manifest's sha256, `files` and `bin` are checked against its archive.

The other runs package stand-in binaries (--bin-dir; small shell scripts,
as the packaging never looks inside a binary) in a committed copy of the
repository, whose version is bumped so nothing can come from Chart.yaml or
the templates by accident: a build without the completion helpers,
reproducibility, and the refusals (dirty tree, bad VERSION) with nothing
built.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import platform
import re
import shutil
import subprocess
import tarfile
import tomllib
from typing import Any, Iterator

import helm_python as helm
import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
RELEASE = pathlib.Path("scripts") / "release"
CARGO_VERSION = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]
VERSION = f"v{CARGO_VERSION}"
PLUGINS = sorted(p.stem for p in (ROOT / "krew").glob("*.yaml"))
HOST = (
    {"Linux": "linux", "Darwin": "darwin"}[platform.system()],
    {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}[platform.machine()],
)
# What the krew archives hold besides LICENSE and NOTICE.
BINARIES = [b for name in PLUGINS for b in (f"kubectl-{name}", f"kubectl_complete-{name}")]
# krew's index types (pkg/index): the keys each object may have.
KEYS = {
    "plugin": {"apiVersion", "kind", "metadata", "spec"},
    "metadata": {"name"},
    "spec": {"version", "homepage", "shortDescription", "description", "caveats", "platforms"},
    "platform": {"selector", "uri", "sha256", "files", "bin"},
    "selector": {"matchLabels"},
    "file": {"from", "to"},
}


def release(root: pathlib.Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(root / RELEASE), *args], cwd=root, capture_output=True, text=True, env={**os.environ, **env}
    )


def sha256(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def template(root: pathlib.Path, name: str) -> dict[str, Any]:
    return yaml.safe_load((root / "krew" / f"{name}.yaml").read_text())


def check_manifest(root: pathlib.Path, out: pathlib.Path, name: str, version: str) -> dict[str, tarfile.TarInfo]:
    """Checks OUT_DIR/NAME.yaml against its archive for the host and the
    template it came from; returns the host archive's members."""
    manifest = yaml.safe_load((out / f"{name}.yaml").read_text())
    tpl = template(root, name)
    assert set(manifest) == KEYS["plugin"]
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest["kind"] == "Plugin"
    assert manifest["metadata"] == {"name": name}
    spec = manifest["spec"]
    assert set(spec) <= KEYS["spec"]
    assert spec["version"] == version
    for key in KEYS["spec"] - {"version", "platforms"}:
        assert spec.get(key) == tpl["spec"].get(key), key

    platforms = {(p["selector"]["matchLabels"]["os"], p["selector"]["matchLabels"]["arch"]): p for p in spec["platforms"]}
    assert HOST in platforms, f"no {HOST} platform in {name}.yaml"
    tpl_platforms = {(p["selector"]["matchLabels"]["os"], p["selector"]["matchLabels"]["arch"]): p for p in tpl["spec"]["platforms"]}
    members: dict[str, tarfile.TarInfo] = {}
    for (os_name, arch), p in platforms.items():
        assert set(p) == KEYS["platform"]
        assert set(p["selector"]) == KEYS["selector"] and len(p["selector"]["matchLabels"]) == 2
        tp = tpl_platforms[(os_name, arch)]
        assert p["bin"] == tp["bin"] == f"kubectl-{name}"
        archive_name = f"kubectl-{name}_{version}_{os_name}_{arch}.tar.gz"
        assert p["uri"] == f"{tp['uri'].rsplit('/', 2)[0]}/{version}/{archive_name}"
        archive = out / archive_name
        assert p["sha256"] == sha256(archive)

        assert p["files"] == tp["files"]
        assert {"from": f"kubectl_complete-{name}", "to": "."} in p["files"], "kubectl's completion helper ships"
        for f in p["files"]:
            assert set(f) == KEYS["file"] and f["to"] == "."
        with tarfile.open(archive) as tar:
            infos = tar.getmembers()
            names = [i.name for i in infos]
            assert names == sorted({f["from"] for f in p["files"]}), "the archive holds exactly the files the manifest installs"
            for info in infos:
                assert info.isfile() and (info.uid, info.gid) == (0, 0)
                executable = info.name == p["bin"] or info.name.startswith("kubectl_complete-")
                assert info.mode == (0o755 if executable else 0o644), info.name
                if info.name in ("LICENSE", "NOTICE"):
                    assert tar.extractfile(info).read() == (root / info.name).read_bytes()
            if (os_name, arch) == HOST:
                members = {i.name: i for i in infos}
    return members


def extract(out: pathlib.Path, name: str, member: str, into: pathlib.Path) -> pathlib.Path:
    archive = out / f"kubectl-{name}_{VERSION}_{HOST[0]}_{HOST[1]}.tar.gz"
    with tarfile.open(archive) as tar:
        tar.extract(member, into, filter="data")
    return into / member


def workspace_bins() -> set[str]:
    meta = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )
    packages = yaml.safe_load(meta.stdout)["packages"]  # JSON is YAML
    return {t["name"] for p in packages for t in p["targets"] if "bin" in t["kind"]}


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pathlib.Path]:
    out = tmp_path_factory.mktemp("release") / "out"
    p = release(ROOT, VERSION, str(out), "--allow-dirty", "--profile", "dev")
    assert p.returncode == 0, p.stderr
    yield out
    # Debug archives are large: pytest would keep them for three runs.
    shutil.rmtree(out)


@pytest.mark.parametrize("name", PLUGINS)
def test_each_manifest_agrees_with_its_archive(released: pathlib.Path, name: str, tmp_path: pathlib.Path) -> None:
    assert f"kubectl_complete-{name}" in workspace_bins(), "the workspace builds the helper the manifest ships"
    members = check_manifest(ROOT, released, name, VERSION)
    # The archived binary is this build's, for this version.
    binary = extract(released, name, f"kubectl-{name}", tmp_path)
    try:
        assert members[binary.name].size == binary.stat().st_size
        version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True).stdout
    finally:
        binary.unlink()
    assert version.split() == [f"kubectl-{name}", CARGO_VERSION]


def test_checksums_cover_every_file(released: pathlib.Path) -> None:
    listed = [line.split("  ", 1)[1] for line in (released / "SHA256SUMS").read_text().splitlines()]
    assert sorted(listed) == sorted(p.name for p in released.iterdir() if p.name != "SHA256SUMS")
    check = subprocess.run(["sha256sum", "--strict", "-c", "SHA256SUMS"], cwd=released, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_chart_is_packaged_with_the_release_version(released: pathlib.Path) -> None:
    check_chart(released / f"reverser-{CARGO_VERSION}.tgz", CARGO_VERSION)


def check_chart(archive: pathlib.Path, version: str) -> None:
    with helm.Chart.load_archive(archive.read_bytes()) as chart:
        assert chart.metadata["version"] == version
        assert chart.metadata["appVersion"] == version
        rendered = chart.render({}, name="rev", namespace="reverser", is_install=True)
        repository = chart.values["image"]["repository"]
    images = set()
    for path, text in rendered.items():
        for doc in yaml.safe_load_all(text) if path.endswith(".yaml") else []:
            pod = (doc or {}).get("spec", {}).get("template", {}).get("spec", {})
            images |= {c["image"] for c in pod.get("containers", [])}
    # The image tag comes from appVersion, i.e. the release's VERSION.
    assert images == {f"{repository}:{version}"}


# Runs on a committed copy of the repository, with stand-in binaries.

BUMPED = "7.8.9-rc.1"


@pytest.fixture
def repo(tmp_path: pathlib.Path) -> pathlib.Path:
    """The working tree's files (tracked and new, not ignored) committed in
    a fresh repository, with the workspace version bumped to BUMPED."""
    copy = tmp_path / "repo"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, copy / rel)
    cargo_toml = copy / "Cargo.toml"
    text = cargo_toml.read_text()
    assert f'version = "{CARGO_VERSION}"' in text
    cargo_toml.write_text(text.replace(f'version = "{CARGO_VERSION}"', f'version = "{BUMPED}"', 1))
    git = ["git", "-c", "user.name=release test", "-c", "user.email=release@test.invalid"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "release test"]):
        subprocess.run([*git, *cmd], cwd=copy, check=True, capture_output=True)
    return copy


def stand_ins(d: pathlib.Path, *names: str) -> pathlib.Path:
    d.mkdir(parents=True, exist_ok=True)
    for name in names:
        (d / name).write_text(f"#!/bin/sh\necho '{name} stand-in'\n")
        (d / name).chmod(0o755)
    return d


def test_a_committed_release_takes_its_version_everywhere(repo: pathlib.Path, tmp_path: pathlib.Path) -> None:
    bins = stand_ins(tmp_path / "bin", *BINARIES, "reverser-sidecar")
    out = tmp_path / "out"
    # A clean tree needs no --allow-dirty.
    p = release(repo, f"v{BUMPED}", str(out), "--bin-dir", str(bins))
    assert p.returncode == 0, p.stderr
    for name in PLUGINS:
        check_manifest(repo, out, name, f"v{BUMPED}")
    check_chart(out / f"reverser-{BUMPED}.tgz", BUMPED)
    assert f"docker build --build-arg VERSION=v{BUMPED} -t ghcr.io/reverser/reverser-sidecar:{BUMPED}" in p.stderr


def test_a_build_without_a_completion_helper_is_refused(repo: pathlib.Path, tmp_path: pathlib.Path) -> None:
    bins = stand_ins(tmp_path / "bin", "kubectl-reverser", "kubectl-tatara", "kubectl_complete-reverser")
    out = tmp_path / "out"
    p = release(repo, f"v{BUMPED}", str(out), "--bin-dir", str(bins))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "installs kubectl_complete-tatara, which neither the" in p.stderr, p.stderr


def test_archives_are_reproducible(repo: pathlib.Path, tmp_path: pathlib.Path) -> None:
    bins = stand_ins(tmp_path / "bin", *BINARIES)
    runs = []
    for i, env in enumerate([{}, {}, {"SOURCE_DATE_EPOCH": "1700000000"}]):
        out = tmp_path / f"out{i}"
        p = release(repo, f"v{BUMPED}", str(out), "--bin-dir", str(bins), **env)
        assert p.returncode == 0, p.stderr
        runs.append({f.name: sha256(f) for f in out.iterdir() if f.name.endswith((".tar.gz", ".yaml"))})
    assert runs[0] == runs[1]
    # Only the timestamps differ with SOURCE_DATE_EPOCH, and they are its.
    assert runs[2].keys() == runs[0].keys() and all(runs[2][k] != runs[0][k] for k in runs[0])
    with tarfile.open(tmp_path / "out2" / f"kubectl-tatara_v{BUMPED}_{HOST[0]}_{HOST[1]}.tar.gz") as tar:
        assert {i.mtime for i in tar.getmembers()} == {1700000000}


def refused(p: subprocess.CompletedProcess[str], out: pathlib.Path, target_dir: pathlib.Path, says: str) -> None:
    assert p.returncode == 2, p.stdout + p.stderr
    assert says in p.stderr, p.stderr
    assert not out.exists(), "a refused release wrote its OUT_DIR"
    assert not target_dir.exists(), "a refused release ran cargo"


@pytest.mark.parametrize(
    ("version", "says"),
    [
        (BUMPED, "has no leading v"),
        ("V" + BUMPED, "has no leading v"),
        ("v7.8", "is not semver"),
        ("v7", "is not semver"),
        ("v07.8.9", "is not semver"),
        ("v7.8.9-", "is not semver"),
        ("v7.8.9-rc..1", "is not semver"),
        ("v7.8.9+", "is not semver"),
        ("vx.y.z", "is not semver"),
        ("v7.8.9", "differs from the workspace version 7.8.9-rc.1"),
        ("", "no VERSION given"),
    ],
)
def test_a_bad_version_is_refused_before_building(repo: pathlib.Path, tmp_path: pathlib.Path, version: str, says: str) -> None:
    (repo / "untracked").write_text("the version is checked first")
    out, target_dir = tmp_path / "out", tmp_path / "target"
    refused(release(repo, version, str(out), CARGO_TARGET_DIR=str(target_dir)), out, target_dir, says)


@pytest.mark.parametrize("change", ["untracked", "modified", "staged"])
def test_a_dirty_tree_is_refused_unless_allowed(repo: pathlib.Path, tmp_path: pathlib.Path, change: str) -> None:
    if change == "untracked":
        (repo / "notes.txt").write_text("not committed")
    else:
        with (repo / "README.md").open("a") as f:
            f.write("\nnot committed\n")
        if change == "staged":
            subprocess.run(["git", "add", "README.md"], cwd=repo, check=True)
    out, target_dir = tmp_path / "out", tmp_path / "target"
    env = {"CARGO_TARGET_DIR": str(target_dir)}
    refused(release(repo, f"v{BUMPED}", str(out), **env), out, target_dir, "uncommitted change(s)")
    # --allow-dirty gets past that check: the next one (an unknown target) refuses.
    p = release(repo, f"v{BUMPED}", str(out), "--allow-dirty", "--target", "riscv64gc-unknown-linux-gnu", **env)
    refused(p, out, target_dir, "target riscv64gc-unknown-linux-gnu is not a krew platform")


def test_a_used_out_dir_is_refused(repo: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out, target_dir = tmp_path / "out", tmp_path / "target"
    out.mkdir()
    (out / "kubectl-reverser_v0.0.1_linux_amd64.tar.gz").write_text("an older release")
    p = release(repo, f"v{BUMPED}", str(out), CARGO_TARGET_DIR=str(target_dir))
    assert p.returncode == 2 and "is not an empty directory" in p.stderr, p.stderr
    assert [f.name for f in out.iterdir()] == ["kubectl-reverser_v0.0.1_linux_amd64.tar.gz"]
    assert not target_dir.exists()


def test_the_install_docs_name_what_the_release_writes(released: pathlib.Path) -> None:
    """The commands in docs/install.md and docs/release.md name this
    version's files, as scripts/release names them."""
    text = "\n".join((ROOT / "docs" / d).read_text() for d in ("install.md", "release.md"))
    text = text.replace("\\\n", " ")
    base = {name: template(ROOT, name)["spec"]["platforms"][0]["uri"].rsplit("/", 2)[0] for name in PLUGINS}

    local = re.findall(r"kubectl krew install --manifest=dist/(\w+)\.yaml --archive=dist/(\S+)", text)
    assert sorted(name for name, _ in local) == PLUGINS
    for name, archive in local:
        m = re.fullmatch(rf"kubectl-{name}_{re.escape(VERSION)}_(\w+)_(\w+)\.tar\.gz", archive)
        assert m, archive
        assert {"os": m.group(1), "arch": m.group(2)} in [p["selector"]["matchLabels"] for p in template(ROOT, name)["spec"]["platforms"]]
        if (m.group(1), m.group(2)) == HOST:
            assert (released / archive).is_file()

    urls = re.findall(r"--manifest-url=(\S+)", text)
    assert sorted(urls) == sorted(f"{base[name]}/{VERSION}/{name}.yaml" for name in PLUGINS)
    assert all((released / url.rsplit("/", 1)[1]).is_file() for url in urls)

    builds = re.findall(r"docker (?:buildx )?build (?:--platform \S+ )?--build-arg VERSION=(\S+)\s+-t (\S+):(\S+)", text)
    assert len(builds) >= 3 and all((v, tag) == (VERSION, CARGO_VERSION) for v, _, tag in builds), builds
    assert set(re.findall(r"scripts/release (\S+) dist", text)) == {VERSION}
    assert set(re.findall(r"--set image\.tag=(\S+)", text)) == {CARGO_VERSION}
    assert set(re.findall(r"reverser-(\d[\w.-]*)\.tgz", text)) == {CARGO_VERSION}
    assert (released / f"reverser-{CARGO_VERSION}.tgz").is_file()
