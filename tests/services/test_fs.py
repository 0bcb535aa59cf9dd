"""``LocalFileSystem``: confinement to the session's roots, reads, atomic writes (real files)."""

from __future__ import annotations

import errno
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_driver import RpcError
from acp_driver.services import LocalFileSystem, ServiceError

from ._helpers import FakeSession

INVALID_PARAMS = -32602
NOT_FOUND = -32002
SECRET = "top secret\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text(SECRET)
    return Path(os.path.realpath(path))


@pytest.fixture
def sibling(tmp_path: Path) -> Path:
    """``root2`` next to ``root``: shares its name as a prefix, is not inside it."""
    path = tmp_path / "root2"
    path.mkdir()
    (path / "secret.txt").write_text(SECRET)
    return Path(os.path.realpath(path))


@pytest.fixture
def fs() -> LocalFileSystem:
    return LocalFileSystem()


@pytest.fixture
def unix_socket(root: Path) -> Iterator[Path]:
    path = root / "sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    try:
        yield path
    finally:
        sock.close()


async def refused(coro: object, reason: str, code: int = INVALID_PARAMS) -> ServiceError:
    with pytest.raises(RpcError) as info:
        await coro  # type: ignore[misc]
    error = info.value
    assert isinstance(error, ServiceError), repr(error)
    assert (error.code, error.reason) == (code, reason), repr(error)
    assert error.data["reason"] == reason
    return error


# ---------------------------------------------------------------------- escapes: reads


async def test_relative_path_is_refused(fs, session, root, monkeypatch):
    (root / "a.txt").write_text("x")
    monkeypatch.chdir(root)
    error = await refused(fs.read_text_file(session, "a.txt"), "relative_path")
    assert "'a.txt' is relative" in error.message
    await refused(fs.read_text_file(session, "./a.txt"), "relative_path")


async def test_dotdot_traversal_out_of_the_root_is_refused(fs, session, root, outside):
    path = f"{root}/../outside/secret.txt"
    error = await refused(fs.read_text_file(session, path), "outside_roots")
    assert f"resolves to {outside}/secret.txt" in error.message
    assert f"outside the session's roots ({root})" in error.message
    deep = f"{root}/{'../' * 30}etc/passwd"
    await refused(fs.read_text_file(session, deep), "outside_roots")


async def test_symlinked_file_pointing_outside_is_refused(fs, session, root, outside):
    (root / "link.txt").symlink_to(outside / "secret.txt")
    await refused(fs.read_text_file(session, str(root / "link.txt")), "outside_roots")


async def test_symlinked_directory_pointing_outside_is_refused(fs, session, root, outside):
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    await refused(fs.read_text_file(session, str(root / "linkdir" / "secret.txt")), "outside_roots")
    await refused(fs.read_text_file(session, str(root / "linkdir" / "missing.txt")), "outside_roots")


async def test_sibling_directory_with_a_common_prefix_is_outside(fs, session, root, sibling):
    assert str(sibling).startswith(str(root))
    error = await refused(fs.read_text_file(session, str(sibling / "secret.txt")), "outside_roots")
    assert error.message == (f"path {sibling}/secret.txt is outside the session's roots ({root})")


@pytest.mark.parametrize(
    "path", ["/proc/self/environ", "/proc/self/cmdline", "/proc/1/mem", "/sys/kernel/uevent_helper"]
)
async def test_proc_and_sys_are_refused(fs, session, path):
    await refused(fs.read_text_file(session, path), "special_path")


@pytest.mark.parametrize("path", ["/dev/null", "/dev/zero", "/dev/urandom", "/dev/stdin"])
async def test_device_files_are_refused(fs, session, path):
    await refused(fs.read_text_file(session, path), "special_path")


async def test_special_trees_are_refused_even_when_a_root_contains_them():
    everything = LocalFileSystem(extra_roots=["/"])
    session = FakeSession("s", "/nonexistent-root")
    for path in ("/proc/self/environ", "/dev/zero", "/dev/null", "/sys/kernel/uevent_helper"):
        await refused(everything.read_text_file(session, path), "special_path")
        await refused(everything.write_text_file(session, path, "x"), "special_path")


