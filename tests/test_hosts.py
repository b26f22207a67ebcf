"""Several hosts on this machine (tests/hosts.py: network namespaces, a 3-member etcd cluster across
them, a master and a worker per host advertising its own address, PostgreSQL on a host of its own),
faults that only multiple hosts have, and the chaos ledger's checks after each: every command one
instance, every instance SUCCESS, every attempt ran once, no two attempts of a task overlapped,
nothing left running."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.states import TaskState, WorkflowState
from tests.host_workload import TaskSampler, Workload, measured
from tests.hosts import HostCluster

#: attempts of a worker a failover found lost
LOST_ON_HOST = (
    f"SELECT count(*) AS n FROM task_instance WHERE host = $1 AND state = {int(TaskState.NEED_FAULT_TOLERANCE)}"
)


pytestmark = pytest.mark.slow

TTL = 3.0


#: a lease that outlives an etcd election. A node cannot tell a lease the new leader will keep (etcd
#: extends every lease when a leader takes over) from one that expired: with no answer for a whole TTL it
#: must fence itself. Etcd's election (its default 1 s election timeout, randomised up to 2 s, then the
#: votes) plus a keep-alive interval must fit in the TTL with room for a loaded machine: production's 15 s
#: does; the 3 s of the other scenarios does not always (a CI run saw a worker fence itself).
ELECTION_PROOF_TTL = 6.0


def _cluster(workdir: Path, ttl: float = TTL, **kw: str) -> Iterator[HostCluster]:
    base = workdir / f"hosts-{uuid.uuid4().hex[:6]}"
    base.mkdir()
    os.chmod(base, 0o755)
    cluster = HostCluster(base, hosts=3, ttl=ttl, exec_slots="8", **kw)
    try:
        yield cluster.up()
    finally:
        cluster.down()


@pytest.fixture
def hosts(workdir: Path) -> Iterator[HostCluster]:
    yield from _cluster(workdir)


@pytest.fixture
def election_proof_hosts(workdir: Path) -> Iterator[HostCluster]:
    yield from _cluster(workdir, ttl=ELECTION_PROOF_TTL)


@pytest.fixture
def rejoining_hosts(workdir: Path) -> Iterator[HostCluster]:
    """Nodes that re-register as a new incarnation after losing their session (registry.on_lost)."""
    yield from _cluster(workdir, on_lost="reregister")


def _log(cluster: HostCluster, role: str, name: str) -> str:
    node = (cluster.masters if role == "master" else cluster.workers)[name]
    return node.proc.log_path.read_text(errors="replace")


@pytest.mark.timeout(400)
async def test_a_dead_host_s_instances_and_tasks_are_taken_over_by_the_other_hosts(hosts: HostCluster) -> None:
    work = Workload(hosts)
    await work.submit(workflows=4, width=3, sleep=2.0)
    with TaskSampler(hosts.base) as sampler:
        victim = await work.busy_host(hosts.names)
        master, worker = hosts.masters[victim].address, hosts.workers[victim].address
        owned = {r["id"] for r in await work.query("SELECT id FROM workflow_instance WHERE host = $1", master)}
        hosts.kill_host(victim)  # nodes, etcd member, tasks, reaper: SIGKILL

        async def released() -> bool:
            return await work.held_by(master, worker) == (0, 0)

        took = await measured(released, 6 * TTL, f"host {victim}'s instances and attempts taken over")
        print(f"\nhost {victim} died: its work taken over in {took:.1f} s (lease TTL {TTL} s)")
        await work.wait_all(180)
        summary = await work.check(sampler)
        moved = await work.query("SELECT id, host FROM workflow_instance WHERE id = ANY($1)", list(owned))
        lost = await work.query(LOST_ON_HOST, worker)
    work.stop_and_check_nothing_left(summary)
    assert not summary.violations, summary.text()
    assert moved and all(r["host"] != master for r in moved), moved
    assert lost[0]["n"] >= 1  # its running attempts were failed over (NEED_FAULT_TOLERANCE) and ran again


@pytest.mark.timeout(400)
async def test_a_cut_off_host_fences_itself_and_rejoins_as_a_new_incarnation(rejoining_hosts: HostCluster) -> None:
    hosts = rejoining_hosts
    work = Workload(hosts)
    await work.submit(workflows=4, width=3, sleep=2.0)
    with TaskSampler(hosts.base) as sampler:
        victim = await work.busy_host(hosts.names)
        master, worker = hosts.masters[victim].address, hosts.workers[victim].address
        revisions = {role: hosts.key_revision(role, victim) for role in ("master", "worker")}
        await asyncio.to_thread(hosts.lead_etcd_elsewhere, victim)  # its fencing, not an election, is tested
        hosts.net.cut(victim)  # its processes live on, cut off from every other host

        async def released() -> bool:
            return await work.held_by(master, worker) == (0, 0)

        took = await measured(released, 6 * TTL, f"host {victim}'s instances and attempts taken over")
        print(f"\nhost {victim} cut off: its work taken over in {took:.1f} s (lease TTL {TTL} s)")
        for role in ("master", "worker"):  # each judged its session LOST itself (and so fenced itself)
            await measured(lambda r=role: '"new": "LOST"' in _log(hosts, r, victim), TTL, f"{role} judged LOST")
        hosts.net.restore(victim)

        async def rejoined() -> bool:
            return all(hosts.key_revision(r, victim) > revisions[r] for r in revisions)

        # the master's fencing may wait for a database call in flight when the link went down (up to
        # database.command_timeout, 30 s) before it re-registers
        took = await measured(rejoined, 45, f"host {victim}'s nodes registered again")
        print(f"host {victim} back: its nodes registered again {took:.1f} s after the link came up")
        await work.wait_all(180)
        summary = await work.check(sampler)
        lost = await work.query(LOST_ON_HOST, worker)
    for role in ("master", "worker"):  # the same processes, as new incarnations
        node = (hosts.masters if role == "master" else hosts.workers)[victim]
        assert node.proc.exited() is None and node.healthy(), f"{role} on {victim} did not come back"
    work.stop_and_check_nothing_left(summary)
    assert not summary.violations, summary.text()
    assert lost[0]["n"] >= 1


@pytest.mark.timeout(400)
async def test_when_the_etcd_leader_s_host_dies_the_others_keep_scheduling_and_none_fences_itself(
    election_proof_hosts: HostCluster,
) -> None:
    hosts = election_proof_hosts
    work = Workload(hosts)
    await work.submit(workflows=4, width=3, sleep=2.0)
    with TaskSampler(hosts.base) as sampler:
        await work.busy_host(hosts.names)
        leader = hosts.etcd_leader()
        survivors = [n for n in hosts.names if n != leader]
        hosts.kill_host(leader)  # the etcd leader with its host's master, worker and tasks
        await measured(lambda: hosts.etcd_leader(required=False) in survivors, 10 * TTL, "a new etcd leader")
        await work.submit(workflows=2, width=3, sleep=0.5)  # scheduling goes on after the election
        await work.wait_all(180)
        summary = await work.check(sampler)
    for name in survivors:  # their leases lived through the election: nobody judged its session LOST
        for role in ("master", "worker"):
            node = (hosts.masters if role == "master" else hosts.workers)[name]
            assert node.proc.exited() is None, f"{role} on {name} exited"
            assert '"new": "LOST"' not in _log(hosts, role, name), f"{role} on {name} fenced itself"
    work.stop_and_check_nothing_left(summary)
    assert not summary.violations, summary.text()


@pytest.mark.timeout(500)
async def test_partitions_between_a_master_etcd_and_postgresql_cause_no_split_brain(
    rejoining_hosts: HostCluster,
) -> None:
    hosts = rejoining_hosts
    work = Workload(hosts)
    await work.submit(workflows=4, width=3, sleep=2.0)
    with TaskSampler(hosts.base) as sampler:
        # 1. it reaches PostgreSQL but no etcd quorum (its own member is cut off from the other two)
        victim = await work.busy_host(hosts.names)
        others = [n for n in hosts.names if n != victim]
        master, worker = hosts.masters[victim].address, hosts.workers[victim].address
        await asyncio.to_thread(hosts.lead_etcd_elsewhere, victim)
        hosts.net.block(victim, others)

        async def released() -> bool:
            return await work.held_by(master, worker) == (0, 0)

        await measured(released, 6 * TTL, f"host {victim}'s work taken over while it still reaches PostgreSQL")
        assert '"new": "LOST"' in _log(hosts, "master", victim)
        hosts.net.unblock(victim, others)
        await work.wait_all(180)

        # 2. it reaches etcd (keeps its lease) but not PostgreSQL: nobody takes its instances over
        await work.submit(workflows=4, width=3, sleep=2.0)
        victim = await work.busy_host(hosts.names)
        master = hosts.masters[victim].address
        owned = {
            r["id"]
            for r in await work.query(
                f"SELECT id FROM workflow_instance WHERE state = {int(WorkflowState.RUNNING_EXECUTION)} AND host = $1",
                master,
            )
        }
        hosts.net.block(victim, ["db"])
        try:
            await asyncio.sleep(2 * TTL)  # the fault's length (two TTLs), not a wait for a condition
            rows = await work.query(
                "SELECT id FROM workflow_instance WHERE id = ANY($1) AND host = $2", list(owned), master
            )
        finally:
            hosts.net.unblock(victim, ["db"])
        still = {r["id"] for r in rows}
        assert owned and still == owned, f"instances of a master with a live lease were taken over: {owned - still}"
        await work.wait_all(180)
        summary = await work.check(sampler)
    work.stop_and_check_nothing_left(summary)
    assert not summary.violations, summary.text()
