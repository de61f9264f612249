"""The promises of README.md and .ci/run: the two quick-start commands exist, CI runs them verbatim."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_command(name: str) -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"<!-- command:{name} -->\s*```bash\n(.+?)\n\s*```", text, re.S)
    assert match, f"README.md has no '<!-- command:{name} -->' code block"
    return match.group(1).strip()


def test_readme_has_the_two_quick_start_commands():
    assert readme_command("book") == "bash scripts/build_book.sh"
    assert readme_command("test") == "bash scripts/test.sh"


def test_ci_runs_the_readme_commands_not_copies():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/" not in ci, ".ci/run must read its commands from README.md, not repeat them"
    assert "for name in book test" in ci
    function = re.search(r"^readme_command\(\) \{.*?^\}", ci, re.S | re.M).group(0)
    for name in ("book", "test"):
        extracted = subprocess.run(
            ["bash", "-c", f"{function}\nreadme_command {name}"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        assert extracted == readme_command(name)


def test_every_chapter_is_in_the_toc():
    toc = (ROOT / "_toc.yml").read_text()
    for chapter in sorted((ROOT / "book").glob("*.md")):
        assert f"book/{chapter.stem}" in toc, f"{chapter.name} is not in _toc.yml"