async def test_symlink_inside_the_root_to_a_device_is_refused(fs, session, root):
    (root / "zero").symlink_to("/dev/zero")
    await refused(fs.read_text_file(session, str(root / "zero")), "special_path")
    (root / "env").symlink_to("/proc/self/environ")
    await refused(fs.read_text_file(session, str(root / "env")), "special_path")


async def test_fifo_inside_the_root_is_refused_without_blocking(fs, session, root):
    fifo = root / "fifo"
    os.mkfifo(fifo)
    error = await refused(fs.read_text_file(session, str(fifo)), "not_regular_file")
    assert "is a FIFO; only regular files" in error.message
    await refused(fs.write_text_file(session, str(fifo), "x"), "not_regular_file")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


async def test_socket_inside_the_root_is_refused(fs, session, unix_socket):
    error = await refused(fs.read_text_file(session, str(unix_socket)), "not_regular_file")
    assert "is a socket" in error.message
    await refused(fs.write_text_file(session, str(unix_socket), "x"), "not_regular_file")


async def test_directory_is_refused(fs, session, root):
    (root / "sub").mkdir()
    error = await refused(fs.read_text_file(session, str(root / "sub")), "is_directory")
    assert "is a directory" in error.message
    await refused(fs.read_text_file(session, str(root)), "is_directory")
    await refused(fs.write_text_file(session, str(root / "sub"), "x"), "is_directory")
    await refused(fs.write_text_file(session, str(root), "x"), "is_directory")
    assert (root / "sub").is_dir()


async def test_nul_byte_and_empty_paths_are_refused(fs, session, root):
    error = await refused(fs.read_text_file(session, f"{root}/a\0/etc/passwd"), "invalid_path")
    assert "NUL byte" in error.message
    await refused(fs.write_text_file(session, f"{root}/a\0b", "x"), "invalid_path")
    await refused(fs.read_text_file(session, ""), "invalid_path")


async def test_symlink_loop_is_refused(fs, session, root):
    (root / "a").symlink_to(root / "b")
    (root / "b").symlink_to(root / "a")
    with pytest.raises(ServiceError) as info:
        await fs.read_text_file(session, str(root / "a"))
    assert info.value.code == INVALID_PARAMS


# ---------------------------------------------------------------------- escapes: writes


async def test_write_through_a_symlink_to_outside_is_refused(fs, session, root, outside):
    (root / "link.txt").symlink_to(outside / "secret.txt")
    await refused(fs.write_text_file(session, str(root / "link.txt"), "pwned"), "outside_roots")
    assert (outside / "secret.txt").read_text() == SECRET
    assert (root / "link.txt").is_symlink()


async def test_write_through_a_dangling_symlink_to_outside_is_refused(fs, session, root, outside):
    (root / "dangling").symlink_to(outside / "new.txt")
    await refused(fs.write_text_file(session, str(root / "dangling"), "pwned"), "outside_roots")
    assert not (outside / "new.txt").exists()


async def test_write_into_a_symlinked_directory_outside_is_refused(fs, session, root, outside):
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    await refused(fs.write_text_file(session, str(root / "linkdir" / "new.txt"), "x"), "outside_roots")
    await refused(fs.write_text_file(session, str(root / "linkdir" / "secret.txt"), "x"), "outside_roots")
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == SECRET


async def test_write_into_a_nonexistent_directory_outside_is_refused(fs, session, root, tmp_path):
    target = tmp_path / "elsewhere" / "deep" / "file.txt"
    await refused(fs.write_text_file(session, str(target), "x"), "outside_roots")
    await refused(fs.write_text_file(session, f"{root}/../elsewhere/file.txt", "x"), "outside_roots")
    assert not (tmp_path / "elsewhere").exists()


