"""What each kind of server process imports of the plugin, measured in a fresh process that runs the
plugin's own hooks as SGLang runs them, against ceilings that only ever come down.

- every process SGLang starts runs ``register()`` (``srt/plugins/__init__.py``): the hooks only;
- a TP/DP worker loads the target: the architecture hook on a plugin target, which brings the
  plugin's classes and the capture path;
- the launcher resolves the launch: the validator on a launch that asks for the plugin, which brings
  the rules and the launch snapshot;
- the canary's code loads only when its warmup runs (in no kind above).
"""

import json
import subprocess
import sys

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.releases

CEILINGS = {"every process": 725, "worker": 1_565, "launcher": 4_105}
"""Lines of the package each kind imports, at most. Lower them when the code shrinks; never raise
them to let an import in: make it lazy instead."""

RUN = """
import json, sys
from pathlib import Path
from types import SimpleNamespace

from sglang_eagle3_embed import MODEL_IMPL, plugin

def lines():
    mods = {n: m for n, m in list(sys.modules.items()) if n.split(".")[0] == "sglang_eagle3_embed"}
    files = {n: getattr(m, "__file__", None) for n, m in mods.items()}
    return {n: len(Path(f).read_text().splitlines()) for n, f in files.items() if f}

plugin.register()
out = {"every process": lines()}
if sys.argv[1] == "worker":
    from sglang.srt.models.deepseek_v2 import DeepseekV3ForCausalLM

    from sglang_eagle3_embed.patch import model_architecture

    target = SimpleNamespace(model_impl=MODEL_IMPL, is_draft_model=False)
    cls, _ = model_architecture.around(lambda *a, **k: (DeepseekV3ForCausalLM, "DeepseekV3ForCausalLM"), target)
    assert cls is not DeepseekV3ForCausalLM, cls
    out["worker"] = lines()
if sys.argv[1] == "launcher":
    from sglang_eagle3_embed.patch import speculative_validation

    try:  # the rules load before the first snapshot, which this stand-in cannot give
        speculative_validation.validate_launch(SimpleNamespace(model_impl=MODEL_IMPL), lambda args: None)
    except TypeError:  # msgspec: not a ServerArgs
        pass
    out["launcher"] = lines()
print(json.dumps(out))
"""


def measured(kind: str) -> dict[str, dict[str, int]]:
    done = subprocess.run(
        [sys.executable, "-c", RUN, kind], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def kinds():
    worker, launcher = measured("worker"), measured("launcher")
    return {**worker, "launcher": launcher["launcher"]}


@pytest.mark.parametrize("kind", CEILINGS)
def test_each_kind_of_process_imports_at_most_its_ceiling(kinds, kind):
    total = sum(kinds[kind].values())
    print(f"{kind}: {total} lines in {len(kinds[kind])} modules")
    assert total <= CEILINGS[kind], sorted(kinds[kind].items(), key=lambda kv: -kv[1])


def test_a_worker_reads_of_the_core_the_capture_vocabulary_alone(kinds):
    worker = set(kinds["worker"])
    assert "sglang_eagle3_embed.patch.deepseek_capture" in worker  # it measured the model path
    assert "sglang_eagle3_embed.core.capture.draft_config" in worker
    core = {
        m.removeprefix("sglang_eagle3_embed.core.")
        for m in worker
        if m.startswith("sglang_eagle3_embed.core.")
    }
    # the shared modules at the core's top, and the capture subpackage: no readers, rules, PD or canary
    assert {m.split(".")[0] for m in core if "." in m} == {"capture"}, sorted(core)
    assert "sglang_eagle3_embed.patch.launch_snapshot" not in worker


def test_the_launcher_adds_the_validator_and_not_the_canary(kinds):
    launcher = set(kinds["launcher"])
    assert {"sglang_eagle3_embed.core.rules.table", "sglang_eagle3_embed.patch.launch_snapshot"} <= launcher
    assert not {m for m in launcher if m.startswith("sglang_eagle3_embed.core.canary")}
    assert "sglang_eagle3_embed.core.rules.pair" not in launcher  # no server compares two command lines
