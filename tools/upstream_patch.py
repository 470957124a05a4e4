"""Apply, test and format-check the upstream PR series (docs/upstream/NNNN-*.patch) against the
installed SGLang.

The patches are written against SGLang's repository layout (``python/sglang/...``, ``test/...``)
and apply in order. :func:`patched_tree` lays the installed ``sglang`` package out at
``ROOT/python/sglang`` as a tree of symbolic links (fast: nothing is copied), replaces the files
the patches touch by real copies and applies the first ``upto`` patches there with ``git apply``;
``PYTHONPATH=ROOT/python`` then imports the patched SGLang.

    python -m tools.upstream_patch tree DIR [--upto N]  # a git repository: base, one commit a PR
    python -m tools.upstream_patch diff DIR             # after editing DIR: rewrite the patches
    python -m tools.upstream_patch test                 # every step's tests, at every step
    python -m tools.upstream_patch format               # the changed hunks, as SGLang's hooks check
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

UPSTREAM = Path(__file__).resolve().parent.parent / "docs" / "upstream"
# Upstream files the wheel does not ship (its tests), as SGLang's repository has them, laid out
# by repository path with BASE_SUFFIX appended (kept out of this project's formatter): the base
# that the patches extending them apply to.
BASE = UPSTREAM / "base"
BASE_SUFFIX = ".base"

# The formatters SGLang's .pre-commit-config.yaml pins (black, isort, codespell), with its
# settings: isort's profile and first-party package from .isort.cfg, codespell's ignore list.
FORMATTERS = {"black": "24.10.0", "isort": "5.13.2", "codespell": "2.4.1"}
ISORT_ARGS = ["--profile", "black", "-p", "sglang"]
CODESPELL_IGNORE = "cann,thi,makro,wil,rouge,PRIS"


@dataclass(frozen=True)
class Step:
    """One PR of the series: its patch and the upstream test files it adds."""

    number: int
    patch: Path

    @property
    def name(self) -> str:
        return self.patch.stem

    @property
    def text(self) -> str:
        return self.patch.read_text()

    @property
    def tests(self) -> list[str]:
        """The upstream test files the PR adds or extends."""
        return [p for p in added_files(self.text) + modified_files(self.text) if p.startswith("test/")]

    @property
    def added_tests(self) -> list[str]:
        """The upstream test files the PR adds (the files it extends keep upstream's registration)."""
        return [p for p in added_files(self.text) if p.startswith("test/")]


def series(folder: Path = UPSTREAM) -> list[Step]:
    """The PRs in order: ``NNNN-name.patch``, numbered 1, 2, ... without gaps."""
    patches = sorted(folder.glob("[0-9][0-9][0-9][0-9]-*.patch"))
    steps = [Step(int(p.name[:4]), p) for p in patches]
    if [s.number for s in steps] != list(range(1, len(steps) + 1)):
        raise RuntimeError(f"{folder}: the patches must be numbered 0001, 0002, ... without gaps")
    return steps


def modified_files(text: str) -> list[str]:
    """Repository paths a patch modifies (new files excluded)."""
    return re.findall(r"^--- a/(\S+)$", text, re.M)


def added_files(text: str) -> list[str]:
    """Repository paths a patch creates."""
    return re.findall(r"^--- /dev/null\n\+\+\+ b/(\S+)$", text, re.M)


def added_lines(text: str) -> dict[str, list[tuple[int, int]]]:
    """Per file, the line ranges (first, last; 1-based, in the patched file) the patch adds."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    path, line, start = None, 0, None
    for row in text.splitlines():
        if row.startswith("+++ "):
            path = row[6:]
            ranges.setdefault(path, [])
            continue
        if row.startswith("--- ") or row.startswith("diff "):
            continue
        hunk = re.match(r"@@ -\S+ \+(\d+)(?:,\d+)? @@", row)
        if hunk:
            line, start = int(hunk[1]), None
            continue
        if path is None or row.startswith("\\"):
            continue
        if row.startswith("+"):
            start = line if start is None else start
            line += 1
            continue
        if start is not None:
            ranges[path].append((start, line - 1))
            start = None
        if not row.startswith("-"):
            line += 1
    if path is not None and start is not None:
        ranges[path].append((start, line - 1))
    return {p: r for p, r in ranges.items() if r}


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    if shutil.which("git") is None:
        raise RuntimeError("git is required to apply the upstream patches (git apply); install git")
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)


def base_files(base: Path = BASE) -> list[str]:
    """Repository paths of the upstream files in :data:`BASE`."""
    found = [p for p in base.rglob(f"*{BASE_SUFFIX}") if p.is_file()]
    return sorted(str(p.relative_to(base))[: -len(BASE_SUFFIX)] for p in found)


def link_tree(root: Path) -> Path:
    """``root/python/sglang``: the installed sglang package as symbolic links, and copies of the
    upstream files in :data:`BASE` (tests the patches extend) at their repository paths."""
    import sglang

    for rel in base_files():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(BASE / (rel + BASE_SUFFIX), root / rel)

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
        if path.is_file() and not path.is_symlink():
            continue
        if not path.is_symlink():
            raise FileNotFoundError(f"{rel}: a patch modifies it but the installed sglang has no such file")
        original = path.resolve()
        path.unlink()
        shutil.copyfile(original, path)


def apply(root: Path, step: Step) -> None:
    """``git apply`` the step's patch at ``root`` (``patch -p1`` where git is missing)."""
    if shutil.which("git") is None and shutil.which("patch") is not None:
        commands = [["patch", "-p1", "--dry-run", "-s", "-i"], ["patch", "-p1", "-s", "-i"]]
    else:  # git apply is strict about context and whitespace; _git names git if it is missing
        commands = [["git", "apply", "--check"], ["git", "apply"]]
    for command in commands:
        try:
            if command[0] == "git":
                _git(*command[1:], str(step.patch), cwd=root)
            else:
                subprocess.run(
                    [*command, str(step.patch)], cwd=root, check=True, capture_output=True, text=True
                )
        except subprocess.CalledProcessError as err:
            raise RuntimeError(
                f"{step.patch.name} does not apply after the patches before it:\n{err.stdout}{err.stderr}"
            ) from None


def patched_tree(root: Path, upto: int | None = None, steps: list[Step] | None = None) -> Path:
    """Lay out the installed sglang at ``root`` and apply the first ``upto`` PRs (all by default)
    in order; return ``root / "python"`` (0 gives the installed sglang itself)."""
    steps = (steps or series())[:upto]
    link_tree(root)
    materialize(root, sorted({p for s in steps for p in modified_files(s.text)}))
    for step in steps:
        apply(root, step)
    return root / "python"


def copy_tests(root: Path, step: Step, source: Path) -> None:
    """Put ``step``'s test files, as the patched tree at ``source`` has them, into ``root``."""
    for rel in step.tests:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / rel, root / rel)


