"""Every validation rule fires on its example and not on a close one, through SGLang 0.5.23's real
argument resolution on tiny local config folders (harness/rule_examples.py), and the launch
hook (patch/speculative_validation.py) refuses in the launcher, before any GPU work."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.rule_examples import BASE_TARGET, EXAMPLES, Scenario, launch
from sglang_eagle3_embed.core.capture.draft_config import DRAFT_ARCHS
from sglang_eagle3_embed.core.findings import Severity
from sglang_eagle3_embed.core.rules.table import RULES, every_rule
from tests.support import needs_capture_only
from tests.support.strategies import messy_draft_config
from tests.unit.core.capture.test_draft_config import oracle

pytestmark = pytest.mark.releases


@pytest.fixture(scope="module")
def check(tmp_path_factory):
    from tools.validation_docs import findings_for

    counter = iter(range(10**6))

    def run(scenario: Scenario):
        return findings_for(scenario, tmp_path_factory.mktemp(f"s{next(counter)}"))

    return run


def test_every_rule_has_examples():
    assert set(every_rule()) == set(EXAMPLES)


def test_the_base_deployment_is_clean(check):
    assert check(Scenario(fc_in_features=192)) == []  # with weights to read, every rule is checked


@pytest.mark.parametrize("rule_id", list(every_rule()))
def test_rule_fires_on_its_example_and_not_on_a_close_one(check, rule_id):
    fires, passes = EXAMPLES[rule_id]
    fired = [f for f in check(fires) if f.rule == rule_id]
    assert fired, f"{rule_id} did not fire"
    assert all(f.severity is every_rule()[rule_id].severity for f in fired)
    assert all(f.message for f in fired)
    assert not [f for f in check(passes) if f.rule == rule_id]


def test_seed_flags_are_refused_with_both_fixes(check):
    """The seed: --speculative-num-steps 1 silently turned 16 draft tokens into 2."""
    found = {f.rule: f for f in check(Scenario(launch(steps=(1, 1, 16))))}
    message = found["draft-tokens-rewritten"].message
    assert found["draft-tokens-rewritten"].severity is Severity.ERROR
    assert "--speculative-num-draft-tokens 16" in message and "silently draft 2 tokens" in message
    assert "--speculative-num-steps 15" in message and "--speculative-num-draft-tokens 2" in message


FLAG_CHOICES = st.fixed_dictionaries(
    {
        "algorithm": st.sampled_from(["EAGLE3", "EAGLE", "NEXTN"]),
        "steps": st.one_of(st.none(), st.integers(1, 8)),
        "topk": st.one_of(st.none(), st.integers(1, 4)),
        "draft_tokens": st.one_of(st.none(), st.integers(2, 16)),
        "draft": st.booleans(),
        "pp": st.sampled_from([1, 2]),
        "tbo": st.booleans(),
        "impl": st.sampled_from(["sglang_eagle3_embed", None]),
    }
)


@settings(
    max_examples=int(__import__("os").environ.get("EAGLE3_EMBED_RULE_EXAMPLES", 60)),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(flags=FLAG_CHOICES, draft=messy_draft_config())
def test_random_flags_and_draft_json_give_findings_never_a_traceback(check, flags, draft):
    extra = ["--pp-size", str(flags["pp"])] + (["--enable-two-batch-overlap"] if flags["tbo"] else [])
    argv = launch(
        *extra,
        steps=(flags["steps"], flags["topk"], flags["draft_tokens"]),
        algorithm=flags["algorithm"],
        draft=flags["draft"],
        impl=flags["impl"],
    )
    findings = check(Scenario(argv, draft={"__raw__": __import__("json").dumps(draft)}))
    rules = {f.rule for f in findings}
    eagle3 = flags["algorithm"] == "EAGLE3"
    steps, topk, tokens = flags["steps"], flags["topk"], flags["draft_tokens"]

    # An independent oracle for the flag rules.
    partial = steps is None and (topk is not None or tokens is not None)
    assert ("partial-spec-triple" in rules) == partial
    if partial:
        return  # SGLang's resolution is not run on a refused command line
    if "sglang-resolution" in rules:
        return  # SGLang itself refused (e.g. EAGLE with NEXTN checks); reported, not a traceback
    assert ("draft-path-missing" in rules) == (eagle3 and not flags["draft"])
    rewritten = steps is not None and topk == 1 and tokens is not None and tokens != steps + 1
    assert ("draft-tokens-rewritten" in rules) == rewritten
    assert ("pipeline-parallel" in rules) == (eagle3 and flags["pp"] > 1)
    assert ("two-batch-overlap" in rules) == (eagle3 and flags["tbo"])
    if eagle3 and flags["draft"]:
        draft_errors = {r for r in rules if r.startswith("draft-") and RULES[r].severity is Severity.ERROR}
        draft_errors -= {
            "draft-path-missing", "draft-tokens-rewritten", "draft-vocab", "draft-target-hidden",
            "draft-architecture",
        }  # fmt: skip
        assert bool(draft_errors) == (oracle(draft, BASE_TARGET["num_hidden_layers"]) is None), rules
        if isinstance(draft, dict):  # the class SGLang would load the draft as
            archs = draft.get("architectures")
            loadable = isinstance(archs, list) and archs and archs[0] in DRAFT_ARCHS
            loadable = loadable and all(isinstance(a, str) for a in archs)
            assert ("draft-architecture" in rules) == (not loadable), (archs, rules)


def test_adaptive_rewrite_of_explicit_draft_tokens_is_refused(check):
    found = {f.rule: f for f in check(Scenario(launch("--speculative-adaptive", steps=(3, 1, 8))))}
    message = found["draft-tokens-rewritten"].message
    assert "silently draft 4 tokens instead of 8" in message
    assert (
        "drop --speculative-num-draft-tokens (adaptive picks it), or drop --speculative-adaptive" in message
    )


@needs_capture_only()
def test_capture_only_launch_with_the_plugin_is_not_an_eagle3_deployment(check):
    """--enable-return-aux-hidden-states names the capture convention with --speculative-algorithm
    EAGLE3 but runs no speculation and takes no draft (the probe's engine backend launches this)."""
    flags = launch("--enable-return-aux-hidden-states", steps=(None, None, None), draft=False)
    errors = [f for f in check(Scenario(flags)) if f.severity is Severity.ERROR]
    assert errors == []


def test_launch_with_the_seed_flags_is_refused_before_any_gpu_work(healthy_plugin):
    """The validator wraps SGLang's handle_speculative_decoding step in the launcher process."""
    refused = healthy_plugin["seed_launch"]["sglang_eagle3_embed"]
    assert refused["error"] == "ValidationError"
    assert "[draft-tokens-rewritten]" in refused["message"]
    assert "--speculative-num-steps 15" in refused["message"]
    assert "--speculative-num-draft-tokens 2" in refused["message"]
    assert healthy_plugin["seed_launch"]["null"]["ok"] == "resolved"  # other launches: SGLang as before


def test_warnings_are_logged_and_the_launch_goes_on(healthy_plugin):
    assert healthy_plugin["warned_launch"]["ok"] == "resolved"
    logged = [w for w in healthy_plugin["warnings"] if "[draft-ids-undeclared]" in w]
    assert len(logged) == 1, healthy_plugin["warnings"]
