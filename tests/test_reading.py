"""Paragraphs a reader can take in: no prose paragraph of the book longer than ``WORD_LIMIT`` words, except inside a
collapsed note (``:class: dropdown``), where the details most readers skip belong.

A page is read as MyST Markdown: code cells, code blocks, math, tables and ``{eval-rst}`` blocks are not prose; the
text of admonitions, proofs, exercises and figure captions is.  A paragraph is a run of non-blank prose lines; a
list item or a definition starts a new one.  A word is a whitespace-separated token, inline math ``$…$`` and a
role such as ``{glue:text}`...``` counting as one.
"""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the most words a paragraph a reader meets unfolded may have
WORD_LIMIT = 150
#: directives whose body is prose (a name ending in one of these; ``prf:lemma``, ``figure``, ``admonition``, ...)
PROSE = re.compile(
    r"^(admonition|note|tip|hint|important|attention|caution|warning|danger|error|seealso|epigraph|margin|"
    r"figure|prf:\w+|exercise|solution|dropdown|glossary)$"
)
FENCE = re.compile(r"^\s*(`{3,}|:{3,})\s*(\{[^}]*\})?\s*(.*)$")
#: a line that starts a new paragraph: a list item or a definition
ITEM = re.compile(r"^\s*([-*+]|\d+[.)]|:)\s+")
#: pages whose long paragraphs are still to be split: page → why (strict: remove the entry once it passes)
NOT_YET_SPLIT: dict[str, str] = {}


