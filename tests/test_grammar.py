"""The one grammar of typed values (``ortlab.core.grammar``): what the CLI and the Lab's boxes
read, and what each says of a part it cannot read."""

from __future__ import annotations

import pytest

from ortlab.core.errors import FeedError, OptionError
from ortlab.core.grammar import int_list, parse_dims, version_pair, words


def test_lists_and_ranges_read_as_llama_bench_reads_them() -> None:
    assert int_list("128,512") == [128, 512]
    assert int_list("1-4") == [1, 2, 3, 4]
    assert int_list("1-8+2") == [1, 3, 5, 7]
    assert int_list("128-1024*2") == [128, 256, 512, 1024]
    assert int_list(" 0, 256 ") == [0, 256]
    for bad, said in [("4-1", "empty or endless"), ("0-8*2", "empty or endless"), ("x", "ranges")]:
        with pytest.raises(OptionError, match=said):
            int_list(bad)


def test_version_pairs_and_words() -> None:
    assert version_pair("1.31.1, 1.32.0") == ["1.31.1", "1.32.0"]
    for bad in ("1.31.1", "1.31.1,1.32.0,1.33.0", "1.31.1,latest"):
        with pytest.raises(OptionError, match="two onnxruntime versions"):
            version_pair(bad)
    assert words(" a, b,,c ") == ["a", "b", "c"] and words("") == []


def test_dims_one_value_or_many() -> None:
    assert parse_dims("batch=1, sequence=128") == {"batch": 1, "sequence": 128}
    assert parse_dims("batch=, past=0") == {"past": 0}  # a blank dim is not given
    assert parse_dims("batch=1,2,4; sequence=64", many=True) == {
        "batch": [1, 2, 4],
        "sequence": [64],
    }
    with pytest.raises(FeedError, match="name=integer"):
        parse_dims("batch=one")
