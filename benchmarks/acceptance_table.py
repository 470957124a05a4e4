"""Turn the GPU acceptance logs into the results table of docs/benchmarks.md.

    python -m benchmarks.acceptance_table LOGDIR [LOGDIR ...]

Reads the engine results of the runs in ``harness.acceptance_runs``
(``<name>.json`` written by ``harness.engine_run``; a later folder wins) and the
offline prediction (``offline.json`` written by ``tests/gpu/test_acceptance.py``) and prints a Markdown table: accept lengths plugin vs stock vs
offline, output tokens/s with and without speculation (every prompt at once, and one at a time). An
engine whose process SGLang killed at startup leaves only its ``<name>.log``: the table shows the
error line from it.
"""

import json
import sys
from datetime import date
from pathlib import Path

from benchmarks import _common as c
from harness.acceptance_runs import OFFLINE, RUNS, offline_key


def _mean(values):
    values = [v for v in values or [] if v is not None]
    return sum(values) / len(values) if values else None


def _result(folders: list[Path], name: str) -> dict | None:
    """The engine's result from the last folder that has it; from its log if SGLang killed it."""
    for folder in reversed(folders):
        if (folder / f"{name}.json").exists():
            return json.loads((folder / f"{name}.json").read_text())
        if (folder / f"{name}.log").exists():
            return {
                "ok": False,
                "error": c.last_error_line((folder / f"{name}.log").read_text(), "no result"),
            }
    return None


def table(folders: list[Path]) -> str:
    offline = {}
    for folder in folders:
        if (folder / OFFLINE).exists():
            offline = json.loads((folder / OFFLINE).read_text())
    lines, meta, at_once = [], {}, set()
    for run in RUNS:
        label = run.label
        result = _result(folders, run.name)
        if result is None:
            lines.append(f"| {label} | not run | | | |")
            continue
        meta = meta or {k: result.get(k) for k in ("gpu", "sglang") if result.get(k)}
        predicted = None
        if run.offline_wiring is not None:
            predicted = offline.get(str(run.offline_steps), {}).get(offline_key(run.offline_wiring))
        pred = f"{predicted:.2f}" if predicted is not None else ""
        if not result.get("ok"):
            lines.append(f"| {label} | fails: {result.get('error', '')[-80:]} | {pred} | | |")
            continue
        modes = result["modes"]
        if modes["all"].get("outputs"):
            at_once.add(len(modes["all"]["outputs"]))
        accept = _mean(modes["all"]["accept_length"])
        shown = f"{accept:.2f}" if accept is not None else "-"
        single = modes.get("one-by-one", {}).get("tokens_per_s", "")
        lines.append(f"| {label} | {shown} | {pred} | {modes['all']['tokens_per_s']} | {single} |")
    count = "/".join(map(str, sorted(at_once))) or "all"
    header = [
        f"| run | accept length (server) | offline prediction | output tokens/s, {count} at once | one at a time |",
        "|---|---|---|---|---|",
    ]
    head = f"{date.today()}, {meta.get('gpu')}, SGLang {meta.get('sglang')}\n\n"
    return head + "\n".join(header + lines)


if __name__ == "__main__":
    print(table([Path(arg) for arg in sys.argv[1:]]))
