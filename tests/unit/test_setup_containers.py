"""bin/_setup.sh's strom_setup_containers: what it asks apt for, with apt and the tools
stubbed (no package is installed and no daemon started here)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


SYSTEM_PATH = "/usr/bin:/bin"


def _asked_for(tmp_path: Path, tools: list[str], engine_answers: bool = False) -> str:
    """Run strom_setup_containers with `tools` on PATH (each a stub script) before the
    system's, and strom_apt_install replaced by an echo; what it asked to install.
    `engine_answers`: `docker info` succeeds (else no engine answers)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        script = bin_dir / tool
        script.write_text(f"#!/bin/sh\nexit {0 if engine_answers else 1}\n")
        script.chmod(0o755)
    script = (f"source {ROOT / 'bin' / '_setup.sh'}\n"
              "strom_apt_install() { shift; echo \"APT: $*\"; return 1; }\n"
              "strom_setup_containers\n")
    env = {"PATH": f"{bin_dir}:{SYSTEM_PATH}", "HOME": str(tmp_path)}
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env,
                       cwd=tmp_path)
    lines = [line for line in r.stdout.splitlines() if line.startswith("APT: ")]
    return lines[0][len("APT: "):] if lines else ""


def test_the_docker_client_alone_still_gets_docker_io_installed(tmp_path):
    # Some machines carry the docker client without an engine (/usr/local/bin/docker).
    asked = _asked_for(tmp_path, ["docker", "debootstrap", "iptables", "ip"]).split()
    # (the system's directories stay on PATH for the script's own commands: a dockerd
    # installed there counts as installed)
    assert ("docker.io" in asked) == (shutil.which("dockerd", path=SYSTEM_PATH) is None)


def test_nothing_is_asked_for_when_every_tool_is_there(tmp_path):
    assert _asked_for(tmp_path, ["docker", "dockerd", "debootstrap", "iptables", "ip"],
                      engine_answers=True) == ""