def paragraphs(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of every prose paragraph outside a collapsed note."""
    lines = text.split("\n")
    start = 0
    if lines and lines[0].strip() == "---":  # front matter
        start = next(i for i in range(1, len(lines)) if lines[i].strip() == "---") + 1
    stack: list[dict] = []  # open fences: char, length, prose, collapsed, in_options
    found: list[tuple[int, str]] = []
    current: list[str] = []
    first = 0
    in_math = False

    def flush():
        if current:
            found.append((first, " ".join(current)))
            current.clear()

    for number, line in enumerate(lines[start:], start + 1):
        stripped = line.strip()
        fence = FENCE.match(line)
        if fence and not in_math:
            marker, directive, rest = fence.groups()
            top = stack[-1] if stack else None
            if top and marker[0] == top["char"] and len(marker) >= top["length"] and not directive and not rest:
                flush()
                stack.pop()
                continue
            if not (top and not top["prose"]):  # a fence inside code is code
                flush()
                name = (directive or "{code}")[1:-1].strip()
                outer_collapsed = any(f["collapsed"] for f in stack)
                stack.append(
                    {
                        "char": marker[0],
                        "length": len(marker),
                        "prose": bool(PROSE.match(name)),
                        "collapsed": outer_collapsed or name == "dropdown",
                        "options": True,
                    }
                )
                continue
        top = stack[-1] if stack else None
        if top and top["options"]:
            if re.match(r"^\s*:[\w-]+:", line):
                if re.match(r"^\s*:class:.*\bdropdown\b", line):
                    top["collapsed"] = True
                continue
            top["options"] = False
        prose = (top is None or top["prose"]) and not (top and top["collapsed"])
        if stripped.startswith("$$"):
            flush()
            # a one-line display "$$ x $$ (label)" or the start/end of a multi-line one
            if not (len(stripped) > 2 and "$$" in stripped[2:]):
                in_math = not in_math
            continue
        if in_math or not prose:
            flush()
            continue
        if (
            not stripped
            or stripped.startswith(("#", "|", "<!--", "+++", "%"))
            or re.match(r"^\(.+\)=$", stripped)
            or re.match(r"^\{[\w.-]+\}\s*$", stripped)  # an attribute line such as {.glossary}
        ):
            flush()
            continue
        if ITEM.match(line):
            flush()
        if not current:
            first = number
        current.append(stripped)
    flush()
    return found


def words(paragraph: str) -> int:
    paragraph = re.sub(r"\$[^$]+\$", "MATH", paragraph)
    paragraph = re.sub(r"\{[\w:.-]+\}`[^`]*`", "ROLE", paragraph)
    return len(paragraph.split())


def long_paragraphs(page: Path, limit: int = WORD_LIMIT) -> list[str]:
    return [
        f"{page.name}:{line}: {words(text)} words: {text[:70]}…"
        for line, text in paragraphs(page.read_text())
        if words(text) > limit
    ]


PAGES = sorted((ROOT / "book").rglob("*.md"))


def marked_pending(pages, pending: dict[str, str]) -> list:
    """The pages, those named in ``pending`` (page name → why) marked as strict expected failures."""
    return [
        pytest.param(page, marks=pytest.mark.xfail(strict=True, reason=pending[page.name]))
        if page.name in pending
        else page
        for page in pages
    ]


@pytest.mark.parametrize(
    "page",
    marked_pending(PAGES, NOT_YET_SPLIT),
    ids=lambda page: str(page.relative_to(ROOT / "book")),
)
def test_no_paragraph_is_too_long_to_read(page):
    too_long = long_paragraphs(page)
    assert not too_long, (
        f"{len(too_long)} paragraphs over {WORD_LIMIT} words: split them, or move the details most readers skip "
        "into a collapsed note (```{admonition} Title + :class: dropdown):\n" + "\n".join(too_long)
    )


def test_what_counts_as_a_paragraph():
    """Prose and an admonition's text count; code, math, tables, options and a collapsed note's text do not."""
    long = " ".join(["word"] * (WORD_LIMIT + 1))
    page = f"""---
jupytext: {{}}
---
(label)=
# Title

{long}

```{{code-cell}} ipython3
{long}
```

$$
{long}
$$ (eq-x)

| {long} |

````{{admonition}} Open
A {{glue:text}}`key:.2f` and $a + b$ are one word each.
````

```{{admonition}} Details
:class: dropdown

{long}

:::{{note}}
{long}
:::
```

- {long[:50]}
- {long[:50]}
"""
    found = paragraphs(page)
    assert [words(text) for _, text in found] == [WORD_LIMIT + 1, 8, 11, 11]  # a list item: its marker and ten words
    assert found[0][0] == 7


#: pages whose collapsed notes are fenced with backticks, which the downloaded notebook shows raw (strict)
BACKTICK_NOTES: dict[str, str] = {}
DROPDOWN = re.compile(r"^(`{3,}|:{3,})\{admonition\}[^\n]*\n(?::[\w-]+:[^\n]*\n)*?:class:[^\n]*\bdropdown\b", re.M)


def _download_extension():
    """The book's extension that writes the downloaded notebooks (book/_ext/notebook_download.py)."""
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import notebook_download

    return notebook_download


@pytest.mark.parametrize(
    "page",
    marked_pending([page for page in PAGES if DROPDOWN.search(page.read_text())], BACKTICK_NOTES),
    ids=lambda page: page.name,
)
def test_collapsed_notes_stay_collapsed_in_the_downloaded_notebook(page):
    """A collapsed note is a ``:::{admonition}`` block, which the download menu's notebook shows as a collapsed
    ``<details>`` (book/_ext/notebook_download.py); a backtick fence would reach plain Jupyter as raw MyST."""
    notebook_download = _download_extension()
    resolver = object.__new__(notebook_download.Resolver)
    text = page.read_text()
    fences = [match[1] for match in DROPDOWN.finditer(text)]
    assert all(fence == ":::" for fence in fences), f"{page.name}: a collapsed note fenced with {set(fences)}"
    converted = notebook_download.DIRECTIVE.sub(resolver._directive, text)
    assert not DROPDOWN.search(converted)
    for title in re.findall(r"^:::\{admonition\} ([^\n]+)\n:class: dropdown", text, re.M):
        assert f"<details><summary>{title}</summary>" in converted, f"{page.name}: {title!r} is not collapsed"


def test_a_glued_value_the_download_cannot_format_names_its_page_and_key():
    """The downloaded notebook writes every ``{glue:text}`` value in; a NumPy scalar's repr (``np.float64(…)``)
    is no number to format, and the error must say where it is and what to glue instead."""
    notebook_download = _download_extension()
    resolver = object.__new__(notebook_download.Resolver)
    resolver.docname = "book/04-flattest-generalise"
    resolver.glue = {"slope": {"data": {"text/plain": "np.float64(0.34)"}}, "fine": {"data": {"text/plain": "0.34"}}}
    assert notebook_download.ROLE.sub(resolver.role, "{glue:text}`fine:.1f`") == "0.3"
    with pytest.raises(ValueError, match=r"04-flattest-generalise: the glued value 'slope' .* plain Python value"):
        notebook_download.ROLE.sub(resolver.role, "{glue:text}`slope:.2f`")


#: "at most {glue:text}`name:.2f`" (or "within", "up to", "never less than", …, across a line break): a bound whose
#: number the markdown rounds to nearest, possibly to the wrong side
BOUND_ROUNDED_TO_NEAREST = re.compile(
    r"\b(?:at\s+(?:most|least)|within(?:\s+a\s+factor(?:\s+of)?)?|up\s+to|never\s+(?:less|more)\s+than"
    r"|no\s+(?:less|more)\s+than)\s+\{glue:text\}`[^`:]+:[^`]+`"
)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT / "book")))
def test_a_bound_in_the_prose_is_printed_on_its_own_side(page):
    """A bound "at most x" must print a number ≥ x and "at least x" one ≤ x: it is glued as the text that
    flatbook.prose.at_most / at_least make, never formatted to nearest by the glue role."""
    found = BOUND_ROUNDED_TO_NEAREST.findall(page.read_text())
    assert not found, f"{page.name}: glue these with flatbook.prose.at_most / at_least instead: {found}"


def test_the_bound_check_finds_a_bound_rounded_to_nearest():
    assert BOUND_ROUNDED_TO_NEAREST.search("is at most {glue:text}`ch4_path_max:.2f` times")
    assert BOUND_ROUNDED_TO_NEAREST.search("by at least\n{glue:text}`ch1_blow_up:.0f`")
    assert BOUND_ROUNDED_TO_NEAREST.search("at\nleast {glue:text}`ch4_clean_excess_min:.1e` times")
    assert BOUND_ROUNDED_TO_NEAREST.search("within a factor\n{glue:text}`ch4_ex_factor:.3f` of")
    assert BOUND_ROUNDED_TO_NEAREST.search("never less than {glue:text}`ch3_process_slack_min:.2g` times")
    assert not BOUND_ROUNDED_TO_NEAREST.search("is at most {glue:text}`ch4_path_max` times")
