"""The rules never pass what they could not evaluate: a rule that lacks what it reads (a layer
count, a capture plan, the draft's weights) says "not checked" and why, and a target without a
layer count is an error before any GPU work. Pure: Deployments built from dictionaries."""

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.core.findings import Finding, Severity
from sglang_eagle3_embed.core.readers.deployment import Deployment
from sglang_eagle3_embed.core.rules.table import RULES, Stage, evaluate, refused
from sglang_eagle3_embed.doctor.check import render_json, render_table, verdicts
from tests.support.deployments import DRAFT, READ, TARGET, findings
from tests.support.deployments import deployment as launch

NOT_READ = {k: None if k != "draft_weight_files" else () for k in READ}
"""Nothing read of either checkpoint's weights."""


def deployment(**kwargs) -> Deployment:
    """A launch whose weights were not read unless ``kwargs`` gives what was read of them."""
    return launch(**{**NOT_READ, **kwargs})


def by_rule(found):
    return {f.rule: f for f in found}


def test_the_base_deployment_checks_every_rule_that_applies():
    found = findings(deployment(**READ))
    assert found == []
    assert set(verdicts(found).values()) == {"ok"}


def test_a_target_without_a_layer_count_is_an_error_and_its_draft_rules_are_not_checked():
    target = {k: v for k, v in TARGET.items() if k != "num_hidden_layers"}
    draft = {**DRAFT, "eagle_config": {IDS_FIELD: [-1, 2, 99]}}  # out of range for any small target
    found = by_rule(findings(deployment(target=target, draft=draft, **READ)))
    assert found["target-config"].severity is Severity.ERROR
    assert "num_hidden_layers" in found["target-config"].message
    for rule_id in ("draft-ids-range", "draft-aux-count", "draft-fc-width"):
        assert found[rule_id].severity is Severity.NOT_CHECKED, rule_id
        assert "target-config" in found[rule_id].message
    assert verdicts(list(found.values()))["draft-ids-range"] == "not checked"


def test_rules_after_a_failed_capture_plan_are_not_checked():
    draft = {**DRAFT, "eagle_config": {IDS_FIELD: [-1, 2, 2]}}
    found = by_rule(findings(deployment(draft=draft, **READ)))
    assert found["draft-ids-invalid"].severity is Severity.ERROR
    assert found["draft-ids-range"].severity is Severity.NOT_CHECKED
    assert found["draft-fc-width"].severity is Severity.NOT_CHECKED


def test_weights_not_read_are_not_checked_and_unreadable_weights_are_an_error():
    found = by_rule(findings(deployment(target_weights_error="TARGET holds no *.safetensors weights")))
    for rule_id in ("draft-fc-width", "draft-layer-count", "target-layer-count"):
        assert found[rule_id].severity is Severity.NOT_CHECKED, rule_id
    assert "TARGET holds no *.safetensors weights" in found["target-layer-count"].message
    broken = by_rule(findings(deployment(draft_weights_error="DRAFT/model.safetensors: truncated")))
    assert broken["draft-weights-unreadable"].severity is Severity.ERROR
    assert "DRAFT/model.safetensors: truncated" in broken["draft-weights-unreadable"].message


def test_a_missing_draft_config_leaves_the_draft_rules_not_checked():
    found = by_rule(findings(Deployment(raw={"speculative_algorithm": "EAGLE3"}, target=TARGET)))
    assert found["draft-path-missing"].severity is Severity.ERROR
    assert found["draft-ids-range"].severity is Severity.NOT_CHECKED


def test_not_checked_is_reported_apart_from_errors_and_warnings():
    found = findings(deployment())
    table, report = render_table(found), render_json(found)
    assert "not checked" in table and "3 rule(s) not checked" in table
    assert '"ok": true' in report and '"not checked"' in report


def test_every_rule_can_say_not_checked_or_does_not_need_to():
    """Rules that read the capture plan, the target's widths or the draft's weights are the ones
    that can lack their input; the table lists them so that a new rule is classified too."""
    may_be_unchecked = {
        "target-config", "draft-config-shape", "draft-ids-invalid", "draft-ids-conflict",
        "draft-ids-convention", "draft-ids-range", "draft-use-aux-off", "draft-aux-count",
        "draft-ids-missing", "draft-ids-undeclared", "draft-fc-width", "draft-target-hidden",
        "draft-vocab", "stock-misreads-draft", "target-layer-count", "draft-layer-count",
        "draft-fc-skipped", "mtp-layer-missing",
    }  # fmt: skip
    target = {"architectures": ["DeepseekV3ForCausalLM"]}
    found = findings(
        Deployment(raw={"speculative_algorithm": "EAGLE3", "model_impl": MODEL_IMPL}, target=target)
    )
    unchecked = {f.rule for f in found if f.severity is Severity.NOT_CHECKED}
    assert unchecked <= may_be_unchecked <= set(RULES)


def test_sglang_refusing_the_launch_is_reported_by_the_resolution_rule():
    d = deployment(**READ)
    assert evaluate(d, Stage.RESOLUTION) == []
    refusal = refused(d, ValueError("TRTLLM MLA backend is only supported on Blackwell GPUs"))
    assert evaluate(refusal, Stage.RESOLUTION) == [
        Finding(
            "sglang-resolution",
            Severity.ERROR,
            "ValueError: TRTLLM MLA backend is only supported on Blackwell GPUs",
        )
    ]
    assert findings(refusal) == findings(d) == []  # the other stages read the launch as before
