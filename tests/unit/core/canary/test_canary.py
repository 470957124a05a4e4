"""The canary's pure core: the expectations file read back as written and refused when damaged,
served statistics pooled as the probe pools its prompts, and the verdict naming the wiring a served
accept length matches."""

import json

import pytest

from sglang_eagle3_embed.core.canary.expectations import (
    FORMAT,
    Expectations,
    Served,
    WiringExpectation,
    generate_body,
    judge,
    pool,
    settings_differences,
)
from sglang_eagle3_embed.core.errors import InputError

TRAINED = WiringExpectation(("plugin", "ids as layer outputs"), (0, 3, 5), 4.0, 0.05, ("plugin", "literal"))
DEFAULTS = WiringExpectation(
    ("stock SGLang", "SGLang's default layers"), (2, 3, 4), 1.6, 0.04, ("stock", "defaults")
)
OFF = WiringExpectation(("layers off by one (later)",), (0, 4, 6), 2.6, 0.05, ("convention",))
NEAR = WiringExpectation(("layer 4 read as layer 3",), (0, 3, 4), 3.95, 0.05, ("convention",))


def expectations(*wirings, trained=TRAINED) -> Expectations:
    return Expectations(
        prompts=((1, 2, 3), (4, 5, 6)),
        max_new_tokens=40,
        num_steps=7,
        trained=trained,
        wirings=(trained, *wirings),
        backend="hf",
        dtype="float32",
        target_config_sha256="a" * 64,
        draft_config_sha256="b" * 64,
    )


def served(value, se=0.05):
    return Served(value, se, 32, 1280)


def test_the_file_reads_back_as_written(tmp_path):
    written = expectations(DEFAULTS, OFF)
    path = tmp_path / "expect.json"
    path.write_text(json.dumps(written.as_dict()))
    read = Expectations.read(path)
    assert read == written
    assert read.as_dict()["wirings"][0]["ids"] == [-1, 2, 4]
    assert read.settings["speculative_num_draft_tokens"] == 8


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d.update(format="other"), "not a canary expectations file"),
        (lambda d: d.update(version=9), "version 9"),
        (lambda d: d.update(version=1), "version 1; this sglang-eagle3-embed reads version 2"),
        (lambda d: d["wirings"][0].pop("kinds"), "malformed"),
        (lambda d: d["wirings"][0].update(kinds=["stock", "slip"]), "kinds .* are not 2 of"),
        (lambda d: d["wirings"][0].update(kinds=["stock"]), "kinds .* are not 2 of"),
        (lambda d: d.update(trained="nowhere"), "not among its wirings"),
        (lambda d: d.update(prompts=[]), "no prompts"),
        (lambda d: d["prompts"].append(["x"]), "malformed"),
        (lambda d: d["wirings"][0].pop("accept_length"), "malformed"),
        (lambda d: d["sampling"].update(max_new_tokens=1), "cannot be measured"),
    ],
)
def test_a_damaged_file_is_refused_with_the_fix(damage, message, tmp_path):
    data = expectations(DEFAULTS).as_dict()
    damage(data)
    path = tmp_path / "expect.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=message) as caught:
        Expectations.read(path)
    assert "probe --expectations" in str(caught.value)


def test_an_unreadable_file_names_the_flag(tmp_path):
    with pytest.raises(InputError, match=r"--expect .*cannot be read"):
        Expectations.read(tmp_path / "missing.json")
    (tmp_path / "text").write_text("not json")
    with pytest.raises(InputError, match="not JSON"):
        Expectations.read(tmp_path / "text")


def test_the_request_is_greedy_over_the_recorded_prompts():
    body = generate_body(expectations())
    assert body["input_ids"] == [[1, 2, 3], [4, 5, 6]]
    assert body["sampling_params"] == {"temperature": 0.0, "max_new_tokens": 40, "ignore_eos": True}


def test_pooling_weighs_requests_by_their_verify_steps():
    metas = [
        {"completion_tokens": 40, "spec_verify_ct": 10, "spec_accept_length": 4.0},
        {"completion_tokens": 40, "spec_verify_ct": 20, "spec_accept_length": 2.0},
        {"completion_tokens": 40, "spec_accept_length": 4.0},  # verify count from the ratio
        {"completion_tokens": 40},  # no speculation reported: left out
    ]
    got = pool(metas)
    assert got.accept_length == pytest.approx(120 / 40)
    assert got.requests == 3 and got.tokens == 120
    assert got.se > 0


