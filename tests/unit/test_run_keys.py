"""Run keys placed ahead of the run: in a host tree a sandbox is created from."""

from __future__ import annotations

from pathlib import Path

from loopwright.verify.runner import key_file, place_key_in_tree


def test_a_key_placed_in_a_host_tree_never_goes_through_a_symlink(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    key = place_key_in_tree(plain)
    assert key is not None
    placed = plain / key_file(key)
    assert placed.read_bytes() == key.file_bytes()
    assert placed.stat().st_mode & 0o777 == 0o600

    outside = tmp_path / "outside"
    outside.mkdir()
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".loopwright").symlink_to(outside)
    assert place_key_in_tree(linked) is None
    assert list(outside.iterdir()) == []
    a_file = tmp_path / "a-file"
    a_file.mkdir()
    (a_file / ".loopwright").write_text("not a directory\n")
    assert place_key_in_tree(a_file) is None
