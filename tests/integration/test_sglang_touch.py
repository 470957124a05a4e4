"""The guard that keeps the older-releases phase complete (``tests/support/sglang_touch.py``): a
pytest run of planted tests, with xdist, through this suite's own hooks."""

import os
import subprocess
import sys
import textwrap

from tests.support import ROOT, sglang_touch

PLANTED = """
import subprocess, sys
import pytest

def _sglang():
    from sglang.srt.environ import exportable_env_vars
    exportable_env_vars()

@pytest.fixture(scope="module")
def through_sglang():
    _sglang()

def test_imports_only():
    import sglang.srt.server_args  # an import's own calls do not count

def test_unmarked_runs():
    _sglang()

@pytest.mark.releases
def test_marked_runs():
    _sglang()

@pytest.mark.pinned_release
def test_pinned_runs():
    _sglang()

def test_unmarked_plain():
    pass

@pytest.mark.releases
def test_marked_idle():
    pass

def test_unmarked_fixture_a(through_sglang):
    pass

def test_unmarked_fixture_b(through_sglang):
    pass

def test_unmarked_session_fixture_a(session_sglang):
    pass

def test_unmarked_session_fixture_b(session_sglang):
    pass

def test_unmarked_child():
    code = "from sglang.srt.environ import exportable_env_vars as f; f()"
    subprocess.run([sys.executable, "-c", code], check=True)
"""


CONFTEST = """
import pytest

from tests.conftest import *  # noqa: F403 (this suite's hooks)


@pytest.fixture(scope="session")
def session_sglang():  # set up for the session node, above this folder's conftest hooks
    from sglang.srt.environ import exportable_env_vars

    exportable_env_vars()
"""


def test_tests_that_run_sglang_unmarked_fail_the_run(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # the rootdir, above the suite as in this repository
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_planted.py").write_text(textwrap.dedent(PLANTED))
    outer = {sglang_touch.DIR_ENV, sglang_touch.KEY, "PYTEST_XDIST_WORKER", "PYTEST_XDIST_TESTRUNUID"}
    env = {k: v for k, v in os.environ.items() if k not in outer}
    env["PYTHONPATH"] = str(ROOT)  # without the outer run's sitecustomize: the planted run makes its own
    env["EAGLE3_EMBED_SGLANG_TOUCH_VERBOSE"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "-m", "", "suite"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 1 and "11 passed" in out, out[-3000:] + done.stderr[-2000:]
    flagged = {
        line.rsplit("::", 1)[1].split(" ")[0]
        for line in out.splitlines()
        if line.startswith("runs SGLang's code")
    }
    assert flagged == {
        "test_unmarked_runs", "test_unmarked_fixture_a", "test_unmarked_fixture_b", "test_unmarked_child",
        "test_unmarked_session_fixture_a", "test_unmarked_session_fixture_b",
    }, out[-3000:]  # fmt: skip
    idle = {line.rsplit("::", 1)[1] for line in out.splitlines() if line.startswith("marked `releases`")}
    assert idle == {"test_marked_idle"}, out[-3000:]


SHADOWED = """
import sys, types
stub = types.ModuleType("sglang.kernels.ops.gemm.cutedsl_dual_gemm")  # as the GPU bundle's shim does
sys.modules[stub.__name__] = stub
"""


def test_a_sitecustomize_later_on_the_path_still_runs_in_child_processes(tmp_path):
    """The GPU bundle's ``sitecustomize`` (stubs of two SGLang modules) sits on ``PYTHONPATH``
    after the hook's folder: both run, and a stub without a file does not count as SGLang imported
    before the hook."""
    (tmp_path / "shim").mkdir()
    (tmp_path / "shim" / "sitecustomize.py").write_text(SHADOWED)
    env = {**os.environ, sglang_touch.DIR_ENV: str(tmp_path)}
    env["PYTHONPATH"] = os.pathsep.join([str(sglang_touch.SITE), str(tmp_path / "shim"), str(ROOT)])
    code = (
        "import builtins, sys; from tests.support import sglang_touch as t; "
        "print('sglang.kernels.ops.gemm.cutedsl_dual_gemm' in sys.modules, hasattr(builtins, t.HOOK))"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.split()) == (0, ["True", "True"]), done.stderr[-2000:]


def test_install_refuses_sglang_imported_before_it_but_not_a_stub():
    code = textwrap.dedent(
        """
        import sys, types
        from tests.support import sglang_touch
        sys.modules["sglang.stubbed"] = types.ModuleType("sglang.stubbed")
        sglang_touch.install()
        print("stub: installed")
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, sglang_touch._Finder)]
        import sglang.srt.environ
        try:
            sglang_touch.install()
        except RuntimeError as exc:
            print("imported:", "before the hook (['sglang'," in str(exc) and "stubbed" not in str(exc))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != sglang_touch.DIR_ENV}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.split("\n")[:2] == ["stub: installed", "imported: True"], (
        done.stdout + done.stderr[-2000:]
    )
