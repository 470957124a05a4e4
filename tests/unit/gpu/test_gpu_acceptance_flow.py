"""The GPU acceptance tests' own logic, on the CPU: each test asks for engines SGLang can start (every
keyword a ``ServerArgs`` argument, one configuration per engine name), and the lossless check tells a
near-tie from a real difference. Device time is scarce; a typo must not cost an engine start."""

import inspect

import pytest

from tests.gpu import engine_run
from tests.gpu import test_acceptance as acceptance

PROMPTS = 48


def fake_result(modes, top_logprobs, kwargs, outputs):
    if "pp_size" in kwargs:
        return {
            "ok": False,
            "log": "ValidationError: [pipeline-parallel] --pp-size 2 with EAGLE3",
            "error": "",
        }
    if kwargs.get("speculative_draft_model_path") == "NESTED" and "model_impl" not in kwargs:
        return {"ok": False, "log": "RuntimeError: captured 2 of 3 aux hidden states", "error": ""}
    run = {"outputs": outputs, "accept_length": [3.0] * PROMPTS, "tokens_per_s": 1.0}
    result = {"ok": True, "log": "", "modes": {m: run for m in modes}, **run}
    if top_logprobs:
        result.update(margins=[[2.0] * len(o) for o in outputs], margins_outputs=outputs)
    return result


@pytest.fixture
def recorded(monkeypatch):
    monkeypatch.setattr(acceptance.torch.cuda, "device_count", lambda: 2)
    calls = {}
    outputs = [[i, i + 1, i + 2] for i in range(PROMPTS)]

    def serve(name, modes=("all",), timeout=300, top_logprobs=None, **kwargs):
        assert calls.setdefault(name, kwargs) == kwargs, f"{name}: two configurations under one name"
        return fake_result(modes, top_logprobs, kwargs, outputs)

    drafts = {"nested": "NESTED", "top-level": "TOP", "hand-written": "HAND"}
    return serve, drafts, calls


def test_every_engine_the_acceptance_tests_start_takes_only_sglang_arguments(recorded):
    from sglang.srt.server_args import ServerArgs

    serve, drafts, calls = recorded
    acceptance.test_stock_fails_at_startup_on_nested_ids(serve, drafts)
    acceptance.test_greedy_outputs_are_lossless(serve, drafts)
    acceptance.test_request_cap_behaves_as_in_stock_sglang(serve, drafts)
    acceptance.test_dp_attention_eager_behaves_as_in_stock_sglang(serve, drafts)
    for params in acceptance.MULTI_GPU:
        acceptance.test_multi_gpu(serve, drafts, *params)
    fields = set(inspect.signature(ServerArgs).parameters)  # what sgl.Engine(**kwargs) accepts
    for name, kwargs in calls.items():
        unknown = set(kwargs) - fields
        assert not unknown, f"{name}: not SGLang engine arguments: {sorted(unknown)}"
    assert {"plugin-tp2", "no-spec-tp2", "plugin-dp-attention2-eager", "stock-hand-written-cap8"} <= set(
        calls
    )
    assert calls["stock-hand-written-cap8"]["speculative_draft_model_path"] == "HAND"
    assert "model_impl" not in calls["stock-hand-written-dp-attention2-eager"]


def lossless_inputs(margin_at_difference):
    outputs = [[i, i + 1, i + 2] for i in range(40)]
    base = {
        "ok": True,
        "outputs": outputs,
        "margins_outputs": outputs,
        "margins": [[2.0] * 3 for _ in outputs],
    }
    base["margins"][5][1] = margin_at_difference
    changed = [list(o) for o in outputs]
    changed[5][1] = 99  # prompt 5 leaves the reference at its 2nd token
    result = {"ok": True, "modes": {"one-by-one": {"outputs": changed}, "batches-of-8": {"outputs": outputs}}}
    return base, result


def test_lossless_accepts_a_difference_at_a_near_tie():
    acceptance.assert_lossless(*lossless_inputs(engine_run.NEAR_TIE / 2))


def test_lossless_refuses_a_difference_where_the_target_was_sure():
    with pytest.raises(AssertionError, match=r"not near a tie: \[\(5, 1, 2.0\)\]"):
        acceptance.assert_lossless(*lossless_inputs(2.0))


def test_lossless_accepts_a_difference_plain_decoding_also_made():
    base, result = lossless_inputs(2.0)
    acceptance.assert_lossless(base, result, [result["modes"]["one-by-one"]["outputs"]])
    with pytest.raises(AssertionError, match="not near a tie"):
        acceptance.assert_lossless(base, result, [base["outputs"]])


def test_lossless_needs_enough_identical_prompts(monkeypatch):
    monkeypatch.setattr(acceptance, "MIN_IDENTICAL", 40)
    with pytest.raises(AssertionError, match=r"\[5\]"):
        acceptance.assert_lossless(*lossless_inputs(0.01))


CRASH = {"ok": False, "error": "x: no result after 300 s", "log": "Traceback ...\nAssertionError\n"}


@pytest.mark.parametrize(
    ("plugin", "stock", "verdict"),
    [
        (CRASH, CRASH, None),  # failing alike
        (CRASH, {**CRASH, "log": "torch.OutOfMemoryError: CUDA out of memory"}, "AssertionError"),
        (
            {**CRASH, "error": "ValueError: detokenizer_port at 30235 is not available"},
            CRASH,
            "could not start",
        ),
    ],
    ids=["same-failure", "different-failures", "port-in-use"],
)
def test_failing_alike_means_the_same_failure_on_a_host_that_could_start_both(plugin, stock, verdict):
    results = {"plugin-x": plugin, "stock-hand-written-x": stock}

    def serve(name, **kwargs):
        return dict(results[name])

    drafts = {"nested": "NESTED", "hand-written": "HAND"}
    if verdict is None:
        acceptance.same_as_stock(serve, "x", drafts)
    elif verdict == "AssertionError":
        with pytest.raises(AssertionError):
            acceptance.same_as_stock(serve, "x", drafts)
    else:
        with pytest.raises(pytest.fail.Exception, match=verdict):
            acceptance.same_as_stock(serve, "x", drafts)
