"""core.rules_weights: the rules that read the weights' headers judge the configs SGLang builds
(overrides applied) against what the weights hold, and say "not checked" when the weights were not
read. Pure: Deployments built from dictionaries."""

import pytest

from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.core.findings import Severity
from sglang_eagle3_embed.core.readers.deployment import Deployment
from tests.support.deployments import DRAFT, READ, TARGET, deployment, findings

HELD = READ["target_layers"]


def found(d: Deployment, rule_id: str):
    return [f for f in findings(d) if f.rule == rule_id]


def messages(d, rule_id):
    return [f.message for f in found(d, rule_id) if f.severity is Severity.ERROR]


def test_the_base_deployment_passes_every_weight_rule():
    for rule_id in ("target-layer-count", "draft-layer-count", "draft-fc-skipped", "draft-fc-width"):
        assert found(deployment(), rule_id) == [], rule_id


def test_the_fc_is_skipped_where_the_captured_width_equals_the_drafts_hidden_size():
    skipped = {**DRAFT, "hidden_size": 192, "target_hidden_size": 64}
    (message,) = messages(deployment(draft=skipped), "draft-fc-skipped")
    assert "3 x 64 = 192" in message and "hidden_size is 192" in message and "skipped" in message
    assert messages(deployment(draft={**skipped, "hidden_size": 128}), "draft-fc-skipped") == []


def test_one_capture_of_the_drafts_own_width_skips_the_fc():
    one = {**DRAFT, "eagle_config": {IDS_FIELD: [-1]}}
    assert messages(deployment(draft=one, draft_fc_in_features=64), "draft-fc-skipped")


def test_an_override_of_the_layer_count_reaches_both_models():
    d = deployment(overrides={"num_hidden_layers": 6})
    (target,) = messages(d, "target-layer-count")
    (draft,) = messages(d, "draft-layer-count")
    assert (
        "num_hidden_layers 6 (set by --json-model-override-args)" in target
        and "skip layers 6-7 of the target" in target
    )
    assert "run layers 1-5 of the draft on uninitialised memory" in draft
    assert "drop num_hidden_layers from --json-model-override-args" in draft


def test_layers_the_config_counts_and_the_weights_lack():
    (target,) = messages(deployment(target_layers={i: HELD[i] for i in range(6)}), "target-layer-count")
    assert "hold layers 0-5" in target and "run layers 6-7 of the target on uninitialised memory" in target
    assert "set num_hidden_layers to 6" in target
    (draft,) = messages(deployment(draft_layers=frozenset({0, 1})), "draft-layer-count")
    assert "skip layer 1 of the draft" in draft and "set num_hidden_layers to 2" in draft


@pytest.mark.parametrize(
    "kwargs, why",
    [
        ({"target_layers": None, "target_weights_error": "/t holds no *.safetensors weights"}, "/t holds no"),
        ({"target_layers": None}, "could not be read"),
    ],
)
def test_target_weights_not_read_are_not_checked(kwargs, why):
    (finding,) = found(deployment(**kwargs), "target-layer-count")
    assert finding.severity is Severity.NOT_CHECKED and why in finding.message


def test_draft_weights_not_read_are_not_checked():
    (finding,) = found(
        deployment(draft_layers=None, draft_fc_in_features=None, draft_weight_files=()), "draft-layer-count"
    )
    assert finding.severity is Severity.NOT_CHECKED and "no *.safetensors" in finding.message


def test_the_mtp_rule_says_not_checked_without_the_targets_weights():
    raw = {"speculative_algorithm": "EAGLE"}
    d = Deployment(raw=raw, target=TARGET, target_weights_error="/t holds no *.safetensors weights")
    (finding,) = found(d, "mtp-layer-missing")
    assert finding.severity is Severity.NOT_CHECKED and "/t holds no" in finding.message
