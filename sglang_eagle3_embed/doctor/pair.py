"""The tiny target/draft pair that the tests, the demo and the benchmarks share (torch + transformers).

``build_pair(PairSpec())`` returns two folders in the cache, both loadable by SGLang 0.5.23: the
trained DeepSeek-V3 target (:mod:`sglang_eagle3_embed.doctor.tiny_target`) and an EAGLE-3 draft
(``LlamaForCausalLMEagle3``: ``config.json`` + ``model.safetensors``) distilled on the tensors its
``ids`` name. CPU-small by default; ``PairSpec(target=TargetSpec(num_layers=16, ...))`` for a GPU.

What a key names: the spec, not the bytes. The bytes trained for a spec also depend on the device
(``cuda`` training is not bitwise reproducible, even run to run), and on the CPU on the torch
version, the transformers version (it initialises the target, and writes its version into
``config.json``), the instruction set torch's kernels dispatch to
(``torch.backends.cpu.get_cpu_capability()``: AVX512, AVX2, ...) and the one MKL picks for its
matrix products (both round float sums differently), and the thread count, which is fixed:
training runs on :data:`TRAIN_THREADS` torch threads whatever the caller set. So on the CPU one
machine type with one torch and transformers builds the same bytes for a key, every time
(``tools/demo_pair.py --check`` compares them); elsewhere the same key names an equivalent pair, not
an identical one. The key leaves the device and versions out on purpose, so that a cache (or the
shipped pair) keeps serving after a torch upgrade or on another machine; a cache holds one build
per key, whichever device and torch made it first (the target's ``built_on.txt`` says which). What
the cache guarantees is that a pair is consistent: the draft records the exact build of the target
it was trained on (:data:`TRAINED_ON`), and a draft whose target was rebuilt since (with whatever
bytes) is rebuilt too, or refused where the cache cannot be written.

The default pair also ships with the package (:data:`SHIPPED`, written by ``tools/demo_pair.py``):
:func:`shipped_pair` finds it there, so the demo needs no training.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sglang_eagle3_embed.core.capture.draft_config import resolve_capture_plan
from sglang_eagle3_embed.core.capture.ids import CONVENTION_FIELD, IDS_FIELD, Convention
from sglang_eagle3_embed.core.errors import DraftConfigError, InputError
from sglang_eagle3_embed.doctor import cache
from sglang_eagle3_embed.doctor.tiny_target import (
    GPU_TARGET,
    Language,
    TargetSpec,
    build_target,
    cache_root,
)

__all__ = [
    "SHIPPED",
    "TRAINED_ON",
    "TRAIN_THREADS",
    "Pair",
    "PairSpec",
    "build_pair",
    "shipped_pair",
    "write_config_variant",
]

DRAFT_SPEC_FILE = "tiny_draft_spec.json"
TRAINED_ON = "trained_on.json"
"""In a draft folder: the target folder it was trained on and the SHA-256 of that folder's
manifest, i.e. the exact bytes (:func:`sglang_eagle3_embed.doctor.cache.write_origin`)."""

TRAIN_THREADS = 1
"""Torch threads for training on the CPU: fixed, so that the bytes built for a key do not depend on
the caller's thread count (float sums split per thread round differently)."""

SHIPPED = Path(__file__).parent / "data" / "demo_pair"
"""Package data: the default pair (``PairSpec()``), one folder per key as in a cache."""


