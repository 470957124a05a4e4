"""Damaged model folders for the CLI tests: what to break (Hypothesis strategies) and how to write it.

- a config.json edited by the test (:func:`edit_config`), or with one damage (:func:`damage_config`,
  drawn by :func:`config_damage`): a field set to a wrong value (:data:`WRONG`), deleted, an
  unknown field, or the whole file replaced by bytes that are no JSON object (:func:`raw_config`);
- ``model.safetensors`` damaged (:func:`damage_weights`, drawn by :func:`weights_damage`): cut
  short, a header length that lies, entries with wrong dtypes, shapes or offsets, the file replaced,
  an index naming a missing shard or holding a malformed weight map;
- a path of a kind (:func:`make_path`): a model folder, its config.json, another file, a FIFO, a
  symlink loop, an empty folder, a folder whose config.json is missing, a FIFO or a folder, a path
  under a file, nothing.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import os
import shutil
import struct
from pathlib import Path

from hypothesis import strategies as st

from tests.support.strategies import JSON

__all__ = [
    "LENGTH_EDITS", "MODEL_PATHS", "NUMBERS", "OFFSET_EDITS", "PATH_KINDS", "SHAPE_EDITS", "TRUNCATE",
    "WRONG", "config_damage", "damage_config", "damage_weights", "index_damage", "make_node",
    "make_path", "raw_config", "weights_damage",
]  # fmt: skip

# ------------------------------------------------------------------ config.json

NUMBERS = st.sampled_from(
    [0, -1, -64, 10**20, -(10**20), 2**63, 2**64, 1.5, 64.0, 7.0, math.nan, math.inf, -math.inf, 1e308]
)
WRONG = st.one_of(
    JSON, NUMBERS, st.sampled_from(["64", "7", "-1", "", "NaN", "DeepseekV3ForCausalLM", "layer_output"])
)
"""A value of the wrong type or range for most config fields (NaN and Infinity included)."""


def edit_config(folder: Path, edit) -> None:
    """``edit`` applied in place to ``folder``'s config.json (a function of the parsed object)."""
    config = json.loads((folder / "config.json").read_text())
    edit(config)
    (folder / "config.json").write_text(json.dumps(config))


def damage_config(folder: Path, base: dict, damage) -> None:
    """Write ``base`` with one damage as ``folder``'s config.json: None (no damage), ("set",
    keypath, value), ("delete", keypath) or ("raw", bytes)."""
    if damage is None:
        return
    if damage[0] == "raw":
        (folder / "config.json").write_bytes(damage[1])
        return
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
    (folder / "config.json").write_text(json.dumps(config, allow_nan=True))


