"""Every command's inputs swept with Hypothesis under the command line's contract
(:mod:`tests.support.cli_contract`: exit 0, 1 or 2, no traceback, strict JSON under ``--json``) and
one more property: no healthy verdict (exit 0 without a warning, or a rule "ok" in ``check``'s JSON
table) on input that the code's own reading says is broken.

What an input means is asked of the code, never re-modelled here: a launch of two folders is read as
``check`` reads it into a plain ``Deployment``, whose rules (``core.rules.RULES``) and capture plan
(``core.draft_config.resolve_capture_plan``, asked directly) say what is wrong (:func:`code_reading`);
for ``ids`` and ``probe`` the plan answers (:func:`plan_broken`). Claims that need no rule: every
generated weights damage breaks the safetensors format, a path that is not a model folder is no
model, a non-positive count, an unknown flag or an unreadable file argument is a bad invocation.

The inputs start from the tiny CPU pair shipped with the package: config fields missing, extra or
of any wrong type, whole config files unreadable, damaged safetensors and indexes, ``check``'s server
arguments, every other command's numbers, paths and files. Commands run in-process with the Hub
offline, each under a time limit; examples are derandomized, with no example database.
``EAGLE3_EMBED_SWEEP_SCALE`` scales the number of examples (default 1).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core.capture.draft_config import resolve_capture_plan
from sglang_eagle3_embed.core.capture.ids import CONVENTION_FIELD, IDS_FIELD
from sglang_eagle3_embed.core.errors import DraftConfigError
from sglang_eagle3_embed.core.findings import Severity
from sglang_eagle3_embed.core.readers import model_folder
from sglang_eagle3_embed.core.readers.deployment import WATCHED, Deployment
from sglang_eagle3_embed.core.readers.overrides import parse_overrides
from sglang_eagle3_embed.core.rules.table import RULES
from sglang_eagle3_embed.doctor.pair import PairSpec, shipped_pair
from sglang_eagle3_embed.patch.launch_snapshot import read_models
from tests.support.cli_contract import Hung, assert_contract, check_verdict, run
from tests.support.damage import (
    LENGTH_EDITS,
    MODEL_PATHS,
    OFFSET_EDITS,
    PATH_KINDS,
    SHAPE_EDITS,
    TRUNCATE,
    WRONG,
    config_damage,
    damage_config,
    damage_weights,
    index_damage,
    make_node,
    make_path,
    raw_config,
    weights_damage,
)  # fmt: skip
from tests.support.deployments import RAW, findings
from tests.support.strategies import embed_ids

PAIR = shipped_pair(PairSpec())
assert PAIR is not None, "the demo pair ships with the package (doctor/data/demo_pair)"
TARGET_CONFIG = json.loads((PAIR.target / "config.json").read_text())
DRAFT_CONFIG = json.loads((PAIR.draft / "config.json").read_text())
LAYERS = TARGET_CONFIG["num_hidden_layers"]

SCALE = float(os.environ.get("EAGLE3_EMBED_SWEEP_SCALE", "1"))
PROFILE = dict(
    deadline=None, database=None, derandomize=True, print_blob=False, suppress_health_check=list(HealthCheck)
)


def sweep(n: int):
    return settings(max_examples=max(1, round(n * SCALE)), **PROFILE)


def parsed_int(text: str) -> int | None:
    """``text`` as argparse's ``type=int`` reads it, or None."""
    try:
        return int(text)
    except ValueError:
        return None


# ------------------------------------------------------------------ the code's own reading


def code_reading(target: Path, draft: Path | None, raw=RAW, overrides=None) -> dict[str, Severity]:
    """What is wrong with a launch of ``target`` and ``draft`` (None: no draft path) by the code's
    own reading: {rule id: severity} of every error and warning of the rule table, and of the capture
    plan (:func:`resolve_capture_plan`, asked directly: a rule that drops its verdict is caught).
    The folders are read as ``check`` and ``probe`` read them (``launch_snapshot.read_models``)."""
    d = read_models(target, draft, raw, overrides=overrides or {})
    found = {f.rule: f.severity for f in findings(d) if f.severity is not Severity.NOT_CHECKED}
    if d.eagle3 and d.no_capture is None:
        try:
            plan = resolve_capture_plan(d.draft, d.target_text.get("num_hidden_layers"))
        except DraftConfigError as err:
            found[err.rule] = RULES[err.rule].severity
        else:
            found.update({w.rule: RULES[w.rule].severity for w in plan.warnings})
    return found