@dataclass(frozen=True)
class PairSpec:
    target: TargetSpec = field(default_factory=TargetSpec)
    ids: tuple[int, ...] = (-1, 2, 4)
    convention: str = Convention.LAYER_OUTPUT.value
    """How the draft was trained to read ``ids`` (written to its config when ``declare``)."""
    declare: bool = False
    draft_steps: int = 300
    draft_batch: int = 16
    ttt_steps: int = 3
    seed: int = 0
    draft_arch: str = "llama"
    """``llama`` (``LlamaForCausalLMEagle3``) or ``mla`` (``Eagle3DeepseekV2ForCausalLM``)."""

    def fields(self) -> dict:
        """The spec as a dict: what names the draft (its key) and its folder's spec file. A Llama
        draft's leave ``draft_arch`` out, so that they stay those of the drafts built before MLA
        ones existed (the shipped demo pair among them)."""
        fields = asdict(self)
        if self.draft_arch == "llama":
            del fields["draft_arch"]
        return fields

    @property
    def key(self) -> str:
        blob = json.dumps({**self.fields(), "target": self.target.key}, sort_keys=True).encode()
        ids = "_".join(str(i) for i in self.ids)
        arch = "" if self.draft_arch == "llama" else f"{self.draft_arch}-"
        return f"draft-{arch}{ids}-{hashlib.sha1(blob).hexdigest()[:10]}"

    def validate(self) -> None:
        """Raise :class:`InputError` for a spec that cannot be built, or whose draft config would
        describe tensors the draft was not trained on: the target's sizes, then the draft's config
        (with its convention declared) through the plugin's own capture plan."""
        self.target.validate()
        if self.draft_arch not in ("llama", "mla"):
            raise InputError(f"--draft-arch {self.draft_arch}: use llama or mla")
        if self.convention not in {c.value for c in (Convention.LAYER_OUTPUT, Convention.HIDDEN_STATES)}:
            raise InputError(f"--convention {self.convention}: use layer_output or hidden_states")
        from sglang_eagle3_embed.doctor.tiny_draft import draft_config_dict

        t = self.target
        config = draft_config_dict(t.hidden, t.vocab, t.heads, list(self.ids), t.hidden)
        config["eagle_config"][CONVENTION_FIELD] = self.convention
        try:
            resolve_capture_plan(config, t.num_layers)
        except DraftConfigError as exc:
            raise InputError(
                f"--ids {' '.join(map(str, self.ids))} with --convention {self.convention} and "
                f"--layers {t.num_layers}: {exc}"
            ) from None


GPU_PAIR = PairSpec(target=GPU_TARGET, ids=(-1, 4, 10))
"""The GPU-sized pair: 16-layer target, draft on ``[-1, 4, 10]`` (GPU tests and benchmarks)."""


@dataclass(frozen=True)
class Pair:
    target: Path
    draft: Path
    spec: PairSpec

    @property
    def language(self) -> Language:
        return Language(self.spec.target)


def _draft_config(spec: PairSpec, hf_config) -> dict:
    from sglang_eagle3_embed.doctor.tiny_draft import draft_config_dict, mla_draft_config_dict

    if spec.draft_arch == "mla":
        config = mla_draft_config_dict(hf_config, list(spec.ids))
    else:
        config = draft_config_dict(
            hf_config.hidden_size,
            hf_config.vocab_size,
            hf_config.num_attention_heads,
            list(spec.ids),
            hf_config.hidden_size,
        )
    if spec.declare:
        config["eagle_config"][CONVENTION_FIELD] = spec.convention
    return config


def _draft_problem(draft: Path, target: Path) -> str | None:
    """None when ``draft`` records ``target`` as it is now, else why it is stale."""
    return cache.origin_problem(draft, TRAINED_ON, target, made="trained on")


def shipped_pair(spec: PairSpec) -> Pair | None:
    """The pair of ``spec`` as shipped with the package, or None when none ships for its key, a
    shipped file does not match its manifest, or the draft records another build of the target
    (never repaired in place: the caller builds). The shipped folders are written together by
    ``tools/demo_pair.py``, never one at a time, so a draft without a record is taken as written
    with its target (``tests/integration/doctor/test_demo_pair.py`` checks that the shipped one has it)."""
    target, draft = SHIPPED / spec.target.key, SHIPPED / spec.key
    if not all(folder.is_dir() and cache.verify(folder) is None for folder in (target, draft)):
        return None
    if (draft / TRAINED_ON).exists() and _draft_problem(draft, target) is not None:
        return None
    return Pair(target, draft, spec)


