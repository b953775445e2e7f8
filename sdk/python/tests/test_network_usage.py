"""Network policies, write-only secrets, API keys, usage and cost caps, sync
and async, against the real server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta

import httpx
import pytest

from withruntime import (
    AsyncClient,
    AsyncSandbox,
    BadRequestError,
    Client,
    CostCapError,
    ForbiddenError,
    KeyInfo,
    NetworkPolicy,
    NotFoundError,
    RateLimitedError,
    Sandbox,
    SandboxStoppedError,
    SpendingLimitError,
    UnauthorizedError,
    UsageRow,
)
from withruntime._http import create_body, usage_params
from withruntime.errors import api_error

from .conftest import Server

VALUE = "py-secret-value-5b1e0d"


class Recorder:
    """Keeps every answer body a client receives (an httpx response hook)."""

    def __init__(self) -> None:
        self.bodies: list[str] = []

    def sync_hook(self) -> Callable[[httpx.Response], None]:
        def hook(resp: httpx.Response) -> None:
            self.bodies.append(f"{resp.request.method} {resp.request.url.path}: {resp.read().decode()}")

        return hook

    def containing(self, s: str) -> list[str]:
        return [b for b in self.bodies if s in b]


@pytest.fixture
def recorded(server: Server) -> Iterator[tuple[Client, Recorder]]:
    rec = Recorder()
    with (
        httpx.Client(event_hooks={"response": [rec.sync_hook()]}) as hc,
        Client(server.url, server.key, http_client=hc) as c,
    ):
        yield c, rec


def wait_for(what: str, ok: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not ok():
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {seconds} s")
        time.sleep(0.2)


def test_request_bodies() -> None:
    kw = dict(template=None, timeout_seconds=None, cpu=None, memory_mib=None, disk_mib=None, env=None, metadata=None)
    assert create_body(network=NetworkPolicy(), **kw) == {}
    assert create_body(network=NetworkPolicy(allow=["pypi.org"]), secrets=["TOKEN"], max_cost_micros=5000, **kw) == {
        "network": {"internet": False, "allow": ["pypi.org"]},
        "secrets": ["TOKEN"],
        "maxCostMicros": 5000,
    }
    with pytest.raises(TypeError, match="list of secret names"):
        create_body(network=None, secrets="TOKEN", **kw)
    assert usage_params(None, None, None) == []
    naive = datetime(2026, 1, 2, 3, 4, 5)
    assert usage_params(date(2026, 1, 1), naive, "sandbox") == [
        ("from", "2026-01-01"),
        ("to", "2026-01-02T03:04:05+00:00"),
        ("groupBy", "sandbox"),
    ]
    assert NetworkPolicy.from_dict({"internet": True, "deny": ["x.example"]}).to_dict() == {
        "internet": True,
        "deny": ["x.example"],
    }
    e = api_error(400, "cost_cap", "too dear")
    assert type(e) is CostCapError and isinstance(e, BadRequestError)
    e = api_error(429, "spending_limit", "spent")
    assert type(e) is SpendingLimitError and isinstance(e, RateLimitedError)
    k = KeyInfo.from_dict({"id": "key_1", "name": "n", "prefix": "wr_abcdef", "secret": "wr_abcdefSECRET"})
    assert k.secret == "wr_abcdefSECRET" and "SECRET" not in repr(k) and k.daily_limit_micros is None


def test_secrets_network_keys_and_usage(server: Server, recorded: tuple[Client, Recorder]) -> None:
    admin, rec = recorded

    # A write-only secret.
    sec = admin.set_secret("PY_TOKEN", VALUE, ["api.example.com"])
    assert (sec.name, sec.hosts) == ("PY_TOKEN", ["api.example.com"]) and sec.created_at is not None
    assert [(s.name, s.hosts) for s in admin.list_secrets() if s.name == "PY_TOKEN"] == [
        ("PY_TOKEN", ["api.example.com"])
    ]
    with pytest.raises(BadRequestError) as ei:
        admin.set_secret("PY TOKEN", VALUE, ["api.example.com"])
    assert VALUE not in str(ei.value)

    # A key with a daily limit, and a client that uses it.
    key = admin.create_key("py-sdk", daily_limit_micros=5_000_000)
    assert key.id.startswith("key_") and key.secret.startswith(key.prefix) and key.daily_limit_micros == 5_000_000
    assert key.secret not in repr(key)
    listed = [k for k in admin.list_keys() if k.id == key.id]
    assert len(listed) == 1 and listed[0].secret == "" and listed[0].daily_limit_micros == 5_000_000
    assert not listed[0].revoked and listed[0].name == "py-sdk"

    with Client(server.url, key.secret) as keyed:
        # The key's own secret: the admin's of the same name is another one.
        own = keyed.set_secret("PY_TOKEN", VALUE, ["api.example.com"])
        assert own.owner == key.id and [s.owner for s in keyed.list_secrets()] == [key.id]
        # A sandbox of that key with the secret: its variable holds a placeholder.
        with Sandbox.create(
            client=keyed,
            timeout_seconds=120,
            memory_mib=256,
            secrets=["PY_TOKEN"],
            network=NetworkPolicy(allow=["api.example.com"]),
            max_cost_micros=1_000_000,
        ) as sbx:
            res = sbx.exec('printf %s "$PY_TOKEN"')
            assert res.exit_code == 0 and res.stdout.startswith("wr_placeholder_") and VALUE not in res.stdout
            keyed.delete_secret("PY_TOKEN")

            # Network policy: read, change, refuse an invalid one.
            assert sbx.network() == NetworkPolicy(allow=["api.example.com"])
            want = NetworkPolicy(internet=True, deny=["blocked.example.com"])
            assert sbx.set_network({"internet": True, "deny": ["blocked.example.com"]}) == want
            assert sbx.network() == want
            with pytest.raises(BadRequestError, match="allow"):
                sbx.set_network(NetworkPolicy(internet=True, allow=["x.example.com"]))

            # Some CPU, then the running cost.
            assert sbx.exec("timeout 1 sh -c 'while :; do :; done'; true").exit_code == 0
            wait_for("running cost", lambda: sbx.refresh().cost_micros > 0)
            sid = sbx.id
        with pytest.raises(SandboxStoppedError):
            sbx.network()  # the handle is closed
        info = next(s for s in admin.list(state="stopped") if s.id == sid)
        assert info.cost_micros > 0 and info.end_reason == "deleted"

        # Usage by sandbox and by key: the sandbox's final cost.
        rows = admin.usage(group_by="sandbox")
        assert all(isinstance(r, UsageRow) for r in rows)
        row = next(r for r in rows if r.group == sid)
        assert row.cpu_seconds > 0 and row.billed_cpu_seconds >= row.cpu_seconds and row.gib_seconds > 0
        assert row.overhead_cpu_seconds > 0  # gVisor's own CPU, reported apart
        assert row.cost_micros == info.cost_micros
        rep = keyed.usage_report(datetime.now(UTC) - timedelta(hours=1), group_by="key")
        assert rep.group_by == "key" and rep.prices.cpu_micros_per_vcpu_hour > 0 and rep.total.group == "total"
        krow = next(r for r in rep.rows if r.group == key.id)
        assert (krow.cpu_seconds, krow.cost_micros) == (row.cpu_seconds, row.cost_micros)
        with pytest.raises(BadRequestError, match="groupBy"):
            admin.usage(group_by="week")  # type: ignore[arg-type]

        # A key with a daily limit manages no keys; a revoked key is refused.
        with pytest.raises(ForbiddenError):
            keyed.revoke_key(key.id)
        admin.revoke_key(key.id)
        with pytest.raises(UnauthorizedError):
            keyed.list_keys()
    with pytest.raises(NotFoundError):
        admin.revoke_key(key.id)
    assert next(k for k in admin.list_keys() if k.id == key.id).revoked

    # A cost cap too small for the lease.
    with pytest.raises(CostCapError) as ce:
        Sandbox.create(client=admin, cpu=2, memory_mib=4096, timeout_seconds=3600, max_cost_micros=79_999)
    assert (ce.value.status, ce.value.code) == (400, "cost_cap")
    assert "80000 µ$" in ce.value.message and "maxCostMicros 79999" in ce.value.message

    # Deleting the secret.
    admin.delete_secret("PY_TOKEN")
    assert "PY_TOKEN" not in [s.name for s in admin.list_secrets()]
    with pytest.raises(NotFoundError):
        admin.delete_secret("PY_TOKEN")
    assert rec.containing(VALUE) == []


def test_async_secrets_network_keys_and_usage(server: Server) -> None:
    async def main() -> None:
        async with AsyncClient(server.url, server.key) as c:
            sec = await c.set_secret("PY_ASYNC_TOKEN", VALUE, ["*.example.org"])
            assert sec.hosts == ["*.example.org"]
            assert "PY_ASYNC_TOKEN" in [s.name for s in await c.list_secrets()]

            key = await c.create_key("py-async")
            assert key.secret and key.daily_limit_micros is None
            async with AsyncClient(server.url, key.secret) as keyed:
                async with AsyncSandbox.create(
                    client=keyed, timeout_seconds=120, memory_mib=256, secrets=["PY_ASYNC_TOKEN"]
                ) as sbx:
                    assert (await sbx.exec("echo $PY_ASYNC_TOKEN")).stdout.startswith("wr_placeholder_")
                    assert await sbx.network() == NetworkPolicy()
                    pol = await sbx.set_network(NetworkPolicy(allow=["*.example.org", "203.0.113.0/24"]))
                    assert pol == NetworkPolicy(allow=["*.example.org", "203.0.113.0/24"])
                    assert (await sbx.exec("timeout 1 sh -c 'while :; do :; done'; true")).exit_code == 0
                    sid = sbx.id
                rows = await keyed.usage(group_by="sandbox")
                row = next(r for r in rows if r.group == sid)
                assert row.cpu_seconds > 0 and row.cost_micros > 0
                krows = await c.usage(date.today() - timedelta(days=1), group_by="key")
                assert next(r for r in krows if r.group == key.id).cost_micros == row.cost_micros
                await c.revoke_key(key.id)
                with pytest.raises(UnauthorizedError):
                    await keyed.usage()
            with pytest.raises(CostCapError):
                await AsyncSandbox.create(client=c, timeout_seconds=3600, max_cost_micros=1)
            await c.delete_secret("PY_ASYNC_TOKEN")
            with pytest.raises(NotFoundError):
                await c.delete_secret("PY_ASYNC_TOKEN")

    asyncio.run(main())
