"""The canary's expectations for the tiny pair, recorded as a user records them (``probe
--expectations``), for the tests of the canary command and of the startup self-check."""

from pathlib import Path

from sglang_eagle3_embed.cli import main


def record_expectations(pair, path: Path, *, num_prompts: int, steps: int, new_tokens: int = 24) -> Path:
    argv = ["probe", "--target", str(pair.target), "--draft", str(pair.draft), "--no-progress"]
    argv += ["--num-prompts", str(num_prompts), "--new-tokens", str(new_tokens), "--num-steps", str(steps)]
    assert main([*argv, "--expectations", str(path)]) == 0
    return path
