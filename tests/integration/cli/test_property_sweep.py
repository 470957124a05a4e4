"""Every command's inputs swept with Hypothesis, under the command line's contract (``cli/_exit.py``,
README): exit 0 ok, 1 findings, 2 a bad invocation or unreadable input; never a traceback and never
an exception that only the last-resort handler catches ("run with --debug for the traceback"); with
``--json`` stdout is one strict JSON document (no NaN); and a clearly broken input never gets a
healthy verdict (exit 0 with no error and no warning).

The inputs start from the tiny CPU pair shipped with the package (``doctor/data/demo_pair``):

- config.json: fields missing, extra or of the wrong type (strings, floats, NaN, Infinity, null,
  lists, objects, bools where integers belong), huge or negative numbers, aux layer ids with strings,
  floats, NaN, nested lists, duplicates or out of range, ``eagle_config`` as a list, a string or
  null; and whole files that are empty, not UTF-8, nested too deeply, cut short or not an object;
- weights: a truncated safetensors file, a header whose declared length lies, header entries with
  wrong dtypes, shapes or offsets, a ``model.safetensors.index.json`` naming a missing shard or
  holding a malformed weight_map;
- arguments: ``check``'s server arguments (the speculative triple, the parallel sizes, the
  algorithm, ``--json-model-override-args``, ``--config``, unknown flags, ``--help``; zero,
  negative, huge and non-numeric values), ``ids --num-layers``, ``probe``'s numbers, prompts and
  output, ``pair``'s sizes and ``--cache``;
- paths: a model folder, its config.json, another file, a FIFO, a symlink loop, an empty folder,
  a folder whose config.json is missing, a FIFO or a folder, a path under a file, nothing.

What counts as broken is decided per field by an oracle below (:func:`draft_broken`,
:func:`target_broken`): a value the rules read that no valid deployment of this pair has. ``check``
reads the configs and the draft's weight headers, never the target's weights; ``ids`` reads the
draft's config and the target's layer count only.

Commands run in-process (``cli.main(argv)``, so Ctrl-C's ``os._exit`` is never reached), with the
Hub offline and a time limit per command (a FIFO opened for reading blocks forever). Examples are
derandomized and no example database is kept, so a run is the same everywhere.
``EAGLE3_EMBED_SWEEP_SCALE`` scales the number of examples (default 1).
"""

from __future__ import annotations

import contextlib
import copy
import io
import itertools
import json
import math
import os
import shutil
import signal
import struct
import tempfile
import threading
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglang_eagle3_embed import FAMILY, MODEL_IMPL, cli
from sglang_eagle3_embed.core.ids import CONVENTION_FIELD, IDS_FIELD
from sglang_eagle3_embed.doctor.pair import PairSpec, shipped_pair

PAIR = shipped_pair(PairSpec())
if PAIR is None:
    pytest.skip("the demo pair does not ship with this install", allow_module_level=True)

TARGET_CONFIG = json.loads((PAIR.target / "config.json").read_text())
DRAFT_CONFIG = json.loads((PAIR.draft / "config.json").read_text())
LAYERS = TARGET_CONFIG["num_hidden_layers"]
HIDDEN = TARGET_CONFIG["hidden_size"]
VOCAB = TARGET_CONFIG["vocab_size"]
IDS = DRAFT_CONFIG["eagle_config"][IDS_FIELD]
MIN_LAYERS = max(IDS) + 2  # id k is the output of layer k, captured as the input of layer k + 1

SCALE = float(os.environ.get("EAGLE3_EMBED_SWEEP_SCALE", "1"))
LIMIT_S = 60
"""Seconds one command may run before it counts as hung (``check``'s imports are done before, by
:func:`warm_check`)."""


def examples(n: int) -> int:
    return max(1, round(n * SCALE))


PROFILE = dict(
    deadline=None,
    database=None,
    derandomize=True,
    print_blob=False,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)


def sweep(n: int):
    return settings(max_examples=examples(n), **PROFILE)


# ------------------------------------------------------------------ running a command


class Hung(BaseException):
    """A command ran past :data:`LIMIT_S` (a BaseException: no handler of the command catches it)."""


@contextlib.contextmanager
def time_limit(seconds: int):
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise Hung(f"the command ran for more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module", autouse=True)
def offline():
    """No command of the sweep reaches the Hub: a repo id fails at once."""
    import huggingface_hub.constants

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        yield


@pytest.fixture(scope="module")
def warm_check(source):
    """SGLang imported (its argument resolution imports most of it, once) outside the time limit
    of any one command: one ``check`` of the shipped pair."""
    from sglang_eagle3_embed.doctor.check import run_check

    run_check(launch(SOURCE["target"], SOURCE["draft"]))


def run(*args, capfd=None, limit: int = LIMIT_S) -> tuple[int, str, str]:
    """``sglang-eagle3-embed ARGS`` in this process: (exit code, stdout, stderr). With ``capfd``,
    what libraries write to the file descriptors (logging handlers made before the redirect) is
    part of stderr."""
    if capfd is not None:
        capfd.readouterr()
    out, err = io.StringIO(), io.StringIO()
    try:
        with time_limit(limit), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main([str(a) for a in args])
            except SystemExit as exit_:  # argparse's --help (the contract's parser turns errors into 2)
                code = exit_.code
    except Hung as hung:
        raise Hung(f"{hung}: sglang-eagle3-embed {' '.join(map(str, args))}") from None
    stderr = err.getvalue()
    if capfd is not None:
        fd = capfd.readouterr()
        stderr += fd.out + fd.err
    return code, out.getvalue(), stderr


def strict_json(text: str):
    def reject(constant):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=reject)


def contract(code, out: str, err: str, as_json: bool):
    """The contract every run keeps; returns the JSON document with ``as_json``."""
    tail = (out[-3000:], err[-3000:])
    assert code in (0, 1, 2), (code, *tail)
    assert "Traceback" not in out + err, tail
    assert "run with --debug for the traceback" not in out + err, tail  # an unexpected exception
    if not as_json:
        return None
    document = strict_json(out)
    if code == 2 and isinstance(document, dict) and "error" in document:
        assert document["ok"] is False and document["exit_code"] == 2, document
    return document


def check_verdict(code, out: str, as_json: bool) -> str:
    """``check``'s verdict: "usage" (exit 2), "findings" (exit 1, or warnings), or "healthy"."""
    if code == 2:
        return "usage"
    if code == 1:
        return "findings"
    if as_json:
        report = strict_json(out)
        if "usage" in report:
            return "help"
        return "findings" if any(f["severity"] == "warning" for f in report["findings"]) else "healthy"
    if out.startswith("usage:"):
        return "help"
    return "healthy" if ", 0 warning(s)," in out else "findings"


# ------------------------------------------------------------------ folders and their damage

SOURCE: dict[str, Path] = {}
"""The pair every example copies: the shipped one, copied once (:func:`source`)."""


