"""A Ray cluster address that cannot be reached, or where something other than Ray listens, is one
RayAddressError within seconds, before Ray is asked to join it (core.inference.ray_engine.check_ray_address):
Ray alone retries such an address for minutes. Ray's servers speak gRPC, so the address must answer the HTTP/2
preface with a SETTINGS frame; the fake servers here answer it or not."""
from __future__ import annotations

import contextlib
import importlib.util
import socket
import threading
import os
import time
from pathlib import Path

import pytest

from core.cli.main import main
from core.inference import ray_engine
from core.inference.ray_engine import RayAddressError, check_ray_address

# An unreachable address is refused within seconds; a check that hangs fails here instead of stalling the suite.
pytestmark = [pytest.mark.ray, pytest.mark.timeout(120)]

SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # an empty HTTP/2 SETTINGS frame: a gRPC server's first answer
ROOT = Path(__file__).resolve().parents[1]


def refused_within(address: str, **options) -> str:
    with pytest.raises(RayAddressError) as refused:
        check_ray_address(address, **options)
    message = str(refused.value)
    assert "\n" not in message and address in message
    return message


@pytest.mark.parametrize("address", ["nosuchhost.invalid:6379", "ray://nosuchhost.invalid:10001",
                                     "ray://nosuchhost.invalid"])
def test_a_host_that_does_not_resolve_is_refused_at_once(address):
    assert "cannot resolve nosuchhost.invalid" in refused_within(address)


def test_a_port_nothing_listens_on_is_refused_at_once():
    with socket.socket() as probe:  # a port just freed: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert "nothing answers there" in refused_within(f"127.0.0.1:{port}")


def test_a_lookup_that_never_answers_is_cut_at_the_timeout(monkeypatch):
    monkeypatch.setattr(ray_engine.socket, "create_connection", lambda *args, **kwargs: time.sleep(5))
    assert "no answer within 0.5 s" in refused_within("slow.example:6379", timeout=0.5)


@pytest.mark.parametrize("address", ["host:port", "a:b:c", "localhost:99999", "ray://host/path"])
def test_an_address_that_is_no_host_and_port_is_refused(address):
    assert "is not host:port" in refused_within(address)


def test_a_host_label_past_63_characters_is_refused_in_one_line():
    address = "a" * 300 + ".example:6379"
    message = refused_within(address)
    assert "is not a valid host name" in message and "label" in message


