"""SWITCH conditions: a small expression language whose every evaluation does a bounded amount of work.

The master evaluates conditions when a SWITCH task runs, and the API checks them while saving a
definition. An expression that ran for seconds would hold the GIL (big-integer and string operations
are single C calls: no other thread, signal handler or coroutine runs meanwhile), so the node's lease
keep-alive thread could not answer and the master would lose its lease (DolphinScheduler uses a
JavaScript engine with no bound). Running it in a thread with a time limit cannot help for the same
reason (and a Python thread cannot be stopped), and a subprocess per condition costs milliseconds and
a process to own; instead the grammar is bounded by construction, so no single step takes more than a
few milliseconds and callers may run a batch of evaluations in a thread beside their event loop:

1. the text (after ``${name}`` substitution) is at most :data:`MAX_LENGTH` characters and nests
   brackets at most :data:`MAX_NESTING` deep: parsing is linear in it;
2. it parses (Python's ``ast``) to at most :data:`MAX_NODES` nodes, :data:`MAX_DEPTH` deep, of a
   whitelist: literals (numbers up to :data:`MAX_INT_BITS` bits, strings up to :data:`MAX_STRING`
   characters, lists / tuples), ``true`` / ``false`` / ``null``, comparisons (``== != < <= > >= in``
   ``not in``), ``and or not`` (also spelled ``&& || !`` as in DolphinScheduler's JavaScript, and
   ``=== !==``), ``+ - * / // % **`` on numbers, ``+`` on strings and ``*`` of a string by a number.
   No names, calls, attributes, indexing, comprehensions or string formatting;
3. every operation checks its operands' sizes *before* it runs: no integer result beyond
   :data:`MAX_INT_BITS` bits (``**`` is refused from the operands' sizes, never computed and then
   measured), no string beyond :data:`MAX_STRING` characters;
4. every operation charges a work meter with an upper bound of its cost (operand sizes; the product
   of the lengths for a substring test); past :data:`MAX_WORK` units the evaluation stops.

So the worst case of one evaluation is a fixed, small amount of work: parsing 4096 hostile characters
is the largest part, about 2-4 ms of CPU; a typical condition takes 20 us. The property tests in
tests/test_switch_expressions.py check the meter and the memory allocated. Every failure is an
:class:`ExpressionError` (a ``ValueError``) whose ``reason`` says what was refused.
"""

from __future__ import annotations

import ast
from typing import Any

from core.errors import InvalidInput

#: characters of an expression, after ``${name}`` substitution
MAX_LENGTH = 4096
#: bracket nesting ( [ {
MAX_NESTING = 32
#: syntax tree nodes (literals, operators, comparisons ...)
MAX_NODES = 256
#: depth of the syntax tree
MAX_DEPTH = 32
#: size of any integer, literal or computed (1024 bits: about 308 decimal digits)
MAX_INT_BITS = 1024
#: length of any string, literal or computed
MAX_STRING = 4096
#: units of work one evaluation may spend (one unit ~ one character or machine word touched)
MAX_WORK = 200_000

SYNTAX, REFUSED, LIMIT, VALUE = "syntax", "refused", "limit", "value"


