"""How a parameter's value reaches a task's text: always as data, never as code (docs/WORKFLOWS.md,
"How values reach a script").

* SHELL: each ``${name}`` with a value becomes a reference to a task-private environment variable
  (``${PORPOISE_P_1}``) holding the value, so bash expands it as data: inside double quotes it stays one
  word, unquoted it is split into words (and globbed) but never parsed as code. Inside single quotes
  (and ``$'...'``) the reference is spliced in double quotes (``'...'"${PORPOISE_P_1}"'...'``), so the
  script reads as it did when the text was pasted; a ``${name}`` inside a quoted here-document (``<<'EOF'``),
  whose text bash never expands, is refused.
* PYTHON (engine.tasks.python): a Python literal (``pyliteral``).
* SQL (engine.tasks.sql): a bind parameter; ``!{name}`` is the only raw text substitution.

Each value's own ``$[...]`` placeholders are rendered at the business time first, as they were when the
value was pasted into the text.
"""

from __future__ import annotations

import ast
import datetime as dt
import io
import itertools
import re
import tokenize
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from engine.params import _VAR
from engine.tasks.base import ParamError
from engine.time_placeholders import render

#: the environment variables of a SHELL task's parameters: PORPOISE_P_1, PORPOISE_P_2, ...
ENV_PREFIX = "PORPOISE_P_"
#: bytes of one value passed in the environment at most (the kernel refuses a variable over 128 KiB)
MAX_ENV_VALUE = 100_000
#: bytes of all of a task's parameter values in the environment at most
MAX_ENV_TOTAL = 1_000_000


#: a value bash would run as code wherever it reads it as arithmetic (``$(( ${n} + 1 ))``, ``[[ ${n} -gt 0 ]]``,
#: ``(( ))``, ``${s:${n}}``, ``let``): there an array subscript in the value is expanded, so ``a[$(cmd)]`` runs
#: cmd. Refused as a SHELL task's value: a ``[`` followed by a command substitution or a parameter expansion.
_ARITHMETIC_CODE = re.compile(r"\[.*?(?:\$[({\[]|`)", re.DOTALL)
_ARITHMETIC_REASON = (
    "a value holding '[' and then '$(', '${', '$[' or '`' is refused in SHELL tasks: where bash reads it as a number"
    " (arithmetic: $(( )), [[ -gt ]], (( ))) it would run that text as a command"
)


@dataclass
class Placed:
    """A script whose parameters are references, and the environment they read."""

    text: str
    env: dict[str, str] = field(default_factory=dict)


def rendered_value(name: str, values: Mapping[str, str], when: dt.datetime) -> str:
    """The value of ``name`` with its own ``$[...]`` rendered (a bad one raises PlaceholderError)."""
    return render(values[name], when)


_HEREDOC = re.compile(r"<<(-?)[ \t]*(?:'([^'\n]+)'|\"([^\"\n]+)\"|(\\?)([A-Za-z_][A-Za-z0-9_]*))")
_QUOTED_HEREDOC = (
    "{} is inside a quoted here-document, which bash never expands: unquote its delimiter (<<EOF) to use its value"
)


def shell(script: str, values: Mapping[str, str], when: dt.datetime) -> Placed:
    """``script`` with each known ``${name}`` made a reference to an environment variable holding its value,
    then its ``$[...]`` rendered."""
    scanner = _Shell(script, values, when)
    text = scanner.run()
    return Placed(render(text, when), scanner.env)


