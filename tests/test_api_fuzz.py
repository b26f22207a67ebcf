"""A fuzz run of the API from its own OpenAPI document (schemathesis), against a real API server process on a
database of its own, as an admin: valid and invalid requests for every operation. No answer may be a 500,
carry a traceback, or contain a secret (a data source's password, an alert sender's secrets, the RPC secret,
the database password).

Bounded for ``make test``: ``PORPOISE_FUZZ_EXAMPLES`` examples per operation and generation mode (default 6:
about a minute on 2 cores); raise it for a longer hunt. A failure prints the request that caused it.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable

from engine.accounts.tokens import create_token
from engine.api.server import ROUTES
from engine.infra.etcd import EtcdServer
from engine.infra.postgres import PostgresServer
from tests import databases
from tests.helpers import TEST_SECRET, NodeProc, node_env

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("PORPOISE_FUZZ_EXAMPLES", "6"))
DS_PASSWORD = f"ds-pw-{uuid.uuid4().hex}"
HOOK_TOKEN = f"hook-token-{uuid.uuid4().hex}"
SMTP_PASSWORD = f"smtp-pw-{uuid.uuid4().hex}"
#: answers that never end (server-sent events): tests/test_live.py covers them
STREAMS = {"/api/v1/events"}
#: a token id no fuzzed DELETE /tokens/{id} will guess: the run keeps its credentials
TOKEN_ID = 987_654_321_012


@pytest.fixture(scope="module")
def fuzz_api(workdir: Path, pg_server: PostgresServer, etcd_server: EtcdServer) -> Iterator[tuple[str, str]]:
    """An API server of its own (its own database and registry root), rate limits off, and an admin token."""
    admin_name = f"fuzzadmin_{uuid.uuid4().hex[:8]}"

    async def prepare() -> tuple[str, str]:
        _, dsn = await databases.create_migrated(pg_server, "fuzz")
        conn = await asyncpg.connect(dsn)
        try:
            uid = await conn.fetchval(
                "INSERT INTO users (user_name, user_type) VALUES ($1, 0) RETURNING id", admin_name
            )
            token_id, token = await create_token(conn, uid, "fuzz")
            await conn.execute("UPDATE access_token SET id = $2 WHERE id = $1", token_id, TOKEN_ID)
        finally:
            await conn.close()
        return dsn, token

    dsn, token = asyncio.run(prepare())
    name = databases.database_name(dsn)
    env = node_env(etcd_server.endpoint, f"/{name}", 3, PORPOISE_DATABASE_DSN=dsn)
    api = NodeProc(
        "api", env, workdir / "logs", name,
        ["api.token_cache_seconds=0", "api.rate_limit_per_second=0", "api.anonymous_rate_limit_per_second=0",
         "api.alerts_enabled=false"],
    ).start()  # fmt: skip
    try:
        yield f"http://{api.address}", token
    finally:
        api.stop()


def _secrets(url: str, token: str) -> dict[str, str]:
    """Put secrets where the API keeps them: a data source password, alert sender secrets."""
    headers = {"Authorization": f"Bearer {token}"}
    ds = requests.put(f"{url}/api/v1/datasources/fuzzsource", headers=headers, timeout=10,
                      json={"params": {"host": "127.0.0.1", "user": "u", "password": DS_PASSWORD}})  # fmt: skip
    assert ds.status_code == 200, ds.text
    group = {
        "name": "fuzzgroup",
        "senders": [
            {"type": "WEBHOOK", "name": "chat",
             "params": {"url": "https://example.com/hook", "headers": {"X-Token": HOOK_TOKEN}}},
            {"type": "EMAIL", "name": "mail", "params": {"host": "127.0.0.1", "sender": "p@example.com",
             "receivers": ["o@example.com"], "user": "u", "password": SMTP_PASSWORD}},
        ],
    }  # fmt: skip
    made = requests.post(f"{url}/api/v1/alert-groups", headers=headers, json=group, timeout=10)
    assert made.status_code in (200, 201), made.text
    return {"data source password": DS_PASSWORD, "webhook header": HOOK_TOKEN, "smtp password": SMTP_PASSWORD,
            "rpc secret": TEST_SECRET}  # fmt: skip


def test_fuzzing_every_operation_finds_no_500_no_traceback_and_no_secret(
    fuzz_api: tuple[str, str], pg_server: PostgresServer
) -> None:
    url, token = fuzz_api
    secrets = _secrets(url, token)
    secrets["database password"] = pg_server.dsn.split("@", 1)[0].rsplit(":", 1)[-1]
    raw = requests.get(f"{url}/openapi.json", timeout=10).json()
    schema = schemathesis.openapi.from_dict(raw)
    headers = {"Authorization": f"Bearer {token}"}
    session = requests.Session()
    problems: list[str] = []
    calls = 0

    def check(case: schemathesis.Case) -> None:
        nonlocal calls
        response = case.call(base_url=url, session=session, headers=headers, timeout=20)
        calls += 1
        text = response.text
        where = (
            f"{case.method} {case.formatted_path} query={case.query} body={json.dumps(case.body, default=str)[:300]}"
        )
        if response.status_code >= 500:
            problems.append(f"{response.status_code} for {where}: {text[:300]}")
        if "Traceback" in text or 'File "' in text:
            problems.append(f"a traceback in the answer to {where}")
        for what, value in secrets.items():
            if value and value in text:
                problems.append(f"the {what} in the answer to {where}")

    skipped_negative = 0
    operations = [result.ok() for result in schema.get_all_operations()]
    # every route of the table, not a few
    assert {(r.method, r.path) for r in ROUTES} <= {(o.method.upper(), o.path) for o in operations}
    for operation in operations:
        if operation.path in STREAMS:
            continue
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):

            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(mode))
            def fuzz(case: schemathesis.Case) -> None:
                check(case)

            try:
                fuzz()
            except Unsatisfiable:  # nothing of this operation can be made invalid (no parameters, no body)
                assert mode is schemathesis.GenerationMode.NEGATIVE, operation.label
                skipped_negative += 1
    assert skipped_negative < len(operations) // 2
    assert not problems, f"{len(problems)} problem(s) in {calls} calls:\n" + "\n".join(sorted(set(problems))[:40])
    # the run kept its credentials to the end (a fuzzed call revoking them would hide every later problem)
    assert requests.get(f"{url}/api/v1/projects", headers=headers, timeout=10).status_code == 200
