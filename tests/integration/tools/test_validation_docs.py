"""docs/validation.md is generated from the rule table and stays in sync with it."""

import pytest

from sglang_eagle3_embed.core.rules.table import every_rule
from tools.validation_docs import DOC, render


@pytest.mark.releases
def test_validation_doc_is_up_to_date():
    assert DOC.read_text() == render(), "run: python -m tools.validation_docs"


def test_every_rule_is_documented_with_an_example_message():
    text = DOC.read_text()
    for rule_id in every_rule():
        section = text.split(f"\n## {rule_id}\n", 1)[1].split("\n## ", 1)[0]
        assert "\n> " in section, f"{rule_id} has no example message"
