"""ATTN_NO_NETWORK=1 makes any process that imports attn_tutorial refuse non-loopback connections."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = """
import socket, attn_tutorial
from attn_tutorial._netguard import NetworkDisabledError
server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen(1)
client = socket.socket(); client.connect(server.getsockname()); client.close()   # loopback is fine
try:
    socket.create_connection(("203.0.113.7", 80), timeout=1)   # TEST-NET-3, never routed
except NetworkDisabledError as error:
    print("blocked:", error)
"""


def run(env_value: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ATTN_NO_NETWORK"}
    if env_value is not None:
        env["ATTN_NO_NETWORK"] = env_value
    return subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=60)


def test_guard_blocks_outside_addresses_but_not_loopback():
    result = run("1")
    assert result.returncode == 0, result.stderr
    assert "blocked: network access to ('203.0.113.7', 80) is disabled" in result.stdout


def test_guard_is_off_by_default():
    from attn_tutorial import _netguard

    assert _netguard._is_local(("127.0.0.1", 80)) and _netguard._is_local(("::1", 80, 0, 0))
    assert _netguard._is_local("/tmp/socket") and not _netguard._is_local(("8.8.8.8", 53))
    assert not _netguard._is_local(("example.org", 443))
