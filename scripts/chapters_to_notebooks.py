"""Write every chapter of the book (the jupytext MyST files in _toc.yml) as a .ipynb notebook.

    python scripts/chapters_to_notebooks.py OUTDIR

The notebooks keep the chapters' folder layout under OUTDIR and have no outputs;
open one in Jupyter, or run ``pytest --nbval-lax OUTDIR`` to execute them all.
"""

import argparse
from pathlib import Path

import jupytext
import yaml

ROOT = Path(__file__).resolve().parent.parent


def toc_files(entry: dict) -> list[str]:
    """Every 'file' (and the 'root') of a Jupyter Book 1 table of contents, in reading order."""
    files = [entry[key] for key in ("root", "file") if key in entry]
    for key in ("parts", "chapters", "sections"):
        for child in entry.get(key, []):
            files += toc_files(child)
    return files


def is_notebook(path: Path) -> bool:
    """A MyST file is a notebook when its front matter has a jupytext header."""
    text = path.read_text()
    return text.startswith("---") and "jupytext:" in text.split("---", 2)[1]


def chapters() -> list[Path]:
    """The pages of _toc.yml that are notebooks."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    paths = [ROOT / (name if name.endswith(".md") else name + ".md") for name in toc_files(toc)]
    return [path for path in paths if is_notebook(path)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path)
    args = parser.parse_args()
    for path in chapters():
        target = args.outdir / path.relative_to(ROOT).with_suffix(".ipynb")
        target.parent.mkdir(parents=True, exist_ok=True)
        jupytext.write(jupytext.read(path), target)
        print(f"{path.relative_to(ROOT)} -> {target}")


if __name__ == "__main__":
    main()
