"""One reader of a model folder: its ``config.json`` (and Kimi-K2.5's nested ``text_config``), the
layer count and widths, and its weights' safetensors headers (no tensor is read). Pure module: the
standard library only, so that the command line, the doctor and a server's launch validation read
a folder the same way and fail the same way.

Every failure to read is a :class:`ModelFolderError`, an :class:`~sglang_eagle3_embed.core.errors.InputError`
whose message names the file, what is wrong with it and the fix: a missing path or ``config.json``,
a file where a folder belongs, a symlink loop, something other than a regular file (a FIFO is never
opened), bytes that are not UTF-8, JSON that does not parse, nests too deeply or is not an object,
a safetensors header that does not describe its file, an index that names a missing shard.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import struct
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from sglang_eagle3_embed.core.errors import InputError, positive_int

__all__ = [
    "CONFIG", "DRAFT_LAYER_PREFIXES", "FC_WEIGHT_NAMES", "INDEX", "LAYER_PREFIX", "MTP_MODULES",
    "WRAPPED_LAYER_PREFIXES", "ModelFolder", "ModelFolderError", "TensorInfo", "config_file",
    "decoder_layers", "describe_layers", "fc_in_features", "headers_read_once", "integer_field", "layer_count",
    "layer_prefixes", "looks_local", "read_config", "read_json", "safetensors_header", "text_config",
    "user_path", "weight_files",
]  # fmt: skip

CONFIG = "config.json"
INDEX = "model.safetensors.index.json"
FC_WEIGHT_NAMES = ("fc.weight", "model.fc.weight")
"""Where an EAGLE-3 draft keeps its fc weight (``[hidden, captures x target hidden]``)."""
DRAFT_LAYER_PREFIXES = ("midlayer.", "model.midlayer.", "layers.0.", "model.layers.0.")
"""Where an EAGLE-3 draft keeps its one decoder layer (SGLang loads ``midlayer.*`` as ``layers.0.*``)."""
LAYER_PREFIX = "model.layers."
"""Where a DeepSeek target keeps decoder layer ``i``: ``model.layers.{i}.*``."""
WRAPPED_LAYER_PREFIXES = ("language_model.model.layers.", "language_model.layers.")
"""Where a Kimi-K2.5 checkpoint keeps its text model's decoder layers (the second: NVFP4 exports)."""
MTP_MODULES = frozenset({"eh_proj", "enorm", "hnorm"})
"""The modules only a DeepSeek MTP layer holds (the ``num_nextn_predict_layers`` layers stored after
the decoder layers, ``model.layers.{num_hidden_layers}.eh_proj.weight`` in DeepSeek-V3)."""

MAX_HEADER = 100_000_000
"""The largest safetensors header the safetensors library reads."""

DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "I16": 16, "U16": 16,
    "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64,
    "C64": 64, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}  # fmt: skip
"""Bits per element of the safetensors dtypes (another dtype is refused, as safetensors does)."""

DOWNLOAD = "download the model again (an interrupted download?)"
EDIT = "fix the file or download the model again"


class ModelFolderError(InputError):
    """A model folder (or a file in it) that cannot be read: ``path``, ``problem``, ``fix``, and
    ``what`` the user passed it as (a flag such as ``--target``, or empty)."""

    def __init__(self, path, problem: str, fix: str, what: str = ""):
        self.path, self.problem, self.fix, self.what = Path(path), problem, fix, what
        super().__init__(f"{what} {self.reason}; {fix}" if what else f"{self.reason}; {fix}")

    @property
    def reason(self) -> str:
        """The file and what is wrong with it, without the fix."""
        return f"{self.path}: {self.problem}"


class TensorInfo(NamedTuple):
    dtype: str
    shape: tuple[int, ...]


