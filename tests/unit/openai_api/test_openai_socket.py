"""The service takes the listening sockets systemd keeps across restarts (socket activation), and only the right ones:
one per worker port, handed to the workers in port order."""

import os
import socket

import pytest
from triton_fleet_openai.__main__ import systemd_sockets


def _listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


@pytest.fixture
def listeners():
    socks = [_listener(), _listener()]
    yield socks
    for s in socks:
        s.close()


def env(fds="1"):
    return {"LISTEN_PID": str(os.getpid()), "LISTEN_FDS": fds}


def _dup_at(socks):
    """The sockets' duplicates on consecutive descriptors, as systemd passes them: the first descriptor."""
    probes = [os.dup(s.fileno()) for s in socks]
    first = max(probes) + 16  # clear of the descriptors in use
    for fd in probes:
        os.close(fd)
    for i, s in enumerate(socks):
        os.dup2(s.fileno(), first + i)
    return first


def test_no_socket_passed_means_bind_itself(listeners):
    assert systemd_sockets("127.0.0.1", [8090], environ={}) is None
    # Passed to another process (LISTEN_PID differs): not ours.
    assert systemd_sockets("127.0.0.1", [8090], environ={"LISTEN_PID": "1", "LISTEN_FDS": "1"},
                           first_fd=listeners[0].fileno()) is None


def test_the_configured_sockets_are_taken_in_port_order(listeners):
    ports = [s.getsockname()[1] for s in listeners]
    # systemd passes them in ListenStream= order; the service hands them out by port, whatever that order.
    socks = systemd_sockets("127.0.0.1", sorted(ports), environ=env("2"), first_fd=_dup_at(listeners[::-1]))
    try:
        assert [s.getsockname() for s in socks] == [("127.0.0.1", p) for p in sorted(ports)]
        for sock in socks:
            client = socket.create_connection(sock.getsockname(), timeout=2)
            conn, _ = sock.accept()
            conn.close()
            client.close()
    finally:
        for s in socks:
            s.close()


def test_other_sockets_stop_the_start(listeners):
    port = listeners[0].getsockname()[1]
    with pytest.raises(SystemExit, match=f"bound to 127.0.0.1:{port}, the configuration says 127.0.0.1:8090:"):
        systemd_sockets("127.0.0.1", [8090], environ=env(), first_fd=_dup_at(listeners[:1]))
    with pytest.raises(SystemExit, match=r"systemd passed 2 socket\(s\); the configuration has 1 worker\(s\)"):
        systemd_sockets("127.0.0.1", [port], environ=env("2"), first_fd=_dup_at(listeners))
    # One worker's port missing, another's passed twice.
    with pytest.raises(SystemExit, match=f"the configuration says 127.0.0.1:{port}-{port + 1}"):
        systemd_sockets("127.0.0.1", [port, port + 1], environ=env("2"), first_fd=_dup_at([listeners[0], listeners[0]]))
