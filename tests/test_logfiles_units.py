"""Task log paging on the worker (engine/worker/logfiles.py): the line index gives exactly the lines a
plain read gives, for every page, while the file grows, and after it is replaced."""

from __future__ import annotations

import base64
import os
import socket
from pathlib import Path

import pytest

from engine.worker import logfiles
from engine.worker.logfiles import LogFiles
from rpc.errors import BadRequest


def _append(path: Path, text: str) -> None:
    with path.open("a") as fh:
        fh.write(text)


@pytest.fixture(autouse=True)
def small_index(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logfiles, "INDEX_EVERY", 3)  # checkpoints every 3 lines: every page crosses some
    monkeypatch.setattr(logfiles, "_CHUNK", 7)  # lines split across reads


async def test_every_page_matches_a_plain_read(tmp_path: Path) -> None:
    log = tmp_path / "t.log"
    lines = [f"line {i}" + "x" * (i % 5) for i in range(40)]
    log.write_text("\n".join(lines) + "\n")
    files = LogFiles(tmp_path)
    for skip in range(0, 42):
        for limit in (1, 2, 5, 13):
            got, start, total = await files.range(str(log), skip, limit)
            assert (got, start, total) == (lines[skip : skip + limit], skip, 40), (skip, limit)
    assert await files.range(str(log), 0, 4, from_end=True) == (lines[-4:], 36, 40)
    assert await files.range(str(log), 0, 100, from_end=True) == (lines, 0, 40)


async def test_growing_file_partial_line_and_replacement(tmp_path: Path) -> None:
    log = tmp_path / "t.log"
    log.write_text("a\nb\nc\nd")  # "d" is still being written
    files = LogFiles(tmp_path)
    assert await files.range(str(log), 0, 10) == (["a", "b", "c"], 0, 3)
    _append(log, "one\ne\nf\ng\n")
    assert await files.range(str(log), 2, 10) == (["c", "done", "e", "f", "g"], 2, 7)
    assert await files.range(str(log), 0, 2, from_end=True) == (["f", "g"], 5, 7)
    replaced = tmp_path / "new.log"
    replaced.write_text("x\ny\n")
    replaced.replace(log)  # a new file under the same name (another attempt): the index starts over
    assert await files.range(str(log), 0, 10) == (["x", "y"], 0, 2)


async def test_index_cache_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logfiles, "INDEXED_FILES", 2)
    files = LogFiles(tmp_path)
    for i in range(4):
        (tmp_path / f"{i}.log").write_text("a\n")
        await files.range(str(tmp_path / f"{i}.log"), 0, 1)
    assert [p.name for p in files._indexes] == ["2.log", "3.log"]


async def test_search_finds_every_match_in_steps_and_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "s.log"
    lines = [f"row {i} {'ERROR disk' if i % 7 == 3 else 'ok'}" for i in range(60)]
    log.write_text("\n".join(lines) + "\npartial Error")  # the unfinished last line is not searched
    files = LogFiles(tmp_path)
    expected = [[i, text] for i, text in enumerate(lines) if "error" in text.lower()]
    # all at once, case-insensitive
    hits, after, done, total = await files.search(str(log), "error", 0, 1000)
    assert (hits, done, total) == (expected, True, 60)
    assert after == 60
    # in steps of 2 matches, going on from `after`: the same matches, none twice
    found: list[list[object]] = []
    after, done = 0, False
    while not done:
        hits, after, done, _ = await files.search(str(log), "ERROR", after, 2)
        assert len(hits) <= 2
        found += hits
    assert found == expected
    # a request reads a bounded number of bytes, then says where to go on
    monkeypatch.setattr(logfiles, "MAX_SEARCH_BYTES", 100)
    hits, after, done, _ = await files.search(str(log), "error", 0, 1000)
    assert not done and 0 < after < 60
    assert hits == [h for h in expected if int(h[0]) < after]  # type: ignore[call-overload]


async def test_search_refuses_an_empty_or_huge_needle_and_a_path_outside(tmp_path: Path) -> None:
    from rpc.errors import BadRequest

    log = tmp_path / "s.log"
    log.write_text("a\n")
    files = LogFiles(tmp_path)
    for needle in ("", "x" * 201):
        with pytest.raises(BadRequest):
            await files.search(str(log), needle, 0, 10)
    with pytest.raises(BadRequest):
        await files.search("/etc/passwd", "root", 0, 10)


