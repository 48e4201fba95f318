"""Hostile HTTP clients against a real `nimbus train --metrics-port P`: half-sent requests held open,
over-long request lines and headers, a trickling client and a flood of connections past the exporter's
cap. /metrics keeps answering within a bound throughout, and the training process exits 0."""

import resource
import socket
import subprocess
import time

import pytest

from nimbus_process import ADDRESS_SPACE_BYTES, TIMEOUT_SECONDS, nimbus_binary

# The exporter's per-connection time-out and connection cap (src/monitor/exporter.cc).
REQUEST_TIMEOUT_SECONDS = 3
CONNECTION_CAP = 64
# How long a scrape may take while the exporter is under attack (it answered after 8 s or more before).
SCRAPE_BOUND_SECONDS = 2.5


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def scrape(port: int, request: bytes = None) -> tuple:
    """One request on a fresh connection: (status line, body, seconds taken)."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(request or b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), body.decode(errors="replace"), time.monotonic() - started


@pytest.fixture
def serving(tiny):
    """A tiny training run that serves /metrics on a free port and lingers for 12 s; yields the port,
    then checks that the process exits 0."""
    port = free_port()
    process = subprocess.Popen(
        [nimbus_binary(), "train", str(tiny / "tiny.yaml"), "--run-dir", str(tiny / "run"), "--metrics-port",
         str(port), "--metrics-linger", "12"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES)))
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                status, body, _ = scrape(port)
                if status.endswith("200 OK") and "nimbus_steps_total" in body:
                    break
            except OSError:
                pass
            assert process.poll() is None, "nimbus train ended before serving:\n" + process.stdout.read()
            assert time.monotonic() < deadline, "the exporter never answered"
            time.sleep(0.1)
        yield port
        output, _ = process.communicate(timeout=TIMEOUT_SECONDS)
        assert process.returncode == 0, f"nimbus train exited {process.returncode}:\n{output}"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def open_connections(port: int, count: int, first_bytes: bytes) -> list:
    connections = []
    for _ in range(count):
        connection = socket.create_connection(("127.0.0.1", port), timeout=5)
        if first_bytes:
            connection.sendall(first_bytes)
        connections.append(connection)
    return connections


def test_half_sent_requests_held_open_do_not_block_metrics(serving):
    held = open_connections(serving, 200, b"GET /metrics HTTP/1.1\r\nHost: test\r\n")  # no blank line: half-sent
    try:
        status, body, seconds = scrape(serving)
        assert status.endswith("200 OK") and "nimbus_steps_total" in body, status
        assert seconds < SCRAPE_BOUND_SECONDS, f"/metrics took {seconds:.1f} s behind 200 half-sent requests"
        # Each held connection is closed by its time-out (or evicted past the cap), never kept for good.
        time.sleep(REQUEST_TIMEOUT_SECONDS + 1)
        for connection in held:
            connection.settimeout(2)
            try:
                assert connection.recv(1) == b"", "a half-sent request was answered"
            except ConnectionResetError:
                pass
    finally:
        for connection in held:
            connection.close()


def test_over_long_request_line_and_headers_are_refused(serving):
    status, _, seconds = scrape(serving, b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\n\r\n")
    assert status.startswith("HTTP/1.1 414"), status
    status, _, _ = scrape(serving, b"GET /metrics HTTP/1.1\r\n" + b"X-Filler: " + b"b" * 100_000 + b"\r\n\r\n")
    assert status.startswith("HTTP/1.1 431"), status
    status, _, _ = scrape(serving, b"GARBAGE\r\n\r\n")
    assert status.startswith("HTTP/1.1 400"), status
    status, body, _ = scrape(serving)
    assert status.endswith("200 OK") and "nimbus_steps_total" in body


def test_a_trickling_client_is_cut_off_by_the_time_out(serving):
    with socket.create_connection(("127.0.0.1", serving), timeout=5) as connection:
        started = time.monotonic()
        closed = False
        for byte in b"GET /metrics HTTP/1.1\r\nHost: " + b"x" * 100:
            try:
                connection.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            time.sleep(0.25)
            if time.monotonic() - started > REQUEST_TIMEOUT_SECONDS + 2:
                break
        if not closed:
            connection.settimeout(2)
            try:
                closed = connection.recv(1) == b""
            except ConnectionResetError:
                closed = True
        assert closed, "a client sending one byte every 0.25 s kept its connection past the time-out"
        assert time.monotonic() - started < REQUEST_TIMEOUT_SECONDS + 3


def test_a_flood_of_connections_past_the_cap_does_not_block_metrics(serving):
    flood = open_connections(serving, CONNECTION_CAP * 6, b"")
    try:
        for _ in range(3):
            status, body, seconds = scrape(serving)
            assert status.endswith("200 OK") and "nimbus_steps_total" in body, status
            assert seconds < SCRAPE_BOUND_SECONDS, f"/metrics took {seconds:.1f} s behind {len(flood)} connections"
    finally:
        for connection in flood:
            connection.close()