@contextlib.contextmanager
def listener(answer=None):
    """The address of a local server for the block: with ``answer``, each connection's first bytes are read
    and ``answer`` sent back (then it is closed); without, connections are accepted and never answered."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held = []

    def serve():
        while True:
            try:
                connection, _ = server.accept()
            except OSError:  # the server closed: the block ended
                return
            held.append(connection)
            if answer is not None:
                connection.recv(1024)
                connection.sendall(answer)
                connection.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()
        for connection in held:
            connection.close()


def test_a_grpc_server_and_rays_own_words_pass():
    with listener(answer=SETTINGS) as address:
        check_ray_address(address, timeout=2)
        check_ray_address(f"ray://{address}", timeout=2)
    check_ray_address("auto")
    check_ray_address("local")


def test_a_silent_listener_is_refused_at_the_timeout():
    with listener() as address:
        message = refused_within(address, timeout=1)
    assert "something listens there but it is not Ray (no HTTP/2 answer within 1 s)" in message


@pytest.mark.parametrize(("answer", "reason"), [(b"HTTP/1.1 400 Bad Request\r\n\r\n", "its answer is not HTTP/2"),
                                                (b"", "closed the connection without an HTTP/2 answer")])
def test_a_server_of_another_protocol_is_refused_at_once(answer, reason):
    with listener(answer=answer) as address:
        assert reason in refused_within(address, timeout=5)


def test_under_tls_only_the_connection_is_checked(monkeypatch):
    monkeypatch.setenv("RAY_USE_TLS", "1")  # the cluster would speak TLS first: no plain HTTP/2 to ask for
    with listener() as address:
        check_ray_address(address, timeout=2)


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")
def test_embed_at_a_silent_listener_ends_in_one_error_line_promptly(train_tiny_model, tmp_path, capsys, monkeypatch):
    import ray

    if ray.is_initialized():
        pytest.skip("a Ray of this process is running: ray_session would use it and ignore the address")
    monkeypatch.setattr(ray_engine, "CONNECT_TIMEOUT_S", 1.0)  # the command's own default, shortened: a silent
    # listener is refused at that timeout whatever its length (test_a_silent_listener_is_refused_at_the_timeout)
    model = train_tiny_model("lstm", tmp_path / "runs")
    capsys.readouterr()
    with listener() as address:
        code = main(["embed", "--model", str(model), "--data", str(ROOT / "assets" / "sample_pairs.csv"),
                     "--out", str(tmp_path / "vec.npy"), "--engine", "ray", "--ray-address", address])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("error: Ray cluster") and "it is not Ray" in err[0], err
    assert not ray.is_initialized()


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")
def test_a_ray_session_at_an_unreachable_address_ends_in_one_error_promptly():
    import ray

    if ray.is_initialized():
        pytest.skip("a Ray of this process is running: ray_session would use it and ignore the address")
    with pytest.raises(RayAddressError, match="cannot resolve nosuchhost.invalid"):
        with ray_engine.ray_session("nosuchhost.invalid:6379"):
            pytest.fail("the session started")
    assert not ray.is_initialized()


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")
def test_a_cluster_that_refuses_the_driver_is_one_error(monkeypatch):
    import ray

    if ray.is_initialized():
        pytest.skip("a Ray of this process is running: ray_session would use it and ignore the address")

    def refuse(**options):  # what Ray raises when its head wants an auth token this driver lacks
        raise ConnectionError("Failed to connect to GCS:\n  Unauthenticated: token required")

    monkeypatch.setattr(ray, "init", refuse)
    with listener(answer=SETTINGS) as address:
        with pytest.raises(RayAddressError, match=r"it refused this driver \(Failed to connect to GCS: Unauth"):
            with ray_engine.ray_session(address):
                pytest.fail("the session started")


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")
@pytest.mark.parametrize("address", ["auto", "AUTO"])
def test_auto_with_no_cluster_here_says_so_in_the_labs_words(monkeypatch, address):
    """It was "it refused this driver (Could not find any running Ray instance. Please specify ... `--address`
    flag ...)": a wrong reason, and advice naming a flag the lab does not have."""
    import ray

    if ray.is_initialized():
        pytest.skip("a Ray of this process is running: ray_session would use it and ignore the address")

    def none_found(**options):  # what ray.init(address="auto") raises when no cluster was started here
        raise ConnectionError("Could not find any running Ray instance. Please specify the one to connect to by "
                              "setting `--address` flag or `RAY_ADDRESS` environment variable.")

    monkeypatch.setattr(ray, "init", none_found)
    with pytest.raises(RayAddressError) as refused:
        with ray_engine.ray_session(address):
            pytest.fail("the session started")
    message = str(refused.value)
    assert message == (f"Ray cluster {address}: none runs on this machine; start one with `ray start --head`, "
                       "or give --ray-address host:port")


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")
def test_a_cluster_that_answers_but_never_lets_ray_join_is_one_error_at_the_time_limit(monkeypatch):
    """It was a wait as long as ray.init's own retries (minutes): the address check passes, then ray.init hangs."""
    import ray

    if ray.is_initialized():
        pytest.skip("a Ray of this process is running: ray_session would use it and ignore the address")
    monkeypatch.setattr(ray, "init", lambda **options: time.sleep(60))  # what a join that never completes does
    monkeypatch.setattr(ray_engine, "INIT_TIMEOUT_S", 0.5)
    with listener(answer=SETTINGS) as address:
        with pytest.raises(RayAddressError, match=r"it answered, but Ray did not join it within 0.5 s"):
            with ray_engine.ray_session(address):
                pytest.fail("the session started")


def test_what_ray_init_writes_on_descriptor_2_never_reaches_the_user(monkeypatch, capfd):
    """Ray's core worker logged a line per failed join attempt (twenty lines before the one error line)."""
    import ray

    if ray.is_initialized():
        pytest.skip("a Ray of this process is running: ray_session would use it and ignore the address")

    def noisy_join(**options):
        os.write(2, b"gcs_client.cc:210: Failed to get cluster ID from GCS server\n")
        time.sleep(60)

    monkeypatch.setattr(ray, "init", noisy_join)
    monkeypatch.setattr(ray_engine, "INIT_TIMEOUT_S", 0.5)
    with listener(answer=SETTINGS) as address:
        with pytest.raises(RayAddressError):
            with ray_engine.ray_session(address):
                pytest.fail("the session started")
    assert "gcs_client" not in capfd.readouterr().err
