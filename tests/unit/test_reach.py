"""Product-code changes that reach into the test run (SECURITY 38), Python and JavaScript."""

from __future__ import annotations

import time

import pytest

from loopwright.verify.reach import reach_findings
from loopwright.verify.reach.python import python_reaches

PY_REACHES = [
    ("import pytest\n", "imports:pytest"),
    ("from _pytest import runner\n", "imports:_pytest"),
    ("import unittest.mock as m\nm.patch('x').start()\n", "imports:unittest.mock"),
    ("import atexit\natexit.register(print)\n", "imports:atexit"),
    ("import atexit as a\na.register(print)\n", "uses:atexit.register"),
    ("from atexit import register as r\nr(print)\n", "imports:atexit"),
    ("import os\nos._exit(0)\n", "uses:os._exit"),
    ("from os import _exit\n\ndef f():\n    _exit(0)\n", "imports:os._exit"),
    ("from os import _exit as q\n\ndef f():\n    q(0)\n", "uses:os._exit"),
    ("from os import *\n\ndef f():\n    _exit(0)\n", "uses:os._exit"),
    ("import os\n\ndef f():\n    getattr(os, '_e' + 'xit')(0)\n", "uses:os._exit"),
    ("import os\n\ndef f():\n    getattr(os, 'tixe_'[::-1])(0)\n", "uses:os._exit"),
    ("import os\n\ndef f():\n    getattr(os, chr(95) + 'exit')(0)\n", "uses:os._exit"),
    ("import os\n\ndef f():\n    getattr(os, ''.join(['_', 'exit']))(0)\n", "uses:os._exit"),
    ("import os\n\ndef f(n):\n    getattr(os, n)(0)\n", "dynamic-attribute:os"),
    ("import os\ne = os._exit\n\ndef f():\n    e(0)\n", "uses:os._exit"),
    ("m = __import__('ate' + 'xit')\n", "imports:atexit"),
    ("def f(n):\n    return __import__(n)\n", "dynamic-import:__import__"),
    (
        "import importlib\n\ndef f(name):\n    importlib.import_module(name)\n",
        "dynamic-import:importlib.import_module",
    ),
    ("from importlib import import_module as im\nim('_pytest.runner')\n", "imports:_pytest.runner"),
    ("import sys\nsys.exit(0)\n", "module-exit:sys.exit"),
    ("raise SystemExit(0)\n", "module-exit:SystemExit"),
    ("exit(0)\n", "module-exit:exit"),
    ("import sys\nsys.modules['shop'] = None\n", "uses:sys.modules"),
    ("import sys as s\nm = s.modules\n", "uses:sys.modules"),
    ("import sys\ngetattr(sys, 'modu' + 'les')['x'] = 1\n", "uses:sys.modules"),
    ("import sys\nsys.meta_path.insert(0, object())\n", "uses:sys.meta_path.insert"),
    ("import sys\nf = sys._getframe(1)\n", "uses:sys._getframe"),
    ("import inspect\nf = inspect.currentframe()\n", "uses:inspect.currentframe"),
    ("def f(frame):\n    return frame.f_back.f_globals\n", "introspects:f_globals"),
    ("def f(fn):\n    return fn.__globals__\n", "introspects:__globals__"),
    ("x = ().__class__.__base__.__subclasses__()\n", "introspects:__subclasses__"),
    ("import gc\nobjs = gc.get_objects()\n", "uses:gc.get_objects"),
    ("import ctypes\n", "imports:ctypes"),
    ("import builtins\nbuiltins.len = lambda x: 0\n", "patches:builtins.len"),
    ("import builtins as b\nsetattr(b, 'int', str)\n", "patches:builtins.int"),
    ("__builtins__['len'] = None\n", "uses:__builtins__"),
    (
        "import shop.totals as t\nt.line_total = lambda line: 900\n",
        "patches:shop.totals.line_total",
    ),
    (
        "from shop import totals\nsetattr(totals, 'line_total', None)\n",
        "patches:shop.totals.line_total",
    ),
    ("import json\n\ndef f():\n    json.dumps = repr\n", "patches:json.dumps"),
    ("globals()['pytest_runtest_' + 'makereport'] = print\n", "text:pytest_runtest_makereport"),
    ("globals()['x'] = 1\n", "uses:globals"),
    ("def pytest_runtest_makereport(item, call):\n    pass\n", "defines:pytest_runtest_makereport"),
    ("pytest_plugins = ['shop.forge']\n", "defines:pytest_plugins"),
    ("PATH = '.loop' + 'wright/report'\n", "text:.loopwright/report"),
    ("open(f'.loopwright/{1}', 'w')\n", "text:.loopwright/"),
    ("import signal\nsignal.signal(15, print)\n", "uses:signal.signal"),
    ("import os\nos.execv('/bin/true', ['true'])\n", "uses:os.execv"),
    ("import os\n\ndef f(m):\n    return m\nf(os)\n", "module-value:os"),
    ("g = getattr\n", "passes:getattr"),
    ("eval('1')\n", "uses:eval"),
    ("import importlib.util\n", "imports:importlib.util"),
    ("import sys\nsys.settrace(print)\n", "uses:sys.settrace"),
    ("import sys\nsys.path.insert(0, '/tmp/fake')\n", "uses:sys.path.insert"),
    ("class Any(int):\n    def __eq__(self, other):\n        return True\n", "always:__eq__"),
    ("class Any:\n    __eq__ = lambda self, other: True\n", "always:__eq__"),
    ("import os\n\ndef f():\n    return any('T' in k for k in os.environ)\n", "uses:os.environ"),
    ("from os import getenv\n\ndef f(n):\n    return getenv(n)\n", "uses:os.getenv"),
    ("import os\n\ndef f(n):\n    return os.environ.get(n)\n", "uses:os.environ.get"),
    ("import sys\n\ndef f():\n    return sys.argv[0]\n", "uses:sys.argv"),
    ("import sys\nA = ' '.join(sys.orig_argv)\n", "uses:sys.orig_argv"),
    ("P = '/proc/self/cmdline'\n", "text:/proc/self/cmdline"),
    ("import os\nP = os.path.join('/', 'proc', 'self')\n", "text:/proc/self"),
    ("from pathlib import Path\nP = Path('/') / 'proc'\n", "text:/proc"),
    ("P = bytes([47, 112, 114, 111, 99]).decode()\n", "text:/proc"),
    ("P = bytes.fromhex('2f70726f63').decode()\n", "text:/proc"),
    ("P = ''.join(map(chr, [47, 112, 114, 111, 99]))\n", "text:/proc"),
    ("P = ''.join(reversed('TSET_TNERRUC_TSETYP'))\n", "text:PYTEST_CURRENT_TEST"),
    ("import base64\nP = base64.b64decode('L3Byb2M=')\n", "text:/proc"),
    ("import codecs\nP = codecs.decode('clgrfg', 'rot13')\n", "text:pytest"),
    ("import sys\n\ndef f():\n    return len(sys.argv[1:])\n", "uses:sys.argv"),
    ("import traceback\nS = traceback.extract_stack()\n", "uses:traceback.extract_stack"),
    ("import logging\nF = logging.currentframe()\n", "uses:logging.currentframe"),
    ("import __main__\n", "imports:__main__"),
    ("import sys\nT = type(sys.stdout).__module__\n", "uses:sys.stdout"),
    ("import sys\nT = sys.stdout is sys.__stdout__\n", "uses:sys.__stdout__"),
    ("import faulthandler\nT = faulthandler.is_enabled()\n", "imports:faulthandler"),
    ("import warnings\nT = len(warnings.filters)\n", "uses:warnings.filters"),
    (
        "class V(int):\n    def __eq__(self, other):\n        return other is not None\n",
        "compares:__eq__",
    ),
    ("class V:\n    def __eq__(self, other):\n        return other == other\n", "compares:__eq__"),
    ("class V:\n    __eq__ = lambda self, other: other is not None\n", "compares:__eq__"),
]