@pytest.fixture(scope="module", autouse=True)
def source(tmp_path_factory):
    """A private copy of the shipped pair: package data rewritten while the sweep runs does not
    change its examples."""
    root = tmp_path_factory.mktemp("shipped-pair")
    SOURCE["target"] = Path(shutil.copytree(PAIR.target, root / "target"))
    SOURCE["draft"] = Path(shutil.copytree(PAIR.draft, root / "draft"))
    yield
    SOURCE.clear()


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


def config_bytes(base: dict, damage) -> bytes:
    """``base`` with one damage: ("set", keypath, value), ("delete", keypath) or ("raw", bytes)."""
    if damage[0] == "raw":
        return damage[1]
    config = copy.deepcopy(base)
    *parents, last = damage[1]
    holder = config
    for key in parents:
        if not isinstance(holder.get(key), dict):
            holder[key] = {}
        holder = holder[key]
    if damage[0] == "delete":
        holder.pop(last, None)
    else:
        holder[last] = damage[2]
    return json.dumps(config, allow_nan=True).encode()


ABSENT = object()
"""The value of a deleted field."""


def positive_int(value) -> bool:
    return type(value) is int and value > 0


def unset(value) -> bool:
    return value is ABSENT or value is None


def _valued(damage):
    return damage[2] if damage[0] == "set" else ABSENT


def plan_ids_broken(ids) -> bool:
    """Nested ids the rules accept silently on this target: 3 distinct integers, -1 among them,
    every one in range. Anything else is an error or a warning."""
    return not (
        isinstance(ids, list)
        and len(ids) == len(IDS)
        and all(type(i) is int for i in ids)
        and len(set(ids)) == len(ids)
        and -1 in ids
        and all(-1 <= i <= LAYERS - 2 for i in ids)
    )


def draft_broken(damage, *, plan_only: bool = False) -> bool | None:
    """Whether one damage to the draft's config.json breaks the deployment (True), keeps it valid
    (False), or is outside what the rules read (None). ``plan_only``: what ``ids`` reads."""
    if damage is None:
        return False
    if damage[0] == "raw":
        return True
    path, value = damage[1], _valued(damage)
    name = path[-1]
    nested = path[0] == "eagle_config" and len(path) == 2
    if path == ("eagle_config",):
        return value != DRAFT_CONFIG["eagle_config"]
    if name == IDS_FIELD:
        if nested:
            return plan_ids_broken(None if value is ABSENT else value)
        # a top-level list must equal the nested one
        return not unset(value) and not (
            isinstance(value, list) and not plan_ids_broken(value) and value == IDS
        )
    if name == CONVENTION_FIELD:
        return not (unset(value) or value == "layer_output")
    if name == "use_aux_hidden_state" and nested:
        return not (unset(value) or value is True)
    if name == "num_aux_hidden_states" and len(path) == 1:
        return not (unset(value) or (type(value) is int and value == len(IDS)))
    if plan_only or len(path) != 1:
        return None
    if name == "target_hidden_size":
        return not (unset(value) or (type(value) is int and value == HIDDEN))
    if name == "vocab_size":
        return not (type(value) is int and value == VOCAB)
    if name == "draft_vocab_size":
        if unset(value) or (type(value) is int and value == VOCAB):
            return False
        return None if positive_int(value) and value < VOCAB else True
    if name == "hidden_size":
        return None if value is ABSENT or positive_int(value) else True
    return None


def target_broken(damage, *, plan_only: bool = False) -> bool | None:
    """As :func:`draft_broken`, for the target's config.json."""
    if damage is None:
        return False
    if damage[0] == "raw":
        return True
    path, value = damage[1], _valued(damage)
    if len(path) != 1:
        return None
    name = path[0]
    if name == "num_hidden_layers":
        return (
            None if type(value) is int and value > 10**6 else not (type(value) is int and value >= MIN_LAYERS)
        )
    if plan_only:
        return None
    if name in ("hidden_size", "vocab_size"):
        return not (type(value) is int and value == TARGET_CONFIG[name])
    if name == "architectures":
        fine = (
            isinstance(value, list)
            and value
            and all(isinstance(a, str) for a in value)
            and value[0] in FAMILY
        )
        return not fine
    if name == "model_type":
        return value != TARGET_CONFIG["model_type"]
    return None


# -- strategies for config damage

