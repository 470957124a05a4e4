"""``python -m sglang_eagle3_embed.cli``: the same as the ``sglang-eagle3-embed`` command."""

import sys

from sglang_eagle3_embed.cli import main

sys.exit(main())
