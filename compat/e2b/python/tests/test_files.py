"""files: the envd filesystem service and /files."""

import time
import uuid

import pytest
from e2b import FileType, FilesystemEventType
from e2b.exceptions import FileNotFoundException


def test_text_and_bytes(sandbox):
    info = sandbox.files.write("notes/a.txt", "hello\nworld")
    assert info.path == "/home/user/notes/a.txt"
    assert sandbox.files.read("/home/user/notes/a.txt") == "hello\nworld"
    data = bytes(range(256)) * 64
    sandbox.files.write("/tmp/blob.bin", data)
    assert bytes(sandbox.files.read("/tmp/blob.bin", format="bytes")) == data
    sandbox.files.write("/tmp/stream.bin", data, use_octet_stream=True)
    assert bytes(sandbox.files.read("/tmp/stream.bin", format="bytes")) == data
    written = sandbox.files.write_files(
        [{"path": "/tmp/m/one", "data": "1"}, {"path": "/tmp/m/two", "data": b"2"}]
    )
    assert [w.path for w in written] == ["/tmp/m/one", "/tmp/m/two"]
    assert sandbox.commands.run("cat /tmp/m/one /tmp/m/two").stdout == "12"
    with pytest.raises(FileNotFoundException):
        sandbox.files.read("/tmp/does-not-exist")


def test_list_mkdir_exists_rename_remove(sandbox):
    d = f"/tmp/d-{uuid.uuid4().hex[:8]}"
    assert sandbox.files.make_dir(d + "/sub") is True
    assert sandbox.files.make_dir(d + "/sub") is False
    sandbox.files.write(d + "/f.txt", "x")
    entries = sandbox.files.list(d)
    assert sorted((e.name, e.type) for e in entries) == [("f.txt", FileType.FILE), ("sub", FileType.DIR)]
    deep = sandbox.files.list(d, depth=2)
    assert d + "/sub" in [e.path for e in deep]
    assert sandbox.files.exists(d + "/f.txt")
    moved = sandbox.files.rename(d + "/f.txt", d + "/sub/g.txt")
    assert moved.path == d + "/sub/g.txt"
    assert not sandbox.files.exists(d + "/f.txt")
    info = sandbox.files.get_info(d + "/sub/g.txt")
    assert info.size == 1 and info.type == FileType.FILE and info.permissions.startswith("-rw")
    sandbox.files.remove(d)
    assert not sandbox.files.exists(d)
    sandbox.files.remove(d)  # as envd: removing what is not there is no error
    with pytest.raises(FileNotFoundException):
        sandbox.files.list(d)


def test_list_a_big_directory(sandbox):
    """A directory of more entries than one of Runtime's listing pages holds
    (10000) is listed whole, in order, as envd lists it."""
    d = f"/tmp/big-{uuid.uuid4().hex[:8]}"
    made = sandbox.commands.run(
        f"mkdir {d} && cd {d} && python3 -c \"[open('f%05d' % i, 'w').close() for i in range(12001)]\"", timeout=300
    )
    assert made.exit_code == 0
    entries = sandbox.files.list(d)
    assert [e.name for e in entries] == [f"f{i:05d}" for i in range(12001)]


def test_watch_dir(sandbox):
    d = f"/tmp/w-{uuid.uuid4().hex[:8]}"
    sandbox.files.make_dir(d + "/deep")
    handle = sandbox.files.watch_dir(d, recursive=True)
    events = []

    def wait_for(name, kind):
        deadline = time.time() + 5
        while not any(e.name == name and e.type == kind for e in events):
            assert time.time() < deadline, f"no {kind} event for {name} in {events}"
            time.sleep(0.1)
            events.extend(handle.get_new_events())

    try:
        sandbox.files.write(d + "/new.txt", "content")
        wait_for("new.txt", FilesystemEventType.WRITE)
        sandbox.files.write(d + "/deep/inner.txt", "more")
        wait_for("deep/inner.txt", FilesystemEventType.CREATE)
        sandbox.commands.run(f"rm {d}/new.txt")
        wait_for("new.txt", FilesystemEventType.REMOVE)
    finally:
        handle.stop()


def test_watcher_events_of_a_write_are_there_when_it_returns(sandbox):
    # envd's watcher lives in the process that writes, so E2B programs read
    # a write's events right after it, once: a new file is CREATE, CHMOD
    # (its owner set), WRITE; a rewrite CHMOD, WRITE; a mkdir, a rename and
    # a remove each show at once too, with no polling.
    d = f"/home/user/wr-{uuid.uuid4().hex[:8]}"
    sandbox.files.make_dir(d)
    handle = sandbox.files.watch_dir(d, include_entry=True)
    try:
        sandbox.files.write(f"{d}/f.txt", "one")
        got = [(e.name, e.type) for e in handle.get_new_events()]
        assert got == [("f.txt", FilesystemEventType.CREATE), ("f.txt", FilesystemEventType.CHMOD),
                       ("f.txt", FilesystemEventType.WRITE)], got
        sandbox.files.write(f"{d}/f.txt", "two")
        events = handle.get_new_events()
        assert [(e.name, e.type) for e in events] == [("f.txt", FilesystemEventType.CHMOD),
                                                      ("f.txt", FilesystemEventType.WRITE)], events
        assert events[-1].entry.path == f"{d}/f.txt" and events[-1].entry.size == 3
        sandbox.files.make_dir(f"{d}/sub")
        assert ("sub", FilesystemEventType.CREATE) in [(e.name, e.type) for e in handle.get_new_events()]
        sandbox.files.rename(f"{d}/f.txt", f"{d}/g.txt")
        assert [(e.name, e.type) for e in handle.get_new_events()] == [
            ("f.txt", FilesystemEventType.RENAME), ("g.txt", FilesystemEventType.CREATE)]
        sandbox.files.remove(f"{d}/g.txt")
        assert [(e.name, e.type) for e in handle.get_new_events()] == [("g.txt", FilesystemEventType.REMOVE)]
        assert handle.get_new_events() == []  # each event once
    finally:
        handle.stop()