def test_no_speculative_statistics_is_an_input_error():
    with pytest.raises(InputError, match="no spec_accept_length"):
        pool([{"completion_tokens": 4}])


def test_settings_that_change_accept_length_are_named():
    server = {"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_algorithm": "EAGLE3"}
    assert settings_differences(expectations(), server) == [
        "--speculative-num-steps is 3 on the server, 7 in the expectations"
    ]
    assert "adaptive" in settings_differences(expectations(), {"speculative_adaptive": True})[0]
    assert settings_differences(expectations(), {}) == []  # a router reports none: not compared


def test_the_trained_wiring_served_passes():
    verdict = judge(expectations(DEFAULTS, OFF), served(3.9))
    assert verdict.ok and verdict.matched == TRAINED
    assert "as the trained wiring [-1, 2, 4]" in verdict.lines[0]


def test_defaults_served_are_named_with_the_cause():
    verdict = judge(expectations(DEFAULTS, OFF), served(1.62))
    assert not verdict.ok and verdict.matched == DEFAULTS
    line = verdict.lines[0]
    assert "served 1.62" in line and "SGLang's default layers (1.60 predicted)" in line
    assert "trained on [-1, 2, 4] (4.00 predicted)" in line and "not running the plugin" in line


def test_off_by_one_served_names_the_convention():
    verdict = judge(expectations(DEFAULTS, OFF), served(2.55))
    assert not verdict.ok and verdict.matched == OFF
    assert "numbering" in verdict.lines[0]


def test_the_hint_follows_the_recorded_kind_not_the_name():
    renamed = WiringExpectation(("layers off by one (later)",), (0, 4, 6), 2.6, 0.05, ("other",))
    verdict = judge(expectations(renamed), served(2.55))
    assert verdict.matched == renamed and "feeds the draft other tensors" in verdict.lines[0]
    assert "numbering" not in verdict.lines[0]


def test_a_value_no_wiring_predicts_matches_none():
    verdict = judge(expectations(DEFAULTS, OFF), served(5.5))
    assert not verdict.ok and verdict.matched is None
    assert "above every prediction" in verdict.lines[0]
    assert "nearest" in judge(expectations(DEFAULTS, OFF), served(2.1)).lines[0]


def test_a_wiring_that_ties_with_the_trained_one_is_named_not_failed():
    verdict = judge(expectations(NEAR, DEFAULTS), served(3.93))
    assert verdict.ok and NEAR in verdict.alike
    assert "Not told apart" in verdict.lines[1]


def test_a_pass_reports_the_trained_wiring_as_the_match_and_the_neighbour_apart():
    verdict = judge(expectations(NEAR, DEFAULTS), served(3.94))  # nearer NEAR (3.95) than TRAINED (4.0)
    assert verdict.ok and verdict.matched == TRAINED and verdict.nearest == NEAR
    out = verdict.as_dict(served(3.94), expectations(NEAR, DEFAULTS))
    assert out["matched"] == TRAINED.name and out["nearest"] == NEAR.name
    failed = judge(expectations(DEFAULTS), served(1.62))
    assert failed.matched == failed.nearest == DEFAULTS


def test_noise_widens_the_match():
    assert not judge(expectations(DEFAULTS), served(3.0, se=0.05)).ok
    assert judge(expectations(DEFAULTS), served(3.0, se=0.3)).ok  # within 3 combined standard errors


def test_the_file_format_is_named():
    assert expectations().as_dict()["format"] == FORMAT


def test_a_failure_names_every_wrong_wiring_the_noise_cannot_separate():
    layer0 = WiringExpectation(("layer 0's output for the embedding",), (1, 3, 5), 1.48, 0.1, ("convention",))
    verdict = judge(expectations(DEFAULTS, layer0, OFF), served(1.5, se=0.06))
    assert not verdict.ok and verdict.fits == (layer0, DEFAULTS)  # nearest first; OFF (2.6) does not fit
    line = verdict.lines[0]
    assert (
        "as layer 0's output for the embedding (1.48 predicted) or stock SGLang = SGLang's default layers (1.60"
        in line
    )
    assert "numbering" in line and "not running the plugin" in line
    out = verdict.as_dict(served(1.5, se=0.06), expectations(DEFAULTS, layer0, OFF))
    assert out["fits"] == [layer0.name, DEFAULTS.name] and out["matched"] == layer0.name