def run_tests(root: Path, tests: list[str]) -> subprocess.CompletedProcess:
    """Run upstream-style test files with pytest against the tree at ``root``."""
    env = {**os.environ, "PYTHONPATH": str(root / "python"), "TORCHDYNAMO_DISABLE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=root, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip


def registered_suites() -> set[str]:
    """The CI suite names that the installed SGLang's ``sglang/test/ci/ci_register.py`` names
    (``<stage>-test-<runner>``, in its code or its comments)."""
    import sglang.test.ci.ci_register as ci_register

    source = Path(ci_register.__file__).read_text()
    return set(re.findall(r"""["']([a-z0-9]+(?:-[a-z0-9]+)*-test-[a-z0-9-]+)["']""", source))


SCHEDULED_SUITES = ("weekly-", "nightly-")
"""Suite name prefixes SGLang's CI runs on a schedule (``test/run_suite.py``: ``NIGHTLY_SUITES``,
the weekly ones among ``OTHER_SUITES``), not for a pull request."""


def registration_problems(path: Path) -> list[str]:
    """What SGLang's CI collector (``ci_register.collect_tests``) and its suite names say of an
    upstream test file: parse errors, no registration, no ``__main__`` entry, an unknown suite, a
    suite that does not run on every commit."""
    from sglang.test.ci.ci_register import HWBackend, collect_tests

    try:
        registries = collect_tests([str(path)], sanity_check=True)
    except (ValueError, SyntaxError) as err:
        return [f"{path.name}: {err}"]
    known = registered_suites()
    problems = []
    for entry in registries:
        suite = entry.effective_suite
        if suite.startswith(SCHEDULED_SUITES):
            problems.append(
                f"{path.name}: suite {suite!r} runs on a schedule, not on every commit: a PR's tests "
                f"go in a file registered to a per-commit suite (such as 'base-a-test-cpu')"
            )
        elif entry.backend is HWBackend.CPU and suite not in known:
            problems.append(
                f"{path.name}: suite {suite!r} is not one the installed sglang names ({sorted(known)})"
            )
    if not any(r.backend is HWBackend.CPU for r in registries):
        problems.append(f"{path.name}: no register_cpu_ci(...): the CPU CI would never run it")
    return problems


def custom_test_case_problems(path: Path) -> list[str]:
    """Every test class of an upstream test file derives from SGLang's ``CustomTestCase``."""
    tree = ast.parse(path.read_text())
    problems = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            bases = [getattr(b, "id", getattr(b, "attr", "")) for b in node.bases]
            if "CustomTestCase" not in bases:
                problems.append(f"{path.name}: {node.name} derives from {bases}, not CustomTestCase")
    return problems


def formatter(name: str) -> list[str]:
    """The command of one of :data:`FORMATTERS`, refused unless it is the pinned version."""
    command = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if command is None:
        raise RuntimeError(f"{name} is not installed: pip install {name}=={FORMATTERS[name]}")
    version = subprocess.run([command, "--version"], capture_output=True, text=True).stdout
    if FORMATTERS[name] not in version:
        raise RuntimeError(f"{name} {version.strip()!r} is not {FORMATTERS[name]}, the version SGLang pins")
    return [command]


def _diff_old_lines(diff: str) -> set[int]:
    """Lines of the original file that a unified diff changes."""
    lines: set[int] = set()
    for hunk in re.finditer(r"^@@ -(\d+)(?:,(\d+))? \+", diff, re.M):
        start, count = int(hunk[1]), int(hunk[2] or 1)
        lines.update(range(start, start + max(count, 1)))
    return lines


def format_problems(root: Path, step: Step) -> list[str]:
    """The lines ``step`` adds, checked as SGLang's pre-commit hooks check them: black and isort
    report no change inside them, codespell no misspelling. Lines the PR does not touch are not
    checked (SGLang's own files are not all clean under these versions)."""
    problems = []
    for rel, ranges in added_lines(step.text).items():
        path = root / rel
        if not rel.endswith(".py"):
            continue
        black = subprocess.run(
            [*formatter("black"), "--check", "--diff", "-q", *(f"--line-ranges={a}-{b}" for a, b in ranges), str(path)],
            capture_output=True, text=True,
        )  # fmt: skip
        if black.returncode != 0:
            problems.append(f"{rel}: black {FORMATTERS['black']} would reformat:\n{black.stdout[-2000:]}")
        isort = subprocess.run(
            [*formatter("isort"), *ISORT_ARGS, "--diff", "--check-only", str(path)], capture_output=True, text=True
        )  # fmt: skip
        if isort.returncode not in (0, 1):
            raise RuntimeError(f"isort failed on {rel}: {isort.stderr[-1000:]}")
        ours = {n for a, b in ranges for n in range(a, b + 1)}
        # isort's diff counts lines in the file it read: the patched one
        if _diff_old_lines(isort.stdout) & ours:
            problems.append(f"{rel}: isort {FORMATTERS['isort']} would reorder imports the PR adds")
        lines = path.read_text().splitlines()
        with tempfile.NamedTemporaryFile("w", suffix=".py") as added:
            added.write("\n".join(lines[a - 1 : b][k] for a, b in ranges for k in range(b - a + 1)))
            added.flush()
            spell = subprocess.run(
                [*formatter("codespell"), "-L", CODESPELL_IGNORE, added.name], capture_output=True, text=True
            )  # fmt: skip
        if spell.returncode != 0:
            problems.append(f"{rel}: codespell {FORMATTERS['codespell']}: {spell.stdout.strip()}")
    return problems


def step_trees(work: Path, steps: list[Step] | None = None) -> dict[int, Path]:
    """Roots of the installed sglang with the first k PRs applied, for k = 0 .. len(steps)."""
    steps = steps or series()
    return {k: patched_tree(work / f"step{k}", k, steps).parent for k in range(len(steps) + 1)}


def _failures(root: Path, files: list[str]) -> dict:
    """Run ``files`` in one pytest at ``root``: each file's count of failing tests (``files``) and
    the end of pytest's output (``log``)."""
    per_file = dict.fromkeys(files, 0)
    if not files:
        return {"files": per_file, "log": ""}
    report = root / "report.xml"
    run = run_tests(root, [*files, f"--junitxml={report}"])
    for case in ET.parse(report).iter("testcase"):
        name = case.get("classname") or case.get("name")  # a collection error has no class
        rel = name.replace(".", "/") + ".py"
        rel = rel if rel in per_file else name.rsplit(".", 1)[0].replace(".", "/") + ".py"
        if case.find("failure") is not None or case.find("error") is not None:
            per_file[rel] = per_file.get(rel, 0) + 1
    return {"files": per_file, "log": run.stdout[-3000:]}


def failures_per_file(trees: dict[int, Path], steps: list[Step] | None = None) -> dict[int, dict]:
    """Per tree k: ``with``, the test files of the steps up to k as tree k has them; ``next``,
    step k + 1's test files as the tree after it has them (copied in, after ``with`` ran: a file
    that several PRs extend is then step k + 1's version). Each: the failing tests per file and
    the end of pytest's output."""
    steps = steps or series()
    found = {}
    for k, root in trees.items():
        ours = list(dict.fromkeys(t for s in steps[:k] for t in s.tests))
        found[k] = {"with": _failures(root, ours), "next": {"files": {}, "log": ""}}
        if k < len(steps):
            copy_tests(root, steps[k], trees[k + 1])
            found[k]["next"] = _failures(root, steps[k].tests)
    return found


def check_series(work: Path) -> list[str]:
    """Every step of the series in order: the patch applies; every test file of the steps so far
    passes; the step's own tests fail on the tree before it (each PR's tests need its change);
    the test files it adds or extends register to a per-commit suite the installed sglang knows,
    those it adds use ``CustomTestCase``; its added lines pass the pinned formatters. Returns the problems found,
    one line each."""
    steps, problems = series(), []
    trees = step_trees(work, steps)
    outcomes = failures_per_file(trees, steps)
    for step in steps:
        with_it, without = outcomes[step.number]["with"], outcomes[step.number - 1]["next"]
        failing = [rel for rel, count in with_it["files"].items() if count]
        if failing:
            problems.append(f"{step.name}: {failing} fail with the series up to it:\n{with_it['log']}")
        passing = [rel for rel in step.tests if not without["files"][rel]]
        if passing:
            problems.append(f"{step.name}: {passing} pass without its change")
        after = trees[step.number]
        for rel in step.tests:  # the files it extends too: their tests must run per commit
            problems += registration_problems(after / rel)
        for rel in step.added_tests:
            problems += custom_test_case_problems(after / rel)
        problems += format_problems(after, step)
    return problems


def make_work_tree(root: Path, upto: int | None = None) -> None:
    """A git repository: the touched files as the base commit, then one commit per PR."""
    steps = series()[:upto]
    link_tree(root)
    paths = sorted({p for s in steps for p in modified_files(s.text)})
    materialize(root, paths)
    _git("init", "-q", cwd=root)
    _git("add", *paths, cwd=root)
    commit = ["-c", "user.name=upstream", "-c", "user.email=upstream@invalid", "commit", "-qm"]
    _git(*commit, "sglang base", cwd=root)
    for step in steps:
        apply(root, step)
        _git("add", *modified_files(step.text), *added_files(step.text), cwd=root)
        _git(*commit, step.name, cwd=root)
    print(f"{root}: amend the PR commits, then: python -m tools.upstream_patch diff {root}")


def write_patches(root: Path) -> None:
    """Rewrite each PR's patch from the commits of a work tree made by :func:`make_work_tree`."""
    commits = _git("rev-list", "--reverse", "HEAD", cwd=root).stdout.split()[1:]
    steps = series()
    if len(commits) != len(steps):
        raise RuntimeError(f"{root}: {len(commits)} commits after the base, {len(steps)} patches")
    for step, commit in zip(steps, commits):
        step.patch.write_text(_git("diff", f"{commit}~1", commit, cwd=root).stdout)
        print(f"wrote {step.patch}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["tree", "diff", "test", "format"])
    parser.add_argument("dir", nargs="?", type=Path)
    parser.add_argument("--upto", type=int, default=None, help="apply only the first N PRs")
    args = parser.parse_args()
    if args.command in ("tree", "diff") and args.dir is None:
        parser.error(f"{args.command} needs DIR")
    if args.command == "tree":
        make_work_tree(args.dir, args.upto)
    elif args.command == "diff":
        write_patches(args.dir)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            if args.command == "format":
                problems = []
                for step in series():
                    root = patched_tree(Path(tmp) / step.name, step.number).parent
                    problems += format_problems(root, step)
            else:
                problems = check_series(Path(tmp))
        print("\n".join(problems) or f"{args.command}: {len(series())} PRs, no problem found")
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