@pytest.mark.parametrize(("code", "key"), PY_REACHES, ids=[k for _, k in PY_REACHES])
def test_python_reach_is_found(code: str, key: str) -> None:
    keys = {r.key for r in reach_findings("shop/mod.py", None, code)}
    assert key in keys, keys


PY_CLEAN = [
    "def line_total(line):\n    return int(line.gross * (1 - line.discount_percent / 100) + 0.5)\n",
    '"""Totals, tested with pytest and unittest."""\n\ndef f():\n    """Never calls os._exit."""\n',
    "import os\n\ndef f():\n    return os.path.join('a', 'b'), os.environ.get('X')\n",
    "import sys\n\nif __name__ == '__main__':\n    sys.exit(main())\n",
    "import sys\n\ndef main():\n    sys.exit(1)\n",
    "def f(self, name):\n    return getattr(self, name)\n",
    "class A:\n    def __init__(self):\n        self.__dict__.update({})\n",
    "import json\n\ndef f(x):\n    return json.dumps(x, sort_keys=True)\n",
    "# import atexit; os._exit(0)\nx = 1\n",
    "from .totals import Line\n",
    "class P:\n    def __eq__(self, other):\n        return self.x == other.x\n",
    "import os\nX = os.environ['HOME'], os.getenv('X'), 'Y' in os.environ\n",
    "import sys\n\nif __name__ == '__main__':\n    main(sys.argv[1:])\n",
    "import sys\n\ndef f(x):\n    sys.stdout.write(x)\n    sys.stderr.flush()\n"
    "    print(x, file=sys.stderr)\n",
]