class _Shell:
    """One pass over a bash script tracking its quoting, enough to know what a reference placed at a point
    reads as. Where the tracking could be wrong, the value still stays data: a reference is all that is
    ever written, at worst read literally."""

    def __init__(self, script: str, values: Mapping[str, str], when: dt.datetime) -> None:
        self.script, self.values, self.when = script, values, when
        self.out: list[str] = []
        self.env: dict[str, str] = {}
        self.by_name: dict[str, str] = {}
        # "code" (also inside $( ) and backticks: "paren", "bq"), "dq" (double quotes), "sq" (single
        # quotes), "ansi" ($'...')
        self.stack: list[str] = ["code"]
        #: here-documents opened on the current line: (delimiter, quoted, tabs stripped)
        self.heredocs: list[tuple[str, bool, bool]] = []

    def reference(self, name: str) -> str:
        var = self.by_name.get(name)
        if var is None:
            value = rendered_value(name, self.values, self.when)
            size = len(value.encode())
            if size > MAX_ENV_VALUE:
                raise ParamError(name, f"value too long to give a SHELL task ({size} bytes, at most {MAX_ENV_VALUE})")
            if _ARITHMETIC_CODE.search(value):
                raise ParamError(name, _ARITHMETIC_REASON)
            var = self.by_name[name] = f"{ENV_PREFIX}{len(self.by_name) + 1}"
            self.env[var] = value
            if sum(len(v.encode()) for v in self.env.values()) > MAX_ENV_TOTAL:
                raise ParamError(name, f"the task's parameter values exceed {MAX_ENV_TOTAL} bytes")
        return "${" + var + "}"

    def run(self) -> str:
        i, script = 0, self.script
        while i < len(script):
            if script.startswith("${", i):
                m = _VAR.match(script, i)
                if m is not None and m.group(1).strip() in self.values:
                    ref = self.reference(m.group(1).strip())
                    self.out.append({"sq": f"'\"{ref}\"'", "ansi": f"'\"{ref}\"$'"}.get(self.stack[-1], ref))
                    i = m.end()
                    continue
            i = self.step(i)
        return "".join(self.out)

    def step(self, i: int) -> int:
        """Copy what starts at ``i`` (one character, or an escape, a comment, a here-document's bodies);
        the index after it."""
        script, top, c = self.script, self.stack[-1], self.script[i]
        if top in ("sq", "ansi"):
            if c == "\\" and top == "ansi":
                self.out.append(script[i : i + 2])
                return i + 2
            if c == "'":
                self.stack.pop()
            self.out.append(c)
            return i + 1
        if c == "\\":
            self.out.append(script[i : i + 2])
            return i + 2
        if c == "\n" and self.heredocs and top != "dq":
            self.out.append(c)
            return self.heredoc_bodies(i + 1)
        if script.startswith("$(", i) and not script.startswith("$((", i):
            self.stack.append("paren")
            self.out.append("$(")
            return i + 2
        if c == "`":
            self.stack.pop() if top == "bq" else self.stack.append("bq")
        elif top == "dq":
            if c == '"':
                self.stack.pop()
        elif c == "'":
            self.stack.append("ansi" if i > 0 and script[i - 1] == "$" else "sq")
        elif c == '"':
            self.stack.append("dq")
        elif c in "()" and top == "paren":
            self.stack.append("paren") if c == "(" else self.stack.pop()
        elif c == "#" and (i == 0 or script[i - 1] in " \t\n;&|()"):
            end = script.find("\n", i)
            end = len(script) if end < 0 else end
            self.out.append(script[i:end])  # a comment: nothing in it runs
            return end
        elif script.startswith("<<", i) and not script.startswith("<<<", i):
            h = _HEREDOC.match(script, i)
            if h is not None:
                quoted = h.group(2) is not None or h.group(3) is not None or h.group(4) == "\\"
                self.heredocs.append((h.group(2) or h.group(3) or h.group(5), quoted, h.group(1) == "-"))
                self.out.append(h.group(0))
                return h.end()
        self.out.append(c)
        return i + 1

    def heredoc_bodies(self, i: int) -> int:
        """Copy the bodies of the here-documents opened on the line before ``i``: a quoted one as it is (a
        known ``${name}`` in it is refused), an unquoted one with references placed; the index after them."""
        script = self.script
        for delim, quoted, strip in self.heredocs:
            while i < len(script):
                end = script.find("\n", i)
                end = len(script) if end < 0 else end + 1
                line = script[i:end]
                i = end
                if (line.lstrip("\t") if strip else line).rstrip("\n") == delim:
                    self.out.append(line)
                    break
                for m in _VAR.finditer(line):
                    if m.group(1).strip() in self.values and quoted:
                        raise ParamError("rawScript", _QUOTED_HEREDOC.format(m.group(0)))
                self.out.append(line if quoted else _VAR.sub(self.heredoc_reference, line))
        self.heredocs.clear()
        return i

    def heredoc_reference(self, m: re.Match[str]) -> str:
        name = m.group(1).strip()
        return self.reference(name) if name in self.values else m.group(0)


_NUMBER = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_STRING_START = re.compile(r"([A-Za-z]*)('''|\"\"\"|'|\")")


def pyliteral(value: str) -> str:
    """A Python literal of ``value``: the number it spells (a negative one in parentheses), else a string."""
    if _NUMBER.fullmatch(value):
        return value
    if value.startswith("-") and _NUMBER.fullmatch(value[1:]):
        return f"({value})"
    return repr(value)


