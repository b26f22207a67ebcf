"""RPC codec and signatures (pure)."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any, Union

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core import jsonbody
from rpc import auth, codec
from rpc.errors import BadRequest
from rpc.messages import TaskDispatch, TaskDispatchBatch, TaskReports, TaskResult


def _dispatch(**kw: object) -> TaskDispatch:
    base = dict(
        task_instance_id=1,
        attempt=1,
        workflow_instance_id=2,
        workflow_definition_code=3,
        task_code=4,
        task_name="t",
        task_type="SHELL",
        task_params={"rawScript": "true"},
        master="127.0.0.1:1",
    )
    base.update(kw)
    return TaskDispatch(**base)  # type: ignore[arg-type]


def test_round_trip() -> None:
    msg = _dispatch(schedule_time="2026-01-01T00:00:00", var_pool=[{"prop": "a"}], datasources={"w": {"dsn": "x"}})
    assert codec.decode(TaskDispatch, codec.encode(msg)) == msg


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("attempt"), "TaskDispatch.attempt: required field missing"),
        (lambda d: d.update(attempt=True), "TaskDispatch.attempt: expected an integer, got bool"),
        (lambda d: d.update(task_params=[]), "TaskDispatch.task_params: expected an object"),
        (lambda d: d.update(var_pool=[1]), "TaskDispatch.var_pool[0]: expected an object"),
        (lambda d: d.update(schedule_time=5), "TaskDispatch.schedule_time: expected a string"),
        (lambda d: d.update(extra=1), "unknown fields ['extra']"),
        (lambda d: d.update(v=2), "unsupported message version 2"),
    ],
)
def test_decode_errors_name_the_field(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    data = codec.encode(_dispatch())
    mutate(data)
    with pytest.raises(BadRequest, match=message.replace("[", r"\[").replace("]", r"\]")):
        codec.decode(TaskDispatch, data)


def test_float_fields_accept_ints_and_none_for_optionals() -> None:
    data = codec.encode(TaskResult(1, 1, 1, "h", "SUCCESS", 0, 1, 2))
    assert codec.decode(TaskResult, data).state == "SUCCESS"
    assert codec.decode(TaskDispatch, {**codec.encode(_dispatch()), "schedule_time": None}).schedule_time is None


@given(st.binary(max_size=200), st.text(min_size=1, max_size=20))
def test_signatures_verify_only_the_same_body_method_and_secret(body: bytes, method: str) -> None:
    header = auth.sign("s3cret", method, body, now=1000)
    assert auth.verify("s3cret", method, body, header, 60, now=1010) == ""
    assert auth.verify("other", method, body, header, 60, now=1010) == "bad signature"
    assert auth.verify("s3cret", method + "x", body, header, 60, now=1010) == "bad signature"
    assert auth.verify("s3cret", method, body + b"x", header, 60, now=1010) == "bad signature"
    assert "expired" in auth.verify("s3cret", method, body, header, 60, now=2000)


def test_malformed_headers() -> None:
    assert "missing" in auth.verify("s", "m", b"", None, 60)
    assert "malformed" in auth.verify("s", "m", b"", "t=abc,v1=", 60)


def test_the_nonce_is_signed_and_a_replay_within_the_window_is_refused() -> None:
    body = b'{"x":1}'
    header = auth.sign("s3cret", "m", body, now=1000)
    nonce = dict(p.split("=", 1) for p in header.split(","))["n"]
    other = header.replace(f"n={nonce}", "n=" + "0" * len(nonce))
    assert auth.verify("s3cret", "m", body, other, 60, now=1000) == "bad signature"  # the nonce is under the MAC
    assert "malformed" in auth.verify("s3cret", "m", body, header.replace(f"n={nonce},", ""), 60, now=1000)
    guard = auth.ReplayGuard(max_skew=60)
    assert auth.verify("s3cret", "m", body, header, 60, now=1000, replay=guard) == ""
    assert "replayed" in auth.verify("s3cret", "m", body, header, 60, now=1001, replay=guard)
    fresh = auth.sign("s3cret", "m", body, now=1000)
    assert auth.verify("s3cret", "m", body, fresh, 60, now=1000, replay=guard) == ""


def test_the_replay_guard_forgets_a_nonce_once_its_timestamp_is_out_of_the_window() -> None:
    guard = auth.ReplayGuard(max_skew=60)
    assert guard.first_use("abc", now=0) and guard.first_use("def", now=10)
    assert not guard.first_use("abc", now=119.9)
    assert guard.first_use("abc", now=120.1) and len(guard) == 2  # "abc" again, "def"


def test_every_request_message_has_a_method() -> None:
    from rpc import messages

    requests = [c for c in vars(messages).values() if dataclasses.is_dataclass(c) and hasattr(c, "METHOD")]
    assert len({c.METHOD for c in requests}) == len(requests) >= 9


# -- the compiled decoder against the hint-walking one it replaced (same values, same messages) ----------


def _walk_value(hint: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _walk_value(arg, value, path)
            except BadRequest as exc:
                errors.append(str(exc))
        raise BadRequest(errors[0] if errors else f"{path}: bad value", 400)
    if hint is Any:
        return value
    checks = {bool: ("expected true/false", bool), int: ("expected an integer", int), str: ("expected a string", str)}
    if hint in checks:
        words, kind = checks[hint]
        if (hint is int and isinstance(value, bool)) or not isinstance(value, kind):
            raise BadRequest(f"{path}: {words}, got {type(value).__name__}", 400)
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BadRequest(f"{path}: expected a number, got {type(value).__name__}", 400)
        return float(value)
    if origin is list:
        if not isinstance(value, list):
            raise BadRequest(f"{path}: expected a list, got {type(value).__name__}", 400)
        (item,) = typing.get_args(hint) or (Any,)
        return [_walk_value(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise BadRequest(f"{path}: expected an object, got {type(value).__name__}", 400)
        _, item = typing.get_args(hint) or (str, Any)
        return {str(k): _walk_value(item, v, f"{path}.{k}") for k, v in value.items()}
    assert dataclasses.is_dataclass(hint)
    if not isinstance(value, dict):
        raise BadRequest(f"{path}: expected an object, got {type(value).__name__}", 400)
    return _walk_obj(hint, value, path)  # type: ignore[arg-type]


def _walk_obj(cls: type, data: dict[str, Any], path: str) -> Any:
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    known = set()
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        known.add(f.name)
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise BadRequest(f"{path}.{f.name}: required field missing", 400)
            continue
        kwargs[f.name] = _walk_value(hints[f.name], data[f.name], f"{path}.{f.name}")
    unknown = set(data) - known - {"v"}
    if unknown:
        raise BadRequest(f"{path}: unknown fields {sorted(unknown)}", 400)
    return cls(**kwargs)


def _outcome(decode: Any) -> Any:
    try:
        return ("ok", decode())
    except BadRequest as exc:
        return ("bad", str(exc), exc.status)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
    max_leaves=4,
)


@given(st.data())
def test_the_compiled_decoder_answers_as_walking_the_type_hints_did(data: st.DataObject) -> None:
    result = TaskResult(7, 1, 2, "h:1", "SUCCESS", 0, 1, 2, var_pool=[{"prop": "o", "value": "1"}])
    cls, body = data.draw(st.sampled_from([
        (TaskDispatch, codec.encode(_dispatch(var_pool=[{"prop": "a"}], datasources={"w": {"dsn": "x"}}))),
        (TaskDispatchBatch, json.loads(codec.dumps(TaskDispatchBatch([_dispatch(), _dispatch(attempt=2)])))),
        (TaskReports, json.loads(codec.dumps(TaskReports(running=[], results=[result, result])))),
    ]))  # fmt: skip
    # replace or drop a value somewhere in the body (or add a field), then decode both ways
    node: Any = body
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = data.draw(st.sampled_from(keys))
        if not isinstance(node[key], dict | list) or data.draw(st.booleans()):
            break
        node = node[key]
    if keys:
        action = data.draw(st.sampled_from(["replace", "drop", "add"]))
        if action == "replace":
            node[key] = data.draw(_json)
        elif action == "drop" and isinstance(node, dict):
            del node[key]
        elif isinstance(node, dict):
            node[data.draw(st.text(max_size=4))] = data.draw(_json)
    assert _outcome(lambda: codec.decode(cls, body)) == _outcome(
        lambda: _walk_obj(cls, body, cls.__name__) if body.get("v", 1) == 1 else codec.decode(cls, body)
    )


_params = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@given(_params)
def test_a_body_reads_back_as_the_json_module_wrote_it(params: Any) -> None:
    # bodies are written with orjson (core/jsonbody.py) and read with the json module: whatever a user's task
    # parameters hold (an integer past 64 bits, a lone surrogate) arrives as the json module would send it
    msg = _dispatch(task_params={"rawScript": "true", "x": params})
    as_before = json.dumps(codec.encode(msg), separators=(",", ":"), default=jsonbody.fields)
    assert json.loads(codec.dumps(msg)) == json.loads(as_before)
    assert codec.decode(TaskDispatch, json.loads(codec.dumps(msg))) == msg


def test_what_orjson_refuses_is_written_by_the_json_module() -> None:
    deep: Any = "leaf"
    for _ in range(300):  # orjson stops at 254 levels
        deep = [deep]
    for value in (2**70, -(2**64), "lone \ud800 surrogate", deep, {1: "int key", None: "none key"}):
        msg = _dispatch(task_params={"rawScript": "true", "x": value})
        assert json.loads(codec.dumps(msg))["task_params"]["x"] == json.loads(json.dumps(value))
    # NaN and the infinities are not JSON (PostgreSQL's jsonb refuses them: no parameter holds one): null
    msg = _dispatch(task_params={"rawScript": "true", "x": [float("nan"), float("inf")]})
    assert json.loads(codec.dumps(msg))["task_params"]["x"] == [None, None]
    # nested dataclasses are written field by field either way
    batch = TaskDispatchBatch([_dispatch(task_params={"rawScript": "true", "big": 2**80})])
    assert codec.decode(TaskDispatchBatch, json.loads(codec.dumps(batch))) == batch
