from zkcoord.entity_cache import merge_reads


def test_a_fresh_value_is_stored_and_reported():
    cache = {"a": {"k": "1"}}
    assert merge_reads(cache, ["a", "b"], [{"k": "2"}, {"k": "3"}]) == ["a", "b"]
    assert cache == {"a": {"k": "2"}, "b": {"k": "3"}}


def test_an_unchanged_value_is_not_reported():
    cache = {"a": frozenset({1})}
    assert merge_reads(cache, ["a"], [frozenset({1})]) == []
    assert cache == {"a": frozenset({1})}


def test_an_empty_read_removes_a_cached_key_and_ignores_an_unknown_one():
    cache = {"a": {"k": "1"}}
    assert merge_reads(cache, ["a", "b"], [{}, {}]) == ["a"]
    assert cache == {}
