# Hand-written course infrastructure (not generated from a notebook).
"""Refuse network connections when ``ATTN_NO_NETWORK=1`` (tests and CI).

The test suite blocks sockets in its own process with pytest-socket; notebook kernels are
separate processes, so importing ``attn_tutorial`` there installs this guard instead.
Loopback and Unix sockets stay allowed (Jupyter kernels talk over loopback).
"""

from __future__ import annotations

import ipaddress
import os
import socket

_ENV = "ATTN_NO_NETWORK"


class NetworkDisabledError(ConnectionRefusedError):
    """Raised for a non-loopback connection while the guard is on."""


def _is_local(address) -> bool:
    if not isinstance(address, tuple):  # AF_UNIX path
        return True
    host = str(address[0])
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:  # a host name other than localhost
        return False


def install() -> None:
    """Patch ``socket.socket.connect``/``connect_ex`` to refuse non-loopback addresses."""
    if getattr(socket.socket, "_attn_guarded", False):
        return
    original_connect, original_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self, address):
        if not _is_local(address):
            raise NetworkDisabledError(
                f"network access to {address!r} is disabled ({_ENV}=1): the course's tests and CI "
                "run offline; use a local data directory (ATTN_DATA_DIR)"
            )
        return original_connect(self, address)

    def connect_ex(self, address):
        if not _is_local(address):
            connect(self, address)
        return original_connect_ex(self, address)

    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
    socket.socket._attn_guarded = True


def install_if_requested() -> None:
    if os.environ.get(_ENV, "").strip().lower() in ("1", "true", "yes"):
        install()
