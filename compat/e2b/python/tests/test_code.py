"""The code interpreter: the unmodified e2b-code-interpreter SDK (2.11.5),
whose Sandbox.create() asks for the template code-interpreter-v1 (Runtime's
code-interpreter) and talks to port 49999 (POST /execute, /contexts)."""

import base64

import pytest
from e2b_code_interpreter import Sandbox


@pytest.fixture(scope="module")
def ci():
    sb = Sandbox.create(timeout=300)
    yield sb
    sb.kill()


def test_state_kept_between_cells(ci):
    assert ci.run_code("x = 1").error is None
    ex = ci.run_code("x + 1")
    assert ex.error is None
    assert ex.text == "2"
    assert ex.results[0].is_main_result


def test_matplotlib_chart_is_a_png(ci):
    ex = ci.run_code(
        "import matplotlib.pyplot as plt\n"
        "plt.plot([1, 2, 3], [1, 4, 9])\n"
        "plt.show()"
    )
    assert ex.error is None
    pngs = [r.png for r in ex.results if r.png]
    assert len(pngs) == 1
    assert base64.b64decode(pngs[0]).startswith(b"\x89PNG\r\n\x1a\n")


def test_pil_image_saved_to_a_file_is_a_result(ci):
    # As E2B's interpreter: Image.save(path) also shows the image, once per
    # save, and still writes the file; a save into a buffer shows nothing.
    ex = ci.run_code(
        "import io\n"
        "from PIL import Image\n"
        "im = Image.new('RGB', (8, 8), (200, 10, 10))\n"
        "im.save('red.png')\n"
        "im.save(io.BytesIO(), format='PNG')\n"
        "import os; print(os.path.getsize('red.png') > 0, Image.Image.save.__name__)"
    )
    assert ex.error is None, ex.error
    pngs = [r.png for r in ex.results if r.png]
    assert len(pngs) == 1, ex.results
    assert base64.b64decode(pngs[0]).startswith(b"\x89PNG\r\n\x1a\n")
    assert ex.logs.stdout == ["True save\n"]


def test_exception_is_execution_error(ci):
    ex = ci.run_code("1/0")
    assert ex.error is not None
    assert ex.error.name == "ZeroDivisionError"
    assert "division by zero" in ex.error.value
    assert "ZeroDivisionError" in ex.error.traceback


def test_on_stdout_and_stderr_callbacks(ci):
    out, err = [], []
    ex = ci.run_code(
        "import sys\nprint('hello from the kernel')\nprint('to stderr', file=sys.stderr)",
        on_stdout=out.append,
        on_stderr=err.append,
    )
    assert ex.error is None
    assert "hello from the kernel" in "".join(m.line for m in out)
    assert "to stderr" in "".join(m.line for m in err)
    assert "hello from the kernel" in "".join(ex.logs.stdout)
    assert out[0].timestamp > 0


def test_env_vars_for_one_cell(ci):
    ex = ci.run_code("import os; os.environ.get('ONLY_HERE')", envs={"ONLY_HERE": "yes"})
    assert ex.text == "yes"  # E2B gives a string result without its quotes
    assert ci.run_code("import os; os.environ.get('ONLY_HERE')").text is None


def test_contexts_create_run_restart_remove(ci):
    ctx = ci.create_code_context(language="python")
    assert ctx.id and ctx.language == "python"
    assert ctx.cwd == "/home/user"  # E2B's default for a new context
    assert ci.run_code("import os; os.getcwd()", context=ctx).text == "/home/user"
    assert ci.run_code("y = 41", context=ctx).error is None
    assert ci.run_code("y + 1", context=ctx).text == "42"
    # Contexts are isolated: the default context has no y.
    assert ci.run_code("y").error.name == "NameError"
    assert ctx.id in [c.id for c in ci.list_code_contexts()]
    ci.restart_code_context(ctx)
    assert ci.run_code("y", context=ctx).error.name == "NameError"
    ci.remove_code_context(ctx)
    assert ctx.id not in [c.id for c in ci.list_code_contexts()]


def test_code_port_needs_the_access_token(ci):
    import httpx
    import os

    url = os.environ["E2B_SANDBOX_URL"] + "/execute"
    h = {"E2b-Sandbox-Id": ci.sandbox_id, "E2b-Sandbox-Port": "49999"}
    r = httpx.post(url, json={"code": "1"}, headers=h)
    assert r.status_code == 401
    r = httpx.post(url, json={"code": "1"}, headers={**h, "X-Access-Token": "not-the-token"})
    assert r.status_code == 401


def test_line_chart_data(ci):
    """A matplotlib line chart comes back as result.chart: E2B's LineChart,
    with its labels, units, scales and every point of each line."""
    from e2b_code_interpreter.charts import ChartType, LineChart

    ex = ci.run_code(
        "import matplotlib.pyplot as plt\n"
        "days = [1, 2, 3, 4]\n"
        "plt.plot(days, [20.5, 22.0, 19.5, 25.0], label='noon')\n"
        "plt.plot(days, [10, 11, 9, 12], label='night')\n"
        "plt.title('Temperatures')\n"
        "plt.xlabel('Day')\n"
        "plt.ylabel('Temperature (C)')\n"
        "plt.legend()\n"
        "plt.show()"
    )
    assert ex.error is None
    [res] = [r for r in ex.results if r.chart]
    assert res.png
    chart = res.chart
    assert isinstance(chart, LineChart) and chart.type == ChartType.LINE
    assert (chart.title, chart.x_label, chart.y_label, chart.y_unit) == ("Temperatures", "Day", "Temperature (C)", "C")
    assert chart.x_unit is None
    assert (chart.x_scale, chart.y_scale) == ("linear", "linear")
    assert chart.x_ticks and all(isinstance(t, float) for t in chart.x_ticks)
    assert len(chart.x_tick_labels) == len(chart.x_ticks)
    assert [e.label for e in chart.elements] == ["noon", "night"]
    assert chart.elements[0].points == [(1.0, 20.5), (2.0, 22.0), (3.0, 19.5), (4.0, 25.0)]
    assert all(isinstance(y, float) for _, y in chart.elements[1].points)
    assert [y for _, y in chart.elements[1].points] == [10, 11, 9, 12]
    # It survives the SDK's own serialisation.
    assert '"type": "line"' in ex.to_json()


