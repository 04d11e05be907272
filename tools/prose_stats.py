"""Words per sentence in the project's prose: README.md, docs/*.md and tasks/*/README.md.

    python tools/prose_stats.py [FILE ...] [--limit 20] [--longest 3]

For each file it prints the number of sentences, the average words per sentence and the longest sentences. It exits
1 when a file's average is above the limit (20 words), else 0. Without files it reads the three sets above.

What counts: prose only. Fenced code blocks, tables (lines that begin with `|`), headings and HTML comments are left
out. An inline code span counts as one word, and a link as its text. A sentence ends at `.`, `!` or `?` followed by a
space, at the end of a paragraph, and at the end of a list item. Common abbreviations (e.g., i.e., etc.) end nothing.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 20
ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "al.", "approx.", "no.", "Fig.", "min.")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
CODE_SPAN = re.compile(r"`[^`\n]+`")
LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]*_]*\s+")
WORD = re.compile(r"[\w\u00c0-\uffff]+(?:[-'’.,/][\w\u00c0-\uffff]+)*")


@dataclass
class Stats:
    path: Path
    sentences: list[str]

    @property
    def words(self) -> list[int]:
        return [word_count(sentence) for sentence in self.sentences]

    @property
    def average(self) -> float:
        words = self.words
        return sum(words) / len(words) if words else 0.0


def default_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "tasks").glob("*/README.md"))]


def paragraphs(text: str) -> list[str]:
    """The prose of a Markdown text, one string per paragraph or list item."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.DOTALL)
    blocks: list[list[str]] = []
    current: list[str] = []
    fence: str | None = None

    def close() -> None:
        if current:
            blocks.append(current.copy())
            current.clear()

    for line in text.splitlines():
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            continue
        if stripped.startswith(("```", "~~~")):
            close()
            fence = stripped[:3]
            continue
        if not stripped or stripped.startswith(("#", "|")) or re.fullmatch(r"[-=*_ ]{3,}", stripped):
            close()
            continue
        if line.startswith("    ") and not current and not LIST_ITEM.match(line):
            continue  # an indented code block
        if LIST_ITEM.match(line):
            close()
            line = LIST_ITEM.sub("", line, count=1)
        current.append(line.strip())
    close()
    return [" ".join(block) for block in blocks]


def sentences(paragraph: str) -> list[str]:
    paragraph = CODE_SPAN.sub("CODE", paragraph)
    paragraph = LINK.sub(r"\1", paragraph)
    protected = paragraph
    for abbreviation in ABBREVIATIONS:
        protected = protected.replace(abbreviation + " ", abbreviation.replace(".", "\0") + " ")
    parts = SENTENCE_END.split(protected)
    return [part.replace("\0", ".").strip() for part in parts if word_count(part)]


def word_count(sentence: str) -> int:
    return len(WORD.findall(sentence))


def measure(path: Path) -> Stats:
    found = [sentence for paragraph in paragraphs(path.read_text()) for sentence in sentences(paragraph)]
    return Stats(path, found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="Markdown files (default: README, docs, environments)")
    parser.add_argument("--limit", type=float, default=LIMIT, help="the most words a sentence may average")
    parser.add_argument("--longest", type=int, default=3, help="how many of each file's longest sentences to list")
    args = parser.parse_args(argv)
    over = []
    for path in args.files or default_files():
        stats = measure(path)
        name = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
        verdict = "over" if stats.average > args.limit else "ok"
        print(f"{name}: {len(stats.sentences)} sentences, {stats.average:.1f} words a sentence ({verdict})")
        ranked = sorted(zip(stats.words, stats.sentences), key=lambda pair: -pair[0])
        for words, sentence in ranked[: args.longest]:
            shown = sentence if len(sentence) <= 160 else sentence[:157] + "..."
            print(f"    {words} words: {shown}")
        if stats.average > args.limit:
            over.append(str(name))
    if over:
        print(f"above {args.limit:g} words a sentence: {', '.join(over)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