@pytest.mark.parametrize("code", PY_CLEAN)
def test_python_without_reach_is_clean(code: str) -> None:
    assert reach_findings("shop/mod.py", None, code) == []


def test_only_constructs_the_patch_adds_count() -> None:
    old = "import atexit\n\natexit.register(print)\n"
    assert reach_findings("shop/mod.py", old, old + "\nX = 1\n") == []
    [found] = reach_findings("shop/mod.py", old, old + "atexit.register(repr)\n")
    assert (found.key, found.line) == ("uses:atexit.register", 4)
    assert "exit handler" in found.detail


def test_unparsable_python_is_a_finding() -> None:
    [found] = reach_findings("shop/mod.py", "x = 1\n", "def (:\n")
    assert found.key == "unparsable"
    assert "does not parse as Python" in found.detail


DEEP_SUBSCRIPTS = "TOTAL = GRID" + "[0]" * 900 + "\n"  # Python imports it; the scan recursed


def test_python_nested_too_deeply_to_scan_is_a_finding_not_a_crash() -> None:
    """Before, `RecursionError` left the verification; the file is valid Python."""
    compile(DEEP_SUBSCRIPTS, "shop/mod.py", "exec")
    [found] = reach_findings("shop/mod.py", "x = 1\n", DEEP_SUBSCRIPTS)
    assert (found.key, found.line) == ("uncheckable", 1)
    assert found.detail == (
        "shop/mod.py nests its code too deeply to be checked for code that reaches into the "
        "test run (calls, brackets or blocks inside one another hundreds deep); split it"
    )


def test_a_file_the_scan_cannot_check_is_a_finding_even_when_its_base_was_too() -> None:
    """What the patch adds to such a file is not checked either, so it is never let through
    as already present in the base."""
    added = DEEP_SUBSCRIPTS + "import atexit\natexit.register(repr)\n"
    [found] = reach_findings("shop/mod.py", DEEP_SUBSCRIPTS, added)
    assert found.key == "uncheckable"


def _dispatch(branches: int, last: str) -> str:
    lines = ["import sys", "", "", "def run(op):"]
    for n in range(branches):
        lines += [f"    {'if' if n == 0 else 'elif'} op == {n}:", f"        return {n}"]
    return "\n".join([*lines, "    else:", f"        return {last}", ""])


def test_generated_code_with_long_chains_and_dispatches_is_checked() -> None:
    """A sum of 1,500 terms (generated formulas) and an `if`/`elif` of 1,000 branches are
    walked in a loop: they were reported uncheckable (a frame per operand or branch), so
    a fix touching such a file could not be verified. What they hide is still found."""
    total = "TOTAL = " + " + ".join(f"c{n}" for n in range(1_500)) + "\n"
    assert reach_findings("shop/formula.py", "TOTAL = 0\n", total) == []
    hidden = " + ".join(['""'] * 1_500 + ['"mod"', '"ules"'])
    built = f"import sys\nloaded = getattr(sys, {hidden})\n"
    assert {f.key for f in reach_findings("shop/formula.py", "import sys\n", built)} == {
        "uses:sys.modules",
        "module-value:sys",
    }
    assert reach_findings("shop/ops.py", _dispatch(1, "None"), _dispatch(1_000, "None")) == []
    [found] = reach_findings("shop/ops.py", _dispatch(1, "None"), _dispatch(1_000, "sys.modules"))
    assert (found.key, found.line) == ("uses:sys.modules", 2_006)


def test_a_chain_is_read_in_the_order_a_recursive_walk_reads_it() -> None:
    """Findings keep the order they had: the first operation down the chain that folds is
    read as text, then each right operand above it from the bottom up."""
    text = 'import os, sys\nv = "sys.mod" + "ules" + os.environ + sys.__dict__\n'
    assert [f.key for f in python_reaches("shop/mod.py", text)] == [
        "text:sys.modules",
        "uses:os.environ",
        "namespace:sys",
    ]
    text = "import os, sys\nv = sys.__dict__ + os.environ + 'sys.mod' - __builtins__\n"
    assert [f.key for f in python_reaches("shop/mod.py", text)] == [
        "namespace:sys",
        "uses:os.environ",
        "uses:__builtins__",
    ]


