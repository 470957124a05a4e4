"""The canary: is a running server feeding the draft the tensors it was trained on? (pure)

``probe --expectations FILE`` records what a correct server must show: the prompts as token ids,
the sampling and speculative settings, and the accept length predicted for the wiring the draft
was trained for and for every alternative a server could be feeding it (SGLang's default layers,
a convention off by one, ...), each with its standard error. A server then answers those prompts
(``sglang-eagle3-embed canary``, or the plugin's startup self-check), and its per-request
``meta_info.spec_accept_length`` values, pooled as ``probe`` pools them, are matched against the
recorded wirings. This module holds the file format, the pooling and the verdict; the transports
(HTTP in ``doctor/canary.py``, SGLang's tokenizer manager in ``patch/canary_check.py``) are apart.

Lossless speculation yields the target's tokens whatever the draft reads, so only the accept length
tells a mis-wired draft from a weak one.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from sglang_eagle3_embed import WARMUP
from sglang_eagle3_embed.core.errors import InputError, flag
from sglang_eagle3_embed.core.readers.model_folder import kind_of, open_checked

__all__ = [
    "ENV_FILE",
    "ENV_MODE",
    "FORMAT",
    "MODES",
    "TOLERANCE",
    "WARMUP",
    "Expectations",
    "Kind",
    "Served",
    "Verdict",
    "WiringExpectation",
    "Z",
    "config_digest",
    "generate_body",
    "judge",
    "pool",
    "settings_differences",
    "weights_digest",
]  # fmt: skip

FORMAT = "sglang-eagle3-embed canary expectations"
VERSION = 2
ENV_FILE = "SGLANG_EAGLE3_EMBED_CANARY"
"""Names the expectations file of the startup self-check."""
ENV_MODE = "SGLANG_EAGLE3_EMBED_CANARY_MODE"
MODES = ("log", "raise")
Z = 3.0
"""Standard errors (served and predicted combined) within which a served value matches a wiring."""
TOLERANCE = 0.08
"""Relative allowance for what the probe does not model: bf16 or quantized serving against the
probe's backend, and the server's scheduling of verify steps (docs/canary.md gives the measurements)."""

SETTINGS = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
)
"""The server's settings that change the accept length, as ``/server_info`` names them."""
ADAPTIVE = "speculative_adaptive"
"""The server's switch that changes its number of steps as it runs (no fixed prediction holds)."""
READ = (*SETTINGS, ADAPTIVE)
"""What the canary reads of a server's settings."""


class Kind(StrEnum):
    """What reading gave a wiring (``doctor/wirings.py`` records one per name): the plugin's, stock
    SGLang's, the ids taken literally, SGLang's default layers, a neighbouring convention or slip, or
    another order. The expectations file holds the values."""

    PLUGIN = "plugin"
    STOCK = "stock"
    LITERAL = "literal"
    DEFAULTS = "defaults"
    CONVENTION = "convention"
    OTHER = "other"


KINDS = tuple(Kind)
HINTS = {
    Kind.DEFAULTS: "the server is not running the plugin, or the ids are not where it reads them",
    Kind.STOCK: "the server reads the ids as stock SGLang does: launch it with --model-impl sglang_eagle3_embed",
    Kind.CONVENTION: (
        "the server reads the draft's ids in another numbering than it was trained in: declare the "
        "convention in the draft config (docs/conventions.md) and run sglang-eagle3-embed check on "
        "the launch line"
    ),
}
"""What to do when a server matches a wiring of that kind (the first kind here that the wiring
has); any other: :data:`OTHER_HINT`."""
OTHER_HINT = "the server feeds the draft other tensors: run sglang-eagle3-embed check on its launch line"


def config_digest(folder: str | Path) -> str | None:
    """SHA-256 of a model folder's ``config.json`` bytes; None where the folder has none here."""
    path = Path(folder) / "config.json"
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def weights_digest(folder: str | Path) -> str | None:
    """SHA-256 of what a model folder's weights hold, tensor by tensor (name, dtype, shape, from the
    safetensors headers: no tensor is read, and sharding does not count); None where the folder has
    no readable weights here. Two folders of the same draft agree; a draft config edited after the
    expectations were recorded keeps its weights' digest."""
    from sglang_eagle3_embed.core.readers.model_folder import (  # only when asked
        safetensors_header,
        weight_files,
    )

    try:
        tensors = sorted(
            (name, info.dtype, list(info.shape))
            for file in weight_files(folder)
            for name, info in safetensors_header(file).items()
        )
    except InputError:
        return None
    return hashlib.sha256(json.dumps(tensors).encode()).hexdigest() if tensors else None