def user_path(path) -> Path:
    """``path`` with ``~`` expanded; a ``~user`` that does not exist stays as written, and is named
    when it is read."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        return Path(path)


def looks_local(path: str) -> bool:
    """Whether ``path`` names a local file or folder rather than a hub repo id (``org/name``)."""
    if path.startswith(("/", ".", "~")) or path.count("/") > 1 or "\\" in path:
        return True
    try:
        return os.path.lexists(path)
    except (OSError, ValueError):
        return False


def _stat(path: Path, what: str) -> os.stat_result | None:
    """``path``'s status (links followed), None when nothing is there; a loop or an unreadable
    path is an error."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except ValueError:  # a NUL byte
        raise ModelFolderError(path, "is not a valid path", "pass the model folder", what) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ModelFolderError(path, "is a symlink loop", "point it at the model folder", what) from None
        raise ModelFolderError(
            path, f"cannot be read ({exc.strerror})", "check its permissions", what
        ) from None


KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str:
    """What a path that is not a regular file is, for a message: a folder, a FIFO, a socket or a
    device."""
    return next((name for test, name in KINDS if test(mode)), "a device")


def open_checked(path):
    """``path`` opened for reading without blocking (a FIFO given as a file is never read), or
    None when what was opened is not a regular file (checked again once open: the path may have
    been replaced since the caller looked). ``OSError`` as ``os.open`` raises it."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    f = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        f.close()
        return None
    return f


def _regular(file: Path, what: str) -> os.stat_result:
    st = _stat(file, what)
    if st is None:
        raise ModelFolderError(file, "no such file or folder", "pass the model folder", what)
    if not stat.S_ISREG(st.st_mode):
        kind = kind_of(st.st_mode)
        raise ModelFolderError(
            file, f"is not a regular file but {kind}", "replace it with the model's file", what
        )
    return st


def _open(file: Path, what: str):
    """A regular file opened for reading: checked before it is opened and again once open, and
    opened without blocking (a FIFO is never read)."""
    _regular(file, what)
    try:
        f = open_checked(file)
    except OSError as exc:
        raise ModelFolderError(
            file, f"cannot be read ({exc.strerror})", "check its permissions", what
        ) from None
    if f is None:
        raise ModelFolderError(file, "is not a regular file", "replace it with the model's file", what)
    return f


def _read(f, file: Path, what: str, size: int = -1) -> bytes:
    try:
        return f.read(size)
    except OSError as exc:
        raise ModelFolderError(file, f"cannot be read ({exc.strerror})", DOWNLOAD, what) from None


def _json(data: bytes, file: Path, what: str, fix: str = EDIT):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelFolderError(
            file, f"is not UTF-8 text ({exc.reason} at byte {exc.start})", fix, what
        ) from None
    try:
        return json.loads(text)
    except RecursionError:
        raise ModelFolderError(file, "nests JSON too deeply to be read", fix, what) from None
    except ValueError as exc:  # JSONDecodeError, and numbers past Python's digit limit
        raise ModelFolderError(file, f"is not valid JSON ({exc})", fix, what) from None


def read_json(file, what: str = ""):
    """The JSON value in ``file`` (any value: the caller judges its shape)."""
    file = user_path(file)
    with _open(file, what) as f:
        return _json(_read(f, file, what), file, what)


def config_file(path, what: str = "", *, folder_only: bool = False) -> Path:
    """``path`` itself, or its ``config.json`` when it is a folder (which must exist and hold one);
    with ``folder_only`` it must be a folder."""
    p = user_path(path)
    st = _stat(p, what)
    fix = "pass the model folder" if folder_only else "pass the model folder (or its config.json)"
    if st is None:
        raise ModelFolderError(p, "no such file or folder", fix, what)
    if not stat.S_ISDIR(st.st_mode):
        if folder_only:
            raise ModelFolderError(p, "is a file, not a model folder", fix, what)
        return p
    if _stat(p / CONFIG, what) is None:
        raise ModelFolderError(p, "has no config.json", "pass the model folder", what)
    return p / CONFIG


def read_config(path, what: str = "", *, any_json: bool = False, folder_only: bool = False):
    """The config of ``path``, a model folder or (unless ``folder_only``) its ``config.json``: a
    JSON object, or with ``any_json`` whatever JSON value it holds (for the rules that judge a
    malformed config)."""
    config = read_json(file := config_file(path, what, folder_only=folder_only), what)
    if not any_json and not isinstance(config, dict):
        raise ModelFolderError(
            file, f"is not a JSON object but a {type(config).__name__}", "use the model's config.json", what
        )
    return config


def text_config(config: Mapping) -> Mapping:
    """A target's text config: Kimi-K2.5 nests its DeepSeek config in ``text_config``; any other
    target is its own (so is a target whose ``text_config`` is not an object: :func:`layer_count`
    refuses such a config)."""
    text = config.get("text_config")
    return text if isinstance(text, Mapping) else config


def _text(config, file: Path, what: str) -> Mapping:
    if not isinstance(config, Mapping):
        raise ModelFolderError(
            file, f"is not a JSON object but a {type(config).__name__}", "use the model's config.json", what
        )
    nested = config.get("text_config")
    if nested is not None and not isinstance(nested, Mapping):
        raise ModelFolderError(
            file,
            f"its text_config is not a JSON object (found a {type(nested).__name__})",
            "use the model's original config.json",
            what,
        )
    return text_config(config)


def integer_field(config, key: str, file, what: str = "", fix: str = "use the model's original config.json"):
    """``key`` of the text config (:func:`text_config`) as a positive integer."""
    value = _text(config, user_path(file), what).get(key)
    if not positive_int(value):
        nested = " in its text_config" if config.get("text_config") is not None else ""
        raise ModelFolderError(file, f"has no integer {key}{nested} (found {value!r})", fix, what)
    return value


def layer_count(config, file, what: str = "", fix: str = "use the model's original config.json") -> int:
    """``num_hidden_layers`` of a target config read from ``file`` (Kimi-K2.5: of its text config)."""
    return integer_field(config, "num_hidden_layers", file, what, fix)


def weight_files(folder, what: str = "") -> list[Path]:
    """The weight files of ``folder``: the shards its ``model.safetensors.index.json`` names (each
    must exist), else every ``*.safetensors`` in it (possibly none)."""
    folder = user_path(folder)
    index = folder / INDEX
    if _stat(index, what) is None:
        return sorted(folder.glob("*.safetensors"))
    fix = f"download the model's {INDEX} again"
    with _open(index, what) as f:
        weight_map = _json(_read(f, index, what), index, what, fix)
    weight_map = weight_map.get("weight_map") if isinstance(weight_map, dict) else None
    if not isinstance(weight_map, dict):
        raise ModelFolderError(index, "has no weight_map object", fix, what)
    names = list(weight_map.values())
    if not names:
        raise ModelFolderError(index, "names no shard (its weight_map is empty)", fix, what)
    bad = [n for n in names if not _is_name(n)]
    if bad:
        raise ModelFolderError(
            index, f"names a shard {str(bad[0])[:100]!r} that is not a file name", fix, what
        )
    files = sorted({folder / n for n in names})
    for file in files:
        if _stat(file, what) is None:
            raise ModelFolderError(
                file, f"is missing (named by {INDEX})", "download the missing shards", what
            )
    return files


def _is_name(shard) -> bool:
    return isinstance(shard, str) and shard not in ("", ".", "..") and "/" not in shard and "\\" not in shard


def _entry(name: str, entry, file: Path, what: str) -> tuple[int, int, TensorInfo]:
    """``(start, stop, tensor)`` of one header entry, its byte count checked against its shape."""
    entry = entry if isinstance(entry, dict) else {}
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not (
        isinstance(dtype, str)
        and isinstance(shape, list)
        and all(type(d) is int and d >= 0 for d in shape)
        and isinstance(offsets, list)
        and len(offsets) == 2
        and all(type(o) is int for o in offsets)
        and 0 <= offsets[0] <= offsets[1]
    ):
        raise ModelFolderError(file, f"has a damaged header entry for {name[:100]!r}", DOWNLOAD, what)
    start, stop = offsets
    count = 1
    for d in shape:
        count *= d
    bits = DTYPE_BITS.get(dtype)
    if bits is None:
        problem = f"gives {name[:100]!r} the dtype {dtype[:20]!r}, which safetensors does not define"
        raise ModelFolderError(file, problem, DOWNLOAD, what)
    if count * bits != 8 * (stop - start):
        raise ModelFolderError(
            file, f"describes {name[:100]!r} ({dtype} {shape}) with {stop - start} bytes", DOWNLOAD, what
        )
    return start, stop, TensorInfo(dtype, tuple(shape))


_HEADERS: ContextVar[dict | None] = ContextVar("safetensors_headers", default=None)
"""The headers read inside :func:`headers_read_once`, by file; None outside it."""


@contextmanager
def headers_read_once() -> Iterator[None]:
    """Inside the block, each safetensors file's header is read once: a command that reads a pair
    in several ways (its weights checked, the rules' reading, the fc's width) opens each file once.
    Only headers that read cleanly are kept, so a damaged file is named by every reader."""
    token = _HEADERS.set({})
    try:
        yield
    finally:
        _HEADERS.reset(token)


def safetensors_header(file, what: str = "") -> dict[str, TensorInfo]:
    """The tensors a safetensors file holds, from its header, checked against the file as the
    safetensors library checks it: the header's length and JSON, every entry's dtype, shape and
    byte range, and ranges that follow each other and fill the rest of the file exactly (a
    truncated file fails here)."""
    file = user_path(file)
    read = _HEADERS.get()
    if read is None:
        return _header(file, what)
    key = file.absolute()
    if key not in read:
        read[key] = _header(file, what)
    return dict(read[key])


def _header(file: Path, what: str) -> dict[str, TensorInfo]:
    with _open(file, what) as f:
        size = os.fstat(f.fileno()).st_size
        head = _read(f, file, what, 8)
        if len(head) < 8:
            problem = f"holds {len(head)} bytes, too few for a safetensors header"
            raise ModelFolderError(file, problem, DOWNLOAD, what)
        (length,) = struct.unpack("<Q", head)
        if length > MAX_HEADER or 8 + length > size:
            problem = f"declares a header of {length} bytes in a file of {size} bytes"
            raise ModelFolderError(file, problem, DOWNLOAD, what)
        header = _json(_read(f, file, what, length), file, what, DOWNLOAD)
    if not isinstance(header, dict):
        raise ModelFolderError(file, "has a safetensors header that is not a JSON object", DOWNLOAD, what)
    metadata = header.get("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        problem = "has a __metadata__ that is not an object of strings, which safetensors refuses"
        raise ModelFolderError(file, problem, DOWNLOAD, what)
    entries = sorted(
        (*_entry(name, entry, file, what), name) for name, entry in header.items() if name != "__metadata__"
    )
    end = 0
    for start, stop, _, name in entries:
        if start != end:
            problem = f"has {name[:100]!r} at byte {start} of its data where byte {end} comes next"
            raise ModelFolderError(file, problem, DOWNLOAD, what)
        end = stop
    data = size - 8 - length
    if end != data:
        cut = " (truncated)" if data < end else ""
        problem = f"holds {data} bytes of tensor data where its header describes {end}{cut}"
        raise ModelFolderError(file, problem, DOWNLOAD, what)
    return {name: info for _, _, info, name in entries}


def fc_in_features(folder, what: str = "") -> int | None:
    """The input width of an EAGLE-3 draft's fc from the headers of its weights, None when it has
    no fc weight (or no weights). Every file's header is read, so a damaged shard is found even
    when it holds no fc."""
    width = None
    for file in weight_files(folder, what):
        for name, info in safetensors_header(file, what).items():
            if name in FC_WEIGHT_NAMES:
                if len(info.shape) != 2:
                    problem = f"holds {name} of shape {list(info.shape)}, not 2-D"
                    raise ModelFolderError(file, problem, DOWNLOAD, what)
                width = info.shape[1]
    return width


@dataclass(frozen=True)
class ModelFolder:
    """A local model folder as the doctor reads it: its config (a JSON object) and, on request,
    its weights' headers. ``what`` is how the user passed it (``--target``), named in errors."""

    path: Path
    config: dict
    what: str = ""

    @classmethod
    def read(cls, path, what: str = "") -> ModelFolder:
        return cls(user_path(path), read_config(path, what, folder_only=True), what)

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG

    @property
    def architectures(self) -> list:
        archs = self.config.get("architectures")
        return archs if isinstance(archs, list) else []

    def integer(self, key: str, fix: str = "use the model's original config.json") -> int:
        """``key`` of the text config as a positive integer (``hidden_size``, ``vocab_size``)."""
        return integer_field(self.config, key, self.config_path, self.what, fix)

    @property
    def num_layers(self) -> int:
        return layer_count(self.config, self.config_path, self.what)

    def weight_files(self) -> list[Path]:
        return weight_files(self.path, self.what)

    def check_weights(self) -> dict[str, TensorInfo]:
        """Every weight file's header read and checked (at least one file): name -> tensor."""
        files = self.weight_files()
        if not files:
            raise ModelFolderError(self.path, "has no *.safetensors weights", DOWNLOAD, self.what)
        return {name: info for file in files for name, info in safetensors_header(file, self.what).items()}


