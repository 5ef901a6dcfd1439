"""The proxy process itself: it starts from a properties file, answers Confluent's root and
error bodies outside every resource, and a bad config line names the file and the key."""
from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

from tests.support.broker_process import REPO


def _get(url: str) -> tuple[int, str, object]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers["Content-Type"], json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], json.loads(e.read())


def test_root_and_unknown_path(rest_env) -> None:
    assert _get(rest_env.url + "/") == (200, "application/vnd.kafka.v2+json", {})
    status, ctype, body = _get(rest_env.url + "/no/such/path")
    assert (status, body) == (404, {"error_code": 404, "message": "HTTP 404 Not Found"})
    assert ctype == "application/vnd.kafka.v2+json"
    status, ctype, body = _get(rest_env.url + "/v3/no/such/path")
    assert (status, ctype, body["error_code"]) == (404, "application/json", 404)


def test_bad_config_line_names_file_and_key(tmp_path) -> None:
    cfg = tmp_path / "kafka-rest.properties"
    cfg.write_text("listeners=http://127.0.0.1:0\nconsumer.instance.timeout.ms=soon\n")
    out = subprocess.run([sys.executable, "-m", "clients.rest.main", str(cfg)], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert f"{cfg}:2: consumer.instance.timeout.ms" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_listener_in_use_is_one_line_and_exit_1(tmp_path) -> None:
    import socket
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cfg = tmp_path / "kafka-rest.properties"
        cfg.write_text(f"listeners=http://127.0.0.1:{port}\n")
        out = subprocess.run([sys.executable, "-m", "clients.rest.main", str(cfg)], cwd=REPO,
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert f"cannot listen on http://127.0.0.1:{port}" in out.stderr
    assert "Traceback" not in out.stderr