@dataclass(frozen=True)
class WiringExpectation:
    names: tuple[str, ...]
    capture_indices: tuple[int, ...]
    """0 = embedding output, ``i`` = output of layer ``i-1``."""
    accept_length: float
    se: float
    """Standard error of the predicted accept length over the prompts."""
    kinds: tuple[str, ...]
    """The :data:`KINDS` of the readings that gave it, one per name."""

    @property
    def name(self) -> str:
        return " = ".join(self.names)

    @property
    def ids(self) -> list[int]:
        """The capture indices as aux layer ids (-1 = embedding output, ``k`` = output of layer k)."""
        return [i - 1 for i in self.capture_indices]


@dataclass(frozen=True)
class Expectations:
    prompts: tuple[tuple[int, ...], ...]
    max_new_tokens: int
    num_steps: int
    trained: WiringExpectation
    wirings: tuple[WiringExpectation, ...]
    """Every scored wiring, the trained one included."""
    backend: str
    dtype: str
    target_config_sha256: str | None
    draft_config_sha256: str | None
    prompt_source: str = "token ids as given; no chat template, no thinking mode"
    draft_weights_sha256: str | None = None
    """:func:`weights_digest` of the draft (absent from files recorded before it existed)."""
    extra: Mapping[str, object] = field(default_factory=dict)

    @property
    def settings(self) -> dict:
        """The speculative settings the predictions hold for (a chain: top-k 1)."""
        return {
            "speculative_algorithm": "EAGLE3",
            "speculative_num_steps": self.num_steps,
            "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": self.num_steps + 1,
        }

    def as_dict(self) -> dict:
        def wiring(w: WiringExpectation) -> dict:
            return {
                "names": list(w.names),
                "kinds": list(w.kinds),
                "capture_indices": list(w.capture_indices),
                "ids": w.ids,
                "accept_length": w.accept_length,
                "se": w.se,
            }

        return {
            "format": FORMAT,
            "version": VERSION,
            "prompts": [list(p) for p in self.prompts],
            "prompt_source": self.prompt_source,
            "sampling": {"temperature": 0.0, "max_new_tokens": self.max_new_tokens, "ignore_eos": True},
            "speculative": self.settings,
            ADAPTIVE: False,
            "backend": self.backend,
            "dtype": self.dtype,
            "target_config_sha256": self.target_config_sha256,
            "draft_config_sha256": self.draft_config_sha256,
            "draft_weights_sha256": self.draft_weights_sha256,
            "trained": self.trained.name,
            "wirings": [wiring(w) for w in self.wirings],
            **dict(self.extra),
        }

    @classmethod
    def from_dict(cls, data: object, where: str) -> Expectations:
        """Read what :meth:`as_dict` wrote; anything else is an :class:`InputError` naming ``where``."""

        def bad(why: str) -> InputError:
            return InputError(f"{where}: {why}; write it with sglang-eagle3-embed probe --expectations FILE")

        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise bad(f'not a canary expectations file (no "format": "{FORMAT}")')
        if data.get("version") != VERSION:
            raise bad(f"version {data.get('version')!r}; this sglang-eagle3-embed reads version {VERSION}")
        try:
            prompts = tuple(tuple(_int(t) for t in p) for p in data["prompts"])
            wirings = tuple(
                WiringExpectation(
                    tuple(str(n) for n in w["names"]),
                    tuple(_int(i) for i in w["capture_indices"]),
                    float(w["accept_length"]),
                    float(w["se"]),
                    _kinds(w["kinds"], len(w["names"])),
                )
                for w in data["wirings"]
            )
            sampling, spec = data["sampling"], data["speculative"]
            max_new, steps = _int(sampling["max_new_tokens"]), _int(spec["speculative_num_steps"])
            trained = next((w for w in wirings if w.name == data["trained"]), None)
        except (KeyError, TypeError, ValueError) as exc:
            raise bad(f"a field is missing or malformed ({type(exc).__name__}: {exc})") from None
        if not prompts or any(not p for p in prompts):
            raise bad("it holds no prompts, or an empty one")
        if max_new < 2 or steps < 1:
            raise bad(f"max_new_tokens {max_new} and speculative_num_steps {steps} cannot be measured")
        if trained is None:
            raise bad(f"its trained wiring {data.get('trained')!r} is not among its wirings")
        known = {
            "format", "version", "prompts", "prompt_source", "sampling", "speculative", ADAPTIVE, "backend",
            "dtype", "target_config_sha256", "draft_config_sha256", "draft_weights_sha256", "trained", "wirings",
        }  # fmt: skip
        return cls(
            prompts=prompts,
            max_new_tokens=max_new,
            num_steps=steps,
            trained=trained,
            wirings=wirings,
            backend=str(data.get("backend")),
            dtype=str(data.get("dtype")),
            target_config_sha256=data.get("target_config_sha256"),
            draft_config_sha256=data.get("draft_config_sha256"),
            draft_weights_sha256=data.get("draft_weights_sha256"),
            prompt_source=str(data.get("prompt_source", "")),
            extra={k: v for k, v in data.items() if k not in known},
        )

    @classmethod
    def read(cls, path: str | Path, where: str = "--expect") -> Expectations:
        text = _read_regular(Path(path), where)
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError; too deep; too many digits
            raise InputError(f"{where} {path}: not JSON ({exc})") from None
        return cls.from_dict(data, f"{where} {path}")