def test_watch_dir_sees_a_short_lived_file_and_a_rename(sandbox):
    # Runtime's watch is inotify in the sandbox: a file that lived for 10 ms
    # is reported, and a rename is RENAME of the old name then CREATE of the
    # new, as envd reports it.
    d = f"/tmp/w-{uuid.uuid4().hex[:8]}"
    sandbox.files.make_dir(d)
    handle = sandbox.files.watch_dir(d)
    try:
        sandbox.commands.run(
            f"python3 -c \"import os, time; open('{d}/blink', 'w').close(); time.sleep(0.01); os.unlink('{d}/blink')\""
            f" && echo x > {d}/a && mv {d}/a {d}/b"
        )
        want = [("blink", FilesystemEventType.CREATE), ("blink", FilesystemEventType.REMOVE),
                ("a", FilesystemEventType.RENAME), ("b", FilesystemEventType.CREATE)]
        events = []
        deadline = time.time() + 10
        while not all(w in [(e.name, e.type) for e in events] for w in want):
            assert time.time() < deadline, f"want {want} in {events}"
            time.sleep(0.1)
            events.extend(handle.get_new_events())
        got = [(e.name, e.type) for e in events if (e.name, e.type) in want]
        assert got == want, got
    finally:
        handle.stop()


def test_file_metadata(sandbox):
    # Kept as the file's user.e2b.* extended attributes, as E2B's envd
    # 0.6.2 does: keys lower-cased, reported on the write, stat, list and
    # rename; a rename keeps them, a new write without metadata clears them.
    d = f"/home/user/meta-{uuid.uuid4().hex[:8]}"
    info = sandbox.files.write(f"{d}/a.txt", "x", metadata={"Owner": "agent-7", "stage": "draft"})
    assert info.metadata == {"owner": "agent-7", "stage": "draft"}
    assert sandbox.files.get_info(f"{d}/a.txt").metadata == {"owner": "agent-7", "stage": "draft"}
    assert [e.metadata for e in sandbox.files.list(d)] == [{"owner": "agent-7", "stage": "draft"}]
    moved = sandbox.files.rename(f"{d}/a.txt", f"{d}/b.txt")
    assert moved.metadata == {"owner": "agent-7", "stage": "draft"}
    written = sandbox.files.write_files([{"path": f"{d}/c", "data": "1"}, {"path": f"{d}/e", "data": "2"}], metadata={"batch": "7"})
    assert [w.metadata for w in written] == [{"batch": "7"}, {"batch": "7"}]
    assert sandbox.files.write(f"{d}/b.txt", "y").metadata is None
    assert sandbox.files.get_info(f"{d}/b.txt").metadata is None

    # The sandbox owns its files' attributes: one set from inside with a
    # valid key is reported (as E2B's); bytes no write could have given
    # (non-ASCII, a key with upper case, a huge value) are not, and break
    # nothing.
    script = (
        "import os; p=%r; os.setxattr(p, 'user.e2b.from-inside', b'ok'); "
        "os.setxattr(p, 'user.e2b.bin', bytes([255, 0, 10])); os.setxattr(p, 'user.e2b.Upper', b'x'); "
        "os.setxattr(p, 'user.e2b.big', b'v' * 4090); os.setxattr(p, 'user.other', b'z')"
    ) % f"{d}/c"
    r = sandbox.commands.run(f'python3 -c "{script}"')
    assert r.exit_code == 0, r.stderr
    assert sandbox.files.get_info(f"{d}/c").metadata == {"batch": "7", "from-inside": "ok"}


def test_gzip_upload(sandbox):
    sandbox.files.write("/tmp/gz.txt", "zipped " * 1000, gzip=True)
    assert sandbox.files.read("/tmp/gz.txt") == "zipped " * 1000


def test_stat_of_a_symlink_is_what_it_points_to(sandbox):
    # As envd: get_info follows the link (a chain too) and gives the
    # target's type and size, with its absolute path as symlink_target; the
    # link is marked is_symlink, which this SDK reports as type SYMLINK.
    d = f"/tmp/l-{uuid.uuid4().hex[:8]}"
    sandbox.files.write(d + "/t.txt", "abc")
    sandbox.commands.run("ln -s t.txt link && ln -s link link2 && ln -s nowhere dangling", cwd=d)
    for name in ("link", "link2"):
        info = sandbox.files.get_info(f"{d}/{name}")
        assert info.type == FileType.SYMLINK
        assert info.permissions == "-rw-r--r--"  # the target's, not lrwxrwxrwx
        assert info.symlink_target == d + "/t.txt"
        assert info.size == 3
    assert sandbox.files.get_info(d + "/dangling").symlink_target == "nowhere"


def test_signed_url_names_no_sandbox_with_a_sandbox_url(sandbox):
    """With E2B_SANDBOX_URL the SDK's download_url is the bare sandbox URL,
    which names no sandbox: the facade refuses it, saying what works
    (E2B_DOMAIN mode, or Runtime's own signed URLs)."""
    import urllib.error
    import urllib.request

    url = sandbox.download_url("/home/user/anything.txt")
    assert "signature=v1_" in url
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url, timeout=10)
    assert e.value.code == 401
    assert "E2B_DOMAIN" in e.value.read().decode()