SMALL = st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.text(max_size=4))
NUMBERS = st.sampled_from(
    [0, -1, -64, 10**20, -(10**20), 2**63, 2**64, 1.5, 64.0, 7.0, math.nan, math.inf, -math.inf, 1e308]
)
WRONG = st.one_of(
    st.none(),
    st.booleans(),
    NUMBERS,
    st.integers(-3, 300),
    st.text(max_size=6),
    st.sampled_from(["64", "7", "-1", "", "NaN", "DeepseekV3ForCausalLM", "layer_output"]),
    st.lists(SMALL, max_size=3),
    st.dictionaries(st.text(max_size=4), SMALL, max_size=2),
    st.recursive(SMALL, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2), max_leaves=6),
)  # fmt: skip
ID_ENTRY = st.one_of(
    st.integers(-3, LAYERS + 2),
    st.sampled_from([10**20, -(10**20), 2**63]),
    st.text(max_size=3),
    st.sampled_from(["-1", "2"]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.lists(st.integers(-1, 5), max_size=2),
)
IDS_VALUES = st.one_of(
    st.lists(ID_ENTRY, max_size=5),
    st.lists(st.integers(-2, LAYERS + 1), min_size=1, max_size=5),
    st.lists(st.integers(-1, 5), min_size=1, max_size=4).map(lambda ids: ids + ids[:1]),  # a duplicate
    WRONG,
)
CONVENTIONS = (
    st.sampled_from(["layer_output", "hidden_states", "LAYER_OUTPUT", "sglang_stock", "", "layer-output"])
    | WRONG
)

DRAFT_FIELDS = [
    *sorted({(k,) for k in DRAFT_CONFIG} | {(IDS_FIELD,), (CONVENTION_FIELD,), ("num_aux_hidden_states",)}),
    ("eagle_config", IDS_FIELD), ("eagle_config", IDS_FIELD), ("eagle_config", IDS_FIELD),
    ("eagle_config", CONVENTION_FIELD), ("eagle_config", "use_aux_hidden_state"),
]  # fmt: skip
READ_DRAFT_FIELDS = [
    ("eagle_config",), ("eagle_config", IDS_FIELD), (IDS_FIELD,), ("eagle_config", CONVENTION_FIELD),
    (CONVENTION_FIELD,), ("eagle_config", "use_aux_hidden_state"), ("num_aux_hidden_states",),
    ("target_hidden_size",), ("vocab_size",), ("draft_vocab_size",), ("hidden_size",),
]  # fmt: skip
TARGET_FIELDS = sorted({(k,) for k in TARGET_CONFIG} | {("text_config",)})
READ_TARGET_FIELDS = [
    ("num_hidden_layers",),
    ("hidden_size",),
    ("vocab_size",),
    ("architectures",),
    ("model_type",),
]


def _value_for(path):
    if path[-1] == IDS_FIELD:
        return IDS_VALUES
    if path[-1] == CONVENTION_FIELD:
        return CONVENTIONS
    if path[-1] == "use_aux_hidden_state":
        return st.just(False) | WRONG
    return WRONG


def raw_config(real: bytes):
    """Whole-file damage of a config.json whose real bytes are ``real``."""
    return st.one_of(
        st.just(b""),
        st.sampled_from(
            [b"\xff\xfe\x00", b'{"a": "\xc3"}', b"\x80" + real[1:], real.decode().encode("utf-16")]
        ),
        st.integers(500, 200_000).map(lambda n: b"[" * n + b"]" * n),
        st.integers(500, 50_000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
        st.integers(0, len(real) - 1).map(lambda cut: real[:cut]),
        st.sampled_from([b"[]", b"null", b"3", b'"config"', b"NaN", b"true", b"[1, 2]", b"{} {}"]),
        st.just(b"\xef\xbb\xbf" + real),
        st.just(b'{"num_hidden_layers": ' + b"9" * 5000 + b"}"),
    )


@st.composite
def config_damage(draw, base: dict, fields, read_fields):
    """One damage of a config.json (see :func:`config_bytes`)."""
    kind = draw(st.sampled_from(["set", "set", "set", "read", "read", "read", "delete", "extra", "raw"]))
    if kind == "raw":
        return ("raw", draw(raw_config(json.dumps(base, indent=2).encode())))
    if kind == "extra":
        read = {path[-1] for path in READ_DRAFT_FIELDS + READ_TARGET_FIELDS} | {"text_config"}
        key = draw(st.text(min_size=1, max_size=8).filter(lambda k: k not in base and k not in read))
        return ("set", (key,), draw(WRONG))
    path = draw(st.sampled_from(read_fields if kind == "read" else fields))
    if kind == "delete":
        return ("delete", path)
    return ("set", path, draw(_value_for(path)))


def draft_damage():
    return config_damage(DRAFT_CONFIG, DRAFT_FIELDS, READ_DRAFT_FIELDS)


def target_damage():
    return config_damage(TARGET_CONFIG, TARGET_FIELDS, READ_TARGET_FIELDS)


PLAN_FIELDS = [
    p
    for p in READ_DRAFT_FIELDS
    if p[-1] not in ("target_hidden_size", "vocab_size", "draft_vocab_size", "hidden_size")
]
"""The draft fields the plugin plans the captures from (what ``ids`` reads)."""


def ids_plan_draft_damage():
    return config_damage(DRAFT_CONFIG, DRAFT_FIELDS, PLAN_FIELDS)


# -- weights


def read_safetensors(file: Path) -> tuple[dict, bytes]:
    data = file.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + length]), data[8 + length :]


def write_safetensors(file: Path, header: dict, data: bytes) -> None:
    blob = json.dumps(header, allow_nan=True).encode()
    file.write_bytes(struct.pack("<Q", len(blob)) + blob + data)


SAME_BITS = {"F32": {"I32", "U32"}}
OTHER_DTYPES = st.sampled_from(["F16", "BF16", "F64", "I8", "U8", "BOOL", "I64", "F8_E4M3"])
UNKNOWN_DTYPES = st.sampled_from(["F99", "float32", "", "f32", "Q4_K"])


def _dtype_values():
    return st.one_of(OTHER_DTYPES, UNKNOWN_DTYPES, st.sampled_from([5, None, ["F32"], {"F": 32}]))


SHAPE_EDITS = st.sampled_from(["grow", "append", "drop", "negative", "string", "scalar", "null", "float"])
OFFSET_EDITS = st.sampled_from(["shift", "grow", "swap", "negative", "short", "long", "string", "null"])
LENGTH_EDITS = st.sampled_from(["zero", "one", "minus1", "plus1", "size", "huge", "max"])


def weights_damage():
    kinds = [
        st.tuples(st.just("truncate"), st.floats(0, 1, exclude_max=True)),
        st.tuples(st.just("length"), LENGTH_EDITS),
        st.tuples(st.just("dtype"), st.integers(0, 10**6), _dtype_values()),
        st.tuples(st.just("shape"), st.integers(0, 10**6), SHAPE_EDITS),
        st.tuples(st.just("offsets"), st.integers(0, 10**6), OFFSET_EDITS),
        st.tuples(st.just("entry"), st.integers(0, 10**6), st.sampled_from([5, None, [], "x", {}])),
        st.tuples(st.just("extra-tensor"), st.sampled_from(["fc.bias", "zz", ""])),
        st.tuples(st.just("replace"), st.sampled_from(["empty", "folder", "fifo", "loop", "bytes", "json"])),
        st.tuples(st.just("index"), index_damage()),
        st.tuples(st.just("metadata"), st.sampled_from([5, [], None, {"a": 1}, {"a": {"b": "c"}}])),
    ]
    return st.one_of(*kinds)


def index_damage():
    names = st.sampled_from(["fc.weight", "lm_head.weight", "zz"])
    missing = names.map(lambda n: {"weight_map": {n: "model-00002-of-00002.safetensors"}})
    bad_map = WRONG.filter(lambda v: not isinstance(v, dict)).map(lambda v: {"weight_map": v})
    bad_name = st.sampled_from(
        [5, None, "", ".", "..", "../model.safetensors", "a/b.safetensors", ["x"]]
    ).map(lambda n: {"weight_map": {"fc.weight": n}})
    options = [
        missing,
        bad_map,
        bad_name,
        st.sampled_from([{}, {"metadata": {}}, [], None]),
        st.just({"weight_map": {"fc.weight": "config.json"}}),
        st.just({"weight_map": {"fc.weight": "fifo.safetensors"}}),
        st.sampled_from([b"", b"{not json", b"\xff\xfe"]),
        st.just({"weight_map": {}}),
    ]
    return st.one_of(*options)


def _edit_shape(shape: list, how: str):
    return {
        "grow": [d + 1 for d in shape] or [2],
        "append": [*shape, 2],
        "drop": shape[:-1] if shape and math.prod(shape[:-1]) != math.prod(shape) else [*shape, 3],
        "negative": [-1, *shape[1:]],
        "string": [str(d) for d in shape] or ["1"],
        "scalar": math.prod(shape),
        "null": None,
        "float": [float(d) for d in shape] or [1.0],
    }[how]


def _edit_offsets(offsets: list, how: str):
    start, stop = offsets
    return {
        "shift": [start + 1, stop + 1],
        "grow": [start, stop + 4],
        "swap": [stop, start] if stop != start else [start + 4, start],
        "negative": [-4, stop],
        "short": [start],
        "long": [start, stop, stop],
        "string": [str(start), stop],
        "null": None,
    }[how]


