"""Installing the plugin leaves a supported SGLang as it is: pip, in a fresh virtual environment
where a stand-in ``sglang`` 0.5.21 or 0.5.22 is installed (metadata only, no code and no
dependencies, so nothing else can be at stake), is asked what it would do to install the plugin's
wheel with no index to fetch from: it installs the plugin alone. With 0.5.20 installed it would have
to replace SGLang, and, with no index, cannot."""

import base64
import hashlib
import json
import subprocess
import sys
import zipfile

import pytest

from tests.support import ROOT


def stand_in_wheel(folder, name: str, version: str):
    """A wheel holding only ``name``'s metadata."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    records = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        records.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*records, f"{info}/RECORD,,"]) + "\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return wheel


@pytest.fixture(scope="module")
def plugin_wheel(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wheels")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(folder), str(ROOT)],
        check=True, capture_output=True, cwd=ROOT,
    )  # fmt: skip
    return folder


def dry_run(tmp_path, plugin_wheel, sglang_version):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "--isolated"]
    stand_in = stand_in_wheel(tmp_path, "sglang", sglang_version)
    subprocess.run([*pip, "install", "-q", "--no-index", str(stand_in)], check=True)
    report = tmp_path / "report.json"
    run = subprocess.run(
        [*pip, "install", "--dry-run", "--no-index", "--find-links", str(plugin_wheel),
         "--report", str(report), "sglang-eagle3-embed"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return run, json.loads(report.read_text()) if report.exists() else None


@pytest.mark.parametrize("version", ["0.5.21", "0.5.22"])
def test_a_supported_sglang_is_kept(tmp_path, plugin_wheel, version):
    run, report = dry_run(tmp_path, plugin_wheel, version)
    assert run.returncode == 0, run.stderr
    assert [item["metadata"]["name"] for item in report["install"]] == ["sglang-eagle3-embed"]


def test_an_unsupported_sglang_would_have_to_be_replaced(tmp_path, plugin_wheel):
    run, _ = dry_run(tmp_path, plugin_wheel, "0.5.20")
    assert run.returncode != 0 and "sglang<0.5.24,>=0.5.21" in run.stderr