def test_what_a_long_chain_or_dispatch_hides_in_its_middle_is_found() -> None:
    names = [f"c{n}" for n in range(1_500)]
    names[700] = "sys.modules"
    text = "import sys\nTOTAL = " + " + ".join(names) + "\n"
    assert [f.key for f in python_reaches("shop/formula.py", text)] == ["uses:sys.modules"]
    lines = ["import sys", "", "", "def run(op):"]
    for n in range(800):
        test = "sys.modules" if n == 400 else f"op == {n}"
        body = "return atexit" if n == 401 else f"return {n}"
        lines += [f"    {'if' if n == 0 else 'elif'} {test}:", f"        {body}"]
    keys = [f.key for f in python_reaches("shop/ops.py", "\n".join(lines) + "\n")]
    assert keys == ["uses:sys.modules", "uses:atexit"], keys


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        # The guard holds only its own body: a later branch runs on import.
        ('if __name__ == "__main__":\n    pass\nelif x:\n    sys.exit(0)\n',
         ["module-exit:sys.exit"]),
        ('if __name__ == "__main__":\n    pass\nelse:\n    sys.exit(0)\n',
         ["module-exit:sys.exit"]),
        ('if x:\n    pass\nelif __name__ == "__main__":\n    sys.exit(0)\n', []),
        # Only `==` is a guard: `!=` runs its body on every import.
        ('if __name__ != "__main__":\n    sys.exit(0)\n', ["module-exit:sys.exit"]),
        ('if x:\n    pass\nelif __name__ != "__main__":\n    sys.exit(0)\n',
         ["module-exit:sys.exit"]),
    ],
    ids=["elif-after-guard", "else-after-guard", "guard-in-elif", "not-main", "not-main-elif"],
)  # fmt: skip
def test_exits_are_judged_by_the_guard_of_their_own_branch(text: str, keys: list[str]) -> None:
    found = python_reaches("shop/mod.py", "import sys\n" + text)
    assert [f.key for f in found if f.key.startswith("module-exit")] == keys


def test_an_annotation_evaluated_on_import_is_checked() -> None:
    """Python evaluates a module-level annotation when it imports the module."""
    found = python_reaches("shop/mod.py", "import os\nx: os._exit(0)\n")
    assert "uses:os._exit" in [f.key for f in found]


def test_a_piece_that_names_the_test_run_is_found_when_the_whole_does_not() -> None:
    found = python_reaches("shop/mod.py", 'v = "%.3s" % "atexit"\n')
    assert [f.key for f in found] == ["text:atexit"]


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ('"%999999999s" % ""', "formats a field over 1,000,000 characters wide"),
        (" + ".join([f'"{"a" * 600_000}"'] * 2), "builds a string over 1,000,000 characters"),
        (f'"{"-" * 400_000}".join(["a", "b", "c", "d"])', "joins a string over 1,000,000"),
    ],
    ids=["wide-format", "long-sum", "long-glue"],
)
def test_a_constant_far_larger_than_its_file_is_not_built(expression: str, says: str) -> None:
    """`"%999999999s" % ""` is a gigabyte: the scan would take the machine's memory."""
    started = time.perf_counter()
    [found] = python_reaches("shop/mod.py", f"v = {expression}\n")
    assert found.key == "uncheckable"
    assert says in found.detail
    assert time.perf_counter() - started < 5


def test_python_the_parser_itself_cannot_hold_is_unparsable_not_a_crash() -> None:
    """20,000 unary minus signs overflow the parser's stack: a `MemoryError`, not a
    `SyntaxError`, which left the verification."""
    [found] = reach_findings("shop/mod.py", "x = 1\n", "x = " + "-" * 20_000 + "1\n")
    assert found.key == "unparsable"
    assert "does not parse as Python (MemoryError" in found.detail


def test_other_files_are_not_scanned() -> None:
    assert reach_findings("README.md", None, "import atexit\nprocess.exit(0)\n") == []
    assert reach_findings("shop/mod.py", "import atexit\n", None) == []