def layer_prefixes(config: Mapping) -> tuple[str, ...]:
    """The name prefixes of a target's decoder layers: :data:`LAYER_PREFIX`, or for a Kimi-K2.5
    wrapper (a nested ``text_config``) its text model's, :data:`WRAPPED_LAYER_PREFIXES`."""
    return WRAPPED_LAYER_PREFIXES if text_config(config) is not config else (LAYER_PREFIX,)


def decoder_layers(names, prefixes=(LAYER_PREFIX,)) -> dict[int, frozenset[str]]:
    """The decoder layers that tensor ``names`` hold: index ``i`` of every ``{prefix}{i}.{module}...``
    name, with the modules (the name's next part) the layer holds, e.g. ``self_attn``, ``mlp``, or
    for an MTP layer ``eh_proj`` (:data:`MTP_MODULES`). An index of more than 9 digits is no layer."""
    layers: dict[int, set[str]] = {}
    for name in names:
        prefix = next((p for p in prefixes if name.startswith(p)), None)
        if prefix is None:
            continue
        index, _, rest = name[len(prefix) :].partition(".")
        if rest and index.isascii() and index.isdigit() and len(index) <= 9:
            layers.setdefault(int(index), set()).add(rest.partition(".")[0])
    return {i: frozenset(modules) for i, modules in sorted(layers.items())}


def describe_layers(indices) -> str:
    """Layer indices as runs, for a message: ``layers 0-6``, ``layers 0-2, 4-6``, ``layer 3``.
    ``indices`` holds ints, or ``range`` runs (a count from a config can be too large to list)."""
    spans = sorted(
        {(i.start, i.stop - 1) if isinstance(i, range) else (i, i) for i in indices if i != range(0)}
    )
    runs: list[list[int]] = []
    for a, b in spans:
        if runs and a <= runs[-1][1] + 1:
            runs[-1][1] = max(runs[-1][1], b)
        else:
            runs.append([a, b])
    if not runs:
        return "no decoder layers"
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
    return f"layer {text}" if len(runs) == 1 and runs[0][0] == runs[0][1] else f"layers {text}"