def python(script: str, values: Mapping[str, str], when: dt.datetime) -> str:
    """``script`` with its ``$[...]`` rendered and each known ``${name}`` made a literal: in a string
    literal the string is split around it (``"a/${x}"`` -> ``"a/" 'x-value'``, Python joins adjacent
    literals), in code it is a number or a string literal, in a comment its escaped text."""
    sentinels: dict[str, str] = {}

    def mark(m: re.Match[str]) -> str:
        name = m.group(1).strip()
        if name not in values:
            return m.group(0)
        key = f"__porpoise_param_{len(sentinels)}__"
        while key in script:
            key = "_" + key + "_"
        sentinels[key] = rendered_value(name, values, when)
        return key

    marked = render(_VAR.sub(mark, script), when)  # the script's own $[...]: values are placed after
    if not sentinels:
        return marked
    try:
        return _Python(marked, sentinels).run()
    except (tokenize.TokenError, SyntaxError) as exc:
        raise ParamError(
            "rawScript", f"its parameters cannot be placed as values: Python cannot read the script ({exc})"
        ) from None


class _Python:
    def __init__(self, source: str, sentinels: Mapping[str, str]) -> None:
        self.source = source
        self.sentinels = sentinels
        self.any = re.compile("|".join(re.escape(k) for k in sentinels))
        lines = source.splitlines(keepends=True)
        self.offsets = [0]
        for line in lines:
            self.offsets.append(self.offsets[-1] + len(line))

    def at(self, pos: tuple[int, int]) -> int:
        return self.offsets[pos[0] - 1] + pos[1]

    def run(self) -> str:
        edits: list[tuple[int, int, str]] = []
        fstring: list[int] = []  # starts of the f-strings being read (Python 3.12+ tokenizes them in parts)
        for tok in tokenize.generate_tokens(io.StringIO(self.source).readline):
            kind = tokenize.tok_name[tok.type]
            if kind == "FSTRING_START":
                fstring.append(self.at(tok.start))
                continue
            if kind == "FSTRING_END":
                start = fstring.pop()
                if not fstring:
                    edits.append((start, self.at(tok.end), self.string(self.source[start : self.at(tok.end)])))
                continue
            if fstring or not self.any.search(tok.string):
                continue
            start, end = self.at(tok.start), self.at(tok.end)
            if tok.type == tokenize.STRING:
                edits.append((start, end, self.string(tok.string)))
            elif tok.type == tokenize.COMMENT:
                edits.append((start, end, self.any.sub(lambda m: repr(self.sentinels[m.group(0)])[1:-1], tok.string)))
            elif tok.type == tokenize.NAME and tok.string in self.sentinels:
                edits.append((start, end, pyliteral(self.sentinels[tok.string])))
            else:
                raise ParamError("rawScript", "a ${...} placeholder inside a name cannot be placed as a value")
        out, last = [], 0
        for start, end, text in sorted(edits):
            out += [self.source[last:start], text]
            last = end
        out.append(self.source[last:])
        return "".join(out)

    def string(self, literal: str) -> str:
        """A string literal holding sentinels as adjacent literals: its pieces and the values between."""
        if not self.any.search(literal):
            return literal
        m = _STRING_START.match(literal)
        assert m is not None
        prefix, quote = m.group(1), m.group(2)
        body = literal[m.end() : len(literal) - len(quote)]
        raw, is_bytes, is_f = "r" in prefix.lower(), "b" in prefix.lower(), "f" in prefix.lower()
        parts: list[str] = []
        last = 0
        for s in self.any.finditer(body):
            piece = body[last : s.start()]
            if is_f and _brace_depth(body[: s.start()]) != 0:
                raise ParamError("rawScript", "a ${...} placeholder inside an f-string's {expression} cannot be placed")
            if (len(piece) - len(piece.rstrip("\\"))) % 2:
                raise ParamError(
                    "rawScript", "a ${...} placeholder right after a backslash in a string cannot be placed"
                )
            if len(quote) == 3 and piece.endswith(quote[0]):
                if raw:
                    raise ParamError(
                        "rawScript", "a ${...} placeholder right after a quote in a raw string cannot be placed"
                    )
                quotes = len(piece) - len(piece.rstrip(quote[0]))
                piece = piece[:-quotes] + ("\\" + quote[0]) * quotes
            if piece:
                parts.append(f"{prefix}{quote}{piece}{quote}")
            value = self.sentinels[s.group(0)]
            parts.append(repr(value.encode()) if is_bytes else repr(value))
            last = s.end()
        if body[last:] or not parts:
            parts.append(f"{prefix}{quote}{body[last:]}{quote}")
        placed = " ".join(parts)
        _still_one_string(literal, placed)
        return placed


