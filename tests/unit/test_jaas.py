import pytest

from clients.jaas import PLAIN_LOGIN_MODULE, parse_jaas_config


def test_plain_entry_with_users():
    e = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required\n'
        '  username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a;b=c";')
    assert e.login_module == PLAIN_LOGIN_MODULE and e.control_flag == "required"
    assert e.options == {"username": "admin", "password": "admin-secret",
                         "user_admin": "admin-secret", "user_alice": "a;b=c"}


def test_escapes_and_bare_words():
    e = parse_jaas_config(r'm.M optional a="x\"y\\z" b=plain;')
    assert e.options == {"a": 'x"y\\z', "b": "plain"}


@pytest.mark.parametrize("text, words", [
    ("", "empty"),
    ('m.M required username="a"', "end with ';'"),
    ('m.M maybe username="a";', "control flag"),
    ('m.M required username;', "key=value"),
    ('m.M required a="b"; n.N required;', "exactly one"),
    ('m.M required a="b;', "unterminated"),
])
def test_errors_say_what_is_wrong(text, words):
    with pytest.raises(ValueError, match=words):
        parse_jaas_config(text)
