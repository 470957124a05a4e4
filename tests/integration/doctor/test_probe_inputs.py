"""``probe`` refuses, before any model loads, the inputs that would make it score another model than
the user's: a target whose weights do not hold the layers its config counts (transformers would run
the missing ones on random weights, with one line of warning), a draft whose weights lack its fc or
its layer, a device this machine does not have; and it never says "nothing found wrong" when it
scored no wiring. On the shipped CPU pair (nothing is trained), the command run in-process."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from sglang_eagle3_embed.core.readers.model_folder import INDEX, ModelFolder
from sglang_eagle3_embed.doctor import backends
from sglang_eagle3_embed.doctor.kimi import kimi_config
from sglang_eagle3_embed.doctor.pair import PairSpec, shipped_pair
from sglang_eagle3_embed.doctor.probe import probe_folders
from sglang_eagle3_embed.doctor.report import ProbeReport, WiringResult
from sglang_eagle3_embed.doctor.request import ProbeRequest, check_rules
from sglang_eagle3_embed.doctor.wirings import PLUGIN, STOCK, Wiring
from tests.support import in_process as run
from tests.support.damage import edit_config

QUICK = ["--num-prompts", "4", "--new-tokens", "4", "--num-steps", "2", "--no-progress"]


@pytest.fixture(scope="module")
def pair(request):
    """The default pair as the package ships it; built (once per session) only where it does not ship."""
    return shipped_pair(PairSpec()) or request.getfixturevalue("tiny_pair")


class Loaded(Exception):
    """Raised in place of loading the target: the inputs passed every check."""


@pytest.fixture
def loads(monkeypatch):
    """The backends the probe asked for: none is built (a test that gets past the checks ends in
    :class:`Loaded`)."""
    asked = []

    def make_backend(*args, **kwargs):
        asked.append(args)
        raise Loaded

    monkeypatch.setattr(backends, "make_backend", make_backend)
    return asked


def refused(target, draft, *extra) -> str:
    """The message of a probe that exits 2, in one line, with no traceback."""
    code, out, err = run("probe", "--target", target, "--draft", draft, *QUICK, *extra)
    assert code == 2, (code, out[-2000:], err[-2000:])
    assert "Traceback" not in out + err and out == "", (out + err)[-3000:]
    assert err.startswith("sglang-eagle3-embed: error: ") and len(err.splitlines()) == 1, err
    return err


def target_copy(pair, tmp_path, edit=None, keep=None, add=None, name="t"):
    """A copy of the pair's target: ``edit`` changes its config, ``keep`` filters its tensors by
    name, ``add`` adds tensors."""
    folder = tmp_path / name
    shutil.copytree(pair.target, folder)
    if edit is not None:
        edit_config(folder, edit)
    if keep is not None or add is not None:
        weights = {
            k: v for k, v in load_file(folder / "model.safetensors").items() if keep is None or keep(k)
        }
        save_file({**weights, **(add or {})}, str(folder / "model.safetensors"))
    return folder


def kimi_target(pair, tmp_path, edit=None, name="k"):
    """A Kimi-K2.5 wrapper of the pair's target as ``pair --arch kimi-k25`` writes it (config and
    text weights under ``language_model.``), without the vision tower the probe does not read."""
    folder = tmp_path / name
    folder.mkdir()
    text = json.loads((pair.target / "config.json").read_text())
    if edit is not None:
        edit(text)
    (folder / "config.json").write_text(json.dumps(kimi_config(text)))
    weights = load_file(pair.target / "model.safetensors")
    save_file({f"language_model.{k}": v for k, v in weights.items()}, str(folder / "model.safetensors"))
    return folder


def sharded_target(pair, tmp_path, edit=None):
    """The pair's target in two shards and an index (the layout of every large checkpoint)."""
    folder = target_copy(pair, tmp_path, edit=edit, name="sharded")
    weights = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    shards = {"model-00001-of-00002.safetensors": {}, "model-00002-of-00002.safetensors": {}}
    for k, v in weights.items():
        shards[sorted(shards)[".layers.4." in k or ".layers.5." in k or ".layers.6." in k]][k] = v
    for file, tensors in shards.items():
        save_file(tensors, str(folder / file))
    weight_map = {k: file for file, tensors in shards.items() for k in tensors}
    (folder / INDEX).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