async def test_write_to_a_sibling_with_a_common_prefix_is_refused(fs, session, sibling):
    await refused(fs.write_text_file(session, str(sibling / "secret.txt"), "x"), "outside_roots")
    await refused(fs.write_text_file(session, str(sibling / "new.txt"), "x"), "outside_roots")
    assert (sibling / "secret.txt").read_text() == SECRET
    assert not (sibling / "new.txt").exists()


async def test_relative_write_is_refused(fs, session, root, monkeypatch):
    monkeypatch.chdir(root)
    await refused(fs.write_text_file(session, "new.txt", "x"), "relative_path")
    assert not (root / "new.txt").exists()


async def test_a_symlink_swapped_in_after_the_check_is_not_followed(fs, session, root, outside):
    """TOCTOU: the path is walked with O_NOFOLLOW, so a directory replaced by a symlink fails."""
    sub = root / "sub"
    sub.mkdir()
    (sub / "secret.txt").write_text("inside\n")
    target = fs._target(session, str(sub / "secret.txt"))
    sub.rename(root / "sub.old")
    sub.symlink_to(outside, target_is_directory=True)  # the race: after the check, before the open
    with pytest.raises(ServiceError) as info:
        fs._read_bytes(target, None, None)
    assert info.value.reason == "path_changed"
    with pytest.raises(ServiceError) as info:
        fs._write_bytes(target, b"pwned")
    assert info.value.reason == "path_changed"
    assert (outside / "secret.txt").read_text() == SECRET


async def test_a_final_symlink_swapped_in_is_not_followed(fs, session, root, outside):
    (root / "f.txt").write_text("inside\n")
    target = fs._target(session, str(root / "f.txt"))
    (root / "f.txt").unlink()
    (root / "f.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(ServiceError) as info:
        fs._read_bytes(target, None, None)
    assert info.value.reason == "path_changed"
    with pytest.raises(ServiceError) as info:
        fs._write_bytes(target, b"pwned")
    assert info.value.reason == "path_changed"
    assert (outside / "secret.txt").read_text() == SECRET


# ---------------------------------------------------------------------- reads


async def test_read_whole_file_unicode(fs, session, root):
    text = "héllo wörld ✓ 😀\nzweite Zeile\n"
    (root / "u.txt").write_text(text, encoding="utf-8")
    assert await fs.read_text_file(session, str(root / "u.txt"), None, None) == text


async def test_read_missing_file_is_resource_not_found(fs, session, root):
    error = await refused(fs.read_text_file(session, str(root / "missing.txt")), "not_found", NOT_FOUND)
    assert error.message == f"file not found: {root}/missing.txt"
    error = await refused(fs.read_text_file(session, str(root / "no" / "dir.txt")), "not_found", NOT_FOUND)
    assert "does not exist" in error.message


async def test_read_line_and_limit(fs, session, root):
    (root / "lines.txt").write_text("one\ntwo\nthree\nfour\nfive")
    path = str(root / "lines.txt")
    assert await fs.read_text_file(session, path, 2, 2) == "two\nthree\n"
    assert await fs.read_text_file(session, path, 4, None) == "four\nfive"
    assert await fs.read_text_file(session, path, None, 1) == "one\n"
    assert await fs.read_text_file(session, path, 1, 100) == "one\ntwo\nthree\nfour\nfive"
    assert await fs.read_text_file(session, path, 5, 1) == "five"
    assert await fs.read_text_file(session, path, 6, None) == ""
    assert await fs.read_text_file(session, path, 2, 0) == ""


async def test_read_lines_keep_crlf_and_split_only_on_newline(fs, session, root):
    (root / "crlf.txt").write_bytes("a\r\nb\u2028still b\rstill b\r\nc\n".encode())
    assert await fs.read_text_file(session, str(root / "crlf.txt"), 2, 1) == "b\u2028still b\rstill b\r\n"


async def test_read_invalid_line_or_limit(fs, session, root):
    (root / "f.txt").write_text("x\n")
    await refused(fs.read_text_file(session, str(root / "f.txt"), 0, None), "invalid_params")
    await refused(fs.read_text_file(session, str(root / "f.txt"), None, -1), "invalid_params")


async def test_read_non_utf8_is_refused_clearly(fs, session, root):
    (root / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    error = await refused(fs.read_text_file(session, str(root / "latin1.txt")), "not_utf8")
    assert "is not UTF-8 text (invalid byte at offset 3" in error.message


async def test_read_size_cap(session, root):
    small = LocalFileSystem(max_read_bytes=12)
    (root / "big.txt").write_text("0123456789\n" * 5)
    error = await refused(small.read_text_file(session, str(root / "big.txt")), "too_large")
    assert "12-byte read limit" in error.message
    assert "line/limit" in error.message
    # A window of a big file is fine as long as the window fits.
    assert await small.read_text_file(session, str(root / "big.txt"), 3, 1) == "0123456789\n"
    assert await small.read_text_file(session, str(root / "big.txt"), 4, 0) == ""
    await refused(small.read_text_file(session, str(root / "big.txt"), 2, 2), "too_large")


async def test_read_window_of_a_file_larger_than_the_cap(session, root):
    fs = LocalFileSystem(max_read_bytes=1000)
    (root / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 20001)))
    assert await fs.read_text_file(session, str(root / "big.txt"), 15000, 2) == "line 15000\nline 15001\n"


