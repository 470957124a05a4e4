"""The command line end to end, as a subprocess: ``check`` through SGLang's own parser and
resolution, ``pair`` on the cached tiny pair."""

import json

import pytest

from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from tests.support import cli

pytestmark = pytest.mark.releases


def write(tmp_path, name, config):
    path = tmp_path / name
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    return str(path)


def test_the_module_runs_as_the_command(tmp_path):
    draft = write(tmp_path, "draft", {"eagle_config": {IDS_FIELD: [-1, 2, 30]}})
    run = cli("ids", draft, "--num-layers", "61")
    assert run.returncode == 0, run.stderr
    assert "captures [embedding output, output of layer 2, output of layer 30]" in run.stdout


def check_cli(tmp_path, scenario, *extra):
    from harness.rule_examples import materialize

    return cli("check", *extra, *materialize(scenario, tmp_path))


def test_check_refuses_the_seed_flags_with_a_table(tmp_path):
    from harness.rule_examples import Scenario, launch

    run = check_cli(tmp_path, Scenario(launch(steps=(1, 1, 16))))
    assert run.returncode == 1, run.stderr[-2000:]
    row = next(line for line in run.stdout.splitlines() if line.startswith("draft-tokens-rewritten"))
    assert "error" in row
    assert "1 error(s), 0 warning(s)" in run.stdout
    # SGLang's "Only CUDA ... support AWQ" import warnings speak of this machine, not the deployment
    assert "Only CUDA" not in run.stderr, run.stderr[-2000:]


def test_check_json_clean_deployment_exits_0(tmp_path):
    from harness.rule_examples import Scenario
    from sglang_eagle3_embed.core.rules.table import RULES

    run = check_cli(tmp_path, Scenario(fc_in_features=192), "--json")  # weights: every rule can check
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert report["ok"] is True and report["findings"] == []
    assert report["rules"] == dict.fromkeys(RULES, "ok")


@pytest.mark.parametrize(
    "args", [["check"], ["check", "--model-path"], ["check", "--model-path", "x", "--tp-size", "two"]]
)
def test_check_bad_invocation_exits_2(args):
    assert cli(*args).returncode == 2