class ExpressionError(InvalidInput):
    """A condition that cannot be evaluated. ``kind``: SYNTAX (does not parse), REFUSED (outside the
    language), LIMIT (too long, deep, big or expensive) or VALUE (wrong types for an operation,
    division by zero: may depend on the parameters' values)."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


_BINARY = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
}  # fmt: skip
_COMPARE = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.In: "in",
    ast.NotIn: "not in",
}  # fmt: skip
_REFUSED_OPS = {
    ast.BitAnd: "'&' (write && or and)", ast.BitOr: "'|' (write || or or)", ast.BitXor: "'^'",
    ast.LShift: "'<<'", ast.RShift: "'>>'", ast.MatMult: "'@'", ast.Invert: "'~'",
    ast.Is: "'is' (write ==)", ast.IsNot: "'is not' (write !=)",
}  # fmt: skip
_REFUSED_NODES = {
    ast.Call: "function calls", ast.Attribute: "attribute access", ast.Subscript: "indexing and slicing",
    ast.JoinedStr: "f-strings", ast.Lambda: "lambda", ast.IfExp: "conditional expressions",
    ast.NamedExpr: "assignment", ast.Starred: "unpacking", ast.Dict: "dicts", ast.Set: "sets",
    ast.ListComp: "comprehensions", ast.SetComp: "comprehensions", ast.DictComp: "comprehensions",
    ast.GeneratorExp: "comprehensions", ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield",
}  # fmt: skip
#: JavaScript's literal names (DolphinScheduler evaluates conditions with Nashorn)
_NAMES: dict[str, Any] = {"true": True, "false": False, "null": None}


# -- text -> checked tree ---------------------------------------------------------------------------


def _normalize(text: str) -> str:
    """JavaScript spellings to Python's outside string literals (``&&`` ``||`` ``!`` ``===``
    ``!==``); refuses bracket nesting deeper than MAX_NESTING. One pass, linear."""
    out: list[str] = []
    i, n, depth = 0, len(text), 0
    while i < n:
        ch = text[i]
        if ch in "'\"":
            j = i + 1
            while j < n and text[j] != ch:
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                raise ExpressionError(SYNTAX, "unterminated string literal")
            out.append(text[i : j + 1])
            i = j + 1
            continue
        two = text[i : i + 2]
        if two in ("&&", "||"):
            out.append(" and " if two == "&&" else " or ")
            i += 2
        elif text.startswith(("===", "!=="), i):
            out.append(text[i : i + 2])
            i += 3
        elif two == "!=":
            out.append(two)
            i += 2
        elif ch == "!":
            out.append(" not ")
            i += 1
        else:
            if ch in "([{":
                depth += 1
                if depth > MAX_NESTING:
                    raise ExpressionError(LIMIT, f"brackets nested more than {MAX_NESTING} deep")
            elif ch in ")]}":
                depth -= 1
            out.append(ch)
            i += 1
    return "".join(out)


def _check_node(node: ast.AST) -> None:
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or value is None or isinstance(value, float):
            return
        if isinstance(value, int):
            if value.bit_length() > MAX_INT_BITS:
                raise ExpressionError(LIMIT, f"a number literal over {MAX_INT_BITS} bits")
            return
        if isinstance(value, str):
            if len(value) > MAX_STRING:
                raise ExpressionError(LIMIT, f"a string literal over {MAX_STRING} characters")
            return
        raise ExpressionError(REFUSED, f"{type(value).__name__} literals are not allowed")
    if isinstance(node, ast.Name):
        if node.id not in _NAMES:
            raise ExpressionError(
                REFUSED, f"unknown name {node.id!r} (quote a string: '{node.id}'; a parameter is ${{{node.id}}})"
            )
        return
    if isinstance(node, ast.BinOp) and type(node.op) not in _BINARY:
        raise ExpressionError(REFUSED, f"operator {_REFUSED_OPS.get(type(node.op), type(node.op).__name__)}")
    if isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not | ast.USub | ast.UAdd):
        raise ExpressionError(REFUSED, f"operator {_REFUSED_OPS.get(type(node.op), type(node.op).__name__)}")
    if isinstance(node, ast.Compare):
        for op in node.ops:
            if type(op) not in _COMPARE:
                raise ExpressionError(REFUSED, f"operator {_REFUSED_OPS.get(type(op), type(op).__name__)}")
    if isinstance(node, ast.BoolOp | ast.UnaryOp | ast.BinOp | ast.Compare | ast.Tuple | ast.List):
        return
    what = _REFUSED_NODES.get(type(node), type(node).__name__)
    raise ExpressionError(REFUSED, f"{what} not allowed")


def parse(text: str) -> ast.expr:
    """Parse and check an expression (no ``${name}`` left in it); the checked tree's root."""
    if len(text) > MAX_LENGTH:
        raise ExpressionError(LIMIT, f"{len(text)} characters, over the limit of {MAX_LENGTH}")
    source = _normalize(text).strip()
    if not source:
        raise ExpressionError(SYNTAX, "empty expression")
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:  # also the parser's own limits: nesting, 4300-digit literals
        raise ExpressionError(SYNTAX, f"syntax error: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ExpressionError(LIMIT, "nested too deeply to parse") from None
    nodes = 0
    stack: list[tuple[ast.AST, int]] = [(tree.body, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ExpressionError(LIMIT, f"nested more than {MAX_DEPTH} operations deep")
        _check_node(node)
        nodes += 1
        if nodes > MAX_NODES:
            raise ExpressionError(LIMIT, f"more than {MAX_NODES} operands and operators")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr))
    return tree.body


# -- evaluation -------------------------------------------------------------------------------------


def _size(value: Any) -> int:
    """Upper bound of the work of touching ``value`` once."""
    if isinstance(value, str):
        return len(value) + 1
    if isinstance(value, int):
        return value.bit_length() // 64 + 1
    if isinstance(value, tuple):
        return sum(_size(v) for v in value) + 1
    return 1


def _pow_bits(base: int, exponent: int) -> int:
    """An upper bound of the bits of ``base ** exponent`` (integers), at most twice the true size."""
    if exponent <= 0 or abs(base) <= 1:
        return 1
    return abs(base).bit_length() * exponent


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float)


def _describe(value: Any) -> str:
    return {str: "a string", tuple: "a list", type(None): "null", bool: "a boolean"}.get(type(value), "a number")