def damage_weights(folder: Path, damage) -> None:
    """One damage of ``folder``'s weights (``model.safetensors``, or a new index)."""
    file = folder / "model.safetensors"
    kind = damage[0]
    if kind == "truncate":
        data = file.read_bytes()
        file.write_bytes(data[: int(damage[1] * len(data))])
        return
    if kind == "length":
        data = file.read_bytes()
        (length,) = struct.unpack("<Q", data[:8])
        value = {
            "zero": 0, "one": 1, "minus1": length - 1, "plus1": length + 1, "size": len(data),
            "huge": 2**40, "max": 2**64 - 1,
        }[damage[1]]  # fmt: skip
        file.write_bytes(struct.pack("<Q", value) + data[8:])
        return
    if kind == "replace":
        how = damage[1]
        file.unlink()
        if how == "empty":
            file.write_bytes(b"")
        elif how == "folder":
            file.mkdir()
        elif how == "fifo":
            os.mkfifo(file)
        elif how == "loop":
            file.symlink_to(file)
        elif how == "bytes":
            file.write_bytes(bytes(range(256)) * 4)
        else:
            file.write_text(json.dumps(DRAFT_CONFIG))
        return
    if kind == "index":
        content = damage[1]
        os.mkfifo(folder / "fifo.safetensors")
        index = folder / "model.safetensors.index.json"
        index.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
        return
    header, data = read_safetensors(file)
    names = sorted(n for n in header if n != "__metadata__")
    if kind == "metadata":
        header["__metadata__"] = damage[1]
    elif kind == "extra-tensor":
        end = max(e["data_offsets"][1] for n, e in header.items() if n != "__metadata__")
        header[damage[1]] = {"dtype": "F32", "shape": [1], "data_offsets": [end, end + 4]}
    else:
        name = names[damage[1] % len(names)]
        entry = header[name]
        if kind == "entry":
            header[name] = damage[2]
        elif kind == "dtype":
            entry["dtype"] = damage[2]
        elif kind == "shape":
            entry["shape"] = _edit_shape(entry["shape"], damage[2])
        elif kind == "offsets":
            entry["data_offsets"] = _edit_offsets(entry["data_offsets"], damage[2])
    write_safetensors(file, header, data)


def weights_broken(damage) -> bool | None:
    if damage is None:
        return False
    if damage[0] == "dtype" and isinstance(damage[2], str) and damage[2] in SAME_BITS["F32"]:
        return None  # the same byte count: the header still describes its file
    return True


# -- paths

PATH_KINDS = [
    "folder", "config-file", "other-file", "missing", "fifo", "loop", "empty-folder", "under-a-file",
    "config-missing", "config-fifo", "config-folder", "config-loop", "dangling-link",
]  # fmt: skip


PLACES = itertools.count()


def make_path(kind: str, folder: Path, root: Path) -> Path:
    """A path of ``kind`` made under ``root`` from the good model ``folder``."""
    place = root / f"path-{kind}-{next(PLACES)}"
    if kind == "folder":
        return folder
    if kind == "config-file":
        return folder / "config.json"
    if kind == "other-file":
        place.write_text("not a model\n")
    elif kind == "fifo":
        os.mkfifo(place)
    elif kind == "loop":
        place.symlink_to(place)
    elif kind == "empty-folder":
        place.mkdir()
    elif kind == "under-a-file":
        place.write_text("x")
        return place / "model"
    elif kind == "dangling-link":
        place.symlink_to(root / "nowhere")
    elif kind.startswith("config-"):
        shutil.copytree(folder, place)
        config = place / "config.json"
        config.unlink()
        if kind == "config-fifo":
            os.mkfifo(config)
        elif kind == "config-folder":
            config.mkdir()
        elif kind == "config-loop":
            config.symlink_to(config)
    return place


# ------------------------------------------------------------------ check: folders


def launch(target, draft, *extra) -> list[str]:
    return [
        "--model-path", str(target), "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", str(draft), "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
        "--model-impl", MODEL_IMPL, *extra,
    ]  # fmt: skip


def test_check_passes_the_shipped_pair(tmp_path, capfd, warm_check):
    """The base of every example: the undamaged pair is healthy, every rule checked."""
    target, draft = fresh(tmp_path)
    code, out, err = run("check", "--json", *launch(target, draft), capfd=capfd)
    report = contract(code, out, err, as_json=True)
    assert code == 0 and set(report["rules"].values()) == {"ok"}, report


def _check_folders(tmp_path_factory, capfd, target_damage, draft_damage, weights, as_json):
    with workdir(tmp_path_factory) as root:
        target, draft = fresh(root)
        if target_damage is not None:
            (target / "config.json").write_bytes(config_bytes(TARGET_CONFIG, target_damage))
        if draft_damage is not None:
            (draft / "config.json").write_bytes(config_bytes(DRAFT_CONFIG, draft_damage))
        if weights is not None:
            damage_weights(draft, weights)
        flags = ["--json"] if as_json else []
        code, out, err = run("check", *flags, *launch(target, draft), capfd=capfd)
    contract(code, out, err, as_json)
    verdicts = [target_broken(target_damage), draft_broken(draft_damage), weights_broken(weights)]
    if any(verdicts):
        assert check_verdict(code, out, as_json) in ("findings", "usage"), (
            verdicts,
            out[-3000:],
            err[-2000:],
        )
    return code, out


@sweep(50)
@given(
    target_damage=st.none() | target_damage(),
    draft_damage=st.none() | draft_damage(),
    weights=st.none() | weights_damage(),
    as_json=st.booleans(),
)
def test_check_keeps_the_contract_on_damaged_folders(
    tmp_path_factory, capfd, warm_check, target_damage, draft_damage, weights, as_json
):
    _check_folders(tmp_path_factory, capfd, target_damage, draft_damage, weights, as_json)


@sweep(40)
@given(damage=draft_damage(), as_json=st.booleans())
def test_check_flags_every_broken_draft_config(tmp_path_factory, capfd, warm_check, damage, as_json):
    _check_folders(tmp_path_factory, capfd, None, damage, None, as_json)


@sweep(30)
@given(damage=target_damage(), as_json=st.booleans())
def test_check_flags_every_broken_target_config(tmp_path_factory, capfd, warm_check, damage, as_json):
    _check_folders(tmp_path_factory, capfd, damage, None, None, as_json)


@sweep(35)
@given(damage=weights_damage(), as_json=st.booleans())
def test_check_flags_every_damaged_draft_checkpoint(tmp_path_factory, capfd, warm_check, damage, as_json):
    _check_folders(tmp_path_factory, capfd, None, None, damage, as_json)


