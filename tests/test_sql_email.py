"""A query SQL task's result by e-mail (sendEmail / groupId / title): the message as a real SMTP server on
loopback (aiosmtpd) receives it, its HTML table and its .xlsx and .csv attachments read back; the checks at
save time; what the SQL plugin hands its runner."""

from __future__ import annotations

import asyncio
import csv
import datetime as dt
import decimal
import io
import json
import re
import uuid
from email.message import Message
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from openpyxl import load_workbook

from engine.infra.ports import free_port
from engine.tasks.base import ParamError, TaskContext
from engine.tasks.sql import SqlTask
from engine.tasks.sql_dialects import Rows, SqlError
from engine.tasks.sql_email import TABLE_ROWS, send_result
from tests.conftest import ApiCluster
from tests.test_alerts import SMTP_PASSWORD, Mailbox, smtp
from tests.test_api import error_of, start, wait_final

__all__ = ["smtp"]

COLUMNS = ["id", "name", "amount", "day", "note"]
ROWS = [
    (1, "<b>alpha</b> & co", decimal.Decimal("12.50"), dt.date(2026, 3, 1), None),
    (2, "beta", decimal.Decimal("-3"), dt.date(2026, 3, 2), "x,y"),
]


def sender(port: int, name: str = "ops-mail", **extra: Any) -> dict[str, Any]:
    receivers = ["a@example.org", "b@example.org"]
    params = {"host": "127.0.0.1", "port": port, "sender": "porpoise@example.org", "receivers": receivers}
    params |= {"user": "porpoise", "password": SMTP_PASSWORD}
    return {"name": name, "params": {**params, **extra}}


