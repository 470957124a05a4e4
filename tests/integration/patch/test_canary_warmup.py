"""The startup self-check (``patch/canary_warmup.py``): registered in SGLang's warmup registry,
it passes a server that feeds the draft the trained tensors, and on one that does not it logs the
verdict (``log``) or stops the server as a failed warmup does (``raise``); a check that cannot run
(no file, a PD server, other settings or configs, a bad mode) stops the server with the reason.
The server is SGLang's ``GenerateReqInput`` through a tokenizer manager answering with the tiny
pair's real speculative statistics on the CPU."""

import asyncio
import logging
from types import SimpleNamespace

import pytest

from sglang_eagle3_embed import patch
from sglang_eagle3_embed.core.canary.expectations import ENV_FILE, ENV_MODE, WARMUP
from sglang_eagle3_embed.patch import canary_warmup
from tests.support.canary import record_expectations
from tests.support.speculation import Speculation

pytestmark = pytest.mark.releases
STEPS = 7
TRAINED, DEFAULTS = (0, 3, 5), (2, 3, 4)


@pytest.fixture(scope="module")
def expect(tiny_pair, tmp_path_factory):
    path = tmp_path_factory.mktemp("warmup") / "expect.json"
    return record_expectations(tiny_pair, path, num_prompts=24, steps=STEPS)


class Manager:
    """A tokenizer manager serving the pair under ``indices``; records what it was asked."""

    def __init__(self, pair, indices, **args):
        self.speculation = Speculation(pair.target, pair.draft, indices, STEPS)
        self.server_args = SimpleNamespace(
            speculative_algorithm="EAGLE3",
            speculative_num_steps=STEPS,
            speculative_eagle_topk=1,
            speculative_num_draft_tokens=STEPS + 1,
            speculative_adaptive=False,
            model_path=str(pair.target),
            speculative_draft_model_path=str(pair.draft),
        )
        vars(self.server_args).update(args)
        self.asked = []

    def generate_request(self, obj, request):
        self.asked.append(obj)

        async def answers():
            metas = self.speculation(obj.input_ids, obj.sampling_params["max_new_tokens"])
            yield [{"meta_info": m} for m in metas]

        return answers()


@pytest.fixture
def stopped(monkeypatch):
    """Messages the check stopped the server with (the process tree is not killed here)."""
    import sglang.srt.utils

    calls = []
    monkeypatch.setattr(sglang.srt.utils, "kill_process_tree", lambda pid, **kw: calls.append(pid))
    return calls


def check(manager, mode="null"):
    return asyncio.run(canary_warmup.self_check(mode, manager))


def test_install_registers_the_warmup():
    """``patch.install()`` registers each module of ``HOOKS``; this one is registered alone here,
    since installing them all in a test process would arm the launch guards without activating
    the plugin (``plugin.register()`` does both, in SGLang's processes)."""
    from sglang.srt.entrypoints.warmup import _warmup_registry

    assert canary_warmup in patch.HOOKS
    canary_warmup.register()
    assert _warmup_registry[WARMUP] is canary_warmup.self_check


def test_a_correct_server_passes(tiny_pair, expect, monkeypatch, stopped, caplog):
    monkeypatch.setenv(ENV_FILE, str(expect))
    monkeypatch.setenv(ENV_MODE, "raise")
    manager = Manager(tiny_pair, TRAINED)
    with caplog.at_level(logging.INFO, logger="sglang_eagle3_embed"):
        assert check(manager) is True
    assert stopped == []
    asked = manager.asked[0]
    assert asked.sampling_params == {"temperature": 0.0, "max_new_tokens": 24, "ignore_eos": True}
    assert "as the trained wiring [-1, 2, 4]" in caplog.text and " s)" in caplog.text


def test_a_miswired_server_is_logged_in_log_mode(tiny_pair, expect, monkeypatch, stopped, caplog):
    monkeypatch.setenv(ENV_FILE, str(expect))
    monkeypatch.delenv(ENV_MODE, raising=False)
    with caplog.at_level(logging.INFO, logger="sglang_eagle3_embed"):
        assert check(Manager(tiny_pair, DEFAULTS)) is False
    assert stopped == []
    assert "as SGLang's default layers" in caplog.text
    assert any(r.levelno == logging.ERROR for r in caplog.records)


def test_a_miswired_server_is_stopped_in_raise_mode(tiny_pair, expect, monkeypatch, stopped, caplog):
    monkeypatch.setenv(ENV_FILE, str(expect))
    monkeypatch.setenv(ENV_MODE, "raise")
    with caplog.at_level(logging.INFO, logger="sglang_eagle3_embed"):
        assert check(Manager(tiny_pair, DEFAULTS)) is False
    assert len(stopped) == 1
    assert "stopping the server" in caplog.text and "as SGLang's default layers" in caplog.text


