"""How parameter values reach a task's text (engine/tasks/placing.py): as data, never as code. The scripts
placed here run under the real bash and Python; the SQL is checked as text (tests/test_param_injection.py
runs it on PostgreSQL)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.params import Property, builtins, resolve, trusted_names
from engine.tasks import placing
from engine.tasks.base import ParamError, TaskContext
from engine.tasks.spark import SparkTask
from engine.workflows.start_params import FROM_START, resolve_globals

T = dt.datetime(2026, 3, 1, 10, 0, 0)
#: values that are shell or Python syntax
HOSTILE = ['"; id; echo "', "$(id)", "`id`", "'; id; echo '", "a\nid", "\\", "x'y\"z", "*", "${HOME}", "$[3+4]"]


def bash(script: str, values: dict[str, str]) -> str:
    placed = placing.shell(script, values, T)
    done = subprocess.run(
        ["bash", "-c", placed.text],
        env={**placed.env, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def python(script: str, values: dict[str, str]) -> str:
    text = placing.python(script, values, T)
    done = subprocess.run([sys.executable, "-c", text], capture_output=True, text=True, check=False)
    assert done.returncode == 0, (text, done.stderr)
    return done.stdout


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize(
    "script",
    [
        'printf "%s|" "${v}"',
        "printf \"%s|\" '${v}'",
        "printf \"%s|\" $'${v}'",
        'printf "%s|" "$(printf "%s" "${v}")"',
        'printf "%s|" "`printf "%s" "${v}"`"',
        "cat <<EOF\n${v}|\nEOF",
        "cat <<-EOF\n\t${v}|\n\tEOF",
        'x="${v}"; printf "%s|" "$x" # a comment ${v}',
    ],
)
def test_a_shell_value_is_read_as_the_characters_it_is(script: str, value: str) -> None:
    out = bash(script, {"v": value})
    assert out.rstrip("\n") == f"{value}|", (script, out)


def test_a_shell_script_reads_each_value_from_one_task_private_variable() -> None:
    placed = placing.shell('echo "${a}" ${a} ${b} ${unknown} $[yyyyMMdd] $[3+4]', {"a": "1", "b": "$[yyyyMMdd-1]"}, T)
    assert placed.text == 'echo "${PORPOISE_P_1}" ${PORPOISE_P_1} ${PORPOISE_P_2} ${unknown} 20260301 $[3+4]'
    assert placed.env == {"PORPOISE_P_1": "1", "PORPOISE_P_2": "20260228"}  # a value's own $[...] is rendered
    # unquoted: split into words (as the pasted text was), never run
    assert bash("printf '<%s>' ${v}", {"v": "a b; id"}) == "<a><b;><id>"


def test_a_value_in_a_quoted_here_document_is_refused_and_an_oversized_one_too() -> None:
    with pytest.raises(ParamError, match="quoted here-document"):
        placing.shell("cat <<'EOF'\n${v}\nEOF", {"v": "x"}, T)
    assert bash("cat <<'EOF'\n${unknown} $x\nEOF", {"v": "x"}) == "${unknown} $x\n"  # no value: as written
    with pytest.raises(ParamError, match="too long"):
        placing.shell("echo ${v}", {"v": "x" * (placing.MAX_ENV_VALUE + 1)}, T)


@pytest.mark.parametrize("value", [*HOSTILE, '""" + __import__("os").system("id") + """'])
def test_a_python_value_is_a_literal_wherever_it_stands(value: str) -> None:
    script = "\n".join(
        [
            'print("a:${v}:")',
            "print('b:${v}:')",
            'print("""c:${v}:""")',
            'print(r"d:${v}:")',
            'x = 1\nprint(f"e:{x}:${v}:")',
            "print(${v})  # f:${v}",
            'print(b"g:${v}:".decode())',
            'print("h:" "${v}".upper())',
        ]
    )
    out = python(script, {"v": value}).split("\n")
    assert out[:4] == [f"a:{value}:", f"b:{value}:", f"c:{value}:", f"d:{value}:"] or "\n" in value, out
    joined = "\n".join(out)
    for expected in (f"e:1:{value}:", f"g:{value}:", f"H:{value.upper()}"):
        assert expected in joined, (expected, joined)
    assert f"\n{value}\n" in "\n" + joined


def test_python_numbers_stay_numbers_and_what_cannot_be_placed_is_refused() -> None:
    assert python("print(${n} + 1, ${neg} * 2, ${f} / 2)", {"n": "41", "neg": "-2", "f": "3.0"}) == "42 -4 1.5\n"
    assert python("print('${unknown}', '${setValue(a=1)}')", {}) == "${unknown} ${setValue(a=1)}\n"
    with pytest.raises(ParamError, match="inside a name"):
        placing.python("x${n} = 1", {"n": "2"}, T)
    with pytest.raises(ParamError, match="cannot read the script"):
        placing.python('print("${n}', {"n": "2"}, T)


def test_sql_binds_values_eats_their_quotes_and_takes_raw_text_only_from_the_writers() -> None:
    values = {"day": "20260301", "v": "'; DROP TABLE x; --", "t": "events", "s": "x"}
    text, args = placing.sql(
        "SELECT * FROM !{t} WHERE d = to_date('${day}', 'YYYYMMDD') AND v = \"${v}\" OR v = ${v} OR w = '${u}'"
        " AND d2 = '$[yyyyMMdd]'",
        values,
        T,
        frozenset({"t"}),
    )
    assert text == (
        "SELECT * FROM events WHERE d = to_date($1, 'YYYYMMDD') AND v = $2 OR v = $3 OR w = '${u}' AND d2 = '20260301'"
    )
    assert args == ["20260301", "'; DROP TABLE x; --", "'; DROP TABLE x; --"]
    with pytest.raises(ParamError, match=r"!\{s\}.*writers wrote"):
        placing.sql("SELECT !{s}", values, T, frozenset({"t"}))


def test_a_start_sets_declared_globals_only_and_marks_what_it_set() -> None:
    declared = [{"prop": "a", "value": "1"}, {"prop": "b", "value": "$[yyyyMMdd]"}]
    with pytest.raises(ParamError) as info:
        resolve_globals(declared, {"system.biz.date": '"; id; echo "'}, T)
    assert info.value.field == "StartParams.system.biz.date" and "built-in" in info.value.reason
    with pytest.raises(ParamError) as info:
        resolve_globals(declared, {"c": "1"}, T)
    assert info.value.field == "StartParams.c" and "a start may set only those: a, b" in info.value.reason
    out = resolve_globals(declared, {"a": "2"}, T)
    assert out == [
        {"prop": "a", "direct": "IN", "type": "VARCHAR", "value": "2", "source": FROM_START},
        {"prop": "b", "direct": "IN", "type": "VARCHAR", "value": "20260301"},
    ]
    # a parent's values reach a SUB_PROCESS child even under names it does not declare; never a built-in's
    assert resolve_globals(declared, {"c": "3"}, T, undeclared=True)[-1]["source"] == FROM_START
    with pytest.raises(ParamError):
        resolve_globals(declared, {"system.datetime": "3"}, T, undeclared=True)


def test_no_parameter_takes_a_built_in_s_name_and_built_ins_win() -> None:
    with pytest.raises(ValueError, match="built-in"):
        Property.from_dict({"prop": "system.biz.date", "value": "x"})
    values = resolve([Property("a", value="1")], [], [], T, builtins(T))
    assert values["system.biz.date"] == "20260228"


def test_raw_sql_trusts_only_what_the_writers_wrote() -> None:
    system = builtins(T)
    globals_ = [
        {"prop": "table", "value": "t"},
        {"prop": "day", "value": "x", "source": FROM_START},
        {"prop": "day_table", "value": "t_${day}"},  # declared, but expanded with a start's value
    ]
    local = [
        Property("own", value="events"),
        Property("mixed", value="t_${day}"),
        Property("from_table", value="${table}_x"),
        Property("table2", value="${up}"),
    ]
    trusted = trusted_names(globals_, [Property("up", value="u")], local, system)
    assert {"table", "own", "from_table", "system.biz.date"} <= trusted
    assert not {"day", "day_table", "mixed", "up", "table2"} & trusted


@pytest.mark.parametrize("value", ['"', '"""', "\\", "'; import os; os.system('id') #", '"); print("owned'])
def test_a_value_next_to_a_quote_in_a_triple_quoted_string_stays_in_it(value: str) -> None:
    assert python('print("""say "${v}" """)', {"v": value}) == f'say "{value}" \n'
    with pytest.raises(ParamError, match="right after a backslash"):
        placing.python('print(r"a\\${v}")', {"v": value}, T)
    with pytest.raises(ParamError, match="right after a quote in a raw string"):
        placing.python('print(r"""a"${v}""")', {"v": value}, T)


