"""The docstrings' examples run: every ``>>>`` line of the modules below, as a doctest, in the fast tier.

Each function or class that ``import flatbook`` exports has an ``Examples`` section (seeded, float64, rounded
outputs), and so do the main functions of the core modules; the API reference (book/api/) shows them.  The
whole file takes a few seconds; each example well under one.
"""

import doctest
import importlib
import inspect

import pytest

import flatbook

#: the modules whose docstrings carry examples
MODULES = [
    "flatbook.activations",
    "flatbook.network",
    "flatbook.data",
    "flatbook.flatness",
    "flatbook.flattest",
    "flatbook.global_flattest",
    "flatbook.mirror",
    "flatbook.training",
    "flatbook.interpolators",
    "flatbook.tables",
    "flatbook.prose",
]


def _examples(module_name: str) -> list[doctest.DocTest]:
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [test for test in finder.find(module) if test.examples]


@pytest.mark.parametrize("module_name", MODULES)
def test_examples_run(module_name):
    tests = _examples(module_name)
    assert tests, f"{module_name} has no examples"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    failed, attempted = runner.summarize(verbose=False)
    assert failed == 0, f"{failed} of {attempted} examples in {module_name} failed (output above)"


@pytest.mark.parametrize("name", flatbook.__all__)
def test_every_export_has_an_example(name):
    doc = inspect.getdoc(getattr(flatbook, name)) or ""
    assert "\nExamples\n--------\n" in doc and ">>> " in doc, f"flatbook.{name} has no Examples section"


def test_examples_are_numpy_sections_that_the_api_reference_can_show():
    """Every example sits under an ``Examples`` heading, after the docstring's text; none uses ``|``, which the
    API reference escapes (book/_ext/plain_docstrings.py), or cites a book equation."""
    for module_name in MODULES:
        for test in _examples(module_name):
            doc = test.docstring or ""
            head, _, section = doc.partition("Examples\n")
            assert section.lstrip(" ").startswith("--------"), f"{test.name}: >>> lines outside an Examples section"
            assert ">>>" not in head, f"{test.name}: >>> lines before its Examples section"
            assert "|" not in section and "eq-" not in section, f"{test.name}: its example would not show as written"
