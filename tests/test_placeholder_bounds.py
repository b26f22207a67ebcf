"""`$[...]` time arithmetic (engine/time_placeholders.py) does bounded work whatever the text: bounded
length, nesting, literal digits and values (checked before each operation), errors that quote little."""

from __future__ import annotations

import datetime as dt
import re
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.params import parse_set_values, substitute
from engine.time_placeholders import (
    MAX_LENGTH,
    MAX_NESTING,
    MAX_QUOTE,
    MAX_VALUE,
    PlaceholderError,
    evaluate,
    int_expr,
    render,
)

WHEN = dt.datetime(2024, 1, 31, 12, 0, 0)
#: bytes Python may allocate while evaluating one placeholder within the limits
MEMORY_BOUND = 1 << 18


def _bounded(expr: str) -> None:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        try:
            evaluate(expr, WHEN)
        except PlaceholderError as exc:
            assert len(str(exc)) <= MAX_QUOTE + 200, "the error quotes the whole expression"
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= MEMORY_BOUND, f"{peak} bytes for {expr[:100]!r}"


_ARITH = st.text(alphabet="0123456789+-*/() ", min_size=1, max_size=700)
_GROWING = st.lists(st.sampled_from(["99999999", "999999999999", "(1)", "-7", "0"]), min_size=2, max_size=60).map(
    "*".join
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["yyyyMMdd+", "yyyyMMdd-", "add_months(yyyyMMdd,", "HHmmss-"]), _ARITH)
def test_random_offsets_evaluate_or_are_refused_within_bounded_memory(head: str, arithmetic: str) -> None:
    _bounded(head + arithmetic + (")" if head.endswith(",") else ""))


@settings(max_examples=200, deadline=None)
@given(_GROWING)
def test_growing_products_are_refused_before_they_grow(product: str) -> None:
    try:
        value = int_expr(product)
    except Exception as exc:  # the type is the assertion
        assert type(exc).__name__ == "_Bad" and str(exc)
    else:
        assert abs(value) <= MAX_VALUE
    _bounded(f"yyyyMMdd+{product}")


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ("yyyyMMdd+" + "9" * 3000 + "*0", f"longer than {MAX_LENGTH}"),
        ("yyyyMMdd+" + "9" * 20 + "*0", "digits"),
        ("yyyyMMdd+" + "99999999*" * 20 + "0", "beyond"),
        ("yyyyMMdd+1*" + "(" * (MAX_NESTING + 1) + "1" + ")" * (MAX_NESTING + 1), "nested parentheses"),
        ("yyyyMMdd+1*" + "(" * 600 + "1" + ")" * 600, f"longer than {MAX_LENGTH}"),
    ],
)
def test_each_bound_is_named(expr: str, reason: str) -> None:
    with pytest.raises(PlaceholderError, match=reason) as info:
        evaluate(expr, WHEN)
    assert len(str(info.value)) <= MAX_QUOTE + 200


def test_within_the_bounds_offsets_still_evaluate() -> None:
    deep = MAX_NESTING - 1  # the offset is evaluated as 60*24*(offset): one level more
    assert render("$[yyyyMMdd+1*" + "(" * deep + "1" + ")" * deep + "]", WHEN) == "20240201"
    assert render("$[yyyyMMdd-7*2]", WHEN) == "20240117"
    assert render("$[HHmmss-1/24]", WHEN) == "110000"


# -- ${name} and ${setValue(...)}: one pass over the text -------------------------------------------

_OLD_SET_VALUE = re.compile(r"[$#]\{setValue\(\s*([^=()\s]+)\s*=(.*?)\)\}")


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["${setValue(", "#{setValue(", "a", " = ", "=", ")}", ")", "}", "(", " x", "$"])))
def test_set_values_are_found_as_the_regex_of_dolphinscheduler_finds_them(parts: list[str]) -> None:
    line = "".join(parts)
    assert parse_set_values(line) == [(k.strip(), v.strip()) for k, v in _OLD_SET_VALUE.findall(line)]


@pytest.mark.timeout(60)  # quadratic scans took 20+ minutes on these
def test_hostile_lines_and_values_are_read_in_one_pass() -> None:
    line = "${setValue(a=" * 50_000 + ")}"
    assert parse_set_values(line) == [("a", "${setValue(a=" * 49_999)]
    assert parse_set_values("${setValue(a=" * 50_000) == []
    value = "${" * 131_072 + "${x}"
    assert substitute(value, {"x": "1"}, WHEN) == "${" * 131_072 + "1"