class _Evaluation:
    def __init__(self, budget: int) -> None:
        self.left = budget
        self.budget = budget

    @property
    def spent(self) -> int:
        return self.budget - self.left

    def charge(self, units: int) -> None:
        self.left -= units
        if self.left < 0:
            raise ExpressionError(LIMIT, f"too expensive: more than {self.budget} units of work")

    def value(self, node: ast.expr) -> Any:
        self.charge(1)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return _NAMES[node.id]
        if isinstance(node, ast.Tuple | ast.List):
            return tuple(self.value(e) for e in node.elts)
        if isinstance(node, ast.BoolOp):
            result: Any = None
            for operand in node.values:
                result = self.value(operand)
                if bool(result) != isinstance(node.op, ast.And):
                    break
            return result
        if isinstance(node, ast.UnaryOp):
            operand = self.value(node.operand)
            if isinstance(node.op, ast.Not):
                return not operand
            if not _is_number(operand):
                raise ExpressionError(VALUE, f"unary minus or plus needs a number, not {_describe(operand)}")
            return -operand if isinstance(node.op, ast.USub) else +operand
        if isinstance(node, ast.BinOp):
            return self.binary(type(node.op), self.value(node.left), self.value(node.right))
        assert isinstance(node, ast.Compare)  # parse() admits nothing else
        left = self.value(node.left)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.value(right_node)
            if not self.compare(type(op), left, right):
                return False
            left = right
        return True

    def binary(self, op: type[ast.operator], a: Any, b: Any) -> Any:
        self.charge(_size(a) + _size(b))
        symbol = _BINARY[op]
        if isinstance(a, str) or isinstance(b, str):
            return self._string_op(symbol, a, b)
        if not (_is_number(a) and _is_number(b)):
            raise ExpressionError(VALUE, f"'{symbol}' needs numbers, not {_describe(a)} and {_describe(b)}")
        if op is ast.Pow and isinstance(a, int) and isinstance(b, int) and _pow_bits(a, b) > 2 * MAX_INT_BITS:
            raise ExpressionError(LIMIT, f"'**' result over {MAX_INT_BITS} bits")  # known before computing it
        try:
            result = _ARITHMETIC[op](a, b)
        except ZeroDivisionError:
            raise ExpressionError(VALUE, "division by zero") from None
        except OverflowError:
            raise ExpressionError(LIMIT, f"'{symbol}' result out of range") from None
        if isinstance(result, complex):
            raise ExpressionError(VALUE, "'**' of a negative number to a fractional power")
        if isinstance(result, int) and result.bit_length() > MAX_INT_BITS:
            raise ExpressionError(LIMIT, f"'{symbol}' result over {MAX_INT_BITS} bits")
        return result

    def _string_op(self, symbol: str, a: Any, b: Any) -> str:
        if symbol == "+" and isinstance(a, str) and isinstance(b, str):
            if len(a) + len(b) > MAX_STRING:
                raise ExpressionError(LIMIT, f"a string over {MAX_STRING} characters")
            return a + b
        if symbol == "*" and (isinstance(a, int) or isinstance(b, int)):
            text, times = (a, b) if isinstance(a, str) else (b, a)
            count = max(times, 0) if text else 0  # '' or a negative count: '', however big the count
            if len(text) * count > MAX_STRING:
                raise ExpressionError(LIMIT, f"a string over {MAX_STRING} characters")
            self.charge(len(text) * count)
            return text * count
        raise ExpressionError(VALUE, f"'{symbol}' is not defined for {_describe(a)} and {_describe(b)}")

    def compare(self, op: type[ast.cmpop], a: Any, b: Any) -> bool:
        if op is ast.In or op is ast.NotIn:
            if isinstance(b, str):
                if not isinstance(a, str):
                    raise ExpressionError(VALUE, f"'in' a string needs a string, not {_describe(a)}")
                self.charge(len(a) * len(b) + 1)  # a naive substring search's worst case
                found = a in b
            elif isinstance(b, tuple):
                self.charge(_size(a) * len(b) + _size(b))
                found = a in b
            else:
                raise ExpressionError(VALUE, f"'in' needs a string or a list on its right, not {_describe(b)}")
            return found if op is ast.In else not found
        self.charge(_size(a) + _size(b))
        try:
            return bool(_ORDER[op](a, b))
        except TypeError:
            raise ExpressionError(VALUE, f"cannot compare {_describe(a)} with {_describe(b)}") from None


_ARITHMETIC = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
}  # fmt: skip
_ORDER = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
}  # fmt: skip


def run(text: str, budget: int = MAX_WORK) -> tuple[Any, int]:
    """Parse, check and evaluate ``text``: (its value, the units of work spent)."""
    tree = parse(text)
    evaluation = _Evaluation(budget)
    return evaluation.value(tree), evaluation.spent


def evaluate(text: str) -> Any:
    """The value of ``text``; ExpressionError when it is malformed, refused or too expensive."""
    return run(text)[0]
