"""docs/CONTRACT.md's numbered rules stay honest: numbered in order, and every file a rule cites exists."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = (ROOT / "docs" / "CONTRACT.md").read_text()


def test_the_rules_are_numbered_in_order():
    numbers = [int(n) for n in re.findall(r"^- \*\*R(\d+) ", CONTRACT, flags=re.M)]
    assert numbers and numbers == list(range(1, len(numbers) + 1))


def test_every_file_a_rule_cites_exists():
    rules = CONTRACT[CONTRACT.index("## The rules") :]
    cited = set(re.findall(r"`((?:tests|rebench_inspect)/[\w/]+\.py)`", rules))
    assert cited and not [path for path in sorted(cited) if not (ROOT / path).is_file()]
