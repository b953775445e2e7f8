"""run_code and code contexts (sync and async) against real kernels in a
code-interpreter sandbox."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from withruntime import (
    AsyncSandbox,
    CodeContext,
    Execution,
    NotFoundError,
    OutputMessage,
    Result,
    Sandbox,
    UnsupportedError,
)


def png_size(b: bytes) -> tuple[int, int]:
    assert b[:8] == b"\x89PNG\r\n\x1a\n", b[:8]
    w, h = struct.unpack(">II", b[16:24])
    return w, h


def test_run_code(ci: Sandbox) -> None:
    ex = ci.run_code("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\ndf")
    assert isinstance(ex, Execution) and ex.error is None
    main = [r for r in ex.results if r.is_main_result]
    assert len(main) == 1 and main[0].html and "<table" in main[0].html and main[0].text
    assert ex.text == main[0].text and ex.context_id == "default" and ex.execution_count == 1
    assert ci.run_code("int(df.a.sum())").text == "3"

    # A chart, streamed, with the callbacks.
    out: list[OutputMessage] = []
    results: list[Result] = []
    ex = ci.run_code(
        "import matplotlib.pyplot as plt\nprint('plotting')\nplt.plot([1, 2, 3]);",
        on_stdout=out.append,
        on_result=results.append,
    )
    assert [str(m) for m in out] == ["plotting\n"] and ex.logs.stdout == ["plotting\n"]
    assert len(results) == 1 and results == ex.results and ex.text is None
    png = results[0].png_bytes()
    assert png is not None
    w, h = png_size(png)
    assert 100 <= w <= 5000 and 100 <= h <= 5000
    assert "image/png" in results[0].formats()

    # An exception is the Execution's error, not raised.
    errors: list[Any] = []
    ex = ci.run_code("1/0", on_error=errors.append)
    assert ex.error is not None and ex.error.name == "ZeroDivisionError" and "ZeroDivisionError" in ex.error.traceback
    assert errors == [ex.error]
    assert ci.run_code("df.shape").text == "(2, 1)"

    # A timeout interrupts and keeps the context.
    ex = ci.run_code("import time; time.sleep(30)", timeout_seconds=1)
    assert ex.timed_out and ex.error is not None and ex.error.name == "TimeoutError" and not ex.state_lost
    assert ci.run_code("len(df)").text == "2"

    # Per-call env.
    assert ci.run_code("import os; os.environ.get('WHO')", env={"WHO": "me"}).text == "'me'"


def test_code_contexts(ci: Sandbox) -> None:
    ctx = ci.create_code_context(cwd="/tmp")
    assert isinstance(ctx, CodeContext) and ctx.id.startswith("ctx_") and ctx.cwd == "/tmp"
    ci.run_code("v = 1", context=ctx)
    assert ci.run_code("'v' in globals()").text == "False"
    assert ci.run_code("v", context=ctx.id).text == "1"
    assert {c.id for c in ci.list_code_contexts()} == {"default", ctx.id}
    assert ci.restart_code_context(ctx).restarts == 1
    assert ci.run_code("'v' in globals()", context=ctx).text == "False"
    ci.remove_code_context(ctx)
    with pytest.raises(NotFoundError):
        ci.run_code("1", context=ctx)


def test_run_code_needs_kernels(sbx: Sandbox) -> None:
    with pytest.raises(UnsupportedError) as ei:
        sbx.run_code("1")
    assert "code-interpreter" in str(ei.value)


def test_async_run_code(code_template: str) -> None:
    async def main() -> None:
        async with AsyncSandbox.create(template=code_template, timeout_seconds=300) as sbx:
            ex = await sbx.run_code("x = 20\nx * 2 + 2")
            assert ex.text == "42"
            seen: list[str] = []

            async def on_stdout(m: OutputMessage) -> None:
                await asyncio.sleep(0)
                seen.append(m.line)

            ex = await sbx.run_code("print(x)\nimport matplotlib.pyplot as plt; plt.plot([x]);", on_stdout=on_stdout)
            assert seen == ["20\n"] and len(ex.results) == 1 and ex.results[0].png
            ctx = await sbx.create_code_context()
            assert (await sbx.run_code("'x' in globals()", context=ctx)).text == "False"
            assert len(await sbx.list_code_contexts()) == 2
            await sbx.restart_code_context(ctx)
            await sbx.remove_code_context(ctx)

    asyncio.run(main())