def _read_regular(path: Path, where: str) -> str:
    """The text of the regular file ``path``, checked before it is opened and again once open, and
    opened without blocking: a FIFO or a device given as the file is named, never read."""
    fix = "pass the file probe --expectations wrote"
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise InputError(f"{where} {path}: is {kind_of(mode)}, not an expectations file; {fix}")
        f = open_checked(path)
        if f is None:
            raise InputError(f"{where} {path}: is not a regular file; {fix}")
        with f:
            data = f.read()
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise InputError(
            f"{where} {path}: cannot be read ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{where} {path}: not UTF-8 text ({exc.reason} at byte {exc.start}); {fix}"
        ) from None


def _kinds(value: object, count: int) -> tuple[str, ...]:
    kinds = tuple(str(k) for k in value)  # a non-list is a TypeError, reported as malformed
    if len(kinds) != count or not set(kinds) <= set(KINDS):
        raise ValueError(f"kinds {list(kinds)} are not {count} of {', '.join(KINDS)}")
    return kinds


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{value!r} is not an integer")
    return value


def generate_body(expectations: Expectations) -> dict:
    """SGLang's ``/generate`` request (also ``GenerateReqInput``'s fields) for the canary's prompts:
    greedy, the recorded number of new tokens, end of sequence ignored so that every request makes
    the tokens the probe scored."""
    sampling = {"temperature": 0.0, "max_new_tokens": expectations.max_new_tokens, "ignore_eos": True}
    return {"input_ids": [list(p) for p in expectations.prompts], "sampling_params": sampling}


@dataclass(frozen=True)
class Served:
    """The accept length a server reported over the canary's requests, pooled."""

    accept_length: float
    se: float
    requests: int
    tokens: int


def pool(metas: Sequence[Mapping]) -> Served:
    """Pool per-request ``meta_info`` as the probe pools its prompts: all tokens over all verify
    steps (``completion_tokens / spec_verify_ct`` per request is SGLang's ``spec_accept_length``,
    ``srt/managers/tokenizer_manager.py:3166-3167``). The standard error is the ratio estimator's.
    Raises :class:`InputError` when the server reported no speculative statistics."""
    tokens, steps = [], []
    for meta in metas:
        length = meta.get("spec_accept_length")
        completion = meta.get("completion_tokens")
        if not length or not completion:
            continue
        verify = meta.get("spec_verify_ct") or completion / length
        tokens.append(float(completion))
        steps.append(float(verify))
    if not tokens:
        raise InputError(
            "the server reported no spec_accept_length in any answer: it does not run speculative "
            "decoding (no --speculative-algorithm), or every request ended before its first verify"
        )
    n, total_tokens, total_steps = len(tokens), sum(tokens), sum(steps)
    mean = total_tokens / total_steps
    if n > 1:
        residual = sum((c - mean * v) ** 2 for c, v in zip(tokens, steps, strict=True)) / (n - 1)
        se = math.sqrt(residual / n) / (total_steps / n)
    else:
        se = 0.0
    return Served(mean, se, n, int(total_tokens))


def settings_differences(expectations: Expectations, server: Mapping) -> list[str]:
    """The server's settings that change the accept length and differ from the recorded ones (a
    setting the server does not report is not compared)."""
    out = []
    for name, want in expectations.settings.items():
        have = server.get(name)
        if have is not None and str(have).upper() != str(want).upper():
            out.append(f"{flag(name)} is {have} on the server, {want} in the expectations")
    if server.get(ADAPTIVE):
        out.append("--speculative-adaptive is on: the server changes its number of steps as it runs")
    return out