async def test_read_through_symlinks_that_stay_inside(fs, session, root):
    (root / "real").mkdir()
    (root / "real" / "f.txt").write_text("inside\n")
    (root / "alias").symlink_to(root / "real", target_is_directory=True)
    (root / "flink").symlink_to("real/f.txt")
    assert await fs.read_text_file(session, str(root / "alias" / "f.txt")) == "inside\n"
    assert await fs.read_text_file(session, str(root / "flink")) == "inside\n"
    assert await fs.read_text_file(session, f"{root}/real/../real/./f.txt") == "inside\n"


async def test_roots_and_extra_roots(session, root, outside, sibling):
    multi = FakeSession("s", str(root), [str(root), str(sibling)])
    fs = LocalFileSystem()
    assert await fs.read_text_file(multi, str(sibling / "secret.txt")) == SECRET
    error = await refused(fs.read_text_file(multi, str(outside / "secret.txt")), "outside_roots")
    assert f"({root}, {sibling})" in error.message
    extra = LocalFileSystem(extra_roots=[outside])
    assert await extra.read_text_file(session, str(outside / "secret.txt")) == SECRET


async def test_a_root_behind_a_symlink_is_resolved(tmp_path, root):
    (root / "f.txt").write_text("ok\n")
    alias = tmp_path / "alias"
    alias.symlink_to(root, target_is_directory=True)
    session = FakeSession("s", str(alias))
    fs = LocalFileSystem()
    assert await fs.read_text_file(session, str(alias / "f.txt")) == "ok\n"
    assert await fs.read_text_file(session, str(root / "f.txt")) == "ok\n"


async def test_disabled_operations(session, root):
    (root / "f.txt").write_text("x")
    read_only = LocalFileSystem(write=False)
    assert (read_only.can_read, read_only.can_write) == (True, False)
    await refused(read_only.write_text_file(session, str(root / "f.txt"), "y"), "disabled")
    write_only = LocalFileSystem(read=False)
    await refused(write_only.read_text_file(session, str(root / "f.txt")), "disabled")
    assert (root / "f.txt").read_text() == "x"


# ---------------------------------------------------------------------- writes


def _leftovers(directory: Path) -> list[str]:
    return [name for name in os.listdir(directory) if name.endswith(".acp-tmp")]


async def test_write_creates_a_new_file_with_umask_permissions(fs, session, root):
    path = root / "new.txt"
    await fs.write_text_file(session, str(path), "héllo ✓\n")
    assert path.read_text(encoding="utf-8") == "héllo ✓\n"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
    assert _leftovers(root) == []


