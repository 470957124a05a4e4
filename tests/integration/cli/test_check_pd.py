"""``check ARGS --pd-peer PEER_ARGS`` end to end: both command lines of a PD deployment through
SGLang's own parser and resolution, compared by the pair's rules. Matching sides exit 0; a mismatch
exits 1 with an error naming the flag and the side to change; a bad invocation exits 2; a one-sided PD launch with the plugin
always names the other side."""

import json

import pytest

from harness.rule_examples import DELETE, Scenario, launch, materialize
from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core import rule_ids
from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from tests.support import in_process

pytestmark = pytest.mark.releases


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    """``(prefill, decode)`` argument lists of the base pair (nested ``[-1, 2, 4]``), and the
    same with top-level ids, on one target and draft folder each."""
    root = tmp_path_factory.mktemp("pd")
    nested = materialize(
        Scenario(launch("--disaggregation-mode", "prefill"), fc_in_features=192), root / "nested"
    )
    top = Scenario(
        launch("--disaggregation-mode", "prefill"),
        draft={"eagle_config": DELETE, IDS_FIELD: [-1, 2, 4]},
        fc_in_features=192,
    )
    top_level = materialize(top, root / "top")

    def pair(prefill):
        decode = list(prefill)
        decode[decode.index("prefill")] = "decode"
        return prefill, decode

    return {"nested": pair(nested), "top": pair(top_level)}


def without_plugin(argv):
    i = argv.index("--model-impl")
    return argv[:i] + argv[i + 2 :]


def replaced(argv, flag, value):
    out = list(argv)
    out[out.index(flag) + 1] = value
    return out


def test_a_matching_pair_exits_0_and_answers_the_one_sided_warning(sides):
    prefill, decode = sides["nested"]
    code, out, err = in_process("check", *decode, "--pd-peer", *prefill)  # either order
    assert code == 0, out[-3000:] + err[-2000:]
    assert out.index("== the prefill side (the --pd-peer command line) ==") < out.index(
        "== the decode side (the command line) =="
    )
    pair = out.split("== the pair: the two command lines compared ==", 1)[1]
    assert "0 error(s), 0 warning(s), 0 rule(s) not checked" in pair and rule_ids.PD_PAIR_CAPTURE in pair
    assert out.count("0 error(s), 0 warning(s), 0 rule(s) not checked") == 3  # no pd-peer warning left


def test_a_one_sided_pd_launch_with_the_plugin_names_the_other_side(sides):
    prefill, _ = sides["nested"]
    code, out, _ = in_process("check", "--json", *prefill)
    report = json.loads(out)
    assert code == 0 and report["rules"]["pd-peer"] == "warning"
    (finding,) = [f for f in report["findings"] if f["rule"] == "pd-peer"]
    assert f"The decode server must pass --model-impl {MODEL_IMPL}" in finding["message"]
    assert "captured 2 of 3 aux hidden states" in finding["message"]


def test_a_stock_decode_with_nested_ids_is_an_error_naming_the_decode_side(sides):
    prefill, decode = sides["nested"]
    code, out, _ = in_process("check", "--json", *prefill, "--pd-peer", *without_plugin(decode))
    assert code == 1
    report = json.loads(out)
    assert [s["side"] for s in report["sides"]] == ["the prefill side", "the decode side"]
    assert report["ok"] is False and report["pair"]["rules"][rule_ids.PD_PAIR_PLUGIN] == "error"
    found = {f["rule"]: f["message"] for f in report["pair"]["findings"]}
    assert found[rule_ids.PD_PAIR_PLUGIN].endswith(
        f"Fix: pass --model-impl {MODEL_IMPL} on the decode side too."
    )
    assert "captured 2 of 3 aux hidden states" in found[rule_ids.PD_PAIR_CAPTURE]


def test_a_stock_decode_with_top_level_ids_is_silent_in_sglang_and_an_error_here(sides):
    prefill, decode = sides["top"]
    code, out, _ = in_process("check", *prefill, "--pd-peer", *without_plugin(decode))
    assert code == 1
    assert "silently feeds the draft the wrong tensors for every generated token" in " ".join(out.split())


def test_another_top_k_and_page_size_are_errors_naming_the_flags(sides):
    prefill, decode = sides["nested"]
    decode = [*replaced(decode, "--speculative-eagle-topk", "2"), "--page-size", "16"]
    code, out, _ = in_process("check", "--json", *prefill, "--pd-peer", *decode)
    assert code == 1
    found = [(f["rule"], f["message"].split(":")[0]) for f in json.loads(out)["pair"]["findings"]]
    assert sorted(found) == [
        (rule_ids.PD_PAIR_PAGE_SIZE, "--page-size"),
        (rule_ids.PD_PAIR_SPECULATIVE_SETTINGS, "--speculative-eagle-topk"),
    ]


def test_two_prefill_servers_are_not_a_pair(sides):
    prefill, _ = sides["nested"]
    code, out, _ = in_process("check", "--json", *prefill, "--pd-peer", *prefill)
    assert code == 1
    (roles,) = [f for f in json.loads(out)["pair"]["findings"] if f["rule"] == rule_ids.PD_PAIR_ROLES]
    assert roles["message"].endswith("Fix: pass --disaggregation-mode decode on the --pd-peer command line.")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--pd-peer"], "needs one side's launch arguments before it"),
        (["--model-path", "x", "--pd-peer"], "needs the other side's launch arguments after it"),
        (["--model-path", "x", "--pd-peer", "--model-path", "y", "--pd-peer", "z"], "given 2 times"),
        (["--model-path", "x", "--pd-peer=--model-path"], "takes no value"),
    ],
)
def test_bad_invocations_exit_2_and_say_how_to_call_it(args, said):
    code, out, _ = in_process("check", "--json", *args)
    assert code == 2
    assert said in json.loads(out)["error"]


def test_a_side_sglang_refuses_exits_2_naming_that_side(sides):
    prefill, decode = sides["nested"]
    code, _, err = in_process("check", *prefill, "--pd-peer", *decode, "--tp-size", "two")
    assert code == 2 and "the --pd-peer command line: " in err and "--tp-size" in err
    code, _, err = in_process(
        "check", *replaced(prefill, "--model-path", "/no/such/target"), "--pd-peer", *decode
    )
    assert code == 2 and "the command line: --model-path /no/such/target: no such file or folder" in err
