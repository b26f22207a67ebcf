"""SWITCH conditions (engine/workflows/expressions.py through engine/workflows/logic.py): what the
language accepts, what it refuses and why, and that no expression, random or hostile, makes an
evaluation do more than a bounded amount of work."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.tasks.base import ParamError
from engine.workflows import expressions, logic
from engine.workflows.expressions import LIMIT, MAX_INT_BITS, MAX_STRING, MAX_WORK, REFUSED, SYNTAX, VALUE

ACCEPTED = [
    # DolphinScheduler's own examples (JavaScript spellings) and today's Python ones
    ("${x} > 3", {"x": "4"}, True),
    ("${x} > 3", {"x": "3"}, False),
    ('"${v}" == "a"', {"v": "a"}, True),
    ("'${v}' == 'a'", {"v": "b"}, False),
    ("${a} == 1 && ${b} == 2", {"a": "1", "b": "2"}, True),
    ("${a} == 1 && ${b} == 2", {"a": "1", "b": "3"}, False),
    ("${a} == 1 || ${b} == 2", {"a": "0", "b": "2"}, True),
    ("!(${a} == 1)", {"a": "2"}, True),
    ("!${flag}", {"flag": "false"}, True),
    ("${a} === 1 && '${s}' !== 'x'", {"a": "1", "s": "y"}, True),
    ("${a} != 1", {"a": "1"}, False),
    ("${n} > 5 and ${n} < 7", {"n": "6"}, True),
    ("not ${flag}", {"flag": "False"}, True),
    ("${flag} == true", {"flag": "true"}, True),
    ("'${env}' in ('dev', 'test')", {"env": "test"}, True),
    ("'${env}' in ['dev', 'test']", {"env": "prod"}, False),
    ("'${env}' not in ('dev', 'test')", {"env": "prod"}, True),
    ("'err' in '${msg}'", {"msg": "no error here"}, True),
    ("${a} + ${b} == 3", {"a": "1", "b": "2"}, True),
    ("${a} * 2 - 1 >= 5 and ${a} / 2 == 1.5 and ${a} // 2 == 1 and ${a} % 2 == 1", {"a": "3"}, True),
    ("2 ** 10 == 1024 and 2 ** -1 == 0.5", {}, True),
    ("1 < ${n} <= 10", {"n": "10"}, True),
    ("'${a}' + '${b}' == 'xy'", {"a": "x", "b": "y"}, True),
    ("'-' * 3 == '---' and 'ab' * -(2 ** 512) == '' * 10**300", {}, True),
    ("${big} > 0", {"big": "9" * 300}, True),  # a 300-digit id is still a number (under 1024 bits)
    ("null == null && -${n} < 0", {"n": "1.5"}, True),
    ("'a && b' == 'a ' + '&& b'", {}, True),  # && inside a string is text, not an operator
    ("'!' + '||' == '!||'", {}, True),
]


@pytest.mark.parametrize(("expression", "values", "expected"), ACCEPTED)
def test_accepted_expressions(expression: str, values: dict[str, str], expected: bool) -> None:
    assert logic.evaluate(expression, values) is expected
    assert logic.expression_problem(expression) == ""  # saved without complaint


REFUSED_CASES = [
    # (expression, values, kind, words of the reason)
    ("1000000**1000000 > 0", {}, LIMIT, "'**' result over 1024 bits"),
    ("${n} > 0", {"n": "1000000**1000000"}, LIMIT, "'**' result over 1024 bits"),
    ("2 ** 1024", {}, LIMIT, "over 1024 bits"),
    ("(2 ** 1000) * (2 ** 1000)", {}, LIMIT, "'*' result over 1024 bits"),
    ("'a' * 10**9 == 'b'", {}, LIMIT, f"a string over {MAX_STRING} characters"),
    ("'x' * 4000 + '${s}' == ''", {"s": "y" * 100}, LIMIT, f"a string over {MAX_STRING} characters"),
    ("2.0 ** 10000 > 1", {}, LIMIT, "out of range"),
    ("(" * 40 + "1" + ")" * 40, {}, LIMIT, "brackets nested more than 32 deep"),
    ("-" * 40 + "1", {}, LIMIT, "nested more than 32 operations deep"),
    ("-" * 3000 + "1", {}, LIMIT, "nested too deeply to parse"),
    ("+".join(["1"] * 300) + " > 0", {}, LIMIT, "nested more than 32"),
    ("1 in (" + ", ".join(["1"] * 300) + ")", {}, LIMIT, "more than 256 operands"),
    ("9" * 400 + " > 0", {}, LIMIT, "a number literal over 1024 bits"),
    ("${n} > 0", {"n": "9" * 5000}, LIMIT, "over the limit of 4096"),
    ("'" + "a" * 5000 + "' == 'a'", {}, LIMIT, "over the limit of 4096"),
    ("'${s}' in '${s}${s}'", {"s": "ab" * 600}, LIMIT, "too expensive"),
    ("__import__('os').system('id')", {}, REFUSED, "function calls not allowed"),
    ("open('/etc/passwd').read()", {}, REFUSED, "not allowed"),
    ("(1).__class__.__bases__", {}, REFUSED, "attribute access not allowed"),
    ("'abc'[0] == 'a'", {}, REFUSED, "indexing and slicing not allowed"),
    ("[x for x in (1, 2)]", {}, REFUSED, "comprehensions not allowed"),
    ("(lambda: 1) == 1", {}, REFUSED, "lambda not allowed"),
    ("1 if ${n} else 2", {"n": "1"}, REFUSED, "conditional expressions not allowed"),
    ("{1: 2} == 1", {}, REFUSED, "dicts not allowed"),
    ("f'{1}' == '1'", {}, REFUSED, "f-strings not allowed"),
    ("x > 1", {}, REFUSED, "unknown name 'x'"),
    ("${env} == 'prod'", {"env": "prod"}, REFUSED, "unknown name 'prod' (quote a string"),
    ("1 & 2", {}, REFUSED, "operator '&' (write && or and)"),
    ("1 << 100000", {}, REFUSED, "operator '<<'"),
    ("~1 == -2", {}, REFUSED, "operator '~'"),
    ("1 is 1", {}, REFUSED, "operator 'is' (write ==)"),
    ("1j == 1j", {}, REFUSED, "complex literals are not allowed"),
    ("${n} >", {"n": "1"}, SYNTAX, "syntax error"),
    ("'unterminated == 1", {}, SYNTAX, "unterminated string literal"),
    ("", {}, SYNTAX, "empty expression"),
    ("${missing} > 1", {}, SYNTAX, "unknown parameter ${missing}"),
    ("'%s' % ${n} == '1'", {"n": "1"}, VALUE, "'%' is not defined for a string and a number"),
    ("${n} / 0 > 1", {"n": "1"}, VALUE, "division by zero"),
    ("'${s}' > 1", {"s": "a"}, VALUE, "cannot compare a string with a number"),
    ("(-8) ** 0.5 > 0", {}, VALUE, "negative number to a fractional power"),
    ("(1,) * 3 == (1, 1, 1)", {}, VALUE, "'*' needs numbers, not a list and a number"),
]


@pytest.mark.parametrize(("expression", "values", "kind", "reason"), REFUSED_CASES)
def test_refused_expressions_say_why(expression: str, values: dict[str, str], kind: str, reason: str) -> None:
    with pytest.raises(expressions.ExpressionError) as info:
        logic.evaluate(expression, values)
    assert info.value.kind == kind
    assert reason in str(info.value)
    assert str(info.value).startswith(f"cannot evaluate {expression[:40]!r}"[:-1])  # names the condition


@pytest.mark.parametrize(
    ("expression", "saved"),
    [
        ("1000000**1000000 > 0", False),  # can never be evaluated: refused when saved
        ("'a' * 10**9 == 'b'", False),
        ("(" * 40 + "1" + ")" * 40, False),
        ("9" * 400 + " > 0", False),
        ("len('${s}') > 3", False),
        ("${n} ** 2000 > 0", True),  # fine for 0 and 1: only some values are too big, found at run time
        ("${n} / ${m} > 1", True),  # 0 / 0 with the stand-in values: depends on the real ones
        ("'${s}' > 1", True),
    ],
)
def test_save_time_check(expression: str, saved: bool) -> None:
    assert (logic.expression_problem(expression) == "") is saved


# -- bounded work, whatever the expression ----------------------------------------------------------

_LEAVES = st.one_of(
    st.integers(-(2**1100), 2**1100).map(str),
    st.integers(-50, 5000).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.text(alphabet="ab&|!'\"x ", max_size=40).map(repr),
    st.sampled_from(["true", "false", "null", "'" + "z" * 4000 + "'"]),
)
_BINARY = ["+", "-", "*", "/", "//", "%", "**", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "and", "or",
           "&&", "||", "===", "!=="]  # fmt: skip


def _grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(inner, st.sampled_from(_BINARY), inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        st.tuples(st.sampled_from(["not ", "!", "-", "+"]), inner).map(lambda t: f"{t[0]}({t[1]})"),
        st.lists(inner, max_size=5).map(lambda xs: "[" + ", ".join(xs) + "]"),
    )


EXPRESSIONS = st.recursive(_LEAVES, _grow, max_leaves=40)
#: chains of the operators that grow values: the shapes that froze the master
_GROWING_LEAVES = ["'ab'", "''", "'x' * 100", "(2**512)", "-(2**512)", "1.5", "true"]
GROWING = st.lists(
    st.one_of(st.integers(-(10**6), 10**6).map(str), st.sampled_from(_GROWING_LEAVES)),
    min_size=2,
    max_size=8,
).flatmap(lambda xs: st.lists(st.sampled_from(["**", "*", "+"]), min_size=len(xs) - 1, max_size=len(xs) - 1)
          .map(lambda ops: xs[0] + "".join(f" {op} {x}" for op, x in zip(ops, xs[1:], strict=True))))  # fmt: skip
#: bytes Python may allocate while parsing and evaluating one expression within the limits
MEMORY_BOUND = 1 << 20


def _bounded_run(text: str) -> None:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        try:
            value, work = expressions.run(text)
        except expressions.ExpressionError as exc:
            assert exc.kind in (SYNTAX, REFUSED, LIMIT, VALUE)
            value, work = None, 0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert work <= MAX_WORK
    assert peak <= MEMORY_BOUND, f"{peak} bytes allocated for {text[:200]!r}"
    _check_value(value)


def _check_value(value: Any) -> None:
    if isinstance(value, int):
        assert value.bit_length() <= MAX_INT_BITS
    elif isinstance(value, str):
        assert len(value) <= MAX_STRING
    elif isinstance(value, tuple):
        for v in value:
            _check_value(v)


@settings(max_examples=400, deadline=None)
@given(EXPRESSIONS)
def test_random_expressions_evaluate_within_bounded_work(text: str) -> None:
    _bounded_run(text)


@settings(max_examples=300, deadline=None)
@given(GROWING)
def test_growing_operator_chains_stay_within_bounded_work(text: str) -> None:
    _bounded_run(text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="()[]-+!*'\"a19 &|<>=,.", max_size=300))
def test_arbitrary_text_is_refused_or_evaluated_never_crashes(text: str) -> None:
    _bounded_run(text)


def test_a_switch_has_at_most_max_cases_conditions() -> None:
    def params(n: int) -> dict[str, Any]:
        return {"cases": [{"condition": f"${{x}} == {i}", "next": "b"} for i in range(n)]}

    logic.validate(logic.SWITCH, params(logic.MAX_CASES), {"a"}, {"b"})
    with pytest.raises(ParamError) as info:
        logic.validate(logic.SWITCH, params(logic.MAX_CASES + 1), {"a"}, {"b"})
    assert (info.value.field, info.value.reason) == ("cases", f"at most {logic.MAX_CASES} cases")