def _still_one_string(literal: str, placed: str) -> None:
    """Check that ``placed`` (the pieces of ``literal`` and the values' literals) is still one string: a
    constant, or an f-string with exactly the replacement fields ``literal`` had, so nothing a value holds
    became code; otherwise ParamError (a case the splitting does not foresee)."""

    def parsed(text: str) -> ast.expr | None:
        try:
            return ast.parse(f"({text}\n)", mode="eval").body
        except SyntaxError:
            return None

    def fields(node: ast.AST) -> int:
        return sum(isinstance(n, ast.FormattedValue) for n in ast.walk(node))

    before, after = parsed(literal), parsed(placed)
    if (
        before is None
        or not isinstance(after, ast.Constant | ast.JoinedStr)
        or type(after) is not type(before)
        or fields(after) != fields(before)
    ):
        raise ParamError("rawScript", "a ${...} placeholder in this string literal cannot be placed as a value")


def _brace_depth(text: str) -> int:
    """How many f-string replacement fields are open at the end of ``text`` ({{ and }} are characters)."""
    depth = 0
    for m in re.finditer(r"\{\{|\}\}|\{|\}", text):
        if m.group(0) == "{":
            depth += 1
        elif m.group(0) == "}":
            depth = max(0, depth - 1)
    return depth


#: a ``${name}`` in SQL, with one pair of quotes around it eaten (DolphinScheduler's binding)
_SQL_VAR = re.compile(r"(['\"]?)\$\{([^}]+)\}\1")
#: ``!{name}``: raw text, only for values the workflow's writers wrote
_SQL_RAW = re.compile(r"!\{([^}]+)\}")


def sql(
    text: str,
    values: Mapping[str, str],
    when: dt.datetime,
    trusted: frozenset[str],
    marker: Callable[[int], str] | None = None,
    percent: bool = False,
) -> tuple[str, list[str]]:
    """:func:`sql_bound` without the names of the bound values."""
    statement, args, _ = sql_bound(text, values, when, trusted, marker, percent)
    return statement, args


def sql_bound(
    text: str,
    values: Mapping[str, str],
    when: dt.datetime,
    trusted: frozenset[str],
    marker: Callable[[int], str] | None = None,
    percent: bool = False,
) -> tuple[str, list[str], list[str]]:
    """A statement with its ``$[...]`` rendered, each known ``${name}`` a bind placeholder (``marker(n)`` for
    the n-th, from 1: ``$1``, ``$2``... by default; a quote pair around it is eaten, ``'${day}'`` binds the value)
    and each ``!{name}`` the raw text of a value in ``trusted`` (the workflow's writers wrote it: ParamError for
    any other); and the values to bind, in order. ``percent``: the driver formats the statement with ``%`` when
    values are bound (MySQL, ClickHouse, Hive), so a literal ``%`` is doubled then. The third list names the
    parameter each bound value came from."""
    args: list[str] = []
    names: list[str] = []

    def bind(m: re.Match[str]) -> str:
        name = m.group(2).strip()
        if name not in values:
            return m.group(0)
        args.append(rendered_value(name, values, when))
        names.append(name)
        return f"\x00{len(args)}\x00"  # the marker goes in once the text around it is final

    def raw(m: re.Match[str]) -> str:
        name = m.group(1).strip()
        if name not in values:
            return m.group(0)
        if name not in trusted:
            raise ParamError(
                f"!{{{name}}}",
                "raw text takes only values the workflow's writers wrote (a declared default or the task's own"
                " parameter), not a start parameter's or an upstream task's: use ${" + name + "} to bind it",
            )
        return rendered_value(name, values, when)

    bound = _SQL_RAW.sub(raw, _SQL_VAR.sub(bind, render(text, when).replace("\x00", "")))
    if percent and args:
        quoted = quoted_marks(bound, _BOUND_MARK)
        if quoted:
            name = names[int(quoted[0].group(1)) - 1]
            raise ParamError("${" + name + "}", _QUOTED_BIND.format(name))
        bound = bound.replace("%", "%%")
    mark = marker or (lambda i: f"${i}")
    return re.sub("\x00(\\d+)\x00", lambda m: mark(int(m.group(1))), bound), args, names


