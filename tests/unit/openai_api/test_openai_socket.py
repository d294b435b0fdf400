"""The service takes the listening socket systemd keeps across restarts (socket activation), and only the right one."""

import os
import socket

import pytest
from triton_fleet_openai.__main__ import systemd_socket


@pytest.fixture
def listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    yield s
    s.close()


def env(fds="1"):
    return {"LISTEN_PID": str(os.getpid()), "LISTEN_FDS": fds}


def test_no_socket_passed_means_bind_itself(listener):
    assert systemd_socket("127.0.0.1", 8090, environ={}) is None
    # Passed to another process (LISTEN_PID differs): not ours.
    assert systemd_socket("127.0.0.1", 8090, environ={"LISTEN_PID": "1", "LISTEN_FDS": "1"}, fd=listener.fileno()) is None


def test_the_configured_socket_is_taken(listener):
    port = listener.getsockname()[1]
    sock = systemd_socket("127.0.0.1", port, environ=env(), fd=os.dup(listener.fileno()))
    try:
        assert sock.getsockname() == ("127.0.0.1", port) and sock.type == socket.SOCK_STREAM
        client = socket.create_connection(("127.0.0.1", port), timeout=2)
        conn, _ = sock.accept()
        conn.close()
        client.close()
    finally:
        sock.close()


def test_another_address_stops_the_start(listener):
    port = listener.getsockname()[1]
    with pytest.raises(SystemExit, match=f"bound to 127.0.0.1:{port}, the configuration says 127.0.0.1:8090"):
        systemd_socket("127.0.0.1", 8090, environ=env(), fd=os.dup(listener.fileno()))
    with pytest.raises(SystemExit, match="exactly one"):
        systemd_socket("127.0.0.1", port, environ=env("2"), fd=os.dup(listener.fileno()))
