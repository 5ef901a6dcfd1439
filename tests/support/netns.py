"""What tests running on broker/testing/netns.py networks share."""
from __future__ import annotations

import os

import pytest

from broker.testing.netns import unavailable_reason


def require_netns() -> None:
    """Skip without root/iproute2/iptables, but fail under CI (a missing prerequisite there
    is a broken set-up, not a reason to pass)."""
    reason = unavailable_reason()
    if reason:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"network namespaces unavailable under CI: {reason}")
        pytest.skip(reason)
