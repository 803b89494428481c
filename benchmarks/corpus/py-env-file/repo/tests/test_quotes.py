from envfile import parse


def test_comments_and_blank_lines():
    assert parse("# config\n\nA=1 # inline\n") == {"A": "1"}


def test_quotes_and_export():
    text = "export NAME='Ada Lovelace'\nGREETING=\"hi\\nthere\"\n"
    assert parse(text) == {"NAME": "Ada Lovelace", "GREETING": "hi\nthere"}
