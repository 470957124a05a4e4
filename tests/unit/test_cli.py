"""`sglang-eagle3-embed ids` end to end, as a subprocess."""

import json
import subprocess
import sys

import pytest

from sglang_eagle3_embed.ids import IDS_FIELD


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "sglang_eagle3_embed.cli", *args], capture_output=True, text=True, check=False
    )


def write(tmp_path, name, config):
    path = tmp_path / name
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    return str(path)


def test_ids_explains_plugin_and_stock(tmp_path):
    draft = write(tmp_path, "draft", {"eagle_config": {IDS_FIELD: [-1, 2, 30]}})
    target = write(tmp_path, "target", {"num_hidden_layers": 61})
    run = cli("ids", draft, "--target", target)
    assert run.returncode == 0, run.stderr
    assert "captures [embedding output, output of layer 2, output of layer 30]" in run.stdout
    assert "fails at startup: RuntimeError: captured 2 of 3 aux hidden states" in run.stdout


def test_ids_json_and_kimi_text_config(tmp_path):
    draft = write(tmp_path, "draft", {IDS_FIELD: [30, -1, 2]})
    target = write(tmp_path, "kimi", {"text_config": {"num_hidden_layers": 61}})
    run = cli("ids", draft, "--target", target, "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["capture_indices"] == [31, 0, 3]
    assert result["source"] == "top level"
    assert result["stock_sglang"].startswith("serves [output of layer 1, output of layer 29")


def test_ids_bad_config_exits_1_with_the_fix(tmp_path):
    draft = write(tmp_path, "draft", {"eagle_config": {IDS_FIELD: [-1, 2, 2]}})
    run = cli("ids", draft, "--num-layers", "61")
    assert run.returncode == 1
    assert "repeats [2]" in run.stdout


@pytest.mark.parametrize("args", [["ids"], ["ids", "x"], ["ids", "x", "--num-layers", "two"], ["nope"]])
def test_bad_invocation_exits_2(args):
    assert cli(*args).returncode == 2


def test_no_arguments_runs_the_demo(monkeypatch):
    """The demo is the embedded default (its own subprocess test: test_demo.py)."""
    from sglang_eagle3_embed import cli as cli_module
    from sglang_eagle3_embed import demo

    calls = []
    monkeypatch.setattr(demo, "run_demo", lambda cache: calls.append(cache) or 0)
    assert cli_module.main([]) == 0
    assert calls == [None]


def test_unreadable_config_exits_2(tmp_path):
    run = cli("ids", str(tmp_path / "missing"), "--num-layers", "61")
    assert run.returncode == 2
    assert "cannot read" in run.stderr


def check_cli(tmp_path, scenario, *extra):
    from sglang_eagle3_embed.rule_examples import materialize

    return cli("check", *extra, *materialize(scenario, tmp_path))


def test_check_refuses_the_seed_flags_with_a_table(tmp_path):
    from sglang_eagle3_embed.rule_examples import Scenario, launch

    run = check_cli(tmp_path, Scenario(launch(steps=(1, 1, 16))))
    assert run.returncode == 1, run.stderr[-2000:]
    row = next(line for line in run.stdout.splitlines() if line.startswith("draft-tokens-rewritten"))
    assert "error" in row
    assert "1 error(s), 0 warning(s)" in run.stdout


def test_check_json_clean_deployment_exits_0(tmp_path):
    from sglang_eagle3_embed.rule_examples import Scenario
    from sglang_eagle3_embed.rules import RULES

    run = check_cli(tmp_path, Scenario(), "--json")
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert report["ok"] is True and report["findings"] == []
    assert report["rules"] == dict.fromkeys(RULES, "ok")


@pytest.mark.parametrize(
    "args", [["check"], ["check", "--model-path"], ["check", "--model-path", "x", "--tp-size", "two"]]
)
def test_check_bad_invocation_exits_2(args):
    assert cli(*args).returncode == 2


def test_pair_finds_the_cached_pair(tiny_pair, capsys):
    from sglang_eagle3_embed import cli as cli_module

    assert cli_module.main(["pair", "--cache", str(tiny_pair.target.parent)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"target": str(tiny_pair.target), "draft": str(tiny_pair.draft)}
