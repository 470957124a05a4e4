"""The upstream PR series (docs/upstream/NNNN-*.patch, applied by tools/upstream_patch.py) against
the installed SGLang 0.5.23: it applies in order; at every step the upstream tests of the steps so
far pass and the next step's tests fail (each PR's tests need its change); every test file a PR
adds registers to a CI suite the installed release names; the added lines pass the formatters
SGLang pins; PRs 3 and 4 stand alone; and every id list 0.5.23 serves on a DeepSeek-family target,
capture-only mode's included, captures the same tensors after the series."""

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


def test_series_is_numbered_and_extends_only_upstream_test_files():
    """A PR adds test files or extends upstream's (docs/upstream/base/), never one an earlier PR
    added."""
    assert [s.number for s in STEPS] == list(range(1, LAST + 1)) and LAST >= 2
    added: set[str] = set()
    for step in STEPS:
        assert step.tests, f"{step.name}: no upstream test"
        extended = [p for p in upstream_patch.modified_files(step.text) if p.startswith("test/")]
        assert set(extended) <= set(upstream_patch.base_files()), (step.name, extended)
        assert not added & set(extended), (step.name, extended)
        added |= set(step.added_tests)


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.name)
def test_step_tests_pass_with_the_series_up_to_it_and_fail_without_it(step, outcomes):
    with_it = outcomes[step.number]["with"]
    for rel, failures in with_it["files"].items():
        assert failures == 0, f"{rel} fails after {step.name}:\n{with_it['log']}"
    without = outcomes[step.number - 1]["next"]
    for rel in step.tests:
        assert without["files"][rel] > 0, f"{rel} passes without {step.name}:\n{without['log']}"


@pytest.mark.parametrize("number", [3, 4])
def test_argument_resolution_prs_stand_alone(number, tmp_path):
    """PRs 3 and 4 apply to 0.5.23 without the PRs before them, and their tests pass there."""
    step = STEPS[number - 1]
    root = upstream_patch.patched_tree(tmp_path, steps=[step]).parent
    outcome = upstream_patch._failures(root, step.tests)
    assert not any(outcome["files"].values()), outcome["log"]


def test_suites_are_read_from_the_installed_release():
    suites = upstream_patch.registered_suites()
    assert "base-a-test-cpu" in suites
    assert "stage-a-test-cpu" not in suites  # the name of the earlier releases


@pytest.mark.pinned_release
@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.name)
def test_step_tests_register_to_a_per_commit_suite_with_custom_test_case(step, trees):
    """Every test file a PR adds or extends runs on every commit (a weekly file would hide its
    tests from the PR's CI); the files it adds use ``CustomTestCase``."""
    for rel in step.tests:
        assert upstream_patch.registration_problems(trees[LAST] / rel) == []
    for rel in step.added_tests:
        assert upstream_patch.custom_test_case_problems(trees[LAST] / rel) == []


@pytest.mark.pinned_release
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
    weekly = bad.read_text().replace('suite="stage-a-test-cpu"', 'stage="weekly", runner_config="cpu"')
    bad.write_text(weekly)  # upstream's own resolver tests are registered so
    problems = upstream_patch.registration_problems(bad)
    assert len(problems) == 1 and "'weekly-test-cpu' runs on a schedule" in problems[0], problems
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
    from sglang.srt.model_executor.model_runner_components import spec_aux_hidden_state
    from sglang.srt.models import (
        deepseek_v2, gemma3_causal, gemma4_causal, glm4_moe, glm4_moe_lite, mistral_large_3,
    )
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
    def early(cls, ids, layers):
        check = getattr(spec_aux_hidden_state, "_check_eagle3_layer_ids", None)
        if check is None:
            return None
        hf = SimpleNamespace(architectures=[cls.__name__], num_hidden_layers=layers)
        try:
            target = SimpleNamespace(hf_config=hf, hf_text_config=hf, quantization=None, model_impl="auto")
            check(ids, target, "ids")
        except ValueError:
            return "ValueError"
        return "ok"
    for module in (gemma3_causal, gemma4_causal):  # their setters read the PP rank this way
        module.get_parallel = lambda: SimpleNamespace(pp_group=last)
    out = {}
    lists = [None, [1, 16, 33], [-1, 2, 4], [-1, 4, 10]]
    lists += [list(c) for n in (1, 2, 3) for c in itertools.product(range(-2, 9), repeat=n)]
    for cls in (deepseek_v2.DeepseekV2ForCausalLM, deepseek_v2.DeepseekV3ForCausalLM,
                deepseek_v2.DeepseekV32ForCausalLM, glm4_moe.GlmMoeDsaForCausalLM,
                mistral_large_3.MistralLarge3ForCausalLM, glm4_moe_lite.Glm4MoeLiteForCausalLM):
        out[cls.__name__] = [[ids, capture(cls, ids, 8), early(cls, ids, 8)] for ids in lists]
    for cls in (gemma3_causal.Gemma3ForCausalLM, gemma4_causal.Gemma4ForCausalLM):
        out[cls.__name__] = [
            [ids, capture(cls, ids, 34), None] for ids in ([1, 16, 33], [-1, 16, 32], None)
        ]
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


