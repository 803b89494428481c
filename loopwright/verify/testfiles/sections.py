"""Which sections a change to a file that mixes test, install and product settings touches
(setup.cfg and tox.ini, pyproject.toml, package.json): the reasons it alters the tests, the
reasons it alters the install, and whether anything else changed."""

from __future__ import annotations

from loopwright.verify.testfiles.formats import (
    dig,
    ini_sections,
    json_object,
    package_scripts,
    strip_keys,
    toml_table,
)

_PACKAGE_TEST_KEYS = ("jest", "mocha", "ava", "vitest", "c8", "nyc", "tap")
_PACKAGE_TEST_SCRIPTS = ("test", "pretest", "posttest")
_PACKAGE_DEPENDENCY_KEYS = (
    "dependencies",
    "devDependencies",
    "optionalDependencies",
    "peerDependencies",
    "bundleDependencies",
    "bundledDependencies",
    "overrides",
    "resolutions",
    "workspaces",
    "packageManager",
)
_PACKAGE_INSTALL_SCRIPTS = (
    "preinstall",
    "install",
    "postinstall",
    "prepare",
    "preprepare",
    "postprepare",
    "prepublish",
)
_PYPROJECT_DEPENDENCY_KEYS = (
    ("build-system",),
    ("project", "dependencies"),
    ("project", "optional-dependencies"),
    ("project", "entry-points"),
    ("project", "scripts"),
    ("dependency-groups",),
    ("tool", "poetry", "dependencies"),
    ("tool", "poetry", "dev-dependencies"),
    ("tool", "poetry", "group"),
    ("tool", "poetry", "source"),
    ("tool", "pdm"),
    ("tool", "uv"),
    ("tool", "hatch", "envs"),
    ("tool", "setuptools"),
)


def ini_change(name: str, old: str | None, new: str | None) -> tuple[list[str], list[str], bool]:
    """What a change to setup.cfg or tox.ini (`name`) touches, section by section."""
    before, after = ini_sections(old or ""), ini_sections(new or "")
    changed = sorted(s for s in set(before) | set(after) if before.get(s) != after.get(s))
    test_config, dependency = [], []
    product = False
    for section in changed:
        if section in ("pytest", "tool:pytest") or section.startswith(("tox", "testenv")):
            test_config.append(f"the [{section}] section of {name} configures the tests")
        elif name == "setup.cfg" and (section.startswith("options") or section == "metadata"):
            dependency.append(f"the [{section}] section of setup.cfg is read by the install")
        else:
            product = True
    return test_config, dependency, product


def pyproject_change(old: str | None, new: str | None) -> tuple[list[str], list[str], bool]:
    """What a change to pyproject.toml touches, table by table."""
    before, after = toml_table(old), toml_table(new)
    if (old and not before) or (new and not after):
        # Unreadable TOML cannot be split into sections; assume the worst of both.
        why = (
            "pyproject.toml is not valid TOML (or nests too deeply to read), so its test and "
            "install sections cannot be told apart"
        )
        return [why], [why], False
    test_config, dependency = [], []
    if dig(before, ("tool", "pytest")) != dig(after, ("tool", "pytest")):
        test_config.append("the [tool.pytest] section of pyproject.toml configures pytest")
    seen: set[tuple[str, ...]] = set()
    for key in _PYPROJECT_DEPENDENCY_KEYS:
        if dig(before, key) != dig(after, key):
            seen.add(key)
            dependency.append(
                f"the [{'.'.join(key)}] section of pyproject.toml is read by the install"
            )
    covered = [("tool", "pytest"), *_PYPROJECT_DEPENDENCY_KEYS]
    product = strip_keys(before, covered) != strip_keys(after, covered)
    return test_config, dependency, product


def package_change(old: str | None, new: str | None) -> tuple[list[str], list[str], bool]:
    """What a change to package.json touches, key by key and script by script."""
    before, after = json_object(old), json_object(new)
    if before is None or after is None:
        why = (
            "package.json is not a valid JSON object (or nests too deeply to read), so its "
            "scripts cannot be told apart"
        )
        return [why], [why], False
    test_config, dependency = [], []
    old_scripts, new_scripts = package_scripts(before), package_scripts(after)
    for script in _PACKAGE_TEST_SCRIPTS:
        if old_scripts.get(script) != new_scripts.get(script):
            test_config.append(f"package.json's scripts.{script} decides how the tests run")
    for key in _PACKAGE_TEST_KEYS:
        if before.get(key) != after.get(key):
            test_config.append(f"package.json's `{key}` configures the test runner")
    for key in _PACKAGE_DEPENDENCY_KEYS:
        if before.get(key) != after.get(key):
            dependency.append(f"package.json's `{key}` is read by the install")
    for script in _PACKAGE_INSTALL_SCRIPTS:
        if old_scripts.get(script) != new_scripts.get(script):
            dependency.append(f"package.json's scripts.{script} runs during the install")
    covered_scripts = set(_PACKAGE_TEST_SCRIPTS) | set(_PACKAGE_INSTALL_SCRIPTS)
    rest = {k for k in set(before) | set(after)} - {"scripts", *_PACKAGE_TEST_KEYS}
    rest -= set(_PACKAGE_DEPENDENCY_KEYS)
    product = any(before.get(k) != after.get(k) for k in rest) or any(
        old_scripts.get(k) != new_scripts.get(k)
        for k in set(old_scripts) | set(new_scripts)
        if k not in covered_scripts
    )
    return test_config, dependency, product