_BOUND_MARK = re.compile("\x00(\\d+)\x00")
_QUOTED_BIND = (
    "sits inside a quoted string, a quoted name or a comment, where this data source's driver would splice its"
    " value in as text: write it on its own ('${{{0}}}', the quotes are eaten) and join it in SQL, e.g."
    " CONCAT('day_', '${{{0}}}')"
)
#: where a lexer of MySQL, ClickHouse or Hive may read something other than code
_SPECIAL = re.compile(r"['\"`#$/\-]")
_DOLLAR_TAG = re.compile(r"\$[A-Za-z_]*\$")
_COMMENT_EDGE = re.compile(r"/\*|\*/")
#: a quoted string or name (a doubled quote stays in it), with or without backslash escapes, to its end
_QUOTED = {
    (q, backslash): re.compile(f"{q}(?:[^{q}{bs}]++|{esc}{q}{q})*+{q}", re.DOTALL)
    for q in "'\"`"
    for backslash, esc, bs in ((True, r"\\.|", r"\\"), (False, "", ""))
}
#: the ways those lexers differ: backslash escapes in quotes (MySQL's NO_BACKSLASH_ESCAPES), nested block
#: comments (ClickHouse), MySQL's executable /*! */ comments, # comments (not Hive), "--" without a space
#: after it (a comment for ClickHouse and Hive, not MySQL), $$ here-documents (ClickHouse)
_LEXERS = list(
    itertools.product((True, False), ("flat", "nested", "code"), (True, False), (True, False), (True, False))
)


#: the most tokens (quotes, comments, dashes, dollars) all ways of lexing a statement may read together: a
#: statement of ordinary size takes a few thousand
MAX_LEXER_STEPS = 500_000
_TOO_COMPLEX = (
    "too many quotes and comments around its bound values to check where they sit: split the statement or bind"
    " fewer values"
)


def quoted_marks(text: str, marks: re.Pattern[str]) -> list[re.Match[str]]:
    """The matches of ``marks`` that some SQL lexer of the drivers that splice values into the text themselves
    (MySQL, ClickHouse, Hive: the value arrives as a quoted literal) reads inside a string, a quoted name or a
    comment, where that literal's quotes would end the string and leave the value's text as SQL. Every way
    those lexers differ is tried; a mark is safe only when all read it as code."""
    found: dict[int, re.Match[str]] = {}
    # only the ways of lexing that the text's characters can tell apart
    slash, bang, dollar = "\\" in text, "/*!" in text, "$" in text
    nests = "/*" in text[text.find("/*") + 2 :] if "/*" in text else False
    hashes, dashes = "#" in text, "--" in text

    def block_of(block: str) -> str:
        return block if (block == "code" and bang) or (block == "nested" and nests) else "flat"

    lexers = {
        (bs or not slash, block_of(block), h or not hashes, d or not dashes, here and dollar)
        for bs, block, h, d, here in _LEXERS
    }
    budget = [MAX_LEXER_STEPS]
    for lexer in sorted(lexers):
        for m in _marks_outside_code(text, marks, budget, *lexer):
            found.setdefault(m.start(), m)
    return [found[k] for k in sorted(found)]


def _marks_outside_code(
    text: str, marks: re.Pattern[str], budget: list[int], backslash: bool, block: str, hash_comment: bool,
    loose_dashes: bool, heredoc: bool,
) -> list[re.Match[str]]:  # fmt: skip
    out: list[re.Match[str]] = []
    i, n = 0, len(text)
    while True:
        budget[0] -= 1
        if budget[0] < 0:
            raise ParamError("sql", _TOO_COMPLEX)
        s = _SPECIAL.search(text, i)
        if s is None:
            return out
        i, c = s.start(), s.group(0)
        if c in "'\"`":
            quoted = _QUOTED[c, backslash].match(text, i)
            end = quoted.end() if quoted is not None else n
        elif (c == "#" and hash_comment) or (
            text.startswith("--", i) and (loose_dashes or i + 2 >= n or text[i + 2] in " \t\r\n")
        ):
            end = text.find("\n", i)
            end = n if end < 0 else end
        elif text.startswith("/*", i) and not (block == "code" and text.startswith("/*!", i)):
            depth, j = 1, i + 2
            while depth and (edge := _COMMENT_EDGE.search(text, j)) is not None:
                j = edge.end()
                depth += 1 if edge.group(0) == "/*" and block == "nested" else -1 if edge.group(0) == "*/" else 0
            end = j if depth == 0 else n
        elif c == "$" and heredoc and (tag := _DOLLAR_TAG.match(text, i)) is not None:
            close = text.find(tag.group(0), tag.end())
            end = n if close < 0 else close + len(tag.group(0))
        else:
            i += 3 if text.startswith("/*!", i) else 1
            continue
        out += marks.finditer(text, i, end)
        i = end


def raw_names(text: str) -> set[str]:
    """The names ``text`` uses as ``!{name}``."""
    return {m.group(1).strip() for m in _SQL_RAW.finditer(text)}
