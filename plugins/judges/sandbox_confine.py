"""Building the jail and running the judge in it: the parts of a sandboxed call that run confined.

Standard library only: imported by :mod:`sandbox_runner`, which runs as a
standalone script (``python -I -S``) before and outside anything of the
project. Process A (in fresh user, mount, net, pid, ipc and uts namespaces)
calls :func:`build_root`; process B (pid 1 of the new pid namespace) calls
:func:`run_judge`. See :mod:`sandbox_runner` for the whole picture.
"""

from __future__ import annotations

import ctypes
import errno
import json
import numbers
import os
import resource
import signal
import stat
import sys

# -- kernel constants (x86_64 and aarch64 share these) ------------------------
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 0x4000, 1 << 18

PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_SECUREBITS = 1, 24, 28
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
#: noroot, no-setuid-fixup, no-cap-ambient-raise and keep-caps off, each locked
SECUREBITS_LOCKED = 0xEF
CAPABILITY_VERSION_3 = 0x20080522

#: directories (or merged-/usr symlinks) every Python needs
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
#: OS errors that mean "a limit was hit", not "the judge is wrong"
LIMIT_ERRNOS = {errno.EFBIG, errno.ENOSPC, errno.EDQUOT, errno.EAGAIN, errno.EMFILE, errno.ENFILE, errno.ENOMEM}
OUTPUT_HEAD_BYTES = 4096
libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    """The sandbox could not be built (not the judge's fault)."""


def check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)} (errno {err})")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: None if s is None else s.encode())
    check(libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def prctl(option: int, arg: int = 0) -> int:
    return libc.prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))


# -- the judge side (process B) -------------------------------------------------


def classify_exception(exc_type: str, err: int | None) -> str:
    """Status for a judge that raised ``exc_type`` (with ``errno`` ``err`` for OSErrors)."""
    if exc_type == "MemoryError" or (err is not None and err in LIMIT_ERRNOS):
        return "resource_limit"
    return "crashed"


def _describe(exc: BaseException) -> dict:
    described = {
        "ok": False,
        "exc_type": type(exc).__name__,
        "errno": exc.errno if isinstance(exc, OSError) else None,
        "message": str(exc)[:2000],
    }
    try:
        import traceback  # only on failure: slow to import, and it may fail when the judge exhausted a limit

        frames = exc.__traceback__
        while frames is not None and frames.tb_frame.f_code.co_filename == __file__:
            frames = frames.tb_next  # show the judge's frames, not this runner's
        described["traceback"] = "".join(traceback.format_exception(type(exc), exc, frames))[-4000:]
    except BaseException:  # noqa: BLE001 - the type and message are enough
        pass
    return described


def _drop_capabilities() -> None:
    check(prctl(PR_SET_SECUREBITS, SECUREBITS_LOCKED), "lock securebits")
    for cap in range(64):
        if prctl(PR_CAPBSET_DROP, cap) != 0:
            break  # EINVAL past the last capability this kernel knows
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable x 2 words, all zero
    check(libc.capset(header, data), "drop capabilities")