def test_bar_chart_data(ci):
    """A bar chart's bars come back with their category, group and value."""
    from e2b_code_interpreter.charts import BarChart

    ex = ci.run_code(
        "import matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots()\n"
        "ax.bar(['apples', 'pears', 'plums'], [30, 12, 7], label='2024')\n"
        "ax.set_title('Fruit sold')\n"
        "ax.set_xlabel('Fruit')\n"
        "ax.set_ylabel('Crates')\n"
        "plt.show()"
    )
    assert ex.error is None
    chart = next(r.chart for r in ex.results if r.chart)
    assert isinstance(chart, BarChart)
    assert (chart.title, chart.x_label, chart.y_label) == ("Fruit sold", "Fruit", "Crates")
    assert [(b.label, b.group, b.value) for b in chart.elements] == [
        ("apples", "2024", 30),
        ("pears", "2024", 12),
        ("plums", "2024", 7),
    ]


def test_dataframe_data(ci):
    """A DataFrame's result carries its columns as result.data."""
    ex = ci.run_code("import pandas as pd\npd.DataFrame({'city': ['Oslo', 'Lima'], 'pop': [0.7, 10.1]})")
    assert ex.error is None
    [res] = ex.results
    assert res.data == {"city": ["Oslo", "Lima"], "pop": [0.7, 10.1]}
    assert res.html and "Oslo" in res.html


def test_string_result_text_has_no_quotes(ci):
    """A cell whose value is a string gives that string as text, as E2B's
    interpreter does (not Python's repr with its quotes)."""
    assert ci.run_code("'plain' + ' text'").text == "plain text"
    assert ci.run_code("42").text == "42"


@pytest.mark.parametrize("envs", [None, {"SHAPE": "not the warm image's"}])
def test_default_context_works_in_the_users_home(envs):
    """E2B's kernels start in /home/user (Runtime's own in /workspace):
    listed so before any cell, and the first cell runs there with its
    execution count 1 (the move is silent). With envs the sandbox boots
    without the warm image, and its kernel starts there too."""
    sb = Sandbox.create(timeout=120, envs=envs)
    try:
        default = [c for c in sb.list_code_contexts() if c.language == "python"]
        assert [c.cwd for c in default] == ["/home/user"]
        ex = sb.run_code("import os; os.getcwd()")
        assert ex.error is None and ex.text == "/home/user" and ex.execution_count == 1
        assert sb.create_code_context().cwd == "/home/user"
    finally:
        sb.kill()


def test_default_context_is_listed_and_root_context_runs():
    """list_code_contexts shows the default context before any cell has
    run, and a context in /root (E2B's kernels are root's) works."""
    sb = Sandbox.create(timeout=120)
    try:
        assert "python" in [c.language for c in sb.list_code_contexts()]
        ctx = sb.create_code_context(language="python", cwd="/root")
        assert ctx.cwd == "/root"
        assert [c.id for c in sb.list_code_contexts()][-1] == ctx.id
        ex = sb.run_code("import os; print(os.getcwd(), os.geteuid())", context=ctx)
        assert ex.error is None and "".join(ex.logs.stdout).strip() == "/root 0"
    finally:
        sb.kill()


def test_other_languages_run_in_kernels_of_their_own():
    """A JavaScript cell (E2B's "js") and a Bash cell each keep their state
    in a kernel of their own, apart from Python's; a JavaScript error comes
    back with its name and traceback; each language's default context is
    listed with it and works in /home/user; a language without a kernel is
    refused.

    A sandbox of its own: each language's kernel takes its own memory
    (Deno's about 280 MiB), and the module's sandbox holds what the other
    tests left in Python's; the JavaScript context is removed before the
    Bash one starts, so the two fit the default 512 MiB with room."""
    ci = Sandbox.create(timeout=300)
    try:
        _other_languages(ci)
    finally:
        ci.kill()


def _other_languages(ci):
    ci.run_code("x = 'python'")
    assert ci.run_code("let x = 20; x + 1", language="js").text == "21"
    assert ci.run_code("x * 2", language="javascript").text == "40"
    assert ci.run_code("x").text == "python"
    # as E2B's, each language's default kernel works in the user's home
    assert ci.run_code("console.log(Deno.cwd())", language="js").logs.stdout == ["/home/user\n"]

    ex = ci.run_code("throw new TypeError('no such thing')", language="js")
    assert ex.error is not None
    assert ex.error.name == "TypeError"
    assert ex.error.value == "no such thing"
    assert "TypeError" in ex.error.traceback
    langs = {c.id: c.language for c in ci.list_code_contexts()}
    assert langs.get("default-javascript") == "javascript"
    ci.remove_code_context("default-javascript")

    assert "".join(ci.run_code("N=7; echo start; pwd", language="bash").logs.stdout) == "start\n/home/user\n"
    assert "".join(ci.run_code("echo $((N * 6))", language="bash").logs.stdout) == "42\n"
    langs = {c.id: c.language for c in ci.list_code_contexts()}
    assert langs.get("default-bash") == "bash"

    with pytest.raises(Exception) as exc:
        ci.run_code("1", language="cobol")
    assert "cobol" in str(exc.value)
