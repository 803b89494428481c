import pytest

from envfile import EnvSyntaxError, load, parse


def test_url_with_query_string():
    assert parse("DATABASE_URL=postgres://db/app?sslmode=require&x=1") == {
        "DATABASE_URL": "postgres://db/app?sslmode=require&x=1"
    }


def test_quoted_value_with_equals_and_export():
    assert parse("export EQ=\"a=b=c\"\n") == {"EQ": "a=b=c"}


def test_empty_value_is_allowed():
    assert parse("EMPTY=\n") == {"EMPTY": ""}


def test_key_still_validated():
    with pytest.raises(EnvSyntaxError):
        parse("1BAD=x=y\n")


def test_load_from_file(tmp_path):
    path = tmp_path / ".env"
    path.write_text("SECRET=s3cr3t=\nPORT=8080\n", encoding="utf-8")
    assert load(path) == {"SECRET": "s3cr3t=", "PORT": "8080"}
