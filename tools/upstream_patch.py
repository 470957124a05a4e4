"""Apply, test and refresh docs/upstream/sglang-eagle3-embed.patch against the installed SGLang.

The patch is written against SGLang's repository layout (``python/sglang/...``, ``test/...``).
:func:`patched_tree` lays the installed ``sglang`` package out at ``ROOT/python/sglang`` as a
tree of symbolic links (fast: nothing is copied), replaces the files the patch touches by real
copies and applies the patch there with ``git apply``; ``PYTHONPATH=ROOT/python`` then imports
the patched SGLang.

    python -m tools.upstream_patch tree DIR   # a git repository at DIR: base commit + the patch
    python -m tools.upstream_patch diff DIR   # after editing DIR: rewrite the patch from it
    python -m tools.upstream_patch test       # apply to a temporary tree, run its tests
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PATCH = Path(__file__).resolve().parent.parent / "docs" / "upstream" / "sglang-eagle3-embed.patch"
UPSTREAM_TESTS = ["test/registered/unit/speculative/test_eagle3_layer_ids.py"]


def touched_files(patch: Path = PATCH) -> list[str]:
    """Repository paths the patch modifies (new files excluded)."""
    return re.findall(r"^--- a/(\S+)$", patch.read_text(), re.M)


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    if shutil.which("git") is None:
        raise RuntimeError("git is required to apply the upstream patch (git apply); install git")
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    if command[0] == "git":
        return _git(*command[1:], cwd=cwd)
    return subprocess.run(command, cwd=cwd, check=True, capture_output=True, text=True)


def link_tree(root: Path) -> Path:
    """``root/python/sglang``: the installed sglang package as symbolic links."""
    import sglang

    source = Path(sglang.__file__).resolve().parent
    target = root / "python" / "sglang"
    for folder, dirs, files in os.walk(source):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = Path(folder).relative_to(source)
        (target / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            os.symlink(Path(folder) / name, target / rel / name)
    return target


def materialize(root: Path, paths: list[str]) -> None:
    """Replace the links at ``paths`` by copies, so that patching them leaves the install alone."""
    for rel in paths:
        path = root / rel
        if not path.is_symlink():
            raise FileNotFoundError(f"{rel}: the patch modifies it but the installed sglang has no such file")
        original = path.resolve()
        path.unlink()
        shutil.copyfile(original, path)


def patched_tree(root: Path, patch: Path = PATCH) -> Path:
    """Lay out the installed sglang at ``root`` and apply ``patch``; return ``root / "python"``."""
    link_tree(root)
    materialize(root, touched_files(patch))
    if shutil.which("git") is None and shutil.which("patch") is not None:
        steps = [["patch", "-p1", "--dry-run", "-i", str(patch)], ["patch", "-p1", "-s", "-i", str(patch)]]
    else:  # git apply is strict about context and whitespace; _git names git if it is missing
        steps = [["git", "apply", "--check", str(patch)], ["git", "apply", str(patch)]]
    for command in steps:
        try:
            _run(command, root)
        except subprocess.CalledProcessError as err:
            raise RuntimeError(
                f"{patch.name} does not apply to the installed sglang:\n{err.stdout}{err.stderr}"
            ) from None
    return root / "python"


def run_upstream_tests(root: Path) -> subprocess.CompletedProcess:
    """Run the patch's upstream-style tests against the patched tree at ``root``."""
    env = {**os.environ, "PYTHONPATH": str(root / "python"), "TORCHDYNAMO_DISABLE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *UPSTREAM_TESTS],
        cwd=root, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip


def make_work_tree(root: Path) -> None:
    """A git repository with the touched files as the base commit and the patch applied on top."""
    paths = touched_files()
    link_tree(root)
    materialize(root, paths)
    _git("init", "-q", cwd=root)
    _git("add", *paths, cwd=root)
    _git("-c", "user.name=base", "-c", "user.email=base@invalid", "commit", "-qm", "sglang base", cwd=root)
    _git("apply", str(PATCH), cwd=root)
    print(f"{root}: edit the files, then: python -m tools.upstream_patch diff {root}")


def write_patch(root: Path) -> None:
    """Regenerate the patch from a work tree made by :func:`make_work_tree`."""
    modified = _git("diff", "--name-only", "-z", cwd=root).stdout.split("\0")
    untracked = _git("ls-files", "--others", "-z", cwd=root).stdout.split("\0")
    # the tree's other files are links to the installed sglang: only real files are ours
    ours = sorted(
        {
            p
            for p in modified + untracked
            if p.startswith(("python/", "test/")) and not (root / p).is_symlink()
        }
    )
    _git("add", "-N", *ours, cwd=root)
    PATCH.write_text(_git("diff", "--", *ours, cwd=root).stdout)
    print(f"wrote {PATCH} ({len(ours)} files)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["tree", "diff", "test"])
    parser.add_argument("dir", nargs="?", type=Path)
    args = parser.parse_args()
    if args.command == "tree":
        make_work_tree(args.dir)
    elif args.command == "diff":
        write_patch(args.dir)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            patched_tree(Path(tmp))
            run = run_upstream_tests(Path(tmp))
            print(run.stdout[-3000:], run.stderr[-2000:])
            return run.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