def plan_broken(draft: Path, target: Path | None = None, layers: int | None = None) -> bool | None:
    """Whether the capture plan refuses the draft's ids or warns about them for this target
    (``target``'s config, or ``layers``); True for a config that cannot be read, None where the
    plugin does not serve the target (its architectures outside the DeepSeek family)."""
    try:
        draft_config = model_folder.read_config(draft, any_json=True)
        if target is not None:
            target_config = model_folder.read_config(target)
    except model_folder.ModelFolderError:
        return True
    if target is not None:
        d = Deployment(raw={}, target=target_config)
        if target_config.get("architectures") is not None and not d.family:
            return None
        layers = d.target_text.get("num_hidden_layers")
    try:
        return bool(resolve_capture_plan(draft_config, layers).warnings)
    except DraftConfigError as err:
        assert err.rule in RULES, err.rule  # every refusal names a rule of the table
        return True


def assert_not_healthy(reading, code, out: str, as_json: bool, *context) -> None:
    """No healthy verdict on a launch the code's reading finds wrong: not exit 0 without warnings,
    and no rule of the reading "ok" in ``check``'s JSON table."""
    if not reading:
        return
    assert check_verdict(code, out, as_json) in ("findings", "usage"), (reading, *context, out[-3000:])
    report = json.loads(out) if as_json else {}
    if "rules" in report:
        passed = [r for r in reading if report["rules"].get(r) == "ok"]
        assert not passed, (passed, reading, *context, report["findings"])


# ------------------------------------------------------------------ running a command


@pytest.fixture(scope="module", autouse=True)
def offline():
    """No command of the sweep reaches the Hub: a repo id fails at once."""
    import huggingface_hub.constants

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        yield


SOURCE: dict[str, Path] = {}  # what every example copies: a private copy of the shipped pair


@pytest.fixture(scope="module", autouse=True)
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("shipped-pair")
    SOURCE["target"] = Path(shutil.copytree(PAIR.target, root / "target"))
    SOURCE["draft"] = Path(shutil.copytree(PAIR.draft, root / "draft"))
    yield
    SOURCE.clear()


@pytest.fixture(scope="module")
def warm_check(source):
    """SGLang imported (its argument resolution imports most of it) outside any command's time limit."""
    from sglang_eagle3_embed.doctor.check import run_check

    run_check(launch(SOURCE["target"], SOURCE["draft"]))


def fresh(root: Path) -> tuple[Path, Path]:
    """A copy of the shipped pair under ``root``: (target, draft)."""
    target, draft = root / "target", root / "draft"
    shutil.copytree(SOURCE["target"], target)
    shutil.copytree(SOURCE["draft"], draft)
    return target, draft


@contextlib.contextmanager
def workdir(tmp_path_factory):
    root = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def launch(target, draft, *extra) -> list[str]:
    return [
        "--model-path", str(target), "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", str(draft), "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
        "--model-impl", MODEL_IMPL, *extra,
    ]  # fmt: skip


def json_flag(as_json: bool) -> list[str]:
    return ["--json"] if as_json else []


# ------------------------------------------------------------------ what to damage in the shipped pair

ID_ENTRY = st.one_of(
    st.integers(-3, LAYERS + 2),
    st.sampled_from([10**20, -(10**20), 2**63, "-1", "2", True, None, 1.5, math.nan, math.inf]),
    st.text(max_size=3),
    st.lists(st.integers(-1, 5), max_size=2),
)
LAYER_COUNTS = WRONG | st.sampled_from([10**20, 2**40])
"""Huge counts too: ``check`` once listed every layer a config builds and ran out of memory."""
DUPLICATED = st.lists(st.integers(-1, 5), min_size=1, max_size=4).map(lambda ids: ids + ids[:1])
VALUES = {
    IDS_FIELD: st.one_of(
        st.lists(st.integers(-3, LAYERS + 1), min_size=3, max_size=3),  # as many as the fc reads
        embed_ids(LAYERS),
        embed_ids(LAYERS + 3),  # for a deeper target: often out of range
        st.lists(st.integers(-2, LAYERS + 1), min_size=1, max_size=5),
        st.sampled_from([st.lists(ID_ENTRY, max_size=5), DUPLICATED, WRONG]).flatmap(lambda bad: bad),
    ),
    CONVENTION_FIELD: WRONG | st.sampled_from(
        ["layer_output", "hidden_states", "LAYER_OUTPUT", "sglang_stock", "", "layer-output"]
    ),
    "use_aux_hidden_state": st.just(False) | WRONG,
    "num_hidden_layers": LAYER_COUNTS,
}  # fmt: skip
NESTED = [
    ("eagle_config", k) for k in (IDS_FIELD, IDS_FIELD, IDS_FIELD, CONVENTION_FIELD, "use_aux_hidden_state")
]
EXTRA = {(IDS_FIELD,), (CONVENTION_FIELD,), ("num_aux_hidden_states",)}
DRAFT_FIELDS = [*sorted({(k,) for k in DRAFT_CONFIG} | EXTRA), *NESTED]
READ_DRAFT_FIELDS = [
    ("eagle_config",), *NESTED, (IDS_FIELD,), (CONVENTION_FIELD,), ("num_aux_hidden_states",),
    ("target_hidden_size",), ("vocab_size",), ("draft_vocab_size",), ("hidden_size",),
]  # fmt: skip
TARGET_FIELDS = sorted({(k,) for k in TARGET_CONFIG} | {("text_config",)})
READ_TARGET_FIELDS = [
    (k,) for k in ("num_hidden_layers", "hidden_size", "vocab_size", "architectures", "model_type")
]


