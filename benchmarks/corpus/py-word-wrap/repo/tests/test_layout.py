from textwrapper.wrap import center, indent, paragraphs


def test_center_and_indent():
    assert center("ab", 5) == " ab  "
    assert indent(["x", "", "y"], "> ") == ["> x", "", "> y"]


def test_paragraphs_are_separate():
    assert paragraphs("one two\n\nthree", 20) == "one two\n\nthree"