@sweep(25)
@given(target=st.sampled_from(PATH_KINDS), draft=st.sampled_from(PATH_KINDS), as_json=st.booleans())
def test_check_keeps_the_contract_on_any_path(tmp_path_factory, capfd, warm_check, target, draft, as_json):
    with workdir(tmp_path_factory) as root:
        target_dir, draft_dir = fresh(root)
        argv = launch(make_path(target, target_dir, root), make_path(draft, draft_dir, root))
        code, out, err = run("check", *(["--json"] if as_json else []), *argv, capfd=capfd)
    contract(code, out, err, as_json)
    if (target, draft) != ("folder", "folder"):
        assert check_verdict(code, out, as_json) in ("findings", "usage"), (target, draft, out[-3000:])


# ------------------------------------------------------------------ check: arguments

POSITIVE_FLAGS = [
    "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens", "--tp-size",
    "--dp-size", "--pp-size", "--ep-size", "--page-size", "--max-running-requests",
    "--cuda-graph-max-bs-decode", "--nnodes",
]  # fmt: skip
NUMBER_TEXT = st.one_of(
    st.integers(-3, 20).map(str),
    st.sampled_from(
        ["0", "-1", str(10**20), str(-(10**20)), "1e3", "two", "", "nan", "0x10", " 3", "3.0", "+4", "1_0"]
    ),
)
ALGORITHMS = st.sampled_from(["EAGLE3", "EAGLE", "NEXTN", "STANDALONE", "NGRAM", "eagle3", "FOO", ""])
IMPLS = st.sampled_from([MODEL_IMPL, "sglang", "auto", "sglang-eagle3-embed", "transformers", "x"])
OVERRIDES = st.sampled_from(
    [
        "{",
        "[1]",
        '"x"',
        "null",
        "{}",
        '{"eagle_config": {}}',
        '{"num_hidden_layers": "x"}',
        '{"max_position_embeddings": 256}',
        "1e999",
        "NaN",
    ]
)
YAML_CONFIGS = st.sampled_from(
    # keys no other edit passes on the command line, where a flag overrides its --config value
    ["tp-size: 1\n", "moe-dp-size: 0\n", "attn-dp-size: -1\n", "{{{: [", "- 1\n- 2\n", "\xff", "", "moe-dp-size: two\n"]
)  # fmt: skip


def _parsed_int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


@st.composite
def argument_edit(draw):
    """One edit of the launch and whether it breaks the launch: True, False, None (no claim), or
    "eagle3" (it breaks an EAGLE-3 launch only)."""
    kind = draw(
        st.sampled_from(
            ["positive"] * 4 + ["algorithm", "impl", "override", "unknown", "help", "config", "drop"]
        )
    )
    if kind == "positive":
        flag, value = draw(st.sampled_from(POSITIVE_FLAGS)), draw(NUMBER_TEXT)
        number = _parsed_int(value)
        return ("set", flag, value), number is None or number < 1
    if kind == "algorithm":
        value = draw(ALGORITHMS)
        return ("set", "--speculative-algorithm", value), True if value.upper() in (
            "EAGLE",
            "NEXTN",
            "FOO",
            "",
        ) else None
    if kind == "impl":
        value = draw(IMPLS)
        # stock SGLang misreads the draft's [-1, 2, 4]; a typo of the plugin's name is refused
        return ("set", "--model-impl", value), "eagle3" if value in (
            "sglang-eagle3-embed",
            "sglang",
            "auto",
            "x",
        ) else None
    if kind == "override":
        value = draw(OVERRIDES)
        return ("set", "--json-model-override-args", value), value not in (
            "{}",
            '{"max_position_embeddings": 256}',
        )
    if kind == "unknown":
        return ("add", draw(st.sampled_from(["--no-such-flag", "--speculative-num-stepz", "-x", "--"]))), True
    if kind == "help":
        return ("add", draw(st.sampled_from(["--help", "-h"]))), None
    if kind == "config":
        content = draw(YAML_CONFIGS | st.sampled_from(["FIFO", "FOLDER", "MISSING", "NOT-YAML"]))
        return ("config", content), None if content in ("tp-size: 1\n", "") else True  # "": no arguments
    flag = draw(
        st.sampled_from(
            ["--speculative-num-steps", "--speculative-algorithm", "--speculative-draft-model-path"]
        )
    )
    # without the steps, the top-k and draft tokens stand alone; without the draft, the target drafts
    return ("drop", flag), None if flag == "--speculative-algorithm" else "eagle3"


def _edited(edit) -> str:
    """What an edit changes: its flag (one edit per flag in a launch), else its kind."""
    return edit[0][1] if edit[0][0] in ("set", "drop") else edit[0][0]


def launch_broken(edits) -> bool:
    algorithm = next((e[0][2] for e in edits if e[0][:2] == ("set", "--speculative-algorithm")), "EAGLE3")
    dropped = any(e[0] == ("drop", "--speculative-algorithm") for e in edits)
    eagle3 = algorithm.upper() == "EAGLE3" and not dropped
    return any(claim is True or (claim == "eagle3" and eagle3) for _, claim in edits)


def apply_edits(argv: list[str], edits, root: Path) -> list[str]:
    argv = list(argv)
    for n, edit in enumerate(edits):
        if edit[0] == "set":
            _, flag, value = edit
            if flag in argv:
                argv[argv.index(flag) + 1] = value
            else:
                argv += [flag, value]
        elif edit[0] == "drop":
            if edit[1] in argv:
                i = argv.index(edit[1])
                del argv[i : i + 2]
        elif edit[0] == "add":
            argv.append(edit[1])
        else:
            content = edit[1]
            file = root / (f"launch{n}.txt" if content == "NOT-YAML" else f"launch{n}.yaml")
            if content == "FIFO":
                os.mkfifo(file)
            elif content == "FOLDER":
                file.mkdir()
            elif content not in ("MISSING",):
                file.write_bytes(content.encode("utf-8", "surrogateescape") if content != "\xff" else b"\xff")
            argv += ["--config", str(file)]
    return argv


@sweep(80)
@given(edits=st.lists(argument_edit(), min_size=1, max_size=3, unique_by=_edited), as_json=st.booleans())
def test_check_keeps_the_contract_on_any_arguments(tmp_path_factory, capfd, warm_check, edits, as_json):
    with workdir(tmp_path_factory) as root:
        target, draft = fresh(root)
        argv = apply_edits(launch(target, draft), [e for e, _ in edits], root)
        flags = ["--json"] if as_json else []
        code, out, err = run("check", *flags, *argv, capfd=capfd)
    contract(code, out, err, as_json)
    verdict = check_verdict(code, out, as_json)
    if any(e[0] == ("add", "--help") or e[0] == ("add", "-h") for e in edits):
        assert (code, verdict) == (0, "help"), (code, out[-2000:])
        return
    if launch_broken(edits):
        assert verdict in ("findings", "usage"), (edits, out[-3000:], err[-2000:])


