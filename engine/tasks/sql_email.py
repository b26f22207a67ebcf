"""A query SQL task's result by e-mail (DolphinScheduler's ``sendEmail``, ``title``, ``groupId``).

The master resolves the EMAIL senders of alert group ``groupId`` when it dispatches the task and the worker
gives their params (secrets opened) to the runner on its standard input beside the data source's; after
the task's transaction is committed the runner mails each sender's receivers one message: the rows as an
HTML table in the body (at most :data:`TABLE_ROWS`, DolphinScheduler's cap for "table attachment") and every
row read (up to the task's ``limit``) as two attachments, ``<title>.xlsx`` (one sheet, the column names in
the first row, numbers as numeric cells, anything else as text, as DolphinScheduler writes it) and
``<title>.csv``. A sender that cannot be reached fails the task naming it.
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import email.message
import html
import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.tasks.sql_dialects import Rows, SqlError

#: rows the HTML table in the body shows at most (the attachments carry all rows read)
TABLE_ROWS = 1000
#: seconds one SMTP delivery may take
SEND_TIMEOUT = 30.0

XLSX_TYPE = ("application", "vnd.openxmlformats-officedocument.spreadsheetml.sheet")


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return str(value)


def _xlsx_cell(value: object) -> object:
    if isinstance(value, bool) or value is None:
        return _text(value)
    if isinstance(value, int | float | decimal.Decimal):
        return value
    return _text(value)


def html_table(result: Rows, limit: int = TABLE_ROWS) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in result.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_text(v))}</td>" for v in row) + "</tr>" for row in result.rows[:limit]
    )
    return (
        f'<table border="1" cellspacing="0" cellpadding="4"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


def csv_bytes(result: Rows) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(result.columns)
    writer.writerows([_text(v) for v in row] for row in result.rows)
    return out.getvalue().encode()


def xlsx_bytes(result: Rows, sheet: str = "result") -> bytes:
    from openpyxl import Workbook

    book = Workbook(write_only=True)
    page = book.create_sheet(sheet)
    page.append(list(result.columns))
    for row in result.rows:
        page.append([_xlsx_cell(v) for v in row])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def file_stem(title: str) -> str:
    """``title`` as a file name: no path separators or control characters, at most 100 characters."""
    stem = re.sub(r"[\x00-\x1f/\\:*?\"<>|]+", "_", title).strip(" .") or "result"
    return stem[:100]


def message(title: str, result: Rows, params: Mapping[str, Any]) -> email.message.EmailMessage:
    msg = email.message.EmailMessage()
    msg["From"] = params["sender"]
    msg["To"] = ", ".join(params["receivers"])
    msg["Subject"] = f"[Porpoise] {title}"
    shown = min(len(result.rows), TABLE_ROWS)
    more = len(result.rows) - shown
    note = f"{len(result.rows)} row(s){'; the limit was reached' if result.truncated else ''}"
    tail = f"; the first {shown} shown, all in the attachments" if more else ""
    msg.set_content(f"{title}\n\n{note}{tail}.\nThe rows are attached as {file_stem(title)}.xlsx and .csv.\n")
    msg.add_alternative(
        f"<html><body><h3>{html.escape(title)}</h3><p>{html.escape(note + tail)}.</p>{html_table(result)}"
        "</body></html>",
        subtype="html",
    )
    stem = file_stem(title)
    msg.add_attachment(xlsx_bytes(result), maintype=XLSX_TYPE[0], subtype=XLSX_TYPE[1], filename=f"{stem}.xlsx")
    msg.add_attachment(csv_bytes(result), maintype="text", subtype="csv", filename=f"{stem}.csv")
    return msg


async def send_result(job: Mapping[str, Any], senders: Sequence[Mapping[str, Any]], result: Rows) -> None:
    """Mail ``result`` to every sender of ``senders`` (``{name, params}``, EMAIL params with secrets open);
    SqlError naming the first sender that failed, its secrets cut from the reason."""
    from engine.alerts.senders import SendError, redact, smtp_send

    title = job["title"]
    if not senders:
        print(f"[porpoise] e-mail: alert group {job['group']} has no EMAIL sender: nothing sent", flush=True)
        return
    failed: list[str] = []
    for sender in senders:
        params = sender["params"]
        try:
            await smtp_send(message(title, result, params), params, SEND_TIMEOUT)
            print(f"[porpoise] e-mail: result sent by {sender['name']} to {', '.join(params['receivers'])}", flush=True)
        except SendError as exc:
            failed.append(f"{sender['name']}: {redact(str(exc), params)}")
    if failed:
        raise SqlError(f"the result e-mail was not sent ({'; '.join(failed)})")