def test_a_spark_task_s_values_stay_one_argument_and_literals_in_its_script(tmp_path: Path) -> None:
    params = {"mainFile": "app.py", "mainArgs": "--day ${v} --n 1", "others": "--verbose --queue ${v}"}
    values = {"v": "a b --conf spark.driver.extraJavaOptions=-Dx"}
    ctx = TaskContext(1, "s", params, values, T, tmp_path)
    argv = SparkTask().launch(ctx).argv
    assert argv[argv.index("--queue") + 1] == values["v"] and argv[argv.index("--day") + 1] == values["v"]
    script = SparkTask().launch(TaskContext(1, "s", {"rawScript": "print('${v}')"}, {"v": "'); id; ('"}, T, tmp_path))
    assert script.files["app.py"] == "print(\"'); id; ('\")"


def test_a_value_s_text_is_never_rendered_again_after_it_is_placed() -> None:
    # the value's own $[...] is rendered once (the inner one: the outer holds a $ and stays); what that
    # yields, $['2026'], is not rendered a second time once placed
    nested = "$['$[yyyy]']"
    assert python("print('${v}', '$[yyyy]')", {"v": nested}) == "$['2026'] 2026\n"
    assert bash("printf '%s' \"${v}\"", {"v": nested}) == "$['2026']"