# ------------------------------------------------------------------ ids

NUM_LAYERS = st.one_of(
    st.integers(-3, 12).map(str),
    st.sampled_from([str(10**20), str(-(10**20)), "abc", "", "1.5", "nan", "0x10", "٣", " 7"]),
)


@sweep(200)
@given(
    draft_damage=st.none() | ids_plan_draft_damage(),
    target=st.one_of(
        st.tuples(st.just("--target"), st.none() | target_damage()),
        st.tuples(st.just("--num-layers"), NUM_LAYERS),
        st.tuples(st.just("target-path"), st.sampled_from(PATH_KINDS)),
    ),
    draft_path=st.sampled_from(["folder"] * 6 + PATH_KINDS),
    as_json=st.booleans(),
)
def test_ids_keeps_the_contract(tmp_path_factory, capfd, draft_damage, target, draft_path, as_json):
    with workdir(tmp_path_factory) as root:
        target_dir, draft_dir = fresh(root)
        if draft_damage is not None:
            (draft_dir / "config.json").write_bytes(config_bytes(DRAFT_CONFIG, draft_damage))
        args = ["ids", make_path(draft_path, draft_dir, root)]
        if target[0] == "--target":
            if target[1] is not None:
                (target_dir / "config.json").write_bytes(config_bytes(TARGET_CONFIG, target[1]))
            args += ["--target", target_dir]
        elif target[0] == "target-path":
            args += ["--target", make_path(target[1], target_dir, root)]
        else:
            args += ["--num-layers", target[1]]
        code, out, err = run(*args, *(["--json"] if as_json else []), capfd=capfd)
    document = contract(code, out, err, as_json)
    if target[0] == "--num-layers":
        layers = _parsed_int(target[1])
        layers_broken = layers is None or layers < MIN_LAYERS
        if layers is None or layers < 1:
            assert code == 2, (target, out[-2000:], err[-2000:])
    elif target[0] == "target-path":
        layers_broken = target[1] not in ("folder", "config-file")
        if layers_broken:
            assert code == 2, (target, out[-2000:], err[-2000:])
    else:
        layers_broken = target_broken(target[1], plan_only=True)
    broken = [
        draft_broken(draft_damage, plan_only=True),
        layers_broken,
        draft_path not in ("folder", "config-file"),
    ]
    if any(broken) and code == 0:
        warned = document["warnings"] if as_json else "warning [" in out
        assert warned, (broken, out[-3000:])


# ------------------------------------------------------------------ probe

PROBE_QUICK = [
    "--num-prompts",
    "2",
    "--new-tokens",
    "2",
    "--num-steps",
    "1",
    "--prompt-len",
    "2",
    "--no-progress",
]


@st.composite
def probe_damage(draw):
    """One input that ``probe`` must refuse before it loads a model: (what, detail)."""
    what = draw(
        st.sampled_from(
            ["target-config", "draft-config", "target-weights", "draft-weights", "number", "prompts",
             "output", "device", "target-path", "draft-path", "engine-arg"]
        )
    )  # fmt: skip
    if what == "target-config":
        return what, ("raw", draw(raw_config(json.dumps(TARGET_CONFIG).encode())))
    if what == "draft-config":
        return what, ("raw", draw(raw_config(json.dumps(DRAFT_CONFIG).encode())))
    if what in ("target-weights", "draft-weights"):
        return what, draw(
            st.one_of(
                st.tuples(st.just("truncate"), st.floats(0, 1, exclude_max=True)),
                st.tuples(st.just("length"), LENGTH_EDITS),
                st.tuples(st.just("offsets"), st.integers(0, 10**6), OFFSET_EDITS),
                st.tuples(st.just("shape"), st.integers(0, 10**6), SHAPE_EDITS),
                st.tuples(st.just("index"), index_damage()),
            )
        )
    if what == "number":
        flag = draw(st.sampled_from(["--num-prompts", "--num-steps", "--new-tokens", "--prompt-len"]))
        least = 2 if flag in ("--new-tokens", "--prompt-len") else 1
        return what, (
            flag,
            draw(st.sampled_from([str(least - 1), "-1", "0", str(-(10**20)), "x", "1.5", ""])),
        )
    if what == "prompts":
        return what, draw(
            st.sampled_from(["FIFO", "FOLDER", "MISSING", b"", b"\n\n", b"\xff\xfe", b"[1]", b"[-1, 2]", b"[1.5, 2]",
                             b"[[1], [2]]", b"[1, 2", b'["a", 2]', b"[99999999999, 2]", b"[" * 5000, b"[1, 2]\n[3]"])
        )  # fmt: skip
    if what == "output":
        return what, draw(st.sampled_from(["MISSING-FOLDER", "FOLDER", "UNDER-A-FILE"]))
    if what == "device":
        return what, draw(st.sampled_from(["cuda", "cuda:0", "tpu", "", "cuda:x", "CPU", "cuda:-1"]))
    if what == "engine-arg":
        return what, draw(
            st.sampled_from([["--backend", "engine"], ["--engine-arg", "=1"], ["--engine-arg", "x"]])
        )
    return what, draw(st.sampled_from([k for k in PATH_KINDS if k != "folder"]))


def _probe_args(damage, root: Path, target: Path, draft: Path) -> list:
    what, detail = damage
    quick = list(PROBE_QUICK)
    extra: list = []
    if what == "target-config":
        (target / "config.json").write_bytes(config_bytes(TARGET_CONFIG, detail))
    elif what == "draft-config":
        (draft / "config.json").write_bytes(config_bytes(DRAFT_CONFIG, detail))
    elif what == "target-weights":
        damage_weights(target, detail)
    elif what == "draft-weights":
        damage_weights(draft, detail)
    elif what == "number":
        flag, value = detail
        quick[quick.index(flag) + 1] = value
    elif what == "prompts":
        file = root / "prompts.txt"
        if detail == "FIFO":
            os.mkfifo(file)
        elif detail == "FOLDER":
            file.mkdir()
        elif detail != "MISSING":
            file.write_bytes(detail)
        extra = ["--prompts", file]
    elif what == "output":
        (root / "a-file").write_text("x")
        place = {
            "MISSING-FOLDER": root / "no" / "r.json",
            "FOLDER": root,
            "UNDER-A-FILE": root / "a-file" / "r.json",
        }
        extra = ["--output", place[detail]]
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
@given(damage=probe_damage(), as_json=st.booleans())
def test_probe_refuses_damage_before_it_loads_a_model(tmp_path_factory, capfd, damage, as_json):
    with workdir(tmp_path_factory) as root:
        target, draft = fresh(root)
        args = _probe_args(damage, root, target, draft)
        loaded = []
        from sglang_eagle3_embed.doctor import backends

        real = backends.make_backend

        def spy(*a, **k):
            loaded.append(a)
            return real(*a, **k)

        with mock.patch.object(backends, "make_backend", spy):
            code, out, err = run(*args, *(["--json"] if as_json else []), capfd=capfd)
    contract(code, out, err, as_json)
    assert code == 2, (damage, code, out[-2000:], err[-2000:])
    if damage != ("prompts", b"[99999999999, 2]"):  # token ids are checked against the loaded embedding
        assert not loaded, damage