@dataclass(frozen=True)
class Verdict:
    ok: bool
    matched: WiringExpectation | None
    """The wiring the server is judged to feed: the trained one on a pass, even when a wiring that
    cannot be told apart from it lies nearer the served value (that one is :attr:`nearest`)."""
    lines: tuple[str, ...]
    alike: tuple[WiringExpectation, ...] = ()
    """Wirings whose predictions cannot be told apart from the trained one's."""
    nearest: WiringExpectation | None = None
    """The recorded wiring nearest the served value, in noise units (None where none matches)."""
    fits: tuple[WiringExpectation, ...] = ()
    """On a failure, every wrong wiring the served value matches, nearest first: the noise cannot
    tell them apart, so each is named with what to do about it."""

    def as_dict(self, served: Served, expectations: Expectations) -> dict:
        return {
            "ok": self.ok,
            "served_accept_length": served.accept_length,
            "served_se": served.se,
            "requests": served.requests,
            "matched": None if self.matched is None else self.matched.name,
            "nearest": None if self.nearest is None else self.nearest.name,
            "fits": [w.name for w in self.fits],
            "trained": expectations.trained.name,
            "trained_ids": expectations.trained.ids,
            "indistinguishable_from_trained": [w.name for w in self.alike],
            "verdict": list(self.lines),
        }


def _tolerance(se: float, other_se: float, prediction: float, relative: float) -> float:
    """How far from ``prediction`` a value with standard error ``se`` still matches it."""
    return Z * math.hypot(se, other_se) + relative * prediction


def _hint(wiring: WiringExpectation) -> str:
    return next((HINTS[k] for k in HINTS if k in wiring.kinds), OTHER_HINT)


def judge(expectations: Expectations, served: Served, relative: float = TOLERANCE) -> Verdict:
    """Which recorded wiring the served accept length matches. A wiring matches when the served
    value lies within ``Z`` combined standard errors plus ``relative`` of its prediction; of several,
    the nearest in those units. The server passes when that is the trained wiring, or one whose
    prediction cannot be told apart from the trained one's (then named: the canary cannot separate
    them, and the server loses nothing to it). A failure names every wrong wiring that matches,
    nearest first, each with what to do: the noise does not say which of them the server feeds."""
    trained = expectations.trained
    scale = {w.name: _tolerance(served.se, w.se, w.accept_length, relative) for w in expectations.wirings}
    near = [w for w in expectations.wirings if abs(served.accept_length - w.accept_length) <= scale[w.name]]
    alike = tuple(
        w
        for w in expectations.wirings
        if w is not trained
        and abs(w.accept_length - trained.accept_length)
        <= _tolerance(w.se, trained.se, trained.accept_length, relative)
    )
    head = f"served {served.accept_length:.2f} (± {served.se:.2f}, {served.requests} requests)"
    trained_text = f"the draft was trained on {trained.ids} ({trained.accept_length:.2f} predicted)"
    if not near:
        closest = min(expectations.wirings, key=lambda w: abs(served.accept_length - w.accept_length))
        above = served.accept_length > max(w.accept_length for w in expectations.wirings)
        why = (
            "above every prediction: other prompts, settings or numerics than recorded"
            if above
            else f"nearest {closest.name} ({closest.accept_length:.2f} predicted)"
        )
        return Verdict(False, None, (f"{head} matches no recorded wiring, {why}; {trained_text}.",), alike)

    def distance(w: WiringExpectation) -> float:
        return abs(served.accept_length - w.accept_length) / scale[w.name]

    nearest = min(near, key=distance)
    if nearest is trained or nearest in alike:
        lines = [f"{head}: as the trained wiring {trained.ids} ({trained.accept_length:.2f} predicted)."]
        if alike:
            shown = ", ".join(f"{w.name} ({w.accept_length:.2f})" for w in alike)
            lines.append(f"Not told apart from it at this noise (and served as well): {shown}.")
        return Verdict(True, trained, tuple(lines), alike, nearest)
    fits = tuple(sorted((w for w in near if w is not trained and w not in alike), key=distance))
    named = [f"{w.name} ({w.accept_length:.2f} predicted)" for w in fits]
    shown = (
        named[0]
        if len(named) == 1
        else f"{', '.join(named[:-1])} or {named[-1]} (not told apart at this noise)"
    )
    hints = "; or ".join(dict.fromkeys(_hint(w) for w in fits))
    line = f"{head}, as {shown}; {trained_text}: {hints}."
    return Verdict(False, nearest, (line,), alike, nearest, fits)