def _served(layers_to_capture, num_layers: int):
    """The capture indices a DeepSeek-family decoder loop feeds the draft, in the order it feeds
    them, or None where the forward fails: the loop captures layer ``i``'s input when ``i in
    layers_to_capture``, in layer order (``srt/models/deepseek_v2.py:3175-3196``), and the packer
    fails unless it got one tensor per listed index (``srt/layers/aux_hidden_states.py:84-90``)."""
    if not isinstance(layers_to_capture, list):
        return None  # the setter raised
    captured = [i for i in range(num_layers) if i in layers_to_capture]
    return captured if len(captured) == len(layers_to_capture) else None


def _capture_only_accepts(ids, num_layers: int) -> bool:
    """--return-aux-hidden-state-layer-ids as 0.5.23 validates it before the setter: non-empty,
    non-negative, unique, below the layer count (srt/arg_groups/validation_hook.py:735-747,
    srt/model_executor/model_runner_components/spec_aux_hidden_state.py:113-129)."""
    return bool(ids) and len(set(ids)) == len(ids) and all(0 <= i < num_layers for i in ids)


def test_every_capture_0_5_23_serves_is_the_same_after_the_series(trees):
    """Every id list of up to 3 ids in -2..8 on an 8-layer DeepSeek-family target, for each class
    the change reaches (and Gemma 3 and 4's final-layer capture on 34 layers): a list 0.5.23
    serves, in whatever order, feeds the draft the same tensors in the same order after the
    series, and the check before the weight load accepts it (capture-only mode's lists among
    them); a list 0.5.23 does not serve is refused before the weight load and by the setter, except
    lists with -1, which now serve as layer outputs."""
    before, after = _captures(trees[0]), _captures(trees[LAST])
    assert before.keys() == after.keys()
    capture_only = 0
    for model, rows in before.items():
        for (ids, old, _), (_, new, early) in zip(rows, after[model]):
            if model.startswith("Gemma"):
                assert new == old, (model, ids, old, new)
                continue
            served = _served(old, 8)
            if served is not None:
                assert _served(new, 8) == served and early in ("ok", None), (model, ids, new, early)
                capture_only += _capture_only_accepts(ids, 8)
            elif ids is not None and -1 in ids and _served([i + 1 for i in ids], 8) is not None:
                assert new == [i + 1 for i in ids] and early == "ok", (model, ids, new, early)
            else:
                assert new == "ValueError" and early == "ValueError", (model, ids, old, new, early)
    # the capture-only lists among them: of the 8 + 56 + 336 lists of distinct ids in 0..7, all
    # but [1, 7] and the 12 three-id lists that start with 1 and hold 7 (index 8), for 6 classes
    assert capture_only == 6 * (8 + 55 + 324), capture_only
    gemma = dict((str(ids), got) for ids, got, _ in after["Gemma3ForCausalLM"])
    assert gemma["[1, 16, 33]"] == [2, 17, 34]  # the final layer's output, capture index 34