def without(*layers):
    return lambda name: not any(name.startswith(f"model.layers.{i}.") for i in layers)


def mtp_layer(index, hidden=64) -> dict:
    """DeepSeek-V3's MTP layer as its checkpoints store it (the part of it this check reads)."""
    prefix = f"model.layers.{index}."
    return {
        f"{prefix}eh_proj.weight": torch.zeros(hidden, 2 * hidden),
        f"{prefix}enorm.weight": torch.ones(hidden),
        f"{prefix}hnorm.weight": torch.ones(hidden),
        f"{prefix}input_layernorm.weight": torch.ones(hidden),
    }


def set_layers(n):
    return lambda config: config.update(num_hidden_layers=n)


def drop_layers(config):
    del config["num_hidden_layers"]


# ------------------------------------------------------------------ the target's layers


TARGETS = {
    # what the user found: 3 layers more in config.json than in the weights, run at random
    "config counts 10 layers": (
        lambda p, t: target_copy(p, t, edit=set_layers(10)),
        ["the target's config builds 10 decoder layers (num_hidden_layers 10), but its weights hold layers 0-6",
         "SGLang would run layers 7-9 of the target on uninitialised memory"],
        "download the target's missing weights (an interrupted download?), or set num_hidden_layers to 7 if "
        "the model has 7 layers",
    ),
    "config without the count": (
        lambda p, t: target_copy(p, t, edit=drop_layers),
        ["the target's num_hidden_layers (text_config.num_hidden_layers for Kimi-K2.5) is None"],
        "use the target's original config.json",
    ),
    "config counts 6 layers": (
        lambda p, t: target_copy(p, t, edit=set_layers(6)),
        ["the target's config builds 6 decoder layers (num_hidden_layers 6), but its weights hold layers 0-6",
         "SGLang would skip layer 6 of the target, silently (num_nextn_predict_layers 1 allows MTP layer 6, "
         "and an MTP layer holds eh_proj, enorm and hnorm)"],
        "set num_hidden_layers to 7, the decoder layers the weights hold",
    ),
    "weights without layer 3": (
        lambda p, t: target_copy(p, t, keep=without(3)),
        ["the target's config builds 7 decoder layers (num_hidden_layers 7), but its weights hold layers 0-2, 4-6",
         "SGLang would run layer 3 of the target on uninitialised memory"],
        "download the target's weights again (an interrupted download?)",
    ),
    "weights without the last layers": (
        lambda p, t: target_copy(p, t, keep=without(5, 6)),
        ["but its weights hold layers 0-4", "SGLang would run layers 5-6 of the target"],
        "download the target's missing weights (an interrupted download?), or set num_hidden_layers to 5 if "
        "the model has 5 layers",
    ),
    "a layer 7 that is no MTP layer": (
        lambda p, t: target_copy(p, t, add={"model.layers.7.input_layernorm.weight": torch.ones(64)}),
        ["but its weights hold layers 0-7", "SGLang would skip layer 7 of the target"],
        "set num_hidden_layers to 8, the decoder layers the weights hold",
    ),
    "MTP layer beyond num_nextn_predict_layers 0": (
        lambda p, t: target_copy(
            p, t, edit=lambda c: c.update(num_nextn_predict_layers=0), add=mtp_layer(7)
        ),
        ["but its weights hold layers 0-7", "SGLang would skip layer 7 of the target, silently."],
        "set num_nextn_predict_layers to 1: layer 7 of the weights is an MTP layer (eh_proj, enorm, hnorm)",
    ),
    "shards for 10 layers": (
        lambda p, t: sharded_target(p, t, edit=set_layers(10)),
        ["the target's config builds 10 decoder layers (num_hidden_layers 10), but its weights hold layers 0-6"],
        "download the target's missing weights",
    ),
    "Kimi text_config without the count": (
        lambda p, t: kimi_target(p, t, edit=drop_layers),
        ["the target's num_hidden_layers (text_config.num_hidden_layers for Kimi-K2.5) is None"],
        "use the target's original config.json",
    ),
    "Kimi text_config counts 10 layers": (
        lambda p, t: kimi_target(p, t, edit=set_layers(10)),
        ["the target's config builds 10 decoder layers (num_hidden_layers 10), but its weights hold layers 0-6"],
        "download the target's missing weights (an interrupted download?), or set num_hidden_layers to 7 if "
        "the model has 7 layers",
    ),
}  # fmt: skip