@contextlib.contextmanager
def _train_threads(device: str):
    """:data:`TRAIN_THREADS` torch threads while training on the CPU; the caller's afterwards."""
    import torch

    if device != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(TRAIN_THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def build_pair(spec: PairSpec = PairSpec(), cache_dir: Path | None = None, device: str = "cpu") -> Pair:
    """Build (or find in the cache) the target and the draft of ``spec``; trained on ``device``
    (the CPU is bit-reproducible, on :data:`TRAIN_THREADS` threads; "cuda" is faster, for GPU-sized
    pairs). A complete pair whose draft records this target (:data:`TRAINED_ON`) is used without a
    lock (a read-only cache works). Anything else is built, or moved aside and rebuilt, under the
    folder's own lock (:func:`sglang_eagle3_embed.doctor.cache.ensure`): the target first, then a
    draft trained on that exact target; a stale draft counts as damaged."""
    spec.validate()
    root = cache_root(cache_dir)
    folder = root / spec.key
    with _train_threads(device):
        target = build_target(spec.target, root, device)

        def build(tmp: Path) -> None:
            cache.write_origin(tmp, TRAINED_ON, target)  # before the weights are read: names those bytes
            _train_draft(spec, target, device, tmp)

        draft = cache.ensure(folder, build, check=lambda: _draft_problem(folder, target))
    return Pair(target, draft, spec)


def _train_draft(spec: PairSpec, target_dir: Path, device: str, tmp: Path) -> None:
    """Train the draft of ``spec`` on the target in ``target_dir`` and write its files into ``tmp``."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    from sglang_eagle3_embed.doctor.tiny_draft import train_draft

    target = AutoModelForCausalLM.from_pretrained(target_dir).eval()
    draft = train_draft(
        target,
        Language(spec.target),
        list(spec.ids),
        convention=Convention(spec.convention),
        steps=spec.draft_steps,
        batch=spec.draft_batch,
        ttt_steps=spec.ttt_steps,
        seed=spec.seed,
        device=device,
        mla=spec.draft_arch == "mla",
    )
    save_file(draft.checkpoint(), str(tmp / "model.safetensors"))
    (tmp / "config.json").write_text(json.dumps(_draft_config(spec, target.config), indent=2))
    (tmp / DRAFT_SPEC_FILE).write_text(json.dumps(spec.fields(), indent=2))


def write_config_variant(
    draft_dir: Path, out_dir: Path, *, placement: str, ids: list[int] | None = None
) -> Path:
    """A copy of a draft folder whose ids sit at ``placement`` ("nested" in ``eagle_config``, as
    SGLang/SpecForge write them, or "top-level", as vLLM speculators do); weights are linked.
    ``ids`` replaces the ids (and drops a declared convention): e.g. capture indices written by
    hand for stock SGLang."""
    config = json.loads((Path(draft_dir) / "config.json").read_text())
    eagle = dict(config.get("eagle_config") or {})
    found = eagle.pop(IDS_FIELD, None) or config.pop(IDS_FIELD, None)
    config.pop(IDS_FIELD, None)
    if ids is not None:
        eagle.pop(CONVENTION_FIELD, None)
        config.pop(CONVENTION_FIELD, None)
    ids = found if ids is None else list(ids)
    if placement == "nested":
        eagle[IDS_FIELD] = ids
    elif placement == "top-level":
        config[IDS_FIELD] = ids
    else:
        raise ValueError(f"placement must be 'nested' or 'top-level', not {placement!r}")
    config["eagle_config"] = eagle
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(config, indent=2))
    weights = out_dir / "model.safetensors"
    if not weights.exists():
        weights.symlink_to((Path(draft_dir) / "model.safetensors").resolve())
    return out_dir
