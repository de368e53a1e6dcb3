"""The repository speaks in its own words: no tracked file cites a document that is not in it,
and every link into ``docs/behaviour.md`` lands on a heading that exists.

berth's behaviour is described once, in ``docs/behaviour.md``; code comments, docstrings, test
names, examples, READMEs and the public texts either state the behaviour or link there by a
stable anchor (``docs/behaviour.md#strategy-auto``). A citation of a document outside the
repository tells a reader nothing they can open.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = "docs/behaviour.md"
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()

OUTSIDE_CITATION = re.compile(
    r"(?<![a-z])seeds?[ _-]?(?:0(?!\d)|\d{3}(?!\d)|dummy(?![a-z]))"  # numbered source documents, and one's mode
    r"|\bthe seeds?'?s?\b"  # "the seed's Validation section"
    r"|\bDESIGN(?:\.md\b|:)",  # the design notes
    re.IGNORECASE)
LINK = re.compile(re.escape(PAGE) + r"#([\w-]+)")
IN_PAGE_LINK = re.compile(r"\]\(#([\w-]+)\)")
ANCHOR = re.compile(r'^<a id="([\w-]+)"></a>$')

REQUIRED_ANCHORS = [
    # each behaviour the page must describe, under its own stable anchor
    "checks", "pod-constraints", "node-filter", "liveness", "fit", "fit-message", "disk-floor",
    "unknown-capacity", "overcommit", "strategies", "strategy-default", "strategy-auto", "strategy-fill",
    "strategy-each", "strategy-global", "strategy-drained", "strategy-balanced", "strategy-spread",
    "strategy-best-fit", "sleepy-pods", "capacity-only", "nodes-limit", "topology-spread", "placement-rules",
    "affinity-matching", "rule-limits", "rounds", "round-count", "assumed-pods", "errors", "drains",
    "decision-records",
]


def tracked_text_files() -> list[tuple[str, str]]:
    """(path, text) of every tracked regular file that is text; links and binaries are skipped."""
    listed = subprocess.run(["git", "ls-files", "-z", "-s"], cwd=ROOT, capture_output=True, check=True,
                            ).stdout.decode().split("\0")
    out = []
    for entry in filter(None, listed):
        meta, path = entry.split("\t", 1)
        if meta.startswith(("120000", "160000")) or not (ROOT / path).is_file():
            continue  # a link (its target is listed itself), a submodule, or deleted in the work tree
        data = (ROOT / path).read_bytes()
        if b"\0" in data:
            continue
        try:
            out.append((path, data.decode()))
        except UnicodeDecodeError:
            continue
    return out


def outside_citations(path: str, text: str) -> list[str]:
    """``path:line: text`` for every line of ``text`` that cites an outside document."""
    return [f"{path}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1)
            if OUTSIDE_CITATION.search(line)]


def page_anchors() -> dict[str, int]:
    """The page's explicit anchors, each with the line of the heading it names."""
    lines = (ROOT / PAGE).read_text().splitlines()
    anchors: dict[str, int] = {}
    for n, line in enumerate(lines, 1):
        found = ANCHOR.match(line)
        if found is None:
            continue
        assert found[1] not in anchors, f"{PAGE}:{n}: anchor {found[1]!r} is defined twice"
        assert n < len(lines) and lines[n].startswith("#"), f"{PAGE}:{n}: anchor {found[1]!r} is not on a heading"
        anchors[found[1]] = n + 1
    return anchors


@pytest.mark.parametrize(("case", "line", "cites"), [
    ("numbered_source", "the rule limits of " + "seed 002", True),
    ("numbered_source_no_space", "Seed" + "001: shortfall", True),
    ("numbered_source_in_a_test_id", "se" + "ed_003_1_1_0_max_skew_1", True),
    ("numbered_source_in_a_constant", "SE" + "ED_002 = [", True),
    ("capacity_only_mode", "seed " + "DUMMY", True),
    ("the_source_by_article", "validates every limit of " + "the seed's Validation section", True),
    ("the_design_notes", "in Kubernetes terms (" + "DESIGN.md)", True),
    ("the_design_notes_as_a_label", "# " + "DESIGN: pods nominated by preemption", True),
    ("a_random_seed", "rng = random.Random(seed)", False),
    ("a_random_seed_flag", 'parser.add_argument("--seed", type=int, default=7)', False),
    ("a_random_seed_in_a_docstring", "Same seed, same cluster.", False),
    ("a_link_to_the_page", "ties to the most room (docs/behaviour.md#strategy-auto)", False),
])
def test_what_counts_as_an_outside_citation(case: str, line: str, cites: bool) -> None:
    assert bool(outside_citations("f", line)) is cites, case


def test_no_tracked_file_cites_an_outside_document() -> None:
    found = [hit for path, text in tracked_text_files() if path != SELF for hit in outside_citations(path, text)]
    assert not found, ("cite docs/behaviour.md#<anchor> or state the behaviour instead:\n" + "\n".join(found))


def test_every_link_into_the_behaviour_page_lands_on_an_anchor() -> None:
    anchors = page_anchors()
    broken = [f"{path}:{n}: #{name}" for path, text in tracked_text_files()
              for n, line in enumerate(text.splitlines(), 1)
              for name in (*LINK.findall(line), *(IN_PAGE_LINK.findall(line) if path == PAGE else ()))
              if name not in anchors]
    assert not broken, f"links to anchors {PAGE} does not define:\n" + "\n".join(broken)


def test_the_behaviour_page_describes_every_behaviour_under_its_own_anchor() -> None:
    missing = [name for name in REQUIRED_ANCHORS if name not in page_anchors()]
    assert not missing, f"{PAGE} lacks the anchors {missing}"


def test_the_readme_links_the_behaviour_page() -> None:
    assert f"]({PAGE})" in (ROOT / "README.md").read_text()


def _help_texts(parser: argparse.ArgumentParser) -> list[str]:
    """The help of ``parser`` and of every subcommand under it."""
    texts = [parser.format_help()]
    for action in parser._actions:  # argparse keeps subcommands only here
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                texts.extend(_help_texts(sub))
    return texts


def test_the_public_texts_cite_no_outside_document() -> None:
    """What users read at run time (the explain API's OpenAPI document, the CLI's help) is made
    from the code the walk above reads; this holds the assembled texts to the same rule."""
    from berth.cli.main import build_parser
    from berth.extender.app import create_app
    from berth.extender.settings import ExtenderSettings
    from berth.extender.store import ClusterStore

    openapi = json.dumps(create_app(ClusterStore(), ExtenderSettings()).openapi())
    helps = _help_texts(build_parser())
    texts = {"the OpenAPI document": openapi, **{f"berth help {i}": text for i, text in enumerate(helps)}}
    found = [hit for name, text in texts.items() for hit in outside_citations(name, text)]
    assert len(texts) > 5 and not found, "\n".join(found)