def draft_damage():
    """Half of them the draft's ids (most often the nested list, the one SGLang's target reads)."""
    ids = st.sampled_from([("eagle_config", IDS_FIELD), ("eagle_config", IDS_FIELD), (IDS_FIELD,)])
    ids_damage = st.tuples(st.just("set"), ids, VALUES[IDS_FIELD])
    return config_damage(DRAFT_CONFIG, DRAFT_FIELDS, READ_DRAFT_FIELDS, VALUES) | ids_damage


def target_damage():
    return config_damage(
        TARGET_CONFIG, TARGET_FIELDS, READ_TARGET_FIELDS, {"num_hidden_layers": LAYER_COUNTS}
    )


# ------------------------------------------------------------------ check: folders


@pytest.mark.releases
def test_check_passes_the_shipped_pair(tmp_path, capfd, warm_check):
    """The base of every example: the undamaged pair is healthy to the command and to the code's
    own reading, every rule checked."""
    target, draft = fresh(tmp_path)
    code, out, err = run("check", "--json", *launch(target, draft), capfd=capfd)
    report = assert_contract(code, out, err, as_json=True)
    assert code == 0 and set(report["rules"].values()) == {"ok"}, report
    assert code_reading(target, draft) == {}
    assert plan_broken(draft, target) is False


def check_folders(tmp_path_factory, capfd, target_damage, draft_damage, weights, as_json):
    with workdir(tmp_path_factory) as root:
        target, draft = fresh(root)
        damage_config(target, TARGET_CONFIG, target_damage)
        damage_config(draft, DRAFT_CONFIG, draft_damage)
        if weights is not None:
            damage_weights(draft, weights)
        code, out, err = run("check", *json_flag(as_json), *launch(target, draft), capfd=capfd)
        reading = code_reading(target, draft)
    assert_contract(code, out, err, as_json)
    if weights is not None:  # no header describes its file: never healthy, whatever the rules read
        assert check_verdict(code, out, as_json) in ("findings", "usage"), (weights, out[-3000:])
    assert_not_healthy(reading, code, out, as_json, target_damage, draft_damage, weights)


@pytest.mark.releases
@sweep(50)
@given(
    damage=st.tuples(st.none() | target_damage(), st.none() | draft_damage(), st.none() | weights_damage()),
    as_json=st.booleans(),
)
def test_check_keeps_the_contract_on_damaged_folders(tmp_path_factory, capfd, warm_check, damage, as_json):
    check_folders(tmp_path_factory, capfd, *damage, as_json)


@pytest.mark.releases
@sweep(40)
@given(damage=draft_damage(), as_json=st.booleans())
def test_check_flags_every_broken_draft_config(tmp_path_factory, capfd, warm_check, damage, as_json):
    check_folders(tmp_path_factory, capfd, None, damage, None, as_json)


@pytest.mark.releases
@sweep(30)
@given(damage=target_damage(), as_json=st.booleans())
def test_check_flags_every_broken_target_config(tmp_path_factory, capfd, warm_check, damage, as_json):
    check_folders(tmp_path_factory, capfd, damage, None, None, as_json)


@pytest.mark.releases
@sweep(35)
@given(damage=weights_damage(), as_json=st.booleans())
def test_check_flags_every_damaged_draft_checkpoint(tmp_path_factory, capfd, warm_check, damage, as_json):
    check_folders(tmp_path_factory, capfd, None, None, damage, as_json)


@pytest.mark.releases
@sweep(25)
@given(target=st.sampled_from(PATH_KINDS), draft=st.sampled_from(PATH_KINDS), as_json=st.booleans())
def test_check_keeps_the_contract_on_any_path(tmp_path_factory, capfd, warm_check, target, draft, as_json):
    with workdir(tmp_path_factory) as root:
        target_dir, draft_dir = fresh(root)
        argv = launch(make_path(target, target_dir, root), make_path(draft, draft_dir, root))
        code, out, err = run("check", *json_flag(as_json), *argv, capfd=capfd)
    assert_contract(code, out, err, as_json)
    if (target, draft) != ("folder", "folder"):
        assert check_verdict(code, out, as_json) in ("findings", "usage"), (target, draft, out[-3000:])


# ------------------------------------------------------------------ check: arguments

