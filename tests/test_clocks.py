"""A master's wall clock against the database's, with a real master process whose clock is moved by the
test-only hook debug.clock_offset (as a clock stepped on its host would read)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest

from engine.infra.etcd import EtcdServer
from tests.helpers import NodeProc

pytestmark = pytest.mark.slow


def _skews(text: str) -> list[float]:
    """The skews the node logged (the database's clock less its own)."""
    return [
        json.loads(line)["skew"]
        for line in text.splitlines()
        if line.startswith("{") and '"event": "clock skew against the database"' in line
    ]


def test_a_master_whose_clock_is_far_off_the_database_s_does_not_start(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str
) -> None:
    with pytest.raises(AssertionError) as failed:  # the start helper: it exited instead of becoming healthy
        node_factory("master", etcd_server.endpoint, etcd_root, PORPOISE_DEBUG_CLOCK_OFFSET="30")
    text = str(failed.value)
    assert "master exited with 1" in text, text
    said = re.search(r"porpoise master: this master's clock is ([0-9.]+) s ahead of the database's", text)
    assert said and 29 < float(said[1]) < 31 and "(at most 1.0 s allowed: master.max_clock_skew)" in text, text


def test_the_clock_offset_hook_moves_a_master_s_clock_and_the_check_measures_it(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str
) -> None:
    master = node_factory(
        "master", etcd_server.endpoint, etcd_root,
        PORPOISE_DEBUG_CLOCK_OFFSET="-20", PORPOISE_MASTER_MAX_CLOCK_SKEW="60",
    )  # fmt: skip
    (skew,) = _skews(master.proc.log_path.read_text(errors="replace"))
    assert 19 < skew < 21, skew  # 20 s behind the database's clock: allowed here, measured, logged
    plain = node_factory("master", etcd_server.endpoint, etcd_root)
    (skew,) = _skews(plain.proc.log_path.read_text(errors="replace"))
    assert abs(skew) < 1, skew  # the same machine's clock
