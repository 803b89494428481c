"""The fix's scope for pair mode: the files the failing run names and what they import,
followed through Python, JavaScript/TypeScript and Go on real source text."""

from __future__ import annotations

import pytest

from loopwright.agent.scope import MAX_SCOPE_FILES, fix_scope, js_imports, python_imports

PYTEST_OUTPUT = """\
FAILED tests/test_totals.py::test_discount - assert 90 == 99
tests/test_totals.py:12: in test_discount
invoice/totals.py:7: AssertionError
"""


def scope(tree: dict[str, str], failing: list[str], output: str = "") -> frozenset[str] | None:
    return fix_scope(failing, output, tree, tree.get)


def test_python_imports_are_followed_through_packages_and_relative_imports() -> None:
    tree = {
        "tests/test_totals.py": "from invoice.totals import total\nimport invoice.money as m\n",
        "invoice/__init__.py": "",
        "invoice/totals.py": "from .money import cents\nfrom . import rounding\n",
        "invoice/money.py": "from invoice.util import helpers\n",
        "invoice/rounding.py": "import decimal\n",
        "invoice/util/__init__.py": "",
        "invoice/util/helpers.py": "",
        "invoice/unrelated.py": "import invoice.totals\n",
        "docs/conf.py": "",
        "setup.py": "",
    }
    found = scope(tree, ["tests/test_totals.py::test_discount"])
    assert found == {
        "tests/test_totals.py",
        "invoice/__init__.py",
        "invoice/totals.py",
        "invoice/money.py",
        "invoice/rounding.py",
        "invoice/util/__init__.py",
        "invoice/util/helpers.py",
    }


def test_a_product_file_the_traceback_names_is_in_scope_with_the_failing_test() -> None:
    tree = {
        "tests/test_totals.py": "import pytest\n",
        "invoice/totals.py": "",
        "invoice/__init__.py": "",
        "other.py": "",
    }
    found = scope(tree, ["tests/test_totals.py::test_discount"], PYTEST_OUTPUT)
    assert found == {"tests/test_totals.py", "invoice/totals.py"}


def test_src_layout_and_a_test_directorys_own_helpers_are_found() -> None:
    tree = {
        "src/calc/__init__.py": "",
        "src/calc/ops.py": "",
        "tests/test_ops.py": "from calc.ops import add\nfrom helpers import make\n",
        "tests/helpers.py": "",
    }
    found = scope(tree, ["tests/test_ops.py::test_add"])
    assert found == {
        "tests/test_ops.py",
        "tests/helpers.py",
        "src/calc/__init__.py",
        "src/calc/ops.py",
    }


def test_traceback_frames_seed_the_scope_when_ids_name_no_file() -> None:
    tree = {
        "test/slug.test.js": "const { slugify } = require('../lib/slug')\n",
        "lib/slug.js": "import { trim } from './text.js'\nexport * from \"./re\"\n",
        "lib/text.ts": "",
        "lib/re/index.js": "const x = await import('./inner.mjs')\n",
        "lib/re/inner.mjs": "",
        "lib/other.js": "",
    }
    output = "  at slugify (/workspace/lib/slug.js:4:11)\n  at /workspace/test/slug.test.js:9:3\n"
    found = scope(tree, ["slugify lowercases"], output)
    assert found == {
        "test/slug.test.js",
        "lib/slug.js",
        "lib/text.ts",
        "lib/re/index.js",
        "lib/re/inner.mjs",
    }


def test_a_go_seed_brings_its_package_directory() -> None:
    tree = {"pkg/a.go": "", "pkg/a_test.go": "", "pkg/sub/b.go": "", "main.go": ""}
    output = "    a_test.go:5: wrong\n--- FAIL: TestA\n    pkg/a_test.go:5: wrong\n"
    assert scope(tree, [], output) == {"pkg/a.go", "pkg/a_test.go"}


def test_no_file_of_the_repository_named_means_no_scope() -> None:
    tree = {"invoice/totals.py": ""}
    assert scope(tree, ["tests/test_gone.py::test_x"], "Traceback: /usr/lib/x.py") is None
    assert scope(tree, [], "") is None


def test_unparsable_or_escaping_sources_are_in_scope_without_their_imports() -> None:
    tree = {
        "tests/test_x.py": "def broken(:\n",
        "lib/a.js": "require('../../outside')\nrequire('left-pad')\n",
    }
    assert scope(tree, ["tests/test_x.py::test_x"]) == {"tests/test_x.py"}
    assert scope(tree, [], "at f (/workspace/lib/a.js:1:1)") == {"lib/a.js"}


@pytest.mark.parametrize(
    ("path", "text", "modules"),
    [
        ("a.py", "import os, pkg.mod as m", ["os", "pkg.mod"]),
        ("pkg/a.py", "from .b import c", ["pkg.b", "pkg.b.c"]),
        ("pkg/sub/a.py", "from .. import b", ["pkg", "pkg.b"]),
        ("a.py", "from ... import b", []),
        ("a.py", "from x import *", ["x"]),
    ],
)
def test_python_import_names(path: str, text: str, modules: list[str]) -> None:
    assert python_imports(path, text) == modules


def test_js_specifiers_are_relative_ones_only_and_strings_must_match() -> None:
    text = "import a from './a'\nrequire(\"../b\")\nimport 'c'\nrequire('./d\")\n"
    assert js_imports(text) == ["./a", "../b"]


def test_the_walk_is_bounded() -> None:
    chain = {f"m{n}.py": f"import m{n + 1}\n" for n in range(MAX_SCOPE_FILES + 50)}
    found = scope(chain, ["m0.py::test"])
    assert found is not None and len(found) == MAX_SCOPE_FILES