POSITIVE_FLAGS = [
    "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens", "--tp-size",
    "--dp-size", "--pp-size", "--ep-size", "--page-size", "--max-running-requests",
    "--cuda-graph-max-bs-decode", "--nnodes",
]  # fmt: skip
NUMBER_TEXT = st.integers(-3, 20).map(str) | st.sampled_from(
    ["0", "-1", str(10**20), str(-(10**20)), "1e3", "two", "", "nan", "0x10", " 3", "3.0", "+4", "1_0"]
)
OVERRIDES = [
    "{", "[1]", '"x"', "null", "{}", '{"eagle_config": {}}', '{"num_hidden_layers": "x"}',
    '{"max_position_embeddings": 256}', "1e999", "NaN",
]  # fmt: skip
GOOD_CONFIGS = (b"tp-size: 1\n", b"")
"""The ``--config`` files drawn that SGLang reads (keys no other edit passes on the command line)."""
CONFIGS = [
    *GOOD_CONFIGS, b"moe-dp-size: 0\n", b"attn-dp-size: -1\n", b"{{{: [", b"- 1\n- 2\n", b"\xff",
    b"moe-dp-size: two\n", "FIFO", "FOLDER", "MISSING", "NOT-YAML",
]  # fmt: skip
ALGORITHMS = ["EAGLE3", "EAGLE", "NEXTN", "STANDALONE", "NGRAM", "eagle3", "FOO", ""]
IMPLS = [MODEL_IMPL, "sglang", "auto", "sglang-eagle3-embed", "transformers", "x"]
ADDED = ["--no-such-flag", "--speculative-num-stepz", "-x", "--", "--help", "-h"]
DROPPED = ["--speculative-num-steps", "--speculative-algorithm", "--speculative-draft-model-path"]
EDITS = st.one_of(
    *[st.tuples(st.just("set"), st.sampled_from(POSITIVE_FLAGS), NUMBER_TEXT)] * 4,
    st.tuples(st.just("set"), st.just("--speculative-algorithm"), st.sampled_from(ALGORITHMS)),
    st.tuples(st.just("set"), st.just("--model-impl"), st.sampled_from(IMPLS)),
    st.tuples(st.just("set"), st.just("--json-model-override-args"), st.sampled_from(OVERRIDES)),
    st.tuples(st.just("add"), st.sampled_from(ADDED)),
    st.tuples(st.just("config"), st.sampled_from(CONFIGS)),
    st.tuples(st.just("drop"), st.sampled_from(DROPPED)),
)


def bad_invocation(edit) -> bool:
    """An edit that makes the command line unusable, whatever the rules say: a count that is not a
    positive integer, an override that is not a JSON object, an unknown flag, a bad ``--config``."""
    if edit[0] == "set" and edit[1] in POSITIVE_FLAGS:
        return (parsed_int(edit[2]) or 0) < 1
    if edit[0] == "set" and edit[1] == "--json-model-override-args":
        with contextlib.suppress(ValueError):
            return not isinstance(json.loads(edit[2]), dict)
        return True
    if edit[0] == "add":
        return edit[1] not in ("--help", "-h")
    return edit[0] == "config" and edit[1] not in GOOD_CONFIGS


def apply_edits(argv: list[str], edits, root: Path) -> list[str]:
    argv = list(argv)
    for n, edit in enumerate(edits):
        if edit[0] == "set":
            if edit[1] in argv:
                argv[argv.index(edit[1]) + 1] = edit[2]
            else:
                argv += [edit[1], edit[2]]
        elif edit[0] == "drop" and edit[1] in argv:
            del argv[argv.index(edit[1]) : argv.index(edit[1]) + 2]
        elif edit[0] == "add":
            argv.append(edit[1])
        elif edit[0] == "config":
            yaml = edit[1] != "NOT-YAML"
            file = make_node(
                root / f"launch{n}.{'yaml' if yaml else 'txt'}", edit[1] if yaml else b"NOT-YAML"
            )
            argv += ["--config", str(file)]
    return argv


def edited(edit) -> str:
    """What an edit changes: its flag (set or dropped once per launch), else its kind (once)."""
    return edit[1] if edit[0] in ("set", "drop") else edit[0]


def launch_reading(argv: list[str], target: Path, draft: Path) -> dict[str, Severity]:
    """:func:`code_reading` of the launch ``argv`` passes: its watched flags as plain data."""
    raw = {}
    for name in WATCHED:
        flag = "--" + name.replace("_", "-")
        if flag in argv[:-1]:
            value = argv[argv.index(flag) + 1]
            raw[name] = value if parsed_int(value) is None else parsed_int(value)
    draft_path = draft if "speculative_draft_model_path" in raw else None
    return code_reading(target, draft_path, raw, parse_overrides(raw.get("json_model_override_args")))


@pytest.mark.releases
@sweep(80)
@given(edits=st.lists(EDITS, min_size=1, max_size=3, unique_by=edited), as_json=st.booleans())
def test_check_keeps_the_contract_on_any_arguments(tmp_path_factory, capfd, warm_check, edits, as_json):
    with workdir(tmp_path_factory) as root:
        target, draft = fresh(root)
        argv = apply_edits(launch(target, draft), edits, root)
        code, out, err = run("check", *json_flag(as_json), *argv, capfd=capfd)
        reading = launch_reading(argv, target, draft)
    assert_contract(code, out, err, as_json)
    verdict = check_verdict(code, out, as_json)
    if ("add", "--help") in edits or ("add", "-h") in edits:
        assert (code, verdict) == (0, "help"), (code, out[-2000:])
        return
    if any(bad_invocation(e) for e in edits):
        assert verdict in ("findings", "usage"), (edits, out[-3000:], err[-2000:])
    assert_not_healthy(reading, code, out, as_json, edits)