@pytest.mark.parametrize("what", list(TARGETS))
def test_a_target_whose_weights_do_not_hold_its_layers_is_refused_before_it_loads(
    pair, tmp_path, loads, what
):
    make, problems, fix = TARGETS[what]
    target = make(pair, tmp_path)
    err = refused(target, pair.draft)
    assert f"--target {target}: " in err, err
    for problem in problems:
        assert problem in err, (problem, err)
    assert f"Fix: {fix}" in err, (fix, err)
    assert loads == []


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda p, t: p.target, id="the shipped target"),
        pytest.param(lambda p, t: target_copy(p, t, add=mtp_layer(7)), id="an MTP layer after layer 6"),
        pytest.param(lambda p, t: sharded_target(p, t), id="sharded"),
        pytest.param(lambda p, t: kimi_target(p, t), id="Kimi-K2.5"),
    ],
)
def test_a_target_whose_weights_hold_its_layers_passes(pair, tmp_path, loads, make):
    """DeepSeek-V3's checkpoints hold its MTP layer as model.layers.{num_hidden_layers}: counted
    by num_nextn_predict_layers (1 in the tiny target's config), not refused."""
    target = make(pair, tmp_path)
    check_rules(ModelFolder.read(target, "--target"), ModelFolder.read(pair.draft, "--draft"))
    with pytest.raises(Loaded):
        probe_folders(ProbeRequest(target, pair.draft))
    assert len(loads) == 1


# ------------------------------------------------------------------ the draft's weights


def draft_copy(pair, tmp_path, rename):
    folder = tmp_path / "d"
    shutil.copytree(pair.draft, folder)
    weights = load_file(folder / "model.safetensors")
    renamed = {rename(k): v for k, v in weights.items() if rename(k)}
    save_file(renamed, str(folder / "model.safetensors"))
    return folder


@pytest.mark.parametrize(
    ("rename", "expected"),
    [
        (lambda k: None if k == "fc.weight" else k, "model.safetensors holds no fc.weight"),
        (lambda k: None if k.startswith("midlayer.") else k, "model.safetensors holds no midlayer.*"),
    ],
    ids=["without fc.weight", "without midlayer"],
)
def test_a_draft_without_its_fc_or_its_layer_is_refused_before_a_model_loads(
    pair, tmp_path, loads, rename, expected
):
    draft = draft_copy(pair, tmp_path, rename)
    err = refused(pair.target, draft)
    assert f"--draft {draft}: {expected}" in err, err
    assert "; pass the EAGLE-3 draft's folder, or download the draft again" in err, err
    assert loads == []


def test_a_draft_that_names_its_layer_layers_0_passes(pair, tmp_path, loads):
    draft = draft_copy(pair, tmp_path, lambda k: "model." + k.replace("midlayer.", "layers.0."))
    with pytest.raises(Loaded):
        probe_folders(ProbeRequest(pair.target, draft))


# ------------------------------------------------------------------ the device


NO_CUDA = "use --device cpu, or run on a machine with a GPU"
ENGINE_ON_CPU = "use --backend hf (or sglang-cpu) to run on the CPU"


@pytest.mark.parametrize(
    ("flags", "expected", "fix"),
    [
        (["--device", "cuda"],
         "--device cuda: no CUDA device is visible to torch (torch.cuda.is_available() is False", NO_CUDA),
        (["--device", "cuda:0"], "--device cuda:0: no CUDA device is visible to torch", NO_CUDA),
        (["--backend", "engine"],
         "--backend engine runs SGLang on a CUDA GPU, but no CUDA device is visible to torch",
         f"{ENGINE_ON_CPU}, or run on a machine with a GPU"),
        (["--backend", "engine", "--device", "cpu"],
         "--backend engine --device cpu: the engine backend runs SGLang on a CUDA GPU",
         f"drop --device, or {ENGINE_ON_CPU}"),
        (["--backend", "sglang-cpu", "--device", "cuda"],
         "--backend sglang-cpu --device cuda: the sglang-cpu backend runs on the CPU only",
         "drop --device, or use --backend hf --device cuda"),
        (["--device", "gpu"], "--device gpu: use cpu or cuda (cuda:N for one GPU of several)", ""),
    ],
    ids=["cuda", "cuda:0", "engine", "engine on cpu", "sglang-cpu on cuda", "gpu"],
)  # fmt: skip
def test_a_device_this_machine_lacks_is_refused_before_anything_loads(
    pair, tmp_path, loads, monkeypatch, flags, expected, fix
):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # any machine: none visible
    err = refused(pair.target, pair.draft, *flags)
    assert expected in err, err
    assert not fix or f"; {fix}" in err, err
    assert loads == []
    # checked before any folder is read
    assert expected in refused(tmp_path / "nowhere", tmp_path / "nowhere", *flags)


