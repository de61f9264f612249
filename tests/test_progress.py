"""Progress bars: tqdm.auto, shown in a Jupyter kernel, silenced or forced by FLATBOOK_PROGRESS."""

import sys
import types

import pytest
from tqdm.auto import tqdm as auto_tqdm

from flatbook.errors import FlatbookInputError
from flatbook.progress import progress_bar, progress_disabled


@pytest.fixture
def in_kernel(monkeypatch):
    """Pretend to run inside a Jupyter kernel (what IPython reports there)."""
    shell = types.SimpleNamespace(config={"IPKernelApp": {}})
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))


@pytest.mark.parametrize("value", ["off", "0", "OFF", " false "])
def test_off_silences_the_bar_even_in_a_kernel(monkeypatch, in_kernel, value):
    monkeypatch.setenv("FLATBOOK_PROGRESS", value)
    assert progress_disabled() is True
    assert progress_bar(3).disable


def test_a_kernel_shows_the_bar(monkeypatch, in_kernel):
    monkeypatch.delenv("FLATBOOK_PROGRESS", raising=False)
    assert progress_disabled() is False  # tqdm(disable=None) would turn itself off on a kernel's stream


def test_outside_a_kernel_tqdm_decides_by_the_terminal(monkeypatch):
    monkeypatch.delenv("FLATBOOK_PROGRESS", raising=False)
    monkeypatch.setitem(sys.modules, "IPython", None)
    assert progress_disabled() is None


def test_on_forces_the_bar(monkeypatch):
    monkeypatch.setenv("FLATBOOK_PROGRESS", "on")
    bar = progress_bar(2, desc="x")
    assert isinstance(bar, auto_tqdm) and not bar.disable
    bar.close()


def test_show_overrides_the_environment(monkeypatch):
    monkeypatch.setenv("FLATBOOK_PROGRESS", "on")
    assert progress_bar(2, show=False).disable


def test_a_bad_setting_is_an_error(monkeypatch):
    monkeypatch.setenv("FLATBOOK_PROGRESS", "sometimes")
    with pytest.raises(FlatbookInputError, match="FLATBOOK_PROGRESS"):
        progress_disabled()


def test_the_book_extra_brings_the_widget_bars():
    """In Jupyter tqdm.auto draws a widget only when ipywidgets is importable: the book extra installs it."""
    import importlib.util
    import re
    import tomllib

    from conftest import ROOT

    book = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["book"]
    assert "ipywidgets" in {re.split(r"[<>=!~ \[]", requirement)[0] for requirement in book}
    assert importlib.util.find_spec("ipywidgets"), "ipywidgets is missing: bash scripts/setup.sh installs the extra"
