"""What the Python scan looks for: the modules, names and attributes that reach into the test
run, each with the reason a finding gives."""

from __future__ import annotations

_TEST_FRAMEWORK = "the test framework"
_IDENTITY = "the process's command line, which tells the test run from a real one"
_ENVIRONMENT = (
    "the process's environment read whole or by a computed name, which tells the test run "
    "from a real one"
)
_STACK = "the call stack, whose callers tell the test run from a real one"
_STREAMS = (
    "the standard streams inspected rather than written, which the test run replaces with "
    "its own capture"
)
DANGER: dict[str, str] = {
    "pytest": _TEST_FRAMEWORK,
    "_pytest": _TEST_FRAMEWORK,
    "pluggy": _TEST_FRAMEWORK,
    "unittest": _TEST_FRAMEWORK,
    "doctest": _TEST_FRAMEWORK,
    "nose": _TEST_FRAMEWORK,
    "nose2": _TEST_FRAMEWORK,
    "atexit": "an exit handler, which runs after the tests and can rewrite their outcome",
    "os._exit": "a forced exit, which ends the run before its outcome is written",
    "os.abort": "a forced exit",
    "os.kill": "a signal sent to a process",
    "os.killpg": "a signal sent to a process group",
    "os.fork": "a forked process, which can outlive the run and rewrite its outcome",
    "os.forkpty": "a forked process",
    "signal.signal": "a signal handler",
    "signal.raise_signal": "a signal",
    "signal.pthread_kill": "a signal",
    "signal.alarm": "a timer signal",
    "signal.setitimer": "a timer signal",
    "sys.modules": "the module table, which lets code replace any module",
    "sys.meta_path": "the import machinery",
    "sys.path_hooks": "the import machinery",
    "sys.path_importer_cache": "the import machinery",
    "sys.path.insert": "the import path",
    "sys.path.append": "the import path",
    "sys.path.extend": "the import path",
    "sys.path.remove": "the import path",
    "sys.path.clear": "the import path",
    "sys._getframe": "frame introspection, which reaches the test runner's own variables",
    "sys._current_frames": "frame introspection",
    "sys.settrace": "a trace hook, which can rewrite any running code",
    "sys.setprofile": "a profile hook",
    "sys.monitoring": "a monitoring hook",
    "sys.excepthook": "the exception hook",
    "sys.addaudithook": "an audit hook",
    "threading.settrace": "a trace hook",
    "threading.setprofile": "a profile hook",
    "builtins": "the builtins every module shares",
    "__builtin__": "the builtins every module shares",
    "__builtins__": "the builtins every module shares",
    "ctypes": "ctypes, which can rewrite memory",
    "_ctypes": "ctypes, which can rewrite memory",
    "cffi": "a foreign-function interface, which can rewrite memory",
    "gc.get_objects": "garbage-collector introspection, which reaches every live object",
    "gc.get_referrers": "garbage-collector introspection",
    "gc.get_referents": "garbage-collector introspection",
    "inspect.currentframe": "frame introspection",
    "inspect.stack": "frame introspection",
    "inspect.trace": "frame introspection",
    "inspect.getouterframes": "frame introspection",
    "inspect.getinnerframes": "frame introspection",
    "runpy": "code loaded by path at run time",
    "imp": "code loaded by path at run time",
    "zipimport": "code loaded by path at run time",
    "importlib.util": "code loaded by path at run time",
    "importlib.machinery": "code loaded by path at run time",
    "importlib.reload": "module reloading",
    "importlib._bootstrap": "the import machinery",
    "eval": "code built at run time",
    "exec": "code built at run time",
    "compile": "code built at run time",
    "globals": "a module's namespace by string, which can register hooks under computed names",
    "vars": "a namespace by string",
    "__main__": "the entry module, which tells the test run from a real one",
    "sys.argv": _IDENTITY,
    "sys.orig_argv": _IDENTITY,
    "os.environ": _ENVIRONMENT,
    "os.environb": _ENVIRONMENT,
    "os.getenv": _ENVIRONMENT,
    "os.getenvb": _ENVIRONMENT,
    "traceback.extract_stack": _STACK,
    "traceback.format_stack": _STACK,
    "traceback.print_stack": _STACK,
    "traceback.walk_stack": _STACK,
    "traceback.StackSummary": _STACK,
    "logging.currentframe": _STACK,
    "warnings.catch_warnings": "recorded warnings, whose locations name the calling test",
    "warnings.filters": "the warning filters, which the test run sets for each test",
    "faulthandler": "the fault handler, which the test run turns on",
    "sys.stdout": _STREAMS,
    "sys.stderr": _STREAMS,
    "sys.stdin": _STREAMS,
    "sys.__stdout__": _STREAMS,
    "sys.__stderr__": _STREAMS,
    "sys.__stdin__": _STREAMS,
}
_PY_EXEC_PREFIX = "os.exec"
_PY_SPAWN = ("os.posix_spawn", "os.posix_spawnp")
MODULE_VALUES = {"os", "sys", "signal", "gc", "inspect", "importlib", "threading"}
INTROSPECTION_ATTRS = {
    "__globals__",
    "__subclasses__",
    "__builtins__",
    "__code__",
    "__closure__",
    "__getattribute__",
    "f_globals",
    "f_locals",
    "f_back",
    "f_builtins",
    "f_code",
    "tb_frame",
    "gi_frame",
    "cr_frame",
    "ag_frame",
}
ATTR_BUILTINS = {"getattr", "setattr", "delattr"}
PASSABLE = {"getattr", "setattr", "delattr", "__import__", "eval", "exec", "compile"}
IMPORTERS = {"__import__", "importlib.import_module", "importlib.__import__"}
EXITS = {"sys.exit", "exit", "quit", "os._exit"}


def danger(qual: str) -> str | None:
    """Why the dotted name `qual` (or the module or object it lies in) reaches into the test
    run, or None."""
    if qual.startswith(_PY_EXEC_PREFIX) or qual in _PY_SPAWN:
        return "a process replaced by another program"
    parts = qual.split(".")
    for end in range(len(parts), 0, -1):
        reason = DANGER.get(".".join(parts[:end]))
        if reason is not None:
            return reason
    return None
