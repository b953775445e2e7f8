"""runtime_run_code (code_interpreter_tools): the same declaration and the
same text as the Go SDK's, checked images in each provider's shape, and a
real chart from a real kernel."""

from __future__ import annotations

import asyncio
import base64
import json
import struct

from withruntime import AsyncSandbox, Execution, Sandbox
from withruntime.tools import (
    RUN_CODE_NAME,
    adispatch,
    anthropic_tool_result,
    code_definitions,
    code_interpreter_tools,
    dispatch,
    gemini_parts,
    openai_responses_output,
)
from withruntime.tools._code import summarize

from .conftest import go_testdata


def test_definition_is_the_go_golden() -> None:
    golden = go_testdata(f"{RUN_CODE_NAME}.golden").read_bytes()
    assert code_definitions()[0].to_json().encode() == golden


def test_summary_is_the_go_golden() -> None:
    ex = Execution.from_dict(json.loads(go_testdata("run_code_execution.json").read_text()))
    text, images = summarize(ex)
    imgs = [f"{i['mimeType']} {i['width']}x{i['height']} {len(base64.b64decode(i['data']))} bytes" for i in images]
    got = text + "\n--- images ---\n" + "\n".join(imgs) + "\n"
    assert got == go_testdata("run_code_summary.golden").read_text()


def test_arguments_are_checked_first(sbx: Sandbox) -> None:
    tools = code_interpreter_tools(sbx)
    for args in ('{"code": "", "language": ""}', '{"code": "1", "language": "ruby"}', '{"language": ""}'):
        res = dispatch(tools, RUN_CODE_NAME, args)
        assert res["isError"] and "no Python kernel" not in res["text"], res


def png_size(b: bytes) -> tuple[int, int]:
    assert b[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", b[16:24])
    return w, h


def test_run_code_tool(ci: Sandbox) -> None:
    tools = code_interpreter_tools(ci)
    assert [t.__name__ for t in tools] == [RUN_CODE_NAME]
    res = dispatch(
        tools,
        RUN_CODE_NAME,
        '{"code": "import pandas as pd\\ndf = pd.DataFrame({\'y\': [1, 4, 9]})\\nprint(len(df))", "language": ""}',
    )
    assert not res["isError"] and "stdout:\n3" in res["text"], res
    res = dispatch(
        tools,
        RUN_CODE_NAME,
        {"code": "import matplotlib.pyplot as plt\nplt.plot(df['y']); plt.show()", "language": "python"},
    )
    assert not res["isError"] and len(res["images"]) == 1 and "image 1 (image/png" in res["text"], res["text"]
    img = res["images"][0]
    w, h = png_size(base64.b64decode(img["data"]))
    assert (w, h) == (img["width"], img["height"]) and w >= 100
    a = anthropic_tool_result(res, "toolu_1")
    assert a["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": img["data"]},
    }
    o = openai_responses_output(res, "call_1")
    assert o["output"][1] == {"type": "input_image", "image_url": "data:image/png;base64," + img["data"]}
    g = gemini_parts(res, RUN_CODE_NAME, "fc_1")
    assert g[0]["functionResponse"]["response"]["output"] == res["text"] and g[1]["inlineData"]["data"] == img["data"]
    res = tools[0]("1/0")
    assert not res["isError"] and "error: ZeroDivisionError" in res["text"]


def test_run_code_tool_without_kernels(sbx: Sandbox) -> None:
    res = code_interpreter_tools(sbx)[0]("1")
    assert res["isError"] and "runtime_exec" in res["text"]


def test_async_run_code_tool(code_template: str) -> None:
    async def main() -> None:
        async with AsyncSandbox.create(template=code_template, timeout_seconds=300) as sbx:
            tools = code_interpreter_tools(sbx)
            res = await adispatch(tools, RUN_CODE_NAME, {"code": "x = 6 * 7\nx", "language": ""})
            assert "result:\n42" in res["text"], res

    asyncio.run(main())