JS_REACHES = [
    ("process.exit(0);\n", "process:exit"),
    ("process.exitCode = 0;\n", "process:exitCode"),
    ("process.reallyExit(0);\n", "process:reallyExit"),
    ("process['ex' + 'it'](0);\n", "process:exit"),
    ('process["\\x65xit"](0);\n', "process:exit"),
    ("process.\\u0065xit(0);\n", "process:exit"),
    ("process.on('exit', () => {});\n", "process:on:exit"),
    ("const t = process.argv.join(' ');\n", "process:argv"),
    ("const t = Object.keys(process.env);\n", "process:env"),
    ("const t = process.execArgv;\n", "process:execArgv"),
    ("const t = new Error().stack;\n", "stack:stack"),
    ("try { null.x; } catch (e) { t = e.stack; }\n", "stack:stack"),
    ("const e = new Error('x');\nconst t = e.stack;\n", "stack:stack"),
    ("Error.prepareStackTrace = (e, s) => s;\n", "stack:prepareStackTrace"),
    ("const t = require.main.filename;\n", "uses:require.main"),
    ("process.once('beforeExit', f);\n", "process:once:beforeExit"),
    ("process.on(name, f);\n", "process:on:an event computed at run time"),
    ("const p = process; p.exit(0);\n", "value:process"),
    ("const { exit } = process;\n", "value:process"),
    ("globalThis.process.exit(0);\n", "process:exit"),
    ("globalThis['proc' + 'ess'].exit(0);\n", "process:exit"),
    ("globalThis[name].exit(0);\n", "dynamic:globalThis"),
    ("process[key](0);\n", "dynamic:process"),
    ("const x = 'fs'; require(x);\n", "dynamic-import:require"),
    ("require('no' + 'de:test');\n", "imports:node:test"),
    ("const assert = require('node:assert'); assert.equal = () => {};\n", "imports:assert"),
    ("const { mock } = require('node:test');\n", "imports:node:test"),
    ("import test from 'node:test';\n", "imports:node:test"),
    ("import * as a from 'assert/strict';\n", "imports:assert/strict"),
    ("const m = await import(name);\n", "dynamic-import:import"),
    ("const Module = require('module'); Module._load = f;\n", "imports:module"),
    ("require.cache[k] = fake;\n", "loader:require.cache"),
    ("String.prototype.includes = () => true;\n", "patches:String.prototype.includes"),
    ("Object.prototype['x'] = 1;\n", "patches:Object.prototype.x"),
    ("JSON.stringify = () => '{}';\n", "patches:JSON.stringify"),
    ("Object.defineProperty(Array.prototype, 'x', {});\n", "patches:Object.defineProperty:Array"),
    ("eval('1');\n", "uses:eval"),
    ("new Function('return 1')();\n", "uses:Function"),
    ("x.constructor.constructor('return this')();\n", "uses:constructor.constructor"),
    ("const f = '.loop' + 'wright/report';\n", "text:.loopwright/report"),
    ("const s = `a ${process.exit(0)} b`;\n", "process:exit"),
    # A regex after a block; a scanner that read it as division would see a string here.
    ("if (x) { y(); }\n/'/.test(z); process.exit(0); //'\n", "process:exit"),
]


@pytest.mark.parametrize(("code", "key"), JS_REACHES, ids=[k for _, k in JS_REACHES])
def test_javascript_reach_is_found(code: str, key: str) -> None:
    keys = {r.key for r in reach_findings("src/mod.js", None, code)}
    assert key in keys, keys


JS_CLEAN = [
    "function slugify(t) {\n  return t.replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '');\n}\n",
    "// process.exit(0)\n/* require(x) */\nconst a = 1;\n",
    "const debug = process.env.DEBUG;\nconst args = process.argv.slice(2);\n",
    "if (typeof process !== 'undefined') { a(); }\n",
    "if (require.main === module) { main(); }\nconst h = process.env['HOME'];\n",
    "class Parser {\n  push(x) {\n    this.stack.push(x);\n  }\n}\n",
    "const fs = require('fs');\nconst path = require('node:path');\n",
    "child.on('exit', done);\n",
    "const ratio = a / b / c;\n",
    "module.exports = { slugify };\n",
    "const s = `total: ${a + b}`;\n",
]


@pytest.mark.parametrize("code", JS_CLEAN)
def test_javascript_without_reach_is_clean(code: str) -> None:
    assert reach_findings("src/mod.js", None, code) == []


def test_javascript_counts_only_what_the_patch_adds() -> None:
    old = "function stop() { process.exit(1); }\n"
    assert reach_findings("src/cli.js", old, old + "const a = 1;\n") == []
    [found] = reach_findings("src/cli.js", old, old + "process.exit(0);\n")
    assert (found.key, found.line) == ("process:exit", 2)
