from contacts.importer import Contact, import_contacts


def test_quoted_name_with_comma():
    result = import_contacts(['name,email\n', '"Smith, Jane",jane@example.com\n'])
    assert result.errors == []
    assert result.contacts == [Contact("Smith, Jane", "jane@example.com")]


def test_plain_rows():
    result = import_contacts(["email,name,phone", "ADA@example.com,Ada,555-0100"])
    assert result.contacts == [Contact("Ada", "ada@example.com", "555-0100")]
