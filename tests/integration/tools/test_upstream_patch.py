"""The upstream PR series (docs/upstream/NNNN-*.patch, applied by tools/upstream_patch.py) against
the installed SGLang 0.5.23: it applies in order; at every step the upstream tests of the steps so
far pass and the next step's tests fail (each PR's tests need its change); every test file
registers to a CI suite the installed release names; the added lines pass the formatters SGLang
pins; and no capture that works on 0.5.23 is refused or changed after the series."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tools import upstream_patch

STEPS = upstream_patch.series()
LAST = len(STEPS)


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    """The installed sglang with the first k PRs applied, for k = 0 .. LAST (roots)."""
    return upstream_patch.step_trees(tmp_path_factory.mktemp("series"), STEPS)


@pytest.fixture(scope="module")
def outcomes(trees):
    """Per tree k: each test file of the steps up to k + 1 with its failure count."""
    return upstream_patch.failures_per_file(trees, STEPS)


def test_series_is_numbered_and_patches_never_edit_an_earlier_test():
    assert [s.number for s in STEPS] == list(range(1, LAST + 1)) and LAST >= 2
    for step in STEPS:
        assert step.tests, f"{step.name}: no upstream test"
        assert not [p for p in upstream_patch.modified_files(step.text) if p.startswith("test/")]


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.name)
def test_step_tests_pass_with_the_series_up_to_it_and_fail_without_it(step, outcomes):
    with_it = outcomes[step.number]
    for earlier in STEPS[: step.number]:
        for rel in earlier.tests:
            assert with_it["files"][rel] == 0, f"{rel} fails after {step.name}:\n{with_it['log']}"
    without = outcomes[step.number - 1]
    for rel in step.tests:
        assert without["files"][rel] > 0, f"{rel} passes without {step.name}:\n{without['log']}"


def test_suites_are_read_from_the_installed_release():
    suites = upstream_patch.registered_suites()
    assert "base-a-test-cpu" in suites
    assert "stage-a-test-cpu" not in suites  # the name of the earlier releases


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.name)
def test_step_tests_register_to_a_known_suite_with_custom_test_case(step, trees):
    for rel in step.tests:
        path = trees[LAST] / rel
        assert upstream_patch.registration_problems(path) == []
        assert upstream_patch.custom_test_case_problems(path) == []


def test_registration_problems_name_an_unknown_suite_and_a_missing_entry(tmp_path):
    bad = tmp_path / "test_x.py"
    bad.write_text(
        textwrap.dedent(
            """\
            import unittest
            from sglang.test.ci.ci_register import register_cpu_ci
            register_cpu_ci(est_time=1, suite="stage-a-test-cpu")
            class TestX(unittest.TestCase):
                def test_x(self):
                    pass
            """
        )
    )
    assert "main" in " ".join(upstream_patch.registration_problems(bad))
    bad.write_text(bad.read_text() + 'if __name__ == "__main__":\n    unittest.main()\n')
    problems = upstream_patch.registration_problems(bad)
    assert len(problems) == 1 and "'stage-a-test-cpu'" in problems[0]
    assert "TestX" in upstream_patch.custom_test_case_problems(bad)[0]


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.name)
def test_added_lines_pass_the_formatters_sglang_pins(step, trees):
    assert upstream_patch.format_problems(trees[step.number], step) == []


def test_format_check_sees_a_badly_formatted_added_line(tmp_path):
    root = tmp_path / "tree"
    (root / "python").mkdir(parents=True)
    (root / "python" / "m.py").write_text("x = 1\ny = [ 1,2 ]  # recieve\n")
    patch = tmp_path / "0001-x.patch"
    patch.write_text(
        "diff --git a/python/m.py b/python/m.py\n--- a/python/m.py\n+++ b/python/m.py\n"
        "@@ -1 +1,2 @@\n x = 1\n+y = [ 1,2 ]  # recieve\n"
    )
    problems = upstream_patch.format_problems(root, upstream_patch.Step(1, patch))
    assert any("black" in p for p in problems) and any("codespell" in p for p in problems)


CAPTURES = textwrap.dedent(
    """\
    import itertools, json, sys
    from types import SimpleNamespace
    from sglang.srt.models import deepseek_v2, gemma3_causal, gemma4_causal, glm4_moe_lite
    last = SimpleNamespace(is_last_rank=True)
    def capture(cls, ids, layers):
        fake = SimpleNamespace(
            pp_group=last, config=SimpleNamespace(num_hidden_layers=layers),
            model=SimpleNamespace(layers_to_capture=[]), capture_aux_hidden_states=False,
        )
        try:
            cls.set_eagle3_layers_to_capture(fake, ids)
        except Exception as err:
            return type(err).__name__
        return fake.model.layers_to_capture
    for module in (gemma3_causal, gemma4_causal):  # their setters read the PP rank this way
        module.get_parallel = lambda: SimpleNamespace(pp_group=last)
    out = {}
    lists = [None, [1, 16, 33], [-1, 2, 4], [-1, 4, 10]]
    lists += [list(c) for n in (1, 2, 3) for c in itertools.product(range(-2, 9), repeat=n)]
    for cls in (deepseek_v2.DeepseekV2ForCausalLM, deepseek_v2.DeepseekV3ForCausalLM,
                deepseek_v2.DeepseekV32ForCausalLM, glm4_moe_lite.Glm4MoeLiteForCausalLM):
        out[cls.__name__] = [[ids, capture(cls, ids, 8)] for ids in lists]
    for cls in (gemma3_causal.Gemma3ForCausalLM, gemma4_causal.Gemma4ForCausalLM):
        out[cls.__name__] = [[ids, capture(cls, ids, 34)] for ids in ([1, 16, 33], [-1, 16, 32], None)]
    json.dump(out, sys.stdout)
    """
)


def _captures(root: Path) -> dict:
    env = {"PYTHONPATH": str(root / "python"), "TORCHDYNAMO_DISABLE": "1", "PATH": "/usr/bin:/bin"}
    run = subprocess.run(
        [sys.executable, "-c", CAPTURES], env=env, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def _works_on_0_5_23(indices, num_layers: int) -> bool:
    """What a 0.5.23 DeepSeek loop serves as the draft asked: every id captured once, in order."""
    return (
        isinstance(indices, list)
        and bool(indices)
        and all(isinstance(i, int) and 0 <= i < num_layers for i in indices)
        and indices == sorted(set(indices))
    )


def test_no_capture_that_works_on_0_5_23_changes_after_the_series(trees):
    """Every id list of up to 3 ids in -2..8 on an 8-layer DeepSeek-family target (and Gemma 3 and
    4's final-layer capture on 34 layers): what served before captures the same tensors after;
    what did not is an error after, except lists with -1, which now serve as layer outputs."""
    before, after = _captures(trees[0]), _captures(trees[LAST])
    assert before.keys() == after.keys()
    for model, rows in before.items():
        for (ids, old), (_, new) in zip(rows, after[model]):
            if model.startswith("Gemma") or _works_on_0_5_23(old, 8):
                assert new == old, (model, ids, old, new)
            elif ids is not None and -1 in ids and _works_on_0_5_23([i + 1 for i in ids], 8):
                assert new == [i + 1 for i in ids], (model, ids, new)
            else:
                assert new == "ValueError", (model, ids, old, new)
    gemma = dict((str(ids), got) for ids, got in after["Gemma3ForCausalLM"])
    assert gemma["[1, 16, 33]"] == [2, 17, 34]  # the final layer's output, capture index 34
