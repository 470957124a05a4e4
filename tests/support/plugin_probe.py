"""Run in a fresh process by the integration tests (``python -m tests.support.plugin_probe MODE``):
load the installed plugin the way SGLang does and report what happens, as JSON on the last line.

Modes: ``healthy``; ``old-sglang`` pretends an unsupported SGLang (0.5.20) is installed (its
package metadata says so); ``arch-hook-not-applied`` points the architecture hook at a symbol
SGLang cannot find (SGLang only logs it); ``guard-not-registered`` names a resolution step that
does not exist."""

import json
import sys
import traceback
from types import SimpleNamespace


def outcome(fn):
    try:
        value = fn()
    except Exception as err:
        return {"error": type(err).__name__, "message": str(err)}
    return {"ok": value}


def main(mode: str) -> dict:
    from sglang_eagle3_embed.patch import model_architecture, resolution_guard

    if mode == "old-sglang":  # what the package metadata says, for every reader of it
        import importlib.metadata

        installed = importlib.metadata.version
        importlib.metadata.version = lambda name: "0.5.20" if name == "sglang" else installed(name)
    elif mode == "arch-hook-not-applied":  # SGLang's apply_hooks fails on the target and only logs
        model_architecture.TARGET = "sglang.srt.model_loader.utils.no_such_function"
    elif mode == "guard-not-registered":  # the resolution pipeline refuses the guard's step name
        resolution_guard.STEP = "no_such_step"

    from sglang.srt.entrypoints.warmup import _warmup_registry as warmup_registry
    from sglang.srt.model_loader.utils import get_model_architecture
    from sglang.srt.plugins import load_plugins
    from sglang.srt.server_args import ServerArgs

    from sglang_eagle3_embed.activation import State

    load_plugins()
    import sglang.srt.model_loader.utils as utils  # the hooked module attribute

    def resolve(arch, impl, draft=False):
        cfg = SimpleNamespace(
            hf_config=SimpleNamespace(architectures=[arch]),
            model_impl=impl,
            quantization=None,
            is_draft_model=draft,
        )
        cls, _ = utils.get_model_architecture(cfg)
        return f"{cls.__module__}.{cls.__name__}"

    def launch(impl):
        ServerArgs(model_path="dummy", model_impl=impl).resolve_once()
        return "resolved"

    def seed_launch(impl, steps=(1, 1, 16), draft=None):
        import tempfile

        from sglang.srt.server_args import prepare_server_args

        from harness.rule_examples import Scenario, launch, materialize

        argv = materialize(Scenario(launch(steps=steps, impl=impl), draft=draft or {}), tempfile.mkdtemp())
        prepare_server_args([*argv, "--device", "cpu"]).resolve_once()
        return "resolved"

    import logging

    warnings = []
    handler = logging.Handler()
    handler.emit = lambda record: warnings.append(record.getMessage())
    logging.getLogger("sglang_eagle3_embed").addHandler(handler)
    undeclared = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 5]}}

    archs = [
        "DeepseekV2ForCausalLM",
        "DeepseekV3ForCausalLM",
        "DeepseekV32ForCausalLM",
        "KimiK25ForConditionalGeneration",
    ]
    from importlib.metadata import entry_points

    report = {
        "entry_points": {ep.name: ep.value for ep in entry_points(group="sglang.srt.plugins")},
        "active": State.active,
        "reason": State.reason,
        "arch_hook_applied": model_architecture.applied(),
        "warmups": sorted(warmup_registry),
        "module_level_name_rebound": get_model_architecture is not utils.get_model_architecture,
        "launch": {
            impl: outcome(lambda impl=impl: launch(impl))
            for impl in ("sglang_eagle3_embed", "sglang", "auto")
        },
        "resolve": {},
        "seed_launch": {
            impl: outcome(lambda impl=impl: seed_launch(impl)) for impl in ("sglang_eagle3_embed", None)
        },
        "warned_launch": outcome(lambda: seed_launch("sglang_eagle3_embed", (3, 1, 4), undeclared)),
        "warnings": warnings,
    }
    for impl in ("sglang_eagle3_embed", "sglang", "auto", "transformers_typo"):
        for arch in archs:
            report["resolve"][f"{impl}/{arch}"] = outcome(lambda a=arch, i=impl: resolve(a, i))
    report["resolve"]["draft/DeepseekV3ForCausalLM"] = outcome(
        lambda: resolve("DeepseekV3ForCausalLM", "sglang_eagle3_embed", draft=True)
    )
    report["resolve"]["sglang_eagle3_embed/LlamaForCausalLM"] = outcome(
        lambda: resolve("LlamaForCausalLM", "sglang_eagle3_embed")
    )
    return report


if __name__ == "__main__":
    try:
        result = main(sys.argv[1])
    except Exception:
        result = {"crash": traceback.format_exc()}
    print(json.dumps(result))
