"""commands: the envd process service."""

import time

import pytest
from e2b import CommandExitException
from e2b.exceptions import SandboxException, TimeoutException


def test_stdout_stderr_exit(sandbox):
    r = sandbox.commands.run("echo out; echo err >&2")
    assert (r.stdout, r.stderr, r.exit_code) == ("out\n", "err\n", 0)
    with pytest.raises(CommandExitException) as e:
        sandbox.commands.run("echo partial; echo bad >&2; exit 3")
    assert e.value.exit_code == 3
    assert e.value.stdout == "partial\n" and e.value.stderr == "bad\n"


def test_python_is_a_command(sandbox):
    # E2B's base template has `python`; so does Runtime's (python-is-python3).
    assert sandbox.commands.run("python -c 'print(6*7)'").stdout == "42\n"


def test_env_cwd_user(sandbox):
    assert sandbox.commands.run("echo $FROM_CREATE $ONE", envs={"ONE": "1"}).stdout == "yes 1\n"
    assert sandbox.commands.run("pwd").stdout == "/home/user\n"
    assert sandbox.commands.run("pwd", cwd="/tmp").stdout == "/tmp\n"
    assert sandbox.commands.run("whoami").stdout == "user\n"
    assert sandbox.commands.run("whoami && pwd", user="root").stdout == "root\n/root\n"
    # The SDK runs commands in a login shell.
    assert sandbox.commands.run("shopt -q login_shell && echo login").stdout == "login\n"


def test_on_stdout_streams(sandbox):
    chunks = []
    errs = []
    r = sandbox.commands.run(
        "for i in 1 2 3; do echo line$i; sleep 0.1; done; echo e >&2",
        on_stdout=chunks.append,
        on_stderr=errs.append,
    )
    assert "".join(chunks) == "line1\nline2\nline3\n" == r.stdout
    assert len(chunks) >= 2, "output came in one piece: not streamed"
    assert "".join(errs) == "e\n"


def test_binary_output_is_exact(sandbox):
    r = sandbox.commands.run("printf 'caf\\xc3\\xa9 \\xe2\\x82\\xac'")
    assert r.stdout == "café €"


def test_background_wait_list_connect_kill(sandbox):
    h = sandbox.commands.run("sleep 0.5; echo done", background=True)
    assert h.pid > 0
    assert h.wait().stdout == "done\n"

    long = sandbox.commands.run("echo started; touch /tmp/long-started; sleep 600", background=True)
    deadline = time.time() + 10
    while not sandbox.files.exists("/tmp/long-started"):
        assert time.time() < deadline
        time.sleep(0.05)
    assert long.pid in [p.pid for p in sandbox.commands.list()]
    again = sandbox.commands.connect(long.pid)
    assert again.pid == long.pid
    assert long.kill() is True
    with pytest.raises(CommandExitException) as e:
        again.wait()
    assert e.value.exit_code != 0
    assert "started" in e.value.stdout
    assert long.pid not in [p.pid for p in sandbox.commands.list()]
    assert sandbox.commands.kill(long.pid) is False  # already ended
    assert sandbox.commands.kill(999999) is False  # never existed


def test_send_stdin_and_close(sandbox):
    h = sandbox.commands.run("while read l; do echo got:$l; done; echo eof", background=True, stdin=True)
    sandbox.commands.send_stdin(h.pid, "one\n")
    h.send_stdin("two\n")
    sandbox.commands.close_stdin(h.pid)
    assert h.wait().stdout == "got:one\ngot:two\neof\n"
    # Without stdin=True the command reads end-of-file at once.
    assert sandbox.commands.run("cat; echo after").stdout == "after\n"
    quiet = sandbox.commands.run("sleep 30", background=True)
    with pytest.raises(SandboxException):
        sandbox.commands.send_stdin(quiet.pid, "x")
    quiet.kill()


def test_command_timeout(sandbox):
    with pytest.raises(TimeoutException):
        sandbox.commands.run("sleep 30", timeout=1)


def test_stream_input(sandbox):
    h = sandbox.commands.run("cat", background=True, stdin=True)
    sandbox.commands.stream_input(h.pid, iter([b"a", "b", b"c\n"]))
    sandbox.commands.close_stdin(h.pid)
    assert h.wait().stdout == "abc\n"


def test_kill_during_a_command_says_the_sandbox_was_killed():
    # As E2B's: the stream's connection drops when the sandbox goes, the SDK
    # probes envd's /health (502) and raises its "killed" timeout error.
    from e2b import Sandbox

    sb = Sandbox.create(timeout=120)
    cmd = sb.commands.run("sleep 60", background=True)
    sb.kill()
    with pytest.raises(TimeoutException) as e:
        cmd.wait()
    assert "sandbox was killed or reached its end of life" in str(e.value)


def test_cwd_the_user_cannot_enter(sandbox):
    """A command as the default user in /root (mode 0700) is refused with
    an InvalidArgumentException that says why; as root it runs."""
    from e2b.exceptions import InvalidArgumentException

    with pytest.raises(InvalidArgumentException) as e:
        sandbox.commands.run("pwd", cwd="/root")
    assert "can enter" in str(e.value)
    assert sandbox.commands.run("pwd", cwd="/root", user="root").stdout == "/root\n"
