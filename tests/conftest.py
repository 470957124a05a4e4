"""Fixtures shared by the CPU tiers. Tests that touch SGLang ask for ``sglang_cpu``; the pure-core
tests do not. Test support code lives in ``tests/support`` (importable as ``tests.support``: the
repository root is on pytest's ``pythonpath``, pyproject.toml)."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support import sglang_touch

os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
MEASURE = os.environ.get("EAGLE3_EMBED_SGLANG_TOUCH", "1") != "0"
"""Whether this run measures which tests run SGLang's code (``tests/support/sglang_touch.py``): on,
unless ``EAGLE3_EMBED_SGLANG_TOUCH=0`` (``tools.releases``, whose tests are already chosen, and
``tools/gpu_bundle.sh``: the GPU suite never meets the older releases)."""
if MEASURE:
    sglang_touch.install(owner=True)  # before any test module imports SGLang
FINDINGS: list[str] = []


def pytest_configure(config):
    """One torch thread per xdist worker, whatever test a worker runs first: two workers with a
    thread per core each fight over the cores (a probe run can get 100 times slower), and results
    trained on the CPU depend on the thread count. The first process of a run makes the folder its
    child processes (xdist workers included) report SGLang's code in."""
    if MEASURE:
        config.pluginmanager.register(FixtureWindow(), "sglang-touch-fixtures")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)
    elif MEASURE:
        os.environ[sglang_touch.DIR_ENV] = tempfile.mkdtemp(prefix="sglang-touch-")
        path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join([str(sglang_touch.SITE), *([path] if path else [])])


class FixtureWindow:
    """SGLang's code run while a fixture is set up counts for every test that uses the fixture.
    A plugin of its own: a conftest's hooks reach only the nodes under its folder, and a session
    fixture is set up for the session node, above ``tests/``."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        saved = os.environ.get(sglang_touch.KEY)
        os.environ[sglang_touch.KEY] = sglang_touch.fixture_key(fixturedef)
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop(sglang_touch.KEY, None)
            else:
                os.environ[sglang_touch.KEY] = saved


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if MEASURE and report.when == "call" and not report.skipped:
        fixtures = [d for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs]
        ran = sglang_touch.ran_sglang(item.nodeid, [sglang_touch.fixture_key(d) for d in fixtures])
        marked = any(item.get_closest_marker(m) for m in ("releases", "pinned_release"))
        if ran and not marked:
            FINDINGS.append(f"{UNMARKED}{item.nodeid} ({ran})")
        elif marked and not ran:
            FINDINGS.append(f"{IDLE}{item.nodeid}")


UNMARKED = "runs SGLang's code, not marked `releases` (add @pytest.mark.releases): "
IDLE = "marked `releases` (or `pinned_release`), ran none of SGLang's code this time (a cached value may hide it): "


def pytest_sessionfinish(session, exitstatus):
    """Each xdist worker leaves its findings in the run's folder; the first process gathers them
    and fails the run on a test that runs SGLang's code unmarked."""
    folder = os.environ.get(sglang_touch.DIR_ENV)
    if not MEASURE or not folder:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        Path(folder, f"findings-{worker}").write_text("".join(f + "\n" for f in FINDINGS))
        return
    FINDINGS.extend(
        line for p in sorted(Path(folder).glob("findings-*")) for line in p.read_text().splitlines()
    )
    shutil.rmtree(folder, ignore_errors=True)
    if any(f.startswith(UNMARKED) for f in FINDINGS) and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter):
    if FINDINGS and not os.environ.get("PYTEST_XDIST_WORKER"):
        failing = sorted({f for f in FINDINGS if f.startswith(UNMARKED)})
        idle = sum(f.startswith(IDLE) for f in FINDINGS)
        terminalreporter.section("tests and SGLang's code (tests/support/sglang_touch.py)", red=bool(failing))
        for line in failing:
            terminalreporter.write_line(line)
        terminalreporter.write_line(
            f"{idle} marked tests ran none of SGLang's code this time "
            f"(EAGLE3_EMBED_SGLANG_TOUCH_VERBOSE=1 lists them)"
        )
        if os.environ.get("EAGLE3_EMBED_SGLANG_TOUCH_VERBOSE"):
            for line in sorted(set(FINDINGS) - set(failing)):
                terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def sglang_cpu():
    """Process-global SGLang CPU state (gloo world of one, published test ServerArgs, patches) and
    the helpers that build tiny SGLang models and their HF references."""
    from tests.support import sglang_models as harness

    harness.init()
    return harness


@pytest.fixture(scope="session")
def tiny_pair(tmp_path_factory):
    """The default CPU pair (PairSpec()), built once into a cache that xdist workers share
    (concurrent builds wait on the cache lock of :func:`sglang_eagle3_embed.doctor.pair.build_pair`),
    or that several pytest runs share where ``EAGLE3_EMBED_TEST_PAIR_CACHE`` names it (``tools.releases``
    runs each older release on one build: the pair is torch's work, not SGLang's)."""
    from sglang_eagle3_embed.doctor.pair import build_pair

    root = tmp_path_factory.getbasetemp()
    cache = (root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "pair-cache"
    return build_pair(cache_dir=os.environ.get("EAGLE3_EMBED_TEST_PAIR_CACHE") or cache)


@pytest.fixture(scope="session")
def tiny_kimi_pair(tiny_pair):
    """The default CPU pair with its target wrapped as Kimi-K2.5 (``pair --arch kimi-k25``)."""
    from sglang_eagle3_embed.doctor.kimi import build_kimi_pair

    return build_kimi_pair(tiny_pair.spec, tiny_pair.target.parent)


@pytest.fixture(scope="session")
def tiny_mla_pair(tiny_pair):
    """The default CPU pair's target with an MLA draft on the same ids (``pair --draft-arch mla``)."""
    from dataclasses import replace

    from sglang_eagle3_embed.doctor.pair import build_pair

    return build_pair(replace(tiny_pair.spec, draft_arch="mla"), tiny_pair.target.parent)
