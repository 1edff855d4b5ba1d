"""Jobs of a local run as forks of one process that has imported torch and every command's module.

A `ci` or `smoke` run is ~600 short jobs, and most of each is Python importing torch and torch._dynamo
(which torch.optim's first call imports): ~3–4 s of a 5 s training, ~2 s of a 2 s checkpoint average on
this 2-core machine. The workflow's `onstart` starts one server (`start`); a `nmtrepro` command that
finds `NMTREPRO_FORKSERVER` in its environment hands the server its arguments, working directory,
environment and standard streams, and the server forks a child that runs the command with them, so the
job's own process only waits, forwards signals, and exits as the child did. Where the server is absent,
gone, or declines, the command runs in its own process as before: the server is only ever a shortcut
(but a server that fails after taking a job's request fails that job: it may have forked it).

It is used only where jobs run on the machine that started it (not under a cluster executor, whose jobs
are SLURM's), and not on a machine with a GPU, whose jobs are few and long and whose CUDA must not be
forked. It declines a job whose interpreter or package differs (a per-rule conda environment) or whose
environment sets differently what a library reads once, when it loads (`LOAD_TIME`): the allocator,
the module path, the locale, torch's and OpenMP's switches. Thread counts, which Snakemake sets per
job, the child applies to torch itself (numpy's BLAS keeps the server's, and no command leans on it).
"""
from __future__ import annotations

import atexit
import importlib
import io
import logging
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from contextlib import suppress
from functools import partial
from pathlib import Path

from ..core.gpus import count_visible
from .client import ENV, interpreter, receive, send

LOAD_TIME = ("LD_", "MALLOC_", "GLIBC_", "PYTHON", "TORCH", "PYTORCH_", "KMP_", "GOMP_", "OMP_", "MKL_",
             "OPENBLAS_", "GOTO_", "THP_", "MPL", "LC_", "LANG")  # prefixes of variables read as a library loads
THREADS = ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
           "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")  # what Snakemake sets to a job's threads
STARTED = []  # the sockets of the servers that `start` started in this process
log = logging.getLogger(__name__)


def available() -> bool:
    """Whether this machine runs jobs through a server: Linux (pidfd_open; elsewhere, as on macOS, a fork
    of a process with torch loaded is unsafe) with no GPU visible (the workflow's own count)."""
    return hasattr(os, "pidfd_open") and not count_visible()


def start(log_path: str | Path, *, local: bool, wait: float = 120) -> None:
    """Start a server for this run's jobs, its log at `log_path`, unless they do not run here (`local`
    false: a cluster executor's, or `--touch`), the machine is not `available`, or `NMTREPRO_FORKSERVER` is
    already set (to "off", or a server of an outer run).
    Waits until it has imported everything (~4 s), so that every job of the run goes through it."""
    if not local or ENV in os.environ or not available():
        return
    folder = tempfile.mkdtemp(prefix="nmtrepro-forkserver-")
    path = os.path.join(folder, "socket")
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w", encoding="utf-8") as out:
        server = subprocess.Popen([sys.executable, "-m", __name__, path], stdin=subprocess.DEVNULL, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + wait
    while not os.path.exists(path) and server.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if os.path.exists(path):
        os.environ[ENV] = path
        STARTED.append(path)
    else:  # the jobs run as their own processes; the log says why
        server.kill()
        with suppress(OSError):
            os.rmdir(folder)
        log.warning("the fork server did not start (%s); jobs run as their own processes", log_path)


def stop() -> None:
    """End the server that `start` started in this process, if any (it also ends by itself once this
    process is gone); one of an outer run, or "off", stays as it is."""
    if (path := os.environ.get(ENV)) in STARTED:
        STARTED.remove(path)
        del os.environ[ENV]
        with suppress(OSError), socket.socket(socket.AF_UNIX) as sock:  # (gone: nothing to stop)
            sock.connect(path)
            send(sock, {"stop": True})


def declined(request: dict, started: dict) -> str | None:
    """Why a request must run in its own process, or None. `started`: the server's environment before it
    imported anything (torch sets some variables of its own as it loads)."""
    if request["python"] != interpreter():
        return "another interpreter, environment or package"
    env = request["env"]
    for name in {*env, *started}:
        if name.startswith(LOAD_TIME) and name not in THREADS and env.get(name) != started.get(name):
            return f"{name} differs"
    return None


def child(request: dict, fds: list[int], servers: list) -> None:
    """Become the job: its streams, directory, environment and threads; run the command; exit as it did.
    `servers`: the server's sockets and descriptors, closed here so that no job holds another's."""
    for held in servers:
        if isinstance(held, int):
            os.close(held)
        else:
            held.close()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as Python starts a program
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # found again from the job's TMPDIR (Snakemake's `tmpdir` resource)
    sys.argv = ["nmtrepro", *request["argv"]]
    sys.stdin = io.TextIOWrapper(open(0, "rb", closefd=False))
    sys.stdout = io.TextIOWrapper(open(1, "wb", closefd=False), line_buffering=os.isatty(1))
    sys.stderr = io.TextIOWrapper(open(2, "wb", closefd=False), line_buffering=True, errors="backslashreplace")
    logging.getLogger().handlers.clear()  # the command configures its own, on this stderr
    import random
    random.seed()  # a fresh process's own seed, not the server's
    if threads := os.environ.get("OMP_NUM_THREADS"):
        import torch
        torch.set_num_threads(int(threads))
    from .. import cli
    code = 1
    try:
        code = cli.main(request["argv"])
    except SystemExit as stop:  # as Python's own exit would treat it
        code = 0 if stop.code is None else stop.code if isinstance(stop.code, int) else 1
        if not isinstance(stop.code, int | None):
            print(stop.code, file=sys.stderr)
    except KeyboardInterrupt:  # as Python ends a program on an uncaught one: killed by SIGINT
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:
        traceback.print_exc()
    finally:
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        if code == -signal.SIGINT:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code)


