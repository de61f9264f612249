"""Write every chapter of the book (the jupytext MyST files in _toc.yml) as a .ipynb notebook.

    python scripts/chapters_to_notebooks.py OUTDIR             # no outputs
    python scripts/chapters_to_notebooks.py OUTDIR --execute   # run each, keep the outputs

The notebooks keep the chapters' folder layout under OUTDIR.  Without
``--execute`` they have no outputs: open one in Jupyter, or run
``pytest --nbval-lax OUTDIR`` to execute them all.  With ``--execute`` each is
run top to bottom (from the repository root, as the book build does) and saved
with its outputs, for readers who want plain notebooks.
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
    parser.add_argument("--execute", action="store_true", help="run every notebook and keep its outputs")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell when executing (default 600)")
    args = parser.parse_args()
    for path in chapters():
        target = args.outdir / path.relative_to(ROOT).with_suffix(".ipynb")
        target.parent.mkdir(parents=True, exist_ok=True)
        notebook = jupytext.read(path)
        if args.execute:
            from nbclient import NotebookClient

            NotebookClient(
                notebook, timeout=args.timeout, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
            ).execute()
        jupytext.write(notebook, target)
        print(f"{path.relative_to(ROOT)} -> {target}{' (executed)' if args.execute else ''}")


if __name__ == "__main__":
    main()