def raw_config(real: bytes):
    """Whole-file damage of a config.json whose real bytes are ``real``: empty, not UTF-8, nested
    too deeply, cut short, not an object, a number too long to read."""
    return st.one_of(
        st.sampled_from([b"", b"\xff\xfe\x00", b'{"a": "\xc3"}', b"\x80" + real[1:], real.decode().encode("utf-16")]),
        st.integers(500, 200_000).map(lambda n: b"[" * n + b"]" * n),
        st.integers(500, 50_000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
        st.integers(0, len(real) - 1).map(lambda cut: real[:cut]),
        st.sampled_from([b"[]", b"null", b"3", b'"config"', b"NaN", b"true", b"[1, 2]", b"{} {}"]),
        st.sampled_from([b"\xef\xbb\xbf" + real, b'{"num_hidden_layers": ' + b"9" * 5000 + b"}"]),
    )  # fmt: skip


@st.composite
def config_damage(draw, base: dict, fields, read_fields, values=None):
    """One damage of the config ``base`` (:func:`damage_config`): a keypath of ``fields`` or, as
    often, of ``read_fields`` (those the code reads) set to a value of ``values[key]`` (else
    :data:`WRONG`) or deleted; an unknown key; or the whole file."""
    values = values or {}
    kind = draw(st.sampled_from(["set", "set", "set", "read", "read", "read", "delete", "extra", "raw"]))
    if kind == "raw":
        return ("raw", draw(raw_config(json.dumps(base, indent=2).encode())))
    if kind == "extra":
        known = {path[-1] for path in (*fields, *read_fields)} | {"text_config"}
        key = draw(st.text(min_size=1, max_size=8).filter(lambda k: k not in base and k not in known))
        return ("set", (key,), draw(WRONG))
    path = draw(st.sampled_from(read_fields if kind == "read" else fields))
    if kind == "delete":
        return ("delete", path)
    return ("set", path, draw(values.get(path[-1], WRONG)))


# ------------------------------------------------------------------ model.safetensors

DTYPES = st.sampled_from(
    ["F16", "BF16", "F64", "I8", "U8", "BOOL", "I64", "F8_E4M3", "F99", "float32", "", "f32", "Q4_K"]
) | st.sampled_from([5, None, ["F32"], {"F": 32}])
"""Dtypes an F32 tensor's entry does not have: none of F32's width (I32 or U32 would still fit)."""
SHAPE_EDITS = st.sampled_from(["grow", "append", "drop", "negative", "string", "scalar", "null", "float"])
OFFSET_EDITS = st.sampled_from(["shift", "grow", "swap", "negative", "short", "long", "string", "null"])
LENGTH_EDITS = st.sampled_from(["zero", "one", "minus1", "plus1", "size", "huge", "max"])
TRUNCATE = st.tuples(st.just("truncate"), st.floats(0, 1, exclude_max=True))
REPLACEMENTS = st.sampled_from(
    [b"", bytes(range(256)) * 4, b'{"architectures": ["LlamaForCausalLMEagle3"]}', "FOLDER", "FIFO", "LOOP"]
)
"""What may stand where ``model.safetensors`` was (:func:`make_node`)."""


def index_damage():
    """A ``model.safetensors.index.json`` that names a missing shard or is malformed."""
    names = st.sampled_from(["fc.weight", "lm_head.weight", "zz"])
    shards = st.sampled_from(
        [
            5,
            None,
            "",
            ".",
            "..",
            "../model.safetensors",
            "a/b.safetensors",
            ["x"],
            "config.json",
            "fifo.safetensors",
        ]
    )
    return st.one_of(
        names.map(lambda n: {"weight_map": {n: "model-00002-of-00002.safetensors"}}),
        WRONG.filter(lambda v: not isinstance(v, dict)).map(lambda v: {"weight_map": v}),
        shards.map(lambda n: {"weight_map": {"fc.weight": n}}),
        st.sampled_from([{}, {"metadata": {}}, [], None, b"", b"{not json", b"\xff\xfe", {"weight_map": {}}]),
    )


def weights_damage():
    """A damage of ``model.safetensors`` that breaks the safetensors format: after it, no header
    describes its file (:func:`damage_weights`)."""
    n = st.integers(0, 10**6)
    return st.one_of(
        TRUNCATE,
        st.tuples(st.just("length"), LENGTH_EDITS),
        st.tuples(st.just("dtype"), n, DTYPES),
        st.tuples(st.just("shape"), n, SHAPE_EDITS),
        st.tuples(st.just("offsets"), n, OFFSET_EDITS),
        st.tuples(st.just("entry"), n, st.sampled_from([5, None, [], "x", {}])),
        st.tuples(st.just("extra-tensor"), st.sampled_from(["fc.bias", "zz", ""])),
        st.tuples(st.just("replace"), REPLACEMENTS),
        st.tuples(st.just("index"), index_damage()),
        st.tuples(st.just("metadata"), st.sampled_from([5, [], None, {"a": 1}, {"a": {"b": "c"}}])),
    )


def _edit(value: list, how: str):
    """A tensor entry's shape or data_offsets, edited."""
    first, last = (value[0], value[-1]) if value else (1, 1)
    return {
        "grow": [d + 1 for d in value] or [2], "append": [*value, 2], "negative": [-1, *value[1:]],
        "drop": value[:-1] if value and math.prod(value[:-1]) != math.prod(value) else [*value, 3],
        "string": [str(d) for d in value] or ["1"], "scalar": math.prod(value), "null": None,
        "float": [float(d) for d in value] or [1.0], "shift": [first + 1, last + 1],
        "swap": [last, first] if last != first else [first + 4, first], "short": [first],
        "long": [first, last, last],
    }[how]  # fmt: skip


def damage_weights(folder: Path, damage) -> None:
    """One damage of ``folder``'s weights (:func:`weights_damage`; also ("rename", name, new))."""
    file, kind = folder / "model.safetensors", damage[0]
    if kind == "replace":
        file.unlink()
        make_node(file, damage[1])
        return
    if kind == "index":
        os.mkfifo(folder / "fifo.safetensors")
        index = damage[1] if isinstance(damage[1], bytes) else json.dumps(damage[1]).encode()
        (folder / "model.safetensors.index.json").write_bytes(index)
        return
    data = file.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    if kind == "truncate":
        file.write_bytes(data[: int(damage[1] * len(data))])
        return
    if kind == "length":
        lies = {"zero": 0, "one": 1, "minus1": length - 1, "plus1": length + 1, "size": len(data)}
        lies.update(huge=2**40, max=2**64 - 1)
        file.write_bytes(struct.pack("<Q", lies[damage[1]]) + data[8:])
        return
    header, data = json.loads(data[8 : 8 + length]), data[8 + length :]
    names = sorted(n for n in header if n != "__metadata__")
    if kind == "metadata":
        header["__metadata__"] = damage[1]
    elif kind == "extra-tensor":
        end = max(header[n]["data_offsets"][1] for n in names)
        header[damage[1]] = {"dtype": "F32", "shape": [1], "data_offsets": [end, end + 4]}
    elif kind == "rename":
        header[damage[2]] = header.pop(damage[1])
    else:
        name = names[damage[1] % len(names)]
        if kind == "entry":
            header[name] = damage[2]
        else:
            key = {"dtype": "dtype", "shape": "shape", "offsets": "data_offsets"}[kind]
            header[name][key] = damage[2] if kind == "dtype" else _edit(header[name][key], damage[2])
    blob = json.dumps(header, allow_nan=True).encode()
    file.write_bytes(struct.pack("<Q", len(blob)) + blob + data)


# ------------------------------------------------------------------ paths

PATH_KINDS = [
    "folder", "config-file", "other-file", "missing", "fifo", "loop", "empty-folder", "under-a-file",
    "config-missing", "config-fifo", "config-folder", "config-loop", "dangling-link",
]  # fmt: skip
MODEL_PATHS = ("folder", "config-file")
"""The kinds that name a model (a folder, or its config.json)."""
NODES = {
    "other-file": b"not a model\n", "fifo": "FIFO", "loop": "LOOP", "empty-folder": "FOLDER",
    "dangling-link": "DANGLING", "missing": "MISSING",
}  # fmt: skip
_PLACES = itertools.count()


def make_node(path: Path, what) -> Path:
    """``path`` made as ``what``: bytes (a file of them), "FIFO", "FOLDER", "LOOP" (a link to
    itself), "DANGLING" (a link to nothing) or "MISSING" (nothing)."""
    if isinstance(what, bytes):
        path.write_bytes(what)
    elif what == "FIFO":
        os.mkfifo(path)
    elif what == "FOLDER":
        path.mkdir()
    elif what in ("LOOP", "DANGLING"):
        path.symlink_to(path if what == "LOOP" else path.parent / "nowhere")
    return path


def make_path(kind: str, folder: Path, root: Path) -> Path:
    """A path of ``kind`` (:data:`PATH_KINDS`) made under ``root`` from the good model ``folder``."""
    place = root / f"path-{kind}-{next(_PLACES)}"
    if kind in MODEL_PATHS:
        return folder if kind == "folder" else folder / "config.json"
    if kind == "under-a-file":
        return make_node(place, b"x") / "model"
    if kind in NODES:
        return make_node(place, NODES[kind])
    shutil.copytree(folder, place)  # config-missing, config-fifo, config-folder, config-loop
    (place / "config.json").unlink()
    make_node(place / "config.json", kind.removeprefix("config-").upper())
    return place