# ------------------------------------------------------------------ ids

NUM_LAYERS = st.integers(-3, 12).map(str) | st.sampled_from(
    [str(10**20), str(-(10**20)), "abc", "", "1.5", "nan", "0x10", "٣", " 7"]
)


@sweep(200)
@given(
    draft_damage=st.none() | draft_damage(),
    target=st.one_of(
        st.tuples(st.just("--target"), st.none() | target_damage()),
        st.tuples(st.just("--num-layers"), NUM_LAYERS),
        st.tuples(st.just("target-path"), st.sampled_from(PATH_KINDS)),
    ),
    draft_path=st.sampled_from(["folder"] * 6 + PATH_KINDS),
    as_json=st.booleans(),
)
def test_ids_keeps_the_contract(tmp_path_factory, capfd, draft_damage, target, draft_path, as_json):
    (how, what), layers = target, None
    with workdir(tmp_path_factory) as root:
        target_dir, draft_dir = fresh(root)
        damage_config(draft_dir, DRAFT_CONFIG, draft_damage)
        draft = make_path(draft_path, draft_dir, root)
        if how == "--num-layers":
            args, layers = ["--num-layers", what], parsed_int(what)
        else:
            if how == "--target":
                damage_config(target_dir, TARGET_CONFIG, what)
            target_dir = target_dir if how == "--target" else make_path(what, target_dir, root)
            args = ["--target", target_dir]
        code, out, err = run("ids", draft, *args, *json_flag(as_json), capfd=capfd)
        if how == "--num-layers":
            broken = True if layers is None or layers < 1 else plan_broken(draft, layers=layers)
        else:
            broken = plan_broken(draft, target_dir)
    document = assert_contract(code, out, err, as_json)
    if (how == "--num-layers" and (layers or 0) < 1) or (how == "target-path" and what not in MODEL_PATHS):
        assert code == 2, (target, out[-2000:], err[-2000:])  # a bad invocation, or no target
    if broken and code == 0:
        assert document["warnings"] if as_json else "warning [" in out, (draft_damage, target, out[-3000:])


# ------------------------------------------------------------------ probe

PROBE_QUICK = ["--num-prompts", "2", "--new-tokens", "2", "--num-steps", "1", "--prompt-len", "2"]
PROBE_QUICK += ["--no-progress"]
PROMPTS = [
    "FIFO", "FOLDER", "MISSING", b"", b"\n\n", b"\xff\xfe", b"[1]", b"[-1, 2]", b"[1.5, 2]", b"[[1], [2]]",
    b"[1, 2", b'["a", 2]', b"[99999999999, 2]", b"[" * 5000, b"[1, 2]\n[3]",
]  # fmt: skip
NUMBERS = ["--num-prompts", "--num-steps", "--new-tokens", "--prompt-len"]
NOT_COUNTS = ["least-1", "-1", "0", str(-(10**20)), "x", "1.5", ""]
"""Values below a count's least ("least-1": 1 for --new-tokens and --prompt-len, else 0) or no count."""
ENGINE_ARGS = [("--backend", "engine"), ("--engine-arg", "=1"), ("--engine-arg", "x")]
N = st.integers(0, 10**6)
PROBE_DAMAGE = st.one_of(
    st.tuples(st.just("target-config"), raw_config(json.dumps(TARGET_CONFIG).encode())),
    st.tuples(st.just("draft-config"), raw_config(json.dumps(DRAFT_CONFIG).encode())),
    st.tuples(
        st.sampled_from(["target-weights", "draft-weights"]),
        TRUNCATE | st.tuples(st.just("length"), LENGTH_EDITS) | st.tuples(st.just("offsets"), N, OFFSET_EDITS)
        | st.tuples(st.just("shape"), N, SHAPE_EDITS) | st.tuples(st.just("index"), index_damage()),
    ),
    st.tuples(st.just("number"), st.sampled_from(NUMBERS), st.sampled_from(NOT_COUNTS)),
    st.tuples(st.just("prompts"), st.sampled_from(PROMPTS)),
    st.tuples(st.just("output"), st.sampled_from(["no/r.json", ".", "a-file/r.json"])),
    st.tuples(st.just("device"), st.sampled_from(["cuda", "cuda:0", "tpu", "", "cuda:x", "CPU", "cuda:-1"])),
    st.tuples(st.just("engine-arg"), st.sampled_from(ENGINE_ARGS)),
    st.tuples(st.sampled_from(["target-path", "draft-path"]), st.sampled_from(PATH_KINDS[1:])),
)  # fmt: skip
"""One input ``probe`` must refuse before it loads a model: (what, detail...)."""


