"""A Ray cluster address that cannot be reached is one RayAddressError within seconds, before Ray is asked to
join it (core.inference.ray_engine.check_ray_address): Ray alone retries such an address for minutes."""
from __future__ import annotations

import importlib.util
import socket
import time

import pytest

from core.inference import ray_engine
from core.inference.ray_engine import RayAddressError, check_ray_address

PROMPT_S = 30  # the most an unreachable address may take to be refused


def refused_within(address: str, seconds: float = PROMPT_S, **options) -> str:
    started = time.monotonic()
    with pytest.raises(RayAddressError) as refused:
        check_ray_address(address, **options)
    assert time.monotonic() - started < seconds
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
    assert "no answer within 0.5 s" in refused_within("slow.example:6379", seconds=2, timeout=0.5)


@pytest.mark.parametrize("address", ["host:port", "a:b:c", "localhost:99999", "ray://host/path"])
def test_an_address_that_is_no_host_and_port_is_refused(address):
    assert "is not host:port" in refused_within(address, seconds=1)


def test_a_listening_port_and_rays_own_words_pass():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        check_ray_address(f"127.0.0.1:{server.getsockname()[1]}")
    check_ray_address("auto")
    check_ray_address("local")


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")
def test_a_ray_session_at_an_unreachable_address_ends_in_one_error_promptly():
    import ray

    if ray.is_initialized():
        pytest.skip("a Ray of this process is running: ray_session would use it and ignore the address")
    started = time.monotonic()
    with pytest.raises(RayAddressError, match="cannot resolve nosuchhost.invalid"):
        with ray_engine.ray_session("nosuchhost.invalid:6379"):
            pytest.fail("the session started")
    assert time.monotonic() - started < PROMPT_S
    assert not ray.is_initialized()
