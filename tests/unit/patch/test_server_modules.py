"""The list of what a server process runs, in ``sglang_eagle3_embed/patch/__init__.py`` (linked from
the README), names exactly the modules a server imports, with their size about right."""

import re

from sglang_eagle3_embed import patch
from tests.support import ROOT
from tests.unit.test_layout import PACKAGE, SERVER_ENTRY, package_graph, reach

SECTION = patch.__doc__.split("What a server process runs", 1)[1]


def lines(module: str) -> int:
    path = ROOT / module.replace(".", "/")
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return len(path.read_text().splitlines())


def served() -> tuple[set[str], set[str]]:
    """The glue and the core modules a server reaches, relative to the package."""
    reached = {m.removeprefix(f"{PACKAGE}.") for m in reach(package_graph(), SERVER_ENTRY)}
    reached -= {PACKAGE, "core"}
    core = {m for m in reached if m.startswith("core.")}
    return reached - core, core


def about(what: str) -> int:
    return int(re.search(rf"{what}, about ([\d,]+) lines", SECTION).group(1).replace(",", ""))


def test_the_list_names_every_module_a_server_imports_and_no_other():
    glue, core = served()
    named = set(re.findall(r"``([\w.]+)``", SECTION))
    # the core by its shared modules and its subpackages: ``core.capture`` stands for its modules
    assert {m for m in named if m.startswith("core.")} == {".".join(m.split(".")[:2]) for m in core}
    assert {m.rsplit(".", 1)[-1] for m in glue} - {"patch"} <= named
    assert "this package" in SECTION
    assert "(sglang_eagle3_embed/patch/__init__.py)" in (ROOT / "README.md").read_text()  # one step away


def test_the_sizes_are_about_right():
    glue, core = served()
    for what, modules in (("the glue", glue), (r"the pure core they call \([^)]*\)", core)):
        actual = sum(lines(f"{PACKAGE}.{m}") for m in modules)
        assert abs(about(what) - actual) <= 0.15 * actual, (what, actual)