# ------------------------------------------------------------------ what the report concludes


def test_no_scored_wiring_is_undetermined_a_finding_and_never_nothing_found_wrong(pair, monkeypatch):
    """Every wiring fails (the checks before keep the command from getting here; the report must
    not rely on it): no "nothing found wrong", no exit 0, the failures listed."""
    from sglang_eagle3_embed.doctor import wirings

    failing = [
        Wiring((PLUGIN,), None, "refuses to start: a planted refusal"),
        Wiring((STOCK,), None, "fails at startup: a planted failure"),
    ]
    monkeypatch.setattr(wirings, "candidate_wirings", lambda *args, **kwargs: failing)
    code, out, err = run("probe", "--target", pair.target, "--draft", pair.draft, *QUICK)
    assert code == 1, (code, out[-2000:], err[-2000:])
    assert "Traceback" not in out + err
    assert "nothing found wrong" not in out + err and "trained as" not in out
    assert "Undetermined which wiring the draft was trained for: no wiring could be scored." in out
    assert "--model-impl sglang_eagle3_embed: refuses to start: a planted refusal" in out

    alone = ProbeReport([WiringResult(w, None) for w in failing], 7, 4, 4, "hf")
    assert not alone.plugin_ok and alone.undetermined_because == "no wiring could be scored"
    report = alone.as_dict()  # what --json prints
    assert report["status"] == "undetermined" and not report["plugin_ok"]
    assert report["trained_for"] is None and report["best"] == []
    assert not any("nothing found wrong" in line for line in report["verdict"])


@pytest.mark.releases
def test_a_draft_of_another_kind_is_refused_in_the_words_of_check(pair, tmp_path, loads):
    """probe refuses through check's rules: a plain LlamaForCausalLM config is rule
    ``draft-architecture``'s finding, worded once, for both commands."""
    from sglang_eagle3_embed.core.rule_ids import DRAFT_ARCHITECTURE
    from sglang_eagle3_embed.doctor.check import run_check

    draft = tmp_path / "draft"
    shutil.copytree(pair.draft, draft)
    edit_config(draft, lambda c: c.update(architectures=["LlamaForCausalLM"]))
    err = refused(pair.target, draft)
    launch = ["--model-path", str(pair.target), "--speculative-algorithm", "EAGLE3",
              "--speculative-draft-model-path", str(draft), "--model-impl", "sglang_eagle3_embed"]  # fmt: skip
    (finding,) = [f for f in run_check(launch) if f.rule == DRAFT_ARCHITECTURE]
    assert err.strip() == f"sglang-eagle3-embed: error: --draft {draft}: {finding.message}"
    assert loads == []


@pytest.mark.releases
def test_check_reads_each_weight_header_once_over_both_stages(pair, monkeypatch):
    """check reads the pair before and after SGLang's resolution, the rules' weights each time:
    each file's header is opened once."""
    from sglang_eagle3_embed.core.readers import model_folder
    from sglang_eagle3_embed.doctor.check import run_check

    opened = []
    real = model_folder._open
    monkeypatch.setattr(model_folder, "_open", lambda file, what: opened.append(file) or real(file, what))
    launch = ["--model-path", str(pair.target), "--speculative-algorithm", "EAGLE3",
              "--speculative-draft-model-path", str(pair.draft), "--model-impl", "sglang_eagle3_embed"]  # fmt: skip
    assert not [f for f in run_check(launch) if f.severity.value == "error"]
    headers = [f for f in opened if f.suffix == ".safetensors"]
    assert headers and sorted(headers) == sorted(set(headers))