@pytest.mark.parametrize(
    ("env", "args", "mode", "message"),
    [
        ({ENV_FILE: None}, {}, "null", f"{ENV_FILE} names no expectations file"),
        ({}, {}, "decode", "--disaggregation-mode decode: one side of a PD deployment"),
        ({}, {"speculative_num_steps": 3}, "null", "--speculative-num-steps is 3 on the server"),
        (
            {},
            {"speculative_draft_model_path": "TARGET"},
            "null",
            "not the one the expectations were recorded on",
        ),
        ({ENV_MODE: "loud"}, {}, "null", f"{ENV_MODE}=loud: use log or raise"),
        ({ENV_FILE: "/nonexistent/expect.json"}, {}, "null", "cannot be read"),
    ],
)
def test_a_check_that_cannot_run_stops_the_server(
    tiny_pair, expect, monkeypatch, stopped, caplog, env, args, mode, message
):
    monkeypatch.setenv(ENV_FILE, str(expect))
    monkeypatch.setenv(ENV_MODE, "log")
    for key, value in env.items():
        if value is None:
            monkeypatch.delenv(key)
        else:
            monkeypatch.setenv(key, value)
    if args.get("speculative_draft_model_path") == "TARGET":  # another model folder's config
        args = {"speculative_draft_model_path": str(tiny_pair.target)}
    with caplog.at_level(logging.INFO, logger="sglang_eagle3_embed"):
        assert check(Manager(tiny_pair, TRAINED, **args), mode) is False
    assert len(stopped) == 1
    assert message in caplog.text


def test_an_edited_config_of_the_recorded_draft_is_judged(
    tiny_pair, expect, tmp_path, monkeypatch, stopped, caplog
):
    """The recorded draft's weights under a config edited since (here its ids moved to the top level,
    where stock SGLang does not read them): the check runs and names what the server feeds."""
    from sglang_eagle3_embed.doctor.pair import write_config_variant

    edited = write_config_variant(tiny_pair.draft, tmp_path / "edited", placement="top-level")
    monkeypatch.setenv(ENV_FILE, str(expect))
    monkeypatch.setenv(ENV_MODE, "raise")
    manager = Manager(tiny_pair, DEFAULTS, speculative_draft_model_path=str(edited))
    with caplog.at_level(logging.INFO, logger="sglang_eagle3_embed"):
        assert check(manager) is False
    assert len(stopped) == 1 and manager.asked, "judged, not refused"
    assert "as SGLang's default layers" in caplog.text
    assert "its weights are the recorded draft's" in caplog.text


def test_hub_ids_are_compared_through_the_cache_the_server_read(
    tiny_pair, expect, tmp_path, monkeypatch, stopped, caplog
):
    from sglang_eagle3_embed.doctor.hub_cache import publish

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv(ENV_FILE, str(expect))
    monkeypatch.setenv(ENV_MODE, "log")
    publish(tiny_pair.target, "tiny/target")
    publish(tiny_pair.draft, "tiny/draft")
    publish(tiny_pair.target, "tiny/draft", "other")  # another model's config at another revision
    named = {"model_path": "tiny/target", "speculative_draft_model_path": "tiny/draft"}
    assert check(Manager(tiny_pair, TRAINED, **named)) is True
    other = Manager(tiny_pair, TRAINED, **named, speculative_draft_model_revision="other")
    with caplog.at_level(logging.INFO, logger="sglang_eagle3_embed"):
        assert check(other) is False
    assert len(stopped) == 1
    assert "--speculative-draft-model-path tiny/draft: its config.json is not the one" in caplog.text


@pytest.mark.parametrize("mode", ["log", "raise"])
def test_simulated_acceptance_is_never_judged(tiny_pair, expect, monkeypatch, stopped, caplog, mode):
    """With SGLang's SGLANG_SIMULATE_ACC_LEN on, the accept length is made up: no verdict, said so,
    in both modes, and the server is not stopped (even on a mis-wired server)."""
    monkeypatch.setenv(ENV_FILE, str(expect))
    monkeypatch.setenv(ENV_MODE, mode)
    monkeypatch.setenv("SGLANG_SIMULATE_ACC_LEN", "3.5")
    manager = Manager(tiny_pair, DEFAULTS)
    with caplog.at_level(logging.INFO, logger="sglang_eagle3_embed"):
        assert check(manager) is False
    assert stopped == [] and manager.asked == []
    assert "not judged: SGLANG_SIMULATE_ACC_LEN=3.5" in caplog.text
    assert "as SGLang's default layers" not in caplog.text
    monkeypatch.setenv("SGLANG_SIMULATE_ACC_LEN", "-1")  # SGLang's default: off
    with caplog.at_level(logging.INFO, logger="sglang_eagle3_embed"):
        check(manager)
    assert "as SGLang's default layers" in caplog.text
