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


def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_licence_and_provenance_agree():
    """One licence (MIT, with its file), one repository and one version across pyproject, CITATION, _config.yml."""
    import yaml

    project = _pyproject()["project"]
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert project["license"] == "MIT" == citation["license"]
    assert project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    repository = project["urls"]["Repository"]
    assert citation["repository-code"] == repository == config["repository"]["url"]
    assert project["urls"]["Issues"] == f"{repository}/issues"
    assert project["urls"]["Homepage"] == citation["url"] == config["html"]["baseurl"]
    assert str(citation["version"]) == project["version"]


def test_the_changelog_has_the_current_version():
    version = _pyproject()["project"]["version"]
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[{re.escape(version)}\] - \d{{4}}-\d\d-\d\d$", changelog, re.M), version


def test_binder_installs_what_the_book_needs():
    """binder/requirements.txt pins every dependency of the package and of its book extra, and flatbook itself."""
    lines = [line.split("#")[0].strip() for line in (ROOT / "binder" / "requirements.txt").read_text().splitlines()]
    pinned = {re.split(r"[=<>!~\[]", line)[0].lower() for line in lines if line and not line.startswith("-")}
    project = _pyproject()["project"]
    needed = project["dependencies"] + project["optional-dependencies"]["book"]
    names = {re.split(r"[=<>!~\[ ]", requirement)[0].lower() for requirement in needed}
    assert names <= pinned, f"binder/requirements.txt lacks {sorted(names - pinned)}"
    assert "-e ." in lines and "jupytext" in {n for n in pinned}
    assert (ROOT / "binder" / "runtime.txt").read_text().strip() == "python-3.11"


def test_pyproject_is_the_one_source_of_the_version():
    """The installed package reports pyproject's version, and the intro's BibTeX cites it (CITATION.cff: above)."""
    import flatbook

    version = _pyproject()["project"]["version"]
    assert flatbook.__version__ == version, "the installed metadata is stale: pip install -e . again"
    intro = (ROOT / "book" / "intro.md").read_text()
    (bibtex,) = re.findall(r"```bibtex\n(.*?)```", intro, re.S)
    assert re.findall(r"\d+\.\d+\.\d+", bibtex) == [version]


def test_install_advice_names_the_checkout_not_an_index():
    """No index serves flatbook: pages and error messages say `pip install -e '.[cluster]'`, not `flatbook[...]`."""
    for path in [ROOT / "README.md", *(ROOT / "book").glob("*.md"), *(ROOT / "src" / "flatbook").rglob("*.py")]:
        assert not re.search(r"pip install ['\"]?flatbook\b", path.read_text()), path.relative_to(ROOT)
