from contacts.importer import Contact, import_contacts


def test_quoted_fields_in_any_column():
    result = import_contacts([
        "name,email,phone",
        '"Doe, John",john@example.com,"+1 555, ext 2"',
        'Plain,plain@example.com,""',
    ])
    assert result.errors == []
    assert result.contacts == [
        Contact("Doe, John", "john@example.com", "+1 555, ext 2"),
        Contact("Plain", "plain@example.com", ""),
    ]


def test_quoted_header():
    result = import_contacts(['"name","email"', '"Lee, Ann","ann@example.com"'])
    assert result.contacts == [Contact("Lee, Ann", "ann@example.com")]


def test_too_few_fields_still_reported():
    result = import_contacts(["name,email", '"Only, one"'])
    assert result.contacts == [] and result.errors[0].startswith("row 2")