def probe_args(damage, root: Path, target: Path, draft: Path) -> list:
    what, detail = damage[0], damage[1]
    quick, extra = list(PROBE_QUICK), []
    if what.endswith("-config"):
        damage_config(target if what == "target-config" else draft, {}, ("raw", detail))
    elif what.endswith("-weights"):
        damage_weights(target if what == "target-weights" else draft, detail)
    elif what == "number":
        least = 2 if detail in ("--new-tokens", "--prompt-len") else 1
        quick[quick.index(detail) + 1] = str(least - 1) if damage[2] == "least-1" else damage[2]
    elif what == "prompts":
        extra = ["--prompts", make_node(root / "prompts.txt", detail)]
    elif what == "output":
        (root / "a-file").write_text("x")
        extra = ["--output", root / detail]
    elif what == "device":
        extra = ["--device", detail]
    elif what == "engine-arg":
        extra = list(detail)
    elif what == "target-path":
        target = make_path(detail, target, root)
    else:
        draft = make_path(detail, draft, root)
    return ["probe", "--target", target, "--draft", draft, *quick, *extra]


@sweep(40)
@given(damage=PROBE_DAMAGE, as_json=st.booleans())
def test_probe_refuses_damage_before_it_loads_a_model(tmp_path_factory, capfd, damage, as_json):
    from sglang_eagle3_embed.doctor import backends

    loaded, real = [], backends.make_backend
    spy = mock.patch.object(backends, "make_backend", lambda *a, **k: loaded.append(a) or real(*a, **k))
    with workdir(tmp_path_factory) as root, spy:
        target, draft = fresh(root)
        code, out, err = run(*probe_args(damage, root, target, draft), *json_flag(as_json), capfd=capfd)
    assert_contract(code, out, err, as_json)
    assert code == 2, (damage, code, out[-2000:], err[-2000:])
    if damage != ("prompts", b"[99999999999, 2]"):  # token ids are checked against the loaded embedding
        assert not loaded, damage


@sweep(6)
@given(damage=draft_damage(), as_json=st.booleans())
def test_probe_keeps_the_contract_on_a_damaged_draft_config(tmp_path_factory, capfd, damage, as_json):
    """A few examples that may load the models (about a second each)."""
    with workdir(tmp_path_factory) as root:
        target, draft = fresh(root)
        damage_config(draft, DRAFT_CONFIG, damage)
        args = ["probe", "--target", target, "--draft", draft, *PROBE_QUICK, *json_flag(as_json)]
        code, out, err = run(*args, capfd=capfd)
        broken = plan_broken(draft, target)
    assert_contract(code, out, err, as_json)
    if broken:
        assert code != 0 or "nothing found wrong" not in out, (damage, out[-2000:])


def test_probe_finds_something_wrong_with_a_draft_without_ids(tmp_path, capfd):
    """Without ids the plugin and stock read SGLang's default layers: not evidence of anything."""
    target, draft = fresh(tmp_path)
    damage_config(draft, DRAFT_CONFIG, ("set", ("eagle_config",), None))
    code, out, err = run("probe", "--target", target, "--draft", draft, *PROBE_QUICK, capfd=capfd)
    assert_contract(code, out, err, as_json=False)
    assert code == 1 and "nothing found wrong" not in out and IDS_FIELD in out, out[-2000:]


def test_probe_refuses_prompts_from_a_fifo(tmp_path, capfd):
    target, draft = fresh(tmp_path)
    os.mkfifo(tmp_path / "prompts.txt")
    args = [
        "probe",
        "--target",
        target,
        "--draft",
        draft,
        *PROBE_QUICK,
        "--prompts",
        tmp_path / "prompts.txt",
    ]
    try:
        code, out, err = run(*args, capfd=capfd, limit=5)
    except Hung as hung:
        pytest.fail(str(hung))
    assert_contract(code, out, err, as_json=False)
    assert code == 2 and "prompts.txt" in err, err


@pytest.mark.parametrize("field", ["num_hidden_layers", "hidden_act"])
def test_probe_refuses_a_draft_config_transformers_refuses(tmp_path, capfd, field):
    target, draft = fresh(tmp_path)
    damage_config(draft, DRAFT_CONFIG, ("set", (field,), None))
    code, out, err = run("probe", "--target", target, "--draft", draft, *PROBE_QUICK, capfd=capfd)
    assert_contract(code, out, err, as_json=False)
    assert code == 2 and field in err, err[-2000:]


# ------------------------------------------------------------------ pair and demo

SIZES = st.integers(-3, 9).map(str) | st.sampled_from([str(10**20), str(-(10**20)), "x", "", "1.5"])
PAIR_IDS = st.lists(
    st.integers(-3, 10).map(str) | st.sampled_from([str(10**20), "x"]), min_size=1, max_size=4
)