#: what a start parameter of an EXECUTE-only user may hold to turn a spliced value into SQL
SQL_HOSTILE = " OR 1=1 -- "
#: where a value bound by a driver that splices it into the text (MySQL, ClickHouse, Hive) would end up as SQL:
#: its quoted literal ends the string, name or comment it was written in
QUOTED_PLACES = [
    "SELECT * FROM t WHERE d = 'day_${v}'",
    "SELECT * FROM t WHERE d = '${v}${v}'",
    "SELECT * FROM `t_${v}`",
    'SELECT * FROM "t_${v}"',
    "SELECT 1 /* ${v} */",
    "SELECT 1 /* /* */ ${v} */",
    "SELECT 1 -- ${v}",
    "SELECT 1 # ${v}",
    "SELECT $$ ${v} $$",
    "SELECT 'a\\' , '${v}'",
]


def _spliced(text: str, args: list[str], kind: str) -> str:
    """The statement the driver sends: the values spliced in as it escapes them."""
    if kind == "MYSQL":
        from asyncmy.converters import escape_item

        return text % tuple(escape_item(a, "utf8") for a in args)
    from clickhouse_driver.util.escape import escape_params

    return text % escape_params({f"p{i}": a for i, a in enumerate(args, 1)}, None)


@pytest.mark.parametrize("kind", ["MYSQL", "CLICKHOUSE"])
@pytest.mark.parametrize("text", QUOTED_PLACES)
def test_a_value_the_driver_splices_is_refused_inside_quotes_or_a_comment(kind: str, text: str) -> None:
    marker = (lambda i: "%s") if kind == "MYSQL" else (lambda i: f"%(p{i})s")
    with pytest.raises(ParamError) as info:
        placing.sql(text, {"v": SQL_HOSTILE}, T, frozenset(), marker, True)
    assert info.value.field == "${v}" and "CONCAT('day_', '${v}')" in info.value.reason
    # PostgreSQL binds on the server: a $1 in a string is text there, never the value
    assert placing.sql(text, {"v": SQL_HOSTILE}, T, frozenset())[1] == [SQL_HOSTILE, SQL_HOSTILE][: text.count("${v}")]


