"""A job's side of the fork server (nmtrepro/forks/server.py): hand a command to the run's server, wait for
it, forward signals to it, exit as it did. Kept apart from the server so that the command line's entry
point loads only this."""
from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
from pathlib import Path

ENV = "NMTREPRO_FORKSERVER"  # the server's socket; "off" keeps a run from starting one
HEADER = struct.Struct("!I")  # a request's length, before its JSON


def send(sock: socket.socket, message: dict, fds: list[int] = ()) -> None:
    data = json.dumps(message).encode()
    socket.send_fds(sock, [HEADER.pack(len(data)) + data], list(fds))


def receive(sock: socket.socket, max_fds: int = 0) -> tuple[dict | None, list[int]]:
    """One message and the descriptors that came with it; None where the other side closed. Reads the
    message's own bytes only: a job that ends at once has its exit right behind the server's first reply."""
    data, fds, _, _ = socket.recv_fds(sock, HEADER.size, max_fds)  # the descriptors travel with the header
    if not data:
        return None, fds
    data = exactly(sock, HEADER.size - len(data), data)
    body = data and exactly(sock, HEADER.unpack(data)[0])
    return (json.loads(body) if body else None), fds


def exactly(sock: socket.socket, size: int, data: bytes = b"") -> bytes | None:
    """`data` and `size` more bytes from `sock`; None where it closes first."""
    while size:
        more = sock.recv(size)
        if not more:
            return None
        data, size = data + more, size - len(more)
    return data


def interpreter() -> list[str]:
    """What a job must share with the server: the interpreter, its environment (a venv's or conda's
    prefix) and this package's place."""
    return [os.path.realpath(sys.executable), sys.prefix, str(Path(__file__).parents[1])]


def reply(sock: socket.socket) -> dict | None:
    """The server's next message; None where it closed or reset the connection."""
    try:
        return receive(sock)[0]
    except OSError:
        return None


def run_through_server(argv: list[str]) -> int | None:
    """Run `nmtrepro argv` in a fork of the server; its exit code, or None where it must run here."""
    path = os.environ.get(ENV)
    if not path or path == "off":
        return None
    with socket.socket(socket.AF_UNIX) as sock:
        try:
            sock.connect(path)
            mask = os.umask(0)
            os.umask(mask)
            send(sock, {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "umask": mask,
                        "python": interpreter()}, [0, 1, 2])
        except OSError:  # no server (not up yet, gone, or another machine's): run here
            return None
        started = reply(sock)
        if started is None:  # the server may have forked the job before it failed: running it here too
            print(f"nmtrepro: error: the fork server ({path}) failed to start the job", file=sys.stderr)
            return 1  # could write its outputs twice at once
        if "pid" not in started:  # declined
            return None
        pid = started["pid"]

        def forward(signum, _frame):
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(signum, forward)
        ended = reply(sock)
    if ended is None:  # the server died during the job: the child, if still there, ends with it
        forward(signal.SIGTERM, None)
        print(f"nmtrepro: error: the fork server ({path}) ended during the job", file=sys.stderr)
        return 1
    if ended.get("signal"):  # killed, as the job's own process would have been
        signal.signal(ended["signal"], signal.SIG_DFL)
        os.kill(os.getpid(), ended["signal"])
    return ended["code"]
