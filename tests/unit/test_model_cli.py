"""`loopwright model fetch|serve`: usage errors and environment problems exit as the README
says, with a message that says what to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopwright.cli.base import EXIT_ENVIRONMENT, EXIT_USAGE
from loopwright.cli.main import main


def test_serve_a_missing_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["model", "serve", str(tmp_path / "absent.gguf")])
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "is neither a .gguf file nor a model name" in err
    assert "qwen2.5-coder-0.5b" in err


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [(["--port", "0"], "--port 0"), (["--threads", "0"], "--threads 0")],
    ids=["port", "threads"],
)
def test_serve_bad_flags_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], fragment: str
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    assert main(["model", "serve", str(model), *flags]) == EXIT_USAGE
    assert fragment in capsys.readouterr().err


def test_fetch_an_unknown_name_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "fetch", "llama-70b"]) == EXIT_USAGE
    assert "qwen2.5-coder-1.5b" in capsys.readouterr().err


def test_serve_a_file_that_is_not_a_model_is_an_environment_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "broken.gguf"
    model.write_bytes(b"not a model")
    code = main(["model", "serve", str(model), "--port", "18999"])
    assert code == EXIT_ENVIRONMENT
    assert "the model server exited" in capsys.readouterr().err
