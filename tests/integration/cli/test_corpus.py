"""Published launch lines through ``check`` and ``ids`` (``tests/support/corpus.py``): every line
gets the verdict SGLang on the intended hardware would justify, on a machine without a GPU, and no
rule speaks of a flag or a reading the launch does not have."""

import json

import pytest

from sglang_eagle3_embed.core.findings import Severity
from sglang_eagle3_embed.doctor.check import LaunchArgumentsError, check_launch, verdicts
from tests.support import in_process
from tests.support.corpus import CHECKPOINTS, LAUNCHES, stand_in

pytestmark = pytest.mark.releases


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("corpus")
    return {repo: str(stand_in(checkpoint, root)) for repo, checkpoint in CHECKPOINTS.items()}


def argv(launch, folders) -> list[str]:
    """The launch line with every hub id in it replaced by its stand-in folder."""
    out = []
    for arg in launch.argv:
        flag, eq, value = arg.partition("=")
        out.append(
            f"{flag}={folders.get(value, value)}" if eq and value in folders else folders.get(arg, arg)
        )
    return out


@pytest.mark.parametrize("launch", LAUNCHES, ids=lambda launch: launch.name)
def test_each_published_line_gets_its_verdict(launch, folders):
    try:
        found = check_launch(argv(launch, folders), launch.gpu)
    except LaunchArgumentsError as exc:
        assert launch.exit == 2, f"{launch.name}: {exc}"
        return
    errors = any(f.severity is Severity.ERROR for f in found.findings)
    assert (1 if errors else 0) == launch.exit, (
        launch.name,
        [f for f in found.findings if f.severity.value != "ok"],
    )
    judged = verdicts(found.findings)
    shown = {rule: verdict for rule, verdict in judged.items() if verdict in ("error", "warning")}
    assert shown == launch.verdicts, (launch.name, [f.message for f in found.findings])
    unchecked = [f.message for f in found.findings if f.severity is Severity.NOT_CHECKED]
    assert not unchecked or judged["sglang-resolution"] == "error", unchecked  # configs and weights all read
    assert bool(found.not_checked_here) == launch.here, found.not_checked_here
    assert found.resolved_as and launch.gpu.upper() in found.resolved_as.upper()
    for finding in found.findings:
        assert "-1" not in finding.message or "--model-impl" in " ".join(launch.argv), finding.message


@pytest.mark.parametrize("draft", [c for c in CHECKPOINTS if "eagle3" in c], ids=str)
def test_ids_on_each_published_draft_exits_0_on_its_target(draft, folders):
    """Every published draft is read by stock SGLang on its target as its trainer meant it."""
    target = {
        "specforge/deepseek-v3-671b-eagle3": "deepseek-ai/DeepSeek-V3-0324",
        "thoughtworks/GLM-4.7-Flash-Eagle3": "zai-org/GLM-4.7-Flash",
    }.get(draft, "moonshotai/Kimi-K2.5")
    code, out, err = in_process("ids", folders[draft], "--target", folders[target], "--json")
    result = json.loads(out)
    assert code == 0 and result["stock_capture_indices"], (draft, result, err)