@pytest.mark.parametrize("kind", ["MYSQL", "CLICKHOUSE"])
def test_a_value_the_driver_splices_stays_one_literal_where_it_is_code(kind: str) -> None:
    marker = (lambda i: "%s") if kind == "MYSQL" else (lambda i: f"%(p{i})s")
    text, args = placing.sql(
        "SELECT '50%', a-${v} FROM t WHERE d = '${v}' AND \"${v}\" = e -- a note\n", {"v": SQL_HOSTILE},
        T, frozenset(), marker, True,
    )  # fmt: skip
    sent = _spliced(text, args, kind)
    assert sent == "SELECT '50%', a-' OR 1=1 -- ' FROM t WHERE d = ' OR 1=1 -- ' AND ' OR 1=1 -- ' = e -- a note\n"


def test_a_procedure_s_quoted_in_value_is_refused_on_mysql(tmp_path: Path) -> None:
    from engine.tasks.procedure import ProcedureTask

    source = {"type": "MYSQL", "host": "127.0.0.1"}
    for method, refused in (("CALL p('${v}')", True), ("CALL p(${v})", False), ("CALL p('x', ${v}) -- ${v}", True)):
        ctx = TaskContext(1, "p", {"datasource": "d", "method": method}, {"v": SQL_HOSTILE}, T, tmp_path,
                          datasources={"d": source})  # fmt: skip
        if refused:
            with pytest.raises(ParamError, match="without quotes"):
                ProcedureTask().launch(ctx)
        else:
            assert "\x00in\x00" in json.loads(ProcedureTask().launch(ctx).files["job.json"])["method"]


#: values bash runs as code when it reads them in an arithmetic context: an array subscript is expanded there
ARITHMETIC_CODE = ["a[$(touch owned)]", "x[`touch owned`]", "0+a[ ${IFS}$(touch owned) ]", "b[1]+c[$(touch owned)]"]


@pytest.mark.parametrize("value", ARITHMETIC_CODE)
@pytest.mark.parametrize(
    "script", ["echo $(( ${v} + 1 ))", '[[ "${v}" -gt 0 ]] || true', "(( ${v} > 1 )) || true", "s=abc; echo ${s:${v}}"]
)
def test_a_shell_value_that_would_run_in_an_arithmetic_context_is_refused(
    script: str, value: str, tmp_path: Path
) -> None:
    """`$(( ${n} * 2 ))` and `[[ ${n} -gt 0 ]]` are everyday bash; there a value's own text is evaluated, and a
    subscript in it (`a[$(cmd)]`) runs cmd: such a value never reaches a SHELL task."""
    with pytest.raises(ParamError) as info:
        placing.shell(script, {"v": value, "s": "abc"}, T)
    assert info.value.field == "v" and "arithmetic" in info.value.reason
    # what it would have done: bash ran the command from the value
    placed = placing.shell(script, {"v": "PLACEHOLDER", "s": "abc"}, T)
    env = {**placed.env, "PATH": "/usr/bin:/bin", "PORPOISE_P_1": value}
    subprocess.run(["bash", "-c", placed.text], env=env, cwd=tmp_path, capture_output=True, check=False)
    assert (tmp_path / "owned").exists()
    # values with brackets or dollars alone stay plain data
    for fine in ["[1,2]", "$HOME", "a[1]", "[x] $5", "price: $3 [approx]"]:
        assert placing.shell(script, {"v": fine, "s": "abc"}, T).env["PORPOISE_P_1"] == fine


def test_checking_where_spliced_values_sit_is_bounded() -> None:
    """The check reads the statement once per way of lexing it: a statement of 600,000 quotes and every
    comment style is refused, naming the statement, rather than holding the worker for seconds; a large
    ordinary one passes."""
    hostile = "SELECT '" + "\\'" * 300_000 + " , '${v}' # -- /* /*! $$"
    with pytest.raises(ParamError, match="too many quotes"):
        placing.sql(hostile, {"v": "x"}, T, frozenset(), lambda i: "%s", True)
    rows = ",".join("('a-b', 'c''d', \"e\", 5-3, /* x */ 1)" for _ in range(20_000))
    text, args = placing.sql(
        f"INSERT INTO t VALUES {rows}, ('${{v}}')", {"v": "x"}, T, frozenset(), lambda i: "%s", True
    )
    assert text.endswith("(%s)") and args == ["x"]
