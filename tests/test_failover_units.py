"""Which instances a failover sweep may take (no processes): judged against the live masters read after
the candidate orphans, so a master that registered during a long sweep keeps what it took meanwhile."""

from __future__ import annotations

from engine.master.failover import still_orphaned


def _row(instance_id: int, host: str, epoch: int) -> dict[str, object]:
    return {"id": instance_id, "host": host, "epoch": epoch}


def test_an_instance_of_a_master_that_registered_since_is_not_taken() -> None:
    # read first: only m1 lived; then m2 registered and took instance 2 from a dead master (epoch 457)
    candidates = [_row(1, "dead:1", 10), _row(2, "m2:1", 457)]
    floors_now = {"m1:1": 0, "m2:1": 450}
    assert [r["id"] for r in still_orphaned(candidates, floors_now)] == [1]


def test_an_earlier_incarnation_s_instance_is_taken_and_the_current_one_s_kept() -> None:
    candidates = [_row(1, "m1:1", 99), _row(2, "m1:1", 100), _row(3, "m1:1", 101)]
    assert [r["id"] for r in still_orphaned(candidates, {"m1:1": 100})] == [1]
