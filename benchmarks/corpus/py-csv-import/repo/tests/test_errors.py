import pytest

from contacts.importer import import_contacts


def test_missing_column():
    with pytest.raises(ValueError, match="email"):
        import_contacts(["name,phone", "Ada,1"])


def test_bad_and_duplicate_rows_are_reported():
    result = import_contacts(["name,email", "Ada,ada@x.org", "Bob,not-an-email", "Ada,ADA@x.org", "x"])
    assert len(result.contacts) == 1
    assert [e.split(":")[0] for e in result.errors] == ["row 3", "row 4", "row 5"]