async def test_write_replaces_and_keeps_permissions(fs, session, root):
    path = root / "script.sh"
    path.write_text("old\n")
    path.chmod(0o751)
    inode = path.stat().st_ino
    await fs.write_text_file(session, str(path), "new\n")
    assert path.read_text() == "new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert path.stat().st_ino != inode  # replaced, not rewritten in place
    assert await fs.read_text_file(session, str(path)) == "new\n"
    assert _leftovers(root) == []


async def test_write_creates_missing_parents_inside_the_root(fs, session, root):
    await fs.write_text_file(session, str(root / "a" / "b" / "c.txt"), "deep")
    assert (root / "a" / "b" / "c.txt").read_text() == "deep"


async def test_write_without_create_parents_refuses_missing_directories(session, root):
    fs = LocalFileSystem(create_parents=False)
    error = await refused(fs.write_text_file(session, str(root / "a" / "c.txt"), "x"), "not_found", NOT_FOUND)
    assert "creating directories is disabled" in error.message
    assert not (root / "a").exists()
    await fs.write_text_file(session, str(root / "top.txt"), "ok")
    assert (root / "top.txt").read_text() == "ok"


async def test_write_through_a_symlink_inside_replaces_its_target(fs, session, root):
    (root / "real.txt").write_text("old")
    (root / "link.txt").symlink_to("real.txt")
    await fs.write_text_file(session, str(root / "link.txt"), "new")
    assert (root / "link.txt").is_symlink()
    assert (root / "real.txt").read_text() == "new"


async def test_write_refuses_content_that_is_not_unicode_text(fs, session, root):
    await refused(fs.write_text_file(session, str(root / "f.txt"), "bad \udc80 surrogate"), "not_utf8")
    assert not (root / "f.txt").exists()


async def test_write_size_cap(session, root):
    fs = LocalFileSystem(max_write_bytes=4)
    await refused(fs.write_text_file(session, str(root / "f.txt"), "12345"), "too_large")
    await fs.write_text_file(session, str(root / "f.txt"), "1234")


async def test_failed_fsync_leaves_the_original_intact(fs, session, root, monkeypatch):
    path = root / "keep.txt"
    path.write_text("original\n")

    def broken_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    error = await refused(fs.write_text_file(session, str(path), "replacement\n"), "io_error", -32603)
    assert "Input/output error" in error.message
    assert path.read_text() == "original\n"
    assert _leftovers(root) == []


async def test_disk_full_mid_write_leaves_the_original_intact(fs, session, root, monkeypatch):
    path = root / "keep.txt"
    path.write_text("original\n")
    real_write = os.write
    calls = []

    def half_then_enospc(fd: int, data: object) -> int:
        calls.append(fd)
        if len(calls) == 1:
            return real_write(fd, bytes(data)[:3])  # type: ignore[call-overload]
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_enospc)
    error = await refused(fs.write_text_file(session, str(path), "x" * 100), "io_error", -32603)
    monkeypatch.undo()
    assert "No space left on device" in error.message
    assert len(calls) == 2
    assert path.read_text() == "original\n"
    assert _leftovers(root) == []


async def test_large_write_and_read_roundtrip(fs, session, root):
    text = "ünïcödé line\n" * 200_000  # ~3 MB
    await fs.write_text_file(session, str(root / "big.txt"), text)
    assert await fs.read_text_file(session, str(root / "big.txt")) == text


async def test_file_io_runs_off_the_event_loop(fs, session, root, monkeypatch):
    import threading

    threads: list[str] = []
    for name in ("_read_bytes", "_write_bytes"):
        original = getattr(fs, name)

        def spy(*args: object, _original=original) -> object:
            threads.append(threading.current_thread().name)
            return _original(*args)

        monkeypatch.setattr(fs, name, spy)
    await fs.write_text_file(session, str(root / "t.txt"), "x")
    assert await fs.read_text_file(session, str(root / "t.txt")) == "x"
    assert len(threads) == 2
    assert threading.main_thread().name not in threads
