"""The E2B compatibility suite: the unmodified e2b SDK (PyPI e2b 2.63.0)
against a real Runtime server (``withruntime serve --e2b-listen``) with real
gVisor sandboxes. compat/e2b/run.sh starts the server and sets the SDK's
three variables, E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY (a tenant
key); COMPAT_OTHER_API_KEY is a second tenant's key, passed explicitly
where a test needs it."""

import os

import pytest
from e2b import Sandbox


def pytest_configure(config):
    for name in ("E2B_API_URL", "E2B_SANDBOX_URL", "E2B_API_KEY", "COMPAT_OTHER_API_KEY"):
        if not os.environ.get(name):
            raise pytest.UsageError(f"{name} is not set: run the suite with compat/e2b/run.sh")


@pytest.fixture(scope="module")
def sandbox():
    sb = Sandbox.create(timeout=300, envs={"FROM_CREATE": "yes"}, metadata={"suite": "python"})
    yield sb
    sb.kill()


@pytest.fixture()
def other_key():
    return os.environ["COMPAT_OTHER_API_KEY"]