def ids_missing(damage) -> bool:
    """The damage leaves the draft config without aux layer ids (stock SGLang captures defaults)."""
    if damage[0] == "raw" or len(damage[1]) > 2 or damage[1][0] != "eagle_config":
        return False
    value = _valued(damage)
    if damage[1] == ("eagle_config",):
        return not isinstance(value, dict) or unset(value.get(IDS_FIELD))
    return damage[1] == ("eagle_config", IDS_FIELD) and unset(value)


@sweep(6)
@given(damage=draft_damage(), as_json=st.booleans())
def test_probe_keeps_the_contract_on_a_damaged_draft_config(tmp_path_factory, capfd, damage, as_json):
    """A few examples that may load the models (about a second each)."""
    with workdir(tmp_path_factory) as root:
        target, draft = fresh(root)
        (draft / "config.json").write_bytes(config_bytes(DRAFT_CONFIG, damage))
        args = ["probe", "--target", target, "--draft", draft, *PROBE_QUICK, *(["--json"] if as_json else [])]
        code, out, err = run(*args, capfd=capfd)
    contract(code, out, err, as_json)
    if draft_broken(damage, plan_only=True) or ids_missing(damage):
        assert code != 0 or "nothing found wrong" not in out, (damage, out[-2000:])


def test_probe_finds_something_wrong_with_a_draft_without_ids(tmp_path, capfd):
    """Without ids the plugin and stock read SGLang's default layers: not evidence of anything."""
    target, draft = fresh(tmp_path)
    (draft / "config.json").write_bytes(config_bytes(DRAFT_CONFIG, ("set", ("eagle_config",), None)))
    code, out, err = run("probe", "--target", target, "--draft", draft, *PROBE_QUICK, capfd=capfd)
    contract(code, out, err, as_json=False)
    assert code == 1 and "nothing found wrong" not in out, out[-2000:]
    assert "eagle_aux_hidden_state_layer_ids" in out


# ------------------------------------------------------------------ pair and demo

SIZES = st.one_of(st.integers(-3, 9).map(str), st.sampled_from([str(10**20), str(-(10**20)), "x", "", "1.5"]))


