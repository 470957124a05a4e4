"""Test support: strategies, tiny SGLang models and HF references, the plugin probe, the stand-in
HTTP server. (The rule examples are in the harness, ``harness/rule_examples.py``.)"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository root (the working directory of every subprocess the tests start)."""


def python_sources(*folders: str) -> dict[str, str]:
    """Every Python file under the top-level ``folders``, by its path in the repository
    (``sglang_eagle3_embed/core/rule_ids.py``): what the source scans read."""
    return {
        p.relative_to(ROOT).as_posix(): p.read_text()
        for f in folders
        for p in sorted((ROOT / f).rglob("*.py"))
    }


def cli(*args):
    """``sglang-eagle3-embed ARGS`` in a fresh process (``python -m sglang_eagle3_embed.cli``):
    its completed process, output captured."""
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "sglang_eagle3_embed.cli", *map(str, args)],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip


def in_process(*args) -> tuple[int, str, str]:
    """``sglang-eagle3-embed ARGS`` in this process: (exit code, stdout, stderr)."""
    import contextlib
    import io

    from sglang_eagle3_embed import cli as command

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = command.main([str(a) for a in args])
        except SystemExit as exit_:
            code = exit_.code
    return code, out.getvalue(), err.getvalue()


def needs_capture_only():
    """A pytest mark: skip where the installed SGLang has no capture-only mode (before 0.5.23)."""
    import pytest

    from sglang_eagle3_embed.core.releases import current

    installed = current()
    return pytest.mark.skipif(
        not installed.capture_only,
        reason=f"SGLang {installed.version} has no --enable-return-aux-hidden-states (0.5.23 and later)",
    )