class Cells(HTMLParser):
    """The text of each <th> / <td> of an HTML body, row by row."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def parts(msg: Message) -> tuple[str, dict[str, bytes]]:
    html_body, files = "", {}
    for part in msg.walk():
        if part.get_filename():
            files[part.get_filename()] = part.get_payload(decode=True)
        elif part.get_content_type() == "text/html":
            html_body = part.get_payload(decode=True).decode()
    return html_body, files


def table_of(html_body: str) -> list[list[str]]:
    cells = Cells()
    cells.feed(html_body)
    return cells.rows


def test_the_result_arrives_as_an_html_table_an_xlsx_and_a_csv(smtp: tuple[int, Mailbox]) -> None:
    port, box = smtp
    asyncio.run(send_result({"title": "sales on 2026-03-01", "group": 2}, [sender(port)], Rows(COLUMNS, ROWS)))
    (msg,) = box.messages
    assert msg["Subject"] == "[Porpoise] sales on 2026-03-01"
    assert msg["To"] == "a@example.org, b@example.org" and msg["From"] == "porpoise@example.org"
    html_body, files = parts(msg)
    assert "&lt;b&gt;alpha&lt;/b&gt; &amp; co" in html_body  # a value is text, never markup
    assert table_of(html_body) == [
        COLUMNS,
        ["1", "<b>alpha</b> & co", "12.50", "2026-03-01", ""],
        ["2", "beta", "-3", "2026-03-02", "x,y"],
    ]
    assert sorted(files) == ["sales on 2026-03-01.csv", "sales on 2026-03-01.xlsx"]
    sheet = load_workbook(io.BytesIO(files["sales on 2026-03-01.xlsx"]), read_only=True).active
    cells = [list(r) for r in sheet.iter_rows(values_only=True)]
    assert cells[0] == COLUMNS
    assert cells[1][:4] == [1, "<b>alpha</b> & co", 12.5, "2026-03-01"] and cells[1][4] in (None, "")
    assert cells[2] == [2, "beta", -3, "2026-03-02", "x,y"]
    assert isinstance(cells[1][2], float | int)  # numbers are numeric cells, as DolphinScheduler writes them
    assert list(csv.reader(io.StringIO(files["sales on 2026-03-01.csv"].decode()))) == [
        COLUMNS,
        ["1", "<b>alpha</b> & co", "12.50", "2026-03-01", ""],
        ["2", "beta", "-3", "2026-03-02", "x,y"],
    ]


def test_the_body_table_is_capped_and_the_attachments_hold_every_row(smtp: tuple[int, Mailbox]) -> None:
    port, box = smtp
    rows = [(i, f"r{i}") for i in range(TABLE_ROWS + 500)]
    asyncio.run(send_result({"title": "a/b: big", "group": 2}, [sender(port)], Rows(["n", "label"], rows, True)))
    (msg,) = box.messages
    html_body, files = parts(msg)
    table = table_of(html_body)
    assert len(table) == 1 + TABLE_ROWS and table[-1] == [str(TABLE_ROWS - 1), f"r{TABLE_ROWS - 1}"]
    assert f"{TABLE_ROWS + 500} row(s); the limit was reached; the first {TABLE_ROWS} shown" in html_body
    assert sorted(files) == ["a_b_ big.csv", "a_b_ big.xlsx"]  # the title made a file name
    sheet = load_workbook(io.BytesIO(files["a_b_ big.xlsx"]), read_only=True).active
    values = list(sheet.iter_rows(values_only=True))
    assert len(values) == 1 + TABLE_ROWS + 500 and values[-1] == (TABLE_ROWS + 499, f"r{TABLE_ROWS + 499}")
    assert len(files["a_b_ big.csv"].decode().splitlines()) == 1 + TABLE_ROWS + 500


def test_every_email_sender_of_the_group_gets_it_and_a_failed_one_fails_naming_it(
    smtp: tuple[int, Mailbox], capsys: pytest.CaptureFixture[str]
) -> None:
    port, box = smtp
    dead = sender(free_port(), name="dead-relay", password="relay-Secret-77")
    with pytest.raises(SqlError) as err:
        asyncio.run(send_result({"title": "t", "group": 2}, [sender(port), dead], Rows(["x"], [(1,)])))
    assert "dead-relay: smtp:" in str(err.value) and "relay-Secret-77" not in str(err.value)
    assert len(box.messages) == 1  # the reachable sender delivered
    assert "result sent by ops-mail to a@example.org, b@example.org" in capsys.readouterr().out


def test_a_group_without_email_sender_sends_nothing_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(send_result({"title": "t", "group": 9}, [], Rows(["x"], [(1,)])))
    assert "alert group 9 has no EMAIL sender: nothing sent" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("params", "field", "reason"),
    [
        ({"sendEmail": True}, "groupId", "sendEmail needs the id of the alert group"),
        ({"sendEmail": True, "groupId": "ops"}, "groupId", "sendEmail needs the id of the alert group"),
        ({"sendEmail": True, "groupId": 0}, "groupId", ""),
        ({"sendEmail": True, "groupId": 2, "sqlType": "non_query"}, "sendEmail", "needs sqlType query"),
        ({"sendEmail": "yes", "groupId": 2}, "sendEmail", ""),
        ({"sendEmail": True, "groupId": 2, "title": 5}, "title", ""),
    ],
)
def test_send_email_is_checked_at_save_time(params: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(ParamError) as err:
        SqlTask.validate({"datasource": "wh", "sql": "select 1", **params})
    assert err.value.field == field and reason in err.value.reason


def test_a_valid_send_email_task_passes() -> None:
    SqlTask.validate({"datasource": "wh", "sql": "select 1", "sendEmail": True, "groupId": 2, "title": "x ${d}"})
    SqlTask.validate({"datasource": "wh", "sql": "update t set a = 1", "sqlType": "non_query", "sendEmail": False})


def _context(tmp_path: Path, params: dict[str, Any], senders: tuple[dict[str, Any], ...]) -> TaskContext:
    return TaskContext(
        task_instance_id=1,
        task_name="daily sales",
        task_params=params,
        values={"day": "2026-03-01"},
        when=dt.datetime(2026, 3, 1),
        exec_dir=tmp_path,
        datasources={"wh": {"type": "POSTGRESQL", "host": "127.0.0.1", "password": "pw"}},
        email_senders=senders,
    )


def test_the_senders_go_to_the_runner_on_stdin_and_the_title_in_its_job(tmp_path: Path) -> None:
    senders = (sender(2525),)
    titled = {"datasource": "wh", "sql": "select 1", "sendEmail": True, "groupId": 2, "title": "sales ${day}"}
    launch = SqlTask().launch(_context(tmp_path, titled, senders))
    assert json.loads(launch.stdin)["email_senders"] == list(senders)
    job = json.loads(launch.files["job.json"])
    assert job["email"] == {"title": "sales 2026-03-01", "group": 2}
    assert SMTP_PASSWORD not in launch.files["job.json"]  # the senders' secrets never reach a file

    untitled = {**titled, "title": ""}
    job = json.loads(SqlTask().launch(_context(tmp_path, untitled, senders)).files["job.json"])
    assert job["email"]["title"] == "daily sales query result sets"  # DolphinScheduler's default title

    plain = {"datasource": "wh", "sql": "select 1"}
    launch = SqlTask().launch(_context(tmp_path, plain, senders))
    assert "email_senders" not in json.loads(launch.stdin) and "email" not in json.loads(launch.files["job.json"])
    assert not re.search("smtp|receivers", launch.stdin)


@pytest.mark.slow
def test_a_workflow_mails_its_query_result_to_the_alert_groups_email_senders(
    api_cluster: ApiCluster, smtp: tuple[int, Mailbox]
) -> None:
    """Through the real API, master and worker: the master resolves the group's EMAIL senders (sealed at
    rest), the worker opens them, the runner mails the rows after the query; a webhook sender of the group is
    not sent the rows."""
    c, (port, box) = api_cluster, smtp
    client = c.client()
    source = f"pg_{uuid.uuid4().hex[:8]}"
    client.request("PUT", f"/api/v1/datasources/{source}", {"params": {"dsn": c.dsn}})
    mail = sender(port)
    group = client.post("/api/v1/alert-groups", {"name": f"rows_{uuid.uuid4().hex[:8]}", "senders": [
        {"type": "EMAIL", "name": mail["name"], "params": mail["params"]},
        {"type": "WEBHOOK", "name": "chat", "params": {"url": "http://127.0.0.1:9/never"}},
    ]})["id"]  # fmt: skip
    sql = "SELECT g AS n, 'row ' || g AS label, g * 1.5 AS amount FROM generate_series(1, 3) AS g ORDER BY g"
    doc = {
        "name": f"mail_rows_{uuid.uuid4().hex[:8]}", "project": "sql-mail", "params": {"day": "2026-03-01"},
        "tasks": [{"name": "totals", "type": "SQL", "params": {
            "datasource": source, "sql": sql, "sendEmail": True, "groupId": int(group), "title": "rows on ${day}"}}],
    }  # fmt: skip
    code = int(client.request("POST", "/api/v1/workflows", doc, query={"release": True})["code"])
    detail = wait_final(c, start(c, code))
    assert detail["state"] == "SUCCESS", detail
    (msg,) = box.messages
    assert msg["Subject"] == "[Porpoise] rows on 2026-03-01" and msg["To"] == "a@example.org, b@example.org"
    html_body, files = parts(msg)
    assert table_of(html_body) == [["n", "label", "amount"], ["1", "row 1", "1.5"], ["2", "row 2", "3.0"],
                                   ["3", "row 3", "4.5"]]  # fmt: skip
    sheet = load_workbook(io.BytesIO(files["rows on 2026-03-01.xlsx"]), read_only=True).active
    assert list(sheet.iter_rows(values_only=True)) == [("n", "label", "amount"), (1, "row 1", 1.5),
                                                       (2, "row 2", 3), (3, "row 3", 4.5)]  # fmt: skip
    assert files["rows on 2026-03-01.csv"].decode().splitlines()[1] == "1,row 1,1.5"
    log = "\n".join(client.get(f"/api/v1/tasks/{detail['tasks'][0]['id']}/log", limit=5000)["lines"])
    assert "result sent by ops-mail to a@example.org, b@example.org" in log and SMTP_PASSWORD not in log


@pytest.mark.slow
def test_a_save_with_send_email_but_no_group_is_refused(api_cluster: ApiCluster) -> None:
    doc = {"name": f"bad_mail_{uuid.uuid4().hex[:8]}", "project": "sql-mail", "tasks": [
        {"name": "q", "type": "SQL", "params": {"datasource": "x", "sql": "select 1", "sendEmail": True}}]}  # fmt: skip
    err = error_of(lambda: api_cluster.client().post("/api/v1/workflows", doc))
    assert err.status == 400 and "groupId" in err.field
