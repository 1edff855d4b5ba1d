"""The fork server: a command run through it behaves as in its own process (output, exit code, signals),
and a job it must not take runs in its own process."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from nmtrepro.forks import server as forkserver
from nmtrepro.forks import client as fork_client

NAP = '''
import os, sys, time

def add_arguments_nap(parser):
    parser.add_argument("--seconds", type=float, default=0)
    parser.add_argument("--code", type=int, default=0)

def run_nap(args):
    print(os.getpid(), os.getppid(), os.getcwd(), os.environ.get("NAP_NOTE"), flush=True)
    print("to stderr", file=sys.stderr)
    time.sleep(args.seconds)
    sys.exit(args.code)
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server that knows one more command, `nap` (prints its pid, its parent's, its directory and
    $NAP_NOTE; sleeps; exits with --code), added the way a plugin would be, not through the environment."""
    folder = tmp_path_factory.mktemp("forkserver")
    (folder / "napmod.py").write_text(NAP)
    socket_path = folder / "run" / "socket"
    socket_path.parent.mkdir()
    log = open(folder / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-c", with_nap(folder, f"from nmtrepro.forks.server import serve; "
                                                                    f"serve({str(socket_path)!r})")],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not socket_path.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert socket_path.exists(), (folder / "server.log").read_text()
    yield proc, socket_path, folder / "server.log", folder
    proc.terminate()
    proc.wait(timeout=30)
    log.close()
    assert not socket_path.parent.exists(), "the server removes its socket's folder as it ends"


def with_nap(folder: Path, then: str) -> str:
    """Python that adds `nap` (napmod.py in `folder`) to the command table, as a plugin would, then runs `then`."""
    return textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(folder)!r})
        from nmtrepro import cli
        cli.COMMANDS["nap"] = ("napmod", "sleep a while")
        {then}
    """)


def nmtrepro(server, *args: str, socket_path: Path | str | None = None, cwd: Path | None = None,
             **env: str) -> subprocess.Popen:
    """`nmtrepro ARGS` as a program (the console script's path through cli.main), pointed at the server's
    socket (or `socket_path`)."""
    place = server[1] if socket_path is None else socket_path
    return subprocess.Popen([sys.executable, "-c", with_nap(server[3], "sys.exit(cli.main())"), *args], cwd=cwd,
                            env={**os.environ, forkserver.ENV: str(place), **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_a_command_runs_in_a_fork_with_the_jobs_directory_environment_streams_and_exit_code(server, tmp_path):
    job = nmtrepro(server, "nap", "--code", "3", cwd=tmp_path, NAP_NOTE="hello")
    out, err = job.communicate(timeout=60)
    pid, parent, cwd, note = out.split()
    assert job.returncode == 3 and int(parent) == server[0].pid and int(pid) != job.pid
    assert Path(cwd) == tmp_path and note == "hello" and "to stderr" in err


def test_an_input_error_exits_as_in_its_own_process(server):
    args = ("average", "--checkpoint-dir", "/no/such", "--last", "2", "--final", "x", "--out", "y")
    served, alone = nmtrepro(server, *args), nmtrepro(server, *args, socket_path="")
    assert served.communicate(timeout=60) == alone.communicate(timeout=60)
    assert served.returncode == alone.returncode == 2
    assert "average (pid " in server[2].read_text()


def test_a_job_whose_load_time_environment_differs_or_without_a_server_runs_in_its_own_process(server, tmp_path):
    for place, env in ((None, {"MALLOC_ARENA_MAX": "1"}), (tmp_path / "absent", {})):
        job = nmtrepro(server, "nap", socket_path=place, **env)
        out, _ = job.communicate(timeout=60)
        assert job.returncode == 0 and int(out.split()[0]) == job.pid
    assert "declined (MALLOC_ARENA_MAX differs): nap" in server[2].read_text()


def test_a_server_that_fails_after_the_request_fails_the_job_rather_than_running_it_twice(server, tmp_path):
    """Past its request, the job cannot know whether the server forked it: running it here as well could
    write its outputs twice at once."""
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(tmp_path / "socket"))
        listener.listen(1)

        def take_the_request_and_fail():  # (closing before it has read the request would be a refusal)
            with listener.accept()[0] as connection:
                _, fds, _, _ = socket.recv_fds(connection, 65536, 3)
                for fd in fds:
                    os.close(fd)

        failing = threading.Thread(target=take_the_request_and_fail)
        failing.start()
        job = nmtrepro(server, "nap", socket_path=tmp_path / "socket")
        out, err = job.communicate(timeout=60)
        failing.join()
    assert job.returncode == 1 and out == "" and "failed to start the job" in err


def test_a_job_that_ends_at_once_has_its_exit_read_behind_its_start_in_one_read(server, tmp_path):
    """The server's two replies (the child's pid, then its exit) can reach the job in one read."""
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(tmp_path / "socket"))
        listener.listen(1)

        def start_and_end_at_once():
            with listener.accept()[0] as connection:
                _, fds, _, _ = socket.recv_fds(connection, 65536, 3)
                for fd in fds:
                    os.close(fd)
                both = [json.dumps(message).encode() for message in ({"pid": 2**22 + 1}, {"code": 5, "signal": 0})]
                connection.sendall(b"".join(fork_client.HEADER.pack(len(data)) + data for data in both))

        answering = threading.Thread(target=start_and_end_at_once)
        answering.start()
        job = nmtrepro(server, "nap", socket_path=tmp_path / "socket")
        out, err = job.communicate(timeout=60)
        answering.join()
    assert job.returncode == 5 and out == "", err


def started(job: subprocess.Popen) -> int:
    """The pid of the child running `job` (its first line)."""
    return int(job.stdout.readline().split()[0])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def wait_until_gone(pid: int, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def test_a_signal_to_the_job_reaches_its_child_and_the_job_dies_of_it(server):
    job = nmtrepro(server, "nap", "--seconds", "60")
    child = started(job)
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=30) == -signal.SIGTERM and wait_until_gone(child)


def test_a_killed_job_takes_its_child_with_it(server):
    job = nmtrepro(server, "nap", "--seconds", "60")
    child = started(job)
    job.kill()
    job.wait(timeout=30)
    assert wait_until_gone(child) and "is gone: killing it" in server[2].read_text()


def test_start_runs_a_server_for_local_runs_only_and_stop_ends_it(tmp_path, monkeypatch):
    monkeypatch.delenv(forkserver.ENV, raising=False)
    forkserver.start(tmp_path / "cluster.log", local=False)
    assert forkserver.ENV not in os.environ and not (tmp_path / "cluster.log").exists()
    monkeypatch.setenv(forkserver.ENV, "off")
    forkserver.start(tmp_path / "off.log", local=True)
    forkserver.stop()
    assert not (tmp_path / "off.log").exists() and os.environ[forkserver.ENV] == "off"
    monkeypatch.delenv(forkserver.ENV)
    if not forkserver.available():
        pytest.skip("this machine runs no server (a GPU machine, or not Linux)")
    forkserver.start(tmp_path / "server.log", local=True)
    socket_path = Path(os.environ[forkserver.ENV])  # set once the server is ready
    assert socket_path.exists() and "ready in" in (tmp_path / "server.log").read_text()
    forkserver.stop()
    deadline = time.monotonic() + 30
    while socket_path.parent.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert forkserver.ENV not in os.environ and not socket_path.parent.exists()