@sweep(40)
@given(
    sizes=st.dictionaries(st.sampled_from(["--layers", "--hidden", "--vocab", "--heads"]), SIZES, max_size=3),
    ids=st.none() | PAIR_IDS,
    arch=st.sampled_from(["deepseek-v3", "kimi-k25"]),
    as_json=st.booleans(),
)
def test_pair_keeps_the_contract_on_any_sizes(capfd, sizes, ids, arch, as_json):
    """Nothing is built: the command's own checks, with the builders replaced."""
    from sglang_eagle3_embed.doctor import kimi, pair

    built = []

    def builder(spec, *args):
        built.append(spec)
        return pair.Pair(Path("t"), Path("d"), spec)

    args = ["pair", "--arch", arch, *itertools.chain(*sizes.items()), *(["--ids", *ids] if ids else [])]
    with mock.patch.object(pair, "build_pair", builder), mock.patch.object(kimi, "build_kimi_pair", builder):
        code, out, err = run(*args, *json_flag(as_json), capfd=capfd)
    assert_contract(code, out, err, as_json or code == 0)  # a built pair is always JSON
    assert (code == 0) == bool(built), (args, code, err[-1000:])
    if any((parsed_int(v) or 0) < 1 for v in sizes.values()):
        assert code == 2, (args, out, err[-1000:])


class DemoStarted(BaseException):
    """The demo accepted its cache and began its work (raised in place of that work)."""


@sweep(12)
@given(
    kind=st.sampled_from(["fifo", "other-file", "loop", "under-a-file", "dangling-link"]),
    command=st.sampled_from(["pair", "demo"]),
)
def test_pair_and_demo_refuse_a_cache_that_cannot_be_a_folder(tmp_path_factory, capfd, kind, command):
    from sglang_eagle3_embed.doctor import demo

    def started():
        raise DemoStarted

    with workdir(tmp_path_factory) as root, mock.patch.object(demo, "_quiet_libraries", started):
        cache = make_path(kind, SOURCE["target"], root)
        try:
            code, out, err = run(command, "--cache", cache, capfd=capfd)
        except DemoStarted:
            pytest.fail(f"{command} --cache {kind}: accepted, and the demo started")
    assert_contract(code, out, err, as_json=False)
    assert code == 2 and str(cache) in err, (kind, err[-1000:])


# ------------------------------------------------------------- --help and --version, with or without --json

HELP = [
    ["check", "--json", "-h"],
    *([c, "--help"] for c in ("check", "ids", "probe", "pair", "demo")),
    ["--version"],
]


@pytest.mark.parametrize("as_json", [False, True])
@pytest.mark.parametrize("argv", HELP, ids=" ".join)
def test_help_keeps_the_contract(capfd, argv, as_json):
    code, out, err = run(*argv, *json_flag(as_json), capfd=capfd)
    assert_contract(code, out, err, as_json or "--json" in argv)
    assert code == 0 and ("usage" in out or argv == ["--version"]), (argv, out[-1000:])


# ------------------------------------------------------------ found by the sweep, fixed: kept as examples


def _set(*path_and_value):
    return ("set", path_and_value[:-1], path_and_value[-1])


FIXED_FOLDERS = {
    # the draft's fc is sized from these: SGLang fails building or loading it
    "draft target_hidden_size false": (None, _set("target_hidden_size", False), None, "target_hidden_size is False"),
    "draft target_hidden_size string": (None, _set("target_hidden_size", "64"), None, "target_hidden_size is '64'"),
    "draft target_hidden_size 0": (None, _set("target_hidden_size", 0), None, "target_hidden_size is 0"),
    "draft target_hidden_size NaN": (None, _set("target_hidden_size", math.nan), None, "target_hidden_size is nan"),
    "draft without vocab_size": (None, ("delete", ("vocab_size",)), None, "has no vocab_size"),
    "draft draft_vocab_size string": (None, _set("draft_vocab_size", "x"), None, "draft_vocab_size is 'x'"),
    "draft draft_vocab_size 0": (None, _set("draft_vocab_size", 0), None, "draft_vocab_size is 0"),
    "target without vocab_size": (("delete", ("vocab_size",)), None, None, "target's config has no vocab_size"),
    "target hidden_size 0": (_set("hidden_size", 0), None, None, "target's config hidden_size is 0"),
    "target architectures a string": (_set("architectures", "DeepseekV3ForCausalLM"), None, None, "has architectures = 'DeepseekV3ForCausalLM'"),
    "draft config a JSON list": (None, ("raw", b"[1, 2]"), None, "is not a JSON object but a list"),
    "draft weights without fc.weight": (None, None, ("rename", "fc.weight", "fc2.weight"), "hold no fc.weight"),
    "draft index naming no shard": (None, None, ("index", {"weight_map": {}}), ""),
    "draft weights of a dtype safetensors lacks": (None, None, ("dtype", 0, "F99"), ""),
    "draft weights metadata not strings": (None, None, ("metadata", 5), ""),
}  # fmt: skip