def _set_limits(limits: dict, *, extra_processes: int) -> None:
    cpu = int(limits["cpu_time_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"], limits["memory_bytes"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_size_bytes"], limits["file_size_bytes"]))
    nproc = limits["max_processes"] + extra_processes
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["max_open_files"], limits["max_open_files"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _serialize(kind: str, value: object, max_bytes: int) -> bytes:
    if kind == "metric" and isinstance(value, numbers.Real) and not isinstance(value, bool):
        value = float(value)  # numpy scalars and the like; the host checks the range
    try:
        text = json.dumps({"ok": True, "value": value}, allow_nan=True)
    except (TypeError, ValueError) as exc:
        return json.dumps({"ok": False, "unserializable": True, "exc_type": type(value).__name__,
                           "message": f"returned a {type(value).__name__}, which is not JSON-serializable: {exc}"
                           }).encode()
    data = text.encode()
    if len(data) > max_bytes:
        return json.dumps({"ok": False, "too_large": True, "exc_type": "ResultTooLarge",
                           "message": f"result is {len(data)} bytes of JSON, over the {max_bytes} byte limit"}).encode()
    return data


def run_judge(request: dict, result_fd: int, output_fd: int, *, confined: bool, extra_processes: int) -> None:
    """Process B: confine, run the judge, write the result, exit. Never returns."""
    status = 70
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        os.setsid()
        devnull = os.open("/dev/null", os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.closerange(3, result_fd)
        os.closerange(result_fd + 1, 1 << 16)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        if confined:
            _drop_capabilities()
        check(prctl(PR_SET_NO_NEW_PRIVS, 1), "no_new_privs")
        _set_limits(request["limits"], extra_processes=extra_processes)
    except BaseException as exc:  # noqa: BLE001 - reported as a sandbox failure
        _write_all(result_fd, json.dumps({"ok": False, "setup_error": True, "exc_type": type(exc).__name__,
                                          "message": str(exc)}).encode())
        os._exit(status)

    me = os.getpid()
    sys.path.extend(p for p in request["site_paths"] if p not in sys.path)  # we run with -S
    try:
        namespace: dict = {"__name__": "scalecua_judge", "__builtins__": __builtins__}
        exec(compile(request["code"], "<judge>", "exec"), namespace)  # the untrusted code, confined above
        function = namespace.get(request["function"])
        if not callable(function):
            raise NameError(f"the code defines no function named {request['function']!r}")
        value = function(*request["args"], **request["kwargs"])
        payload = _serialize(request["kind"], value, request["limits"]["max_result_bytes"])
    except BaseException as exc:  # noqa: BLE001 - every judge failure is a result
        if os.getpid() != me:
            os._exit(0)  # a fork of the judge: only the original reports
        try:
            payload = json.dumps(_describe(exc)).encode()
        except BaseException:  # noqa: BLE001 - e.g. no memory left to describe it
            payload = json.dumps({"ok": False, "exc_type": type(exc).__name__, "errno": None, "message": ""}).encode()
    if os.getpid() != me:
        os._exit(0)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - output is best effort
        pass
    try:
        _write_all(result_fd, payload)
        status = 0
    finally:
        os._exit(status)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    os.close(fd)


# -- building the confined root (process A) ----------------------------------------


def _bind_sources(request: dict) -> list[tuple[str, int, bool, bool]]:
    """(path, O_PATH fd, is_dir, is_device) of everything to bind, opened while still privileged."""
    system = [p for p in SYSTEM_PATHS if os.path.isdir(p) and not os.path.islink(p)]
    prefixes = sorted({os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix)})
    wanted: list[str] = []
    for path in [*system, *prefixes, *request["site_paths"], *request["read_only"]]:
        if not any(path == done or path.startswith(done.rstrip("/") + "/") for done in wanted):
            wanted.append(path)
    sources = []
    for path in [*wanted, *DEVICES]:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            if path in request["read_only"]:
                raise SetupError(f"{path} does not exist on the host") from None
            continue
        sources.append((path, fd, stat.S_ISDIR(os.fstat(fd).st_mode), path in DEVICES))
    return sources


def build_root(request: dict) -> None:
    """In A, inside fresh namespaces with maps written: make the confined root and chroot into it."""
    limits = request["limits"]
    sources = _bind_sources(request)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", request["workdir"], "tmpfs", MS_NOSUID | MS_NODEV, "size=8m,nr_inodes=4096,mode=0755,uid=0,gid=0")
    os.chdir(request["workdir"])  # from here on every path is relative to the new root
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    if request["host_is_root"]:
        os.setgroups([])
    for link in SYSTEM_PATHS:
        if os.path.islink(link):  # merged /usr: /bin -> usr/bin and friends
            os.symlink(os.readlink(link), link.lstrip("/"))
    for path, fd, is_dir, device in sources:
        rel = path.lstrip("/")
        if is_dir:
            os.makedirs(rel, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(rel) or ".", exist_ok=True)
            open(rel, "wb").close()
        _mount(f"/proc/self/fd/{fd}", rel, None, MS_BIND | MS_REC)
        _mount(None, rel, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | (0 if device else MS_NODEV))
        os.close(fd)
    os.mkdir("scratch")
    _mount("tmpfs", "scratch", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
           f"size={limits['scratch_bytes']},nr_inodes=4096,mode=0700,uid=0,gid=0")
    if not os.path.lexists("tmp"):  # artifacts under the host's /tmp already made it a directory
        os.symlink("scratch", "tmp")
    _mount(None, ".", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chroot(".")
    os.chdir("/")


def sandbox_ids(request: dict) -> tuple[int, int]:
    if request["host_is_root"]:
        uid = 100_000_000 + int.from_bytes(os.urandom(4), "little") % 1_900_000_000
        return uid, uid
    return os.geteuid(), os.getegid()