def test_a_result_carries_the_last_lines_of_the_log_within_the_byte_cap(tmp_path: Path) -> None:
    log = tmp_path / "1-1.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert logfiles.result_tail(log, 3, 4096) == "line 97\nline 98\nline 99"
    assert logfiles.result_tail(log, 20, 16) == "line 98\nline 99"  # whole lines from the end within 16 bytes
    log.write_text("x" * 10_000 + "\n")
    assert logfiles.result_tail(log, 20, 100) == "x" * 99  # one long last line: its end
    assert logfiles.result_tail(tmp_path / "missing.log", 20, 4096) == ""


@pytest.mark.parametrize(
    ("existing", "writes", "cap", "in_memory"),
    [
        ("", ["[porpoise] header\n", "[porpoise] finished: SUCCESS (exit code 0)\n"], 0, True),
        ("", ["".join(f"out {i}\n" for i in range(50))], 0, True),
        ("", ["no newline at the end"], 0, True),
        ("", ["a\rb\r\nc\x0bd\n", "é" * 3000 + "\n", "partial ü"], 0, True),  # other line breaks, UTF-8
        ("", ["y" * 20_000 + "\n", "short\n"], 0, True),  # a line longer than MAX_LINE_BYTES: clipped
        ("", ["z" * 5_000 + "\n"], 0, True),  # one last line longer than the byte cap: its end
        ("", ["w\n" * 40_000], 0, False),  # more than KEPT_BYTES: read from the file
        ("", [f"line {i}\n" * 40 for i in range(30)], 1_000, False),  # capped: the file was replaced
        ("an earlier start of this attempt\n", ["again\n"], 0, False),  # not all of it written here
        ("", [], 0, True),
    ],
)
def test_a_logs_tail_from_memory_is_what_the_file_gives(
    tmp_path: Path, existing: str, writes: list[str], cap: int, in_memory: bool
) -> None:
    path = tmp_path / "7-1.log"
    if existing:
        path.write_text(existing)
    log = logfiles.CappedLog(path, cap)
    for text in writes:
        log.write(text.encode())
    log.close()
    assert (log.kept is not None) == in_memory
    for lines, limit in ((20, 4096), (3, 4096), (20, 16), (1, 100), (0, 4096)):
        assert log.tail(lines, limit) == logfiles.result_tail(path, lines, limit), (lines, limit)


async def test_logs_read_together_are_whole_within_the_cap_and_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """log.downloads: each log whole (base64) when it holds at most ``cap`` bytes and the answer stays within
    its budget; a larger one, one past the budget, a path outside the log dir or not a regular file is left to be
    read apart; a missing one is said missing; more than a page of paths is refused."""
    files = LogFiles(tmp_path)
    (tmp_path / "1").mkdir()
    contents = {"a": b"first\n", "b": b"x" * 100, "c": bytes(range(256)), "d": b"y" * 60}
    for name, data in contents.items():
        (tmp_path / "1" / f"{name}.log").write_bytes(data)
    os.mkfifo(tmp_path / "1" / "fifo.log")
    (tmp_path / "1" / "outside.log").symlink_to("/etc/passwd")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "1" / "sock.log"))
    monkeypatch.setattr(logfiles, "LOGS_PER_CALL_BYTES", 400)
    names = ("a", "b", "missing", "c", "fifo", "outside", "sock", "d")
    paths = [str(tmp_path / "1" / f"{n}.log") for n in names] + ["/etc/passwd"]
    got = await files.together(paths, cap=300)
    sock.close()
    with pytest.raises(BadRequest, match="does not exist"):  # opened without following a link put there later
        logfiles._small(tmp_path / "1" / "outside.log", 300)
    assert [state for state, _ in got] == ["ok", "ok", "missing", "ok", "missing", "apart", "missing", "apart", "apart"]
    assert [base64.b64decode(data) for state, data in got if state == "ok"] == [contents[n] for n in "abc"]
    # "d" fits the cap but not what is left of the budget (400 - 6 - 100 - 256); alone it comes whole
    assert await files.together([paths[-2]], cap=300) == [["ok", base64.b64encode(contents["d"]).decode()]]
    assert await files.together([paths[-2]], cap=50) == [["apart", ""]]
    with pytest.raises(BadRequest, match="at most 64 logs per call"):
        await files.together(paths * 10, cap=300)