@pytest.mark.releases
@pytest.mark.parametrize("case", list(FIXED_FOLDERS))
def test_check_reports_what_the_sweep_found_in_folders(tmp_path, capfd, warm_check, case):
    target_damage, draft_damage, weights, expected = FIXED_FOLDERS[case]
    target, draft = fresh(tmp_path)
    damage_config(target, TARGET_CONFIG, target_damage)
    damage_config(draft, DRAFT_CONFIG, draft_damage)
    if weights is not None:
        damage_weights(draft, weights)
    code, out, err = run("check", "--json", *launch(target, draft), capfd=capfd)
    report = assert_contract(code, out, err, as_json=True)
    errors = [f["message"] for f in report["findings"] if f["severity"] == "error"]
    assert code == 1 and any(expected in m and "Fix" in m for m in errors), (case, errors)


FIXED_PATHS = {
    "model path is its config.json": (1, "is a file, not a model folder"),
    "target config.json is a FIFO": (1, "is not a regular file but a FIFO"),  # SGLang would block on it
    "model path is missing": (2, "no such file or folder"),
    "--config is a FIFO": (2, "--config"),  # SGLang would block on it
}


@pytest.mark.releases
@pytest.mark.parametrize("case", list(FIXED_PATHS))
def test_check_reports_what_the_sweep_found_in_paths(tmp_path, capfd, warm_check, case):
    target, draft = fresh(tmp_path)
    argv = launch(target, draft)
    model_path = argv.index("--model-path") + 1
    if case == "model path is its config.json":
        argv[model_path] = str(target / "config.json")
    elif case == "target config.json is a FIFO":
        (target / "config.json").unlink()
        os.mkfifo(target / "config.json")
    elif case == "model path is missing":
        argv[model_path] = str(tmp_path / "nowhere")
    else:
        os.mkfifo(tmp_path / "launch.yaml")
        argv += ["--config", str(tmp_path / "launch.yaml")]
    code, out, err = run("check", "--json", *argv, capfd=capfd)
    report = json.dumps(assert_contract(code, out, err, as_json=True))
    expected_code, expected = FIXED_PATHS[case]
    assert code == expected_code and expected in report and "Fix" in report, (case, report)


FIXED_ARGUMENTS = {
    "--tp-size 0": (["--tp-size", "0"], "--tp-size 0"),
    "--dp-size -1": (["--dp-size", "-1"], "--dp-size -1"),
    "--pp-size 0": (["--pp-size", "0"], "--pp-size 0"),
    "--speculative-eagle-topk 0": (["--speculative-eagle-topk", "0"], "--speculative-eagle-topk 0"),
    "--speculative-num-steps 0": (["--speculative-num-steps", "0", "--speculative-num-draft-tokens", "1"], "--speculative-num-steps 0"),
    "--page-size 0": (["--page-size", "0"], "--page-size 0"),
    "--max-running-requests -3": (["--max-running-requests", "-3"], "--max-running-requests -3"),
    "--json-model-override-args a list": (["--json-model-override-args", "[1]"], "--json-model-override-args"),
    "--json-model-override-args not JSON": (["--json-model-override-args", "{"], "--json-model-override-args"),
    "--config not YAML": (["--config", b"{{{: ["], "--config"),
    "--config a folder": (["--config", "FOLDER"], "is a folder"),
    "--config missing": (["--config", "MISSING"], "--config"),
    "--config tp-size 0": (["--config", b"tp-size: 0\n"], "--tp-size 0"),
}  # fmt: skip


@pytest.mark.releases
@pytest.mark.parametrize("case", list(FIXED_ARGUMENTS))
def test_check_refuses_what_the_sweep_found_in_arguments(tmp_path, capfd, warm_check, case):
    target, draft = fresh(tmp_path)
    extra, expected = FIXED_ARGUMENTS[case]
    if extra[0] == "--config":
        extra = apply_edits([], [("config", extra[1])], tmp_path)
    code, out, err = run("check", "--json", *launch(target, draft, *extra), capfd=capfd)
    report = assert_contract(code, out, err, as_json=True)
    assert code == 2 and expected in report["error"] and "Fix" in report["error"], (case, report)


@pytest.mark.releases
def test_check_names_where_a_bare_sglang_assert_stands(tmp_path, capfd, warm_check):
    """SGLang refuses --dp-size 3 with --tp-size 2 under DP attention with a bare ``assert``."""
    target, draft = fresh(tmp_path)
    argv = launch(target, draft, "--tp-size", "2", "--dp-size", "3", "--enable-dp-attention")
    code, out, err = run("check", "--json", *argv, capfd=capfd)
    report = assert_contract(code, out, err, as_json=True)
    (finding,) = [f for f in report["findings"] if f["rule"] == "sglang-resolution"]
    assert code == 1 and "AssertionError with no message at srt/" in finding["message"], finding