def preload() -> None:
    """Import torch, what torch.optim imports on its first call, and every command's module."""
    from .. import cli
    importlib.import_module("torch._dynamo")
    for module, _ in {**cli.COMMANDS, **cli.declared_commands()}.values():
        try:
            importlib.import_module(module)
        except Exception as err:  # the job then fails in its own import, with its own message
            log.info("not preloaded: %s (%s)", module, err)


class Server:
    """The accept loop: a job's request forks a child; a child's exit goes back to its job's process; a
    job's process gone (killed) takes its child with it, as a killed process group would have."""

    def __init__(self, path: str, started: dict):
        os.close(os.pidfd_open(os.getpid()))  # where a sandbox refuses it, fail here, before any job forks
        self.path, self.started = path, started
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(path + ".new")
        os.rename(path + ".new", path)  # jobs connect only once everything is imported
        self.listener.listen(64)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, self.accept)
        self.jobs = {}  # pid -> (connection, pidfd, start time, command)

    def accept(self, _key) -> bool:
        """Fork the job of a new connection, or say why not; False where told to stop."""
        connection, _ = self.listener.accept()
        connection.settimeout(5)  # a job sends its request at once
        try:
            request, fds = receive(connection, 3)
        except OSError:
            request, fds = None, []
        connection.settimeout(None)
        if request is None or request.get("stop"):
            connection.close()
            return request is None
        if why := declined(request, self.started):
            log.info("declined (%s): %s", why, " ".join(request["argv"][:1]))
            with connection, suppress(OSError):  # (a job gone already needs no answer)
                send(connection, {"decline": why})
        else:
            self.fork(request, fds, connection)
        for fd in fds:
            os.close(fd)
        return True

    def fork(self, request: dict, fds: list[int], connection: socket.socket) -> None:
        held = [fd for job_connection, pidfd, _, _ in self.jobs.values() for fd in (job_connection, pidfd)]
        pid = os.fork()
        if pid == 0:
            child(request, fds, [self.selector, self.listener, connection, *held])
        pidfd = os.pidfd_open(pid)
        self.jobs[pid] = (connection, pidfd, time.monotonic(), (request["argv"] or ["(none)"])[0])
        self.selector.register(pidfd, selectors.EVENT_READ, partial(self.exited, pid))
        self.selector.register(connection, selectors.EVENT_READ, partial(self.gone, pid))
        with suppress(OSError):  # a job gone already: `gone` ends its child
            send(connection, {"pid": pid})

    def exited(self, pid: int, _key) -> bool:
        connection, pidfd, began, command = self.jobs.pop(pid)
        _, status = os.waitpid(pid, 0)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        code = os.waitstatus_to_exitcode(status)
        log.info("%s (pid %d): exit %d in %.1f s", command, pid, code, time.monotonic() - began)
        if connection.fileno() >= 0:
            self.selector.unregister(connection)
            with connection, suppress(OSError):
                send(connection, {"code": code, "signal": -code if code < 0 else 0})
        return True

    def gone(self, pid: int, key) -> bool:
        log.info("the job process of pid %d is gone: killing it", pid)
        self.selector.unregister(key.fileobj)
        key.fileobj.close()
        os.kill(pid, signal.SIGKILL)
        return True

    def run(self) -> None:
        """Serve until told to stop; once the run's process is gone, take no new job and end with the last."""
        parent = os.getppid()
        try:
            while self.jobs or self.listener.fileno() >= 0:
                if os.getppid() != parent and self.listener.fileno() >= 0:
                    self.close_listener()
                for key, _ in self.selector.select(timeout=1.0):
                    if not key.data(key):
                        return
        finally:
            for pid in self.jobs:
                os.kill(pid, signal.SIGKILL)
            if self.listener.fileno() >= 0:
                self.close_listener()
            os.rmdir(os.path.dirname(self.path))

    def close_listener(self) -> None:
        self.selector.unregister(self.listener)
        self.listener.close()
        os.unlink(self.path)


def serve(path: str) -> None:
    """Import everything, then serve jobs on `path` (a file in a folder of its own, removed at the end)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s forkserver | %(message)s", datefmt="%H:%M:%S")
    began = time.monotonic()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # through `finally`: the socket goes
    from .. import cli
    cli.huge_pages()  # as each job's own process sets it, before its request
    started = dict(os.environ)
    preload()
    server = Server(path, started)
    log.info("ready in %.1f s: %s", time.monotonic() - began, path)
    server.run()


if __name__ == "__main__":
    if sys.path[0] == os.getcwd():  # `-m` put the run's directory first; a job's own process has not
        del sys.path[0]
    serve(sys.argv[1])