@sweep(40)
@given(
    sizes=st.dictionaries(st.sampled_from(["--layers", "--hidden", "--vocab", "--heads"]), SIZES, max_size=3),
    ids=st.none()
    | st.lists(
        st.one_of(st.integers(-3, 10).map(str), st.sampled_from([str(10**20), "x"])), min_size=1, max_size=4
    ),
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

    args = [
        "pair",
        "--arch",
        arch,
        *[x for kv in sizes.items() for x in kv],
        *(["--ids", *ids] if ids else []),
    ]
    with mock.patch.object(pair, "build_pair", builder), mock.patch.object(kimi, "build_kimi_pair", builder):
        code, out, err = run(*args, *(["--json"] if as_json else []), capfd=capfd)
    contract(code, out, err, as_json or code == 0)
    assert (code == 0) == bool(built), (args, code, err[-1000:])
    if any(_parsed_int(v) is None or _parsed_int(v) < 1 for v in sizes.values()):
        assert code == 2, (args, out, err[-1000:])


CACHE_KINDS = ["fifo", "other-file", "loop", "under-a-file", "dangling-link"]


class DemoStarted(BaseException):
    """The demo accepted its cache and began its work (raised in place of that work)."""


@sweep(12)
@given(kind=st.sampled_from(CACHE_KINDS), command=st.sampled_from(["pair", "demo"]))
def test_pair_and_demo_refuse_a_cache_that_cannot_be_a_folder(tmp_path_factory, capfd, kind, command):
    from sglang_eagle3_embed.doctor import demo

    def started():
        raise DemoStarted

    with workdir(tmp_path_factory) as root:
        cache = make_path(kind, SOURCE["target"], root)
        with mock.patch.object(demo, "_quiet_libraries", started):
            try:
                code, out, err = run(command, "--cache", cache, capfd=capfd)
            except DemoStarted:
                pytest.fail(f"demo --cache {kind}: accepted, and the demo started")
    contract(code, out, err, as_json=False)
    assert code == 2 and str(cache) in err, (kind, err[-1000:])


# ------------------------------------------------------------------ --help and --version with --json

HELP_COMMANDS = [
    ["check", "--help"],
    ["check", "--json", "-h"],
    ["ids", "--help"],
    ["probe", "--help"],
    ["pair", "--help"],
    ["demo", "--help"],
    ["--version"],
]


@sweep(10)
@given(argv=st.sampled_from(HELP_COMMANDS), as_json=st.booleans())
def test_help_keeps_the_contract(capfd, argv, as_json):
    code, out, err = run(*argv, *(["--json"] if as_json else []), capfd=capfd)
    contract(code, out, err, as_json or "--json" in argv)
    assert code == 0 and ("usage" in out or argv == ["--version"]), (argv, out[-1000:])


# ------------------------------------------------------------------ found by the sweep, fixed


def _set(path, value):
    return ("set", path, value)


def _weights_without_fc(draft: Path) -> None:
    header, data = read_safetensors(draft / "model.safetensors")
    header["fc2.weight"] = header.pop("fc.weight")
    write_safetensors(draft / "model.safetensors", header, data)


FIXED_FOLDERS = {
    # the draft's fc is sized from these: SGLang fails building or loading it
    "draft target_hidden_size false": (None, _set(("target_hidden_size",), False), None, "target_hidden_size is False"),
    "draft target_hidden_size string": (None, _set(("target_hidden_size",), "64"), None, "target_hidden_size is '64'"),
    "draft target_hidden_size 0": (None, _set(("target_hidden_size",), 0), None, "target_hidden_size is 0"),
    "draft target_hidden_size NaN": (None, _set(("target_hidden_size",), math.nan), None, "target_hidden_size is nan"),
    "draft without vocab_size": (None, ("delete", ("vocab_size",)), None, "has no vocab_size"),
    "draft draft_vocab_size string": (None, _set(("draft_vocab_size",), "x"), None, "draft_vocab_size is 'x'"),
    "draft draft_vocab_size 0": (None, _set(("draft_vocab_size",), 0), None, "draft_vocab_size is 0"),
    "target without vocab_size": (("delete", ("vocab_size",)), None, None, "target's config has no vocab_size"),
    "target hidden_size 0": (_set(("hidden_size",), 0), None, None, "target's config hidden_size is 0"),
    "target architectures a string": (
        _set(("architectures",), "DeepseekV3ForCausalLM"), None, None, "has architectures = 'DeepseekV3ForCausalLM'"
    ),
    "draft config a JSON list": (None, ("raw", b"[1, 2]"), None, "is not a JSON object but a list"),
    "draft weights without fc.weight": (None, None, _weights_without_fc, "hold no fc.weight"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(FIXED_FOLDERS))
def test_check_reports_what_the_sweep_found_in_folders(tmp_path, capfd, warm_check, case):
    target_damage, draft_damage, weights, expected = FIXED_FOLDERS[case]
    target, draft = fresh(tmp_path)
    if target_damage is not None:
        (target / "config.json").write_bytes(config_bytes(TARGET_CONFIG, target_damage))
    if draft_damage is not None:
        (draft / "config.json").write_bytes(config_bytes(DRAFT_CONFIG, draft_damage))
    if weights is not None:
        weights(draft)
    code, out, err = run("check", "--json", *launch(target, draft), capfd=capfd)
    report = contract(code, out, err, as_json=True)
    errors = [f["message"] for f in report["findings"] if f["severity"] == "error"]
    assert code == 1 and any(expected in m and "Fix" in m for m in errors), (case, errors)


FIXED_PATHS = {
    "model path is its config.json": (1, "is a file, not a model folder"),
    "target config.json is a FIFO": (1, "is not a regular file but a FIFO"),  # SGLang would block on it
    "model path is missing": (2, "no such file or folder"),
    "--config is a FIFO": (2, "--config"),  # SGLang would block on it
}


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
    report = contract(code, out, err, as_json=True)
    expected_code, expected = FIXED_PATHS[case]
    assert code == expected_code and expected in json.dumps(report), (case, report)
    assert "Fix" in json.dumps(report), report


FIXED_ARGUMENTS = {
    "--tp-size 0": (["--tp-size", "0"], "--tp-size 0"),
    "--dp-size -1": (["--dp-size", "-1"], "--dp-size -1"),
    "--pp-size 0": (["--pp-size", "0"], "--pp-size 0"),
    "--speculative-eagle-topk 0": (["--speculative-eagle-topk", "0"], "--speculative-eagle-topk 0"),
    "--speculative-num-steps 0": (
        ["--speculative-num-steps", "0", "--speculative-num-draft-tokens", "1"], "--speculative-num-steps 0"
    ),
    "--page-size 0": (["--page-size", "0"], "--page-size 0"),
    "--max-running-requests -3": (["--max-running-requests", "-3"], "--max-running-requests -3"),
    "--json-model-override-args a list": (["--json-model-override-args", "[1]"], "--json-model-override-args"),
    "--json-model-override-args not JSON": (["--json-model-override-args", "{"], "--json-model-override-args"),
    "--config not YAML": (["--config", "BAD_YAML"], "--config"),
    "--config a folder": (["--config", "FOLDER"], "is a folder"),
    "--config missing": (["--config", "MISSING"], "--config"),
    "--config tp-size 0": (["--config", "TP0_YAML"], "--tp-size 0"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(FIXED_ARGUMENTS))
def test_check_refuses_what_the_sweep_found_in_arguments(tmp_path, capfd, warm_check, case):
    target, draft = fresh(tmp_path)
    extra, expected = FIXED_ARGUMENTS[case]
    files = {"BAD_YAML": "bad.yaml", "FOLDER": "dir.yaml", "MISSING": "none.yaml", "TP0_YAML": "tp0.yaml"}
    (tmp_path / "bad.yaml").write_text("{{{: [")
    (tmp_path / "dir.yaml").mkdir()
    (tmp_path / "tp0.yaml").write_text("tp-size: 0\n")
    extra = [str(tmp_path / files[a]) if a in files else a for a in extra]
    code, out, err = run("check", "--json", *launch(target, draft, *extra), capfd=capfd)
    report = contract(code, out, err, as_json=True)
    assert code == 2 and expected in report["error"] and "Fix" in report["error"], (case, report)


def test_check_names_where_a_bare_sglang_assert_stands(tmp_path, capfd, warm_check):
    """SGLang refuses --dp-size 3 with --tp-size 2 under DP attention with a bare ``assert``."""
    target, draft = fresh(tmp_path)
    argv = launch(target, draft, "--tp-size", "2", "--dp-size", "3", "--enable-dp-attention")
    code, out, err = run("check", "--json", *argv, capfd=capfd)
    report = contract(code, out, err, as_json=True)
    (finding,) = [f for f in report["findings"] if f["rule"] == "sglang-resolution"]
    assert code == 1 and "AssertionError with no message at srt/" in finding["message"], finding


# ------------------------------------------------------------------ found by the sweep, fixed by their owners
# (core/model_folder.py, doctor/request.py, doctor/probe.py): kept as examples of what the sweep generates


def test_check_flags_an_index_that_names_no_shard(tmp_path, capfd, warm_check):
    target, draft = fresh(tmp_path)
    (draft / "model.safetensors.index.json").write_text('{"weight_map": {}}')
    code, out, err = run("check", "--json", *launch(target, draft), capfd=capfd)
    contract(code, out, err, as_json=True)
    assert code == 1, out


def test_check_flags_a_dtype_safetensors_lacks(tmp_path, capfd, warm_check):
    target, draft = fresh(tmp_path)
    damage_weights(
        draft, ("dtype", sorted(read_safetensors(draft / "model.safetensors")[0]).index("fc.weight"), "F99")
    )
    code, out, err = run("check", "--json", *launch(target, draft), capfd=capfd)
    contract(code, out, err, as_json=True)
    assert code == 1, out


def test_check_flags_metadata_that_is_not_an_object_of_strings(tmp_path, capfd, warm_check):
    target, draft = fresh(tmp_path)
    damage_weights(draft, ("metadata", 5))
    code, out, err = run("check", "--json", *launch(target, draft), capfd=capfd)
    contract(code, out, err, as_json=True)
    assert code == 1, out


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
    contract(code, out, err, as_json=False)
    assert code == 2 and "prompts.txt" in err, err


@pytest.mark.parametrize("field", ["num_hidden_layers", "hidden_act"])
def test_probe_refuses_a_draft_config_transformers_refuses(tmp_path, capfd, field):
    target, draft = fresh(tmp_path)
    (draft / "config.json").write_bytes(config_bytes(DRAFT_CONFIG, ("set", (field,), None)))
    code, out, err = run("probe", "--target", target, "--draft", draft, *PROBE_QUICK, capfd=capfd)
    contract(code, out, err, as_json=False)
    assert code == 2 and field in err, err[-2000:]


@pytest.mark.parametrize("argv", [["ids", "--help"], ["probe", "--help"], ["pair", "--help"], ["--version"]])
def test_help_with_json_prints_json(capfd, argv):
    code, out, err = run(*argv, "--json", capfd=capfd)
    contract(code, out, err, as_json=True)
