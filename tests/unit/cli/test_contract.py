"""The command line's exit-code contract on input a user can get wrong: 0 ok, 1 findings, 2 a bad
invocation or unreadable input (with the path and what to do), never a traceback; ``--json`` always
prints JSON, errors too; ``--debug`` shows the traceback. In process, no SGLang, no training."""

import json

import pytest

from sglang_eagle3_embed import cli
from sglang_eagle3_embed.core.capture.ids import IDS_FIELD


def run(capsys, *args) -> tuple[int, str, str]:
    try:
        code = cli.main(list(args))
    except SystemExit as exit_:  # argparse's --help
        code = exit_.code
    out = capsys.readouterr()
    return code, out.out, out.err


def folder(tmp_path, name, config=None, text=None):
    path = tmp_path / name
    path.mkdir()
    (path / "config.json").write_text(text if text is not None else json.dumps(config))
    return str(path)


DRAFT = {"eagle_config": {IDS_FIELD: [-1, 2, 4]}}


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("[1, 2, 3]", "is not a JSON object"),
        ('{"text_config": [1]}', "text_config is not a JSON object"),
        ('{"text_config": {"hidden_size": 64}}', "has no integer num_hidden_layers"),
        ("{not json", "is not valid JSON"),
        ("", "is not valid JSON"),
    ],
)
def test_ids_refuses_a_malformed_target_config_with_exit_2(tmp_path, capsys, target, expected):
    draft = folder(tmp_path, "draft", DRAFT)
    code, out, err = run(capsys, "ids", draft, "--target", folder(tmp_path, "target", text=target))
    assert code == 2 and expected in err and "Traceback" not in out + err
    assert "target/config.json" in err


def test_ids_reports_a_draft_config_that_is_a_list_as_a_finding(tmp_path, capsys):
    code, out, err = run(capsys, "ids", folder(tmp_path, "draft", text="[-1, 2, 4]"), "--num-layers", "8")
    assert code == 1 and "must be a JSON object" in out and "Traceback" not in out + err


@pytest.mark.parametrize("layers", ["0", "-3"])
def test_ids_refuses_a_layer_count_below_one(tmp_path, capsys, layers):
    code, _, err = run(capsys, "ids", folder(tmp_path, "draft", DRAFT), "--num-layers", layers)
    assert code == 2 and "--num-layers" in err


def test_ids_asks_whether_minus_two_meant_the_embedding(tmp_path, capsys):
    draft = folder(tmp_path, "draft", {"eagle_config": {IDS_FIELD: [-2, 2, 4]}})
    code, out, _ = run(capsys, "ids", draft, "--num-layers", "8")
    assert code == 1 and "did you mean -1 (the embedding output)?" in out


def test_a_missing_local_path_is_named_as_such(tmp_path, capsys):
    code, _, err = run(capsys, "ids", str(tmp_path / "no" / "such" / "draft"), "--num-layers", "8")
    assert code == 2 and "no such file or folder" in err and "Repo id" not in err


@pytest.mark.parametrize(
    "args",
    [
        ["ids", "DRAFT_MISSING", "--num-layers", "8", "--json"],
        ["ids", "--json"],
        ["ids", "x", "--num-layers", "two", "--json"],
        ["probe", "--json", "--target", "nowhere", "--draft", "nowhere"],
        ["pair", "--json", "--layers", "0"],
    ],
)
def test_json_is_printed_for_errors_too(capsys, args):
    code, out, err = run(capsys, *args)
    assert code == 2
    report = json.loads(out)
    assert report["ok"] is False and report["exit_code"] == 2 and report["error"]
    assert "Traceback" not in out + err


def test_debug_shows_the_traceback(capsys):
    code, _, err = run(capsys, "ids", "missing-draft", "--num-layers", "8", "--debug")
    assert code == 2 and "Traceback" in err


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--convention", "hidden_states", "--ids", "-1", "2", "4"], "contains -1"),
        (["--ids", "-1", "2", "9"], "out-of-range"),
        (["--layers", "0"], "--layers"),
        (["--hidden", "63"], "--hidden 63"),
        (["--heads", "0"], "--heads"),
        (["--vocab", "4"], "--vocab"),
        (["--ids", "-1", "2", "2"], "repeats [2]"),
    ],
)
def test_pair_validates_its_spec_before_training(capsys, monkeypatch, flags, expected):
    from sglang_eagle3_embed.doctor import pair

    def never(*args, **kwargs):
        raise AssertionError("pair started building an invalid spec")

    monkeypatch.setattr(pair, "build_pair", never)
    code, _, err = run(capsys, "pair", *flags)
    assert code == 2 and expected in err, err
