"""docs/COMPATIBILITY.md's API table is what ApiVersions advertises."""
from __future__ import annotations

import re
from pathlib import Path

import broker.server.handlers  # noqa: F401  (registers the handlers)
from broker.server.dispatch import advertised_versions
from clients.protocol.messages import API_BY_KEY

DOC = Path(__file__).resolve().parents[2] / "docs" / "COMPATIBILITY.md"


def test_compatibility_table_matches_the_registry():
    rows = re.findall(r"^\| (\w+) \| (\d+) \| (\d+)-(\d+) \| (\w+) \|$", DOC.read_text(), re.M)
    documented = {(int(k), int(lo), int(hi)) for _, k, lo, hi, _ in rows}
    assert documented == set(advertised_versions())
    for name, k, _, _, flexible in rows:
        api = API_BY_KEY[int(k)]
        assert api.name == name
        assert flexible == (str(api.flexible) if api.flexible is not None else "none")


# ---- what README.md, bin/start-cluster.sh --help and docs/PERFORMANCE.md say of the project ----

ROOT = DOC.parents[1]
README = ROOT / "README.md"
OUTSIDE = ("DESIGN.md", "STYLE.md", "FIELD-NOTES.md")   # not in this repository


def _pyproject_scripts() -> list[str]:
    import tomllib
    return sorted(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"])


def test_readme_set_up_installs_what_the_setup_script_installs():
    extras = re.search(r'^STROM_EXTRAS="\$\{STROM_EXTRAS:-([\w,]+)\}"',
                       (ROOT / "bin" / "_setup.sh").read_text(), re.M).group(1)
    installs = set(re.findall(r"pip install -e '\.\[([\w,]+)\]'", README.read_text()))
    assert installs == {extras}


def test_readme_names_every_console_script_and_where_it_lands():
    text = README.read_text()
    assert "`.venv/bin`" in text
    for name in _pyproject_scripts():
        assert f"`{name}`" in text, f"README does not name the console script {name}"


def test_every_bin_script_the_readme_names_exists():
    for name in set(re.findall(r"\bbin/([\w.-]+\.sh)\b", README.read_text())):
        path = ROOT / "bin" / name
        assert path.is_file() and path.stat().st_mode & 0o111, f"bin/{name}"


def test_start_cluster_help_lists_every_option_and_no_fallback():
    import subprocess
    script = ROOT / "bin" / "start-cluster.sh"
    r = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0
    help_text = r.stderr + r.stdout
    options = set(re.findall(r"^\s*(?:-h \| )?(--[a-z-]+)(?:=\*)?\)", script.read_text(), re.M))
    assert {"--brokers", "--data-dir", "--standalone", "--dry-run", "--no-setup"} <= options
    for option in options - {"--help"}:
        assert option in help_text, f"--help does not describe {option}"
    assert "until cluster mode is built" not in help_text
    assert "STROM_FORCE_CLUSTER" not in script.read_text()


def test_docs_cite_no_file_outside_the_repository():
    files = [README, ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "bench").glob("*.py"))]
    for path in files:
        text = path.read_text()
        for name in OUTSIDE:
            assert name not in text, f"{path.relative_to(ROOT)} cites {name}"


def test_relative_links_in_the_docs_resolve():
    for path in [README, ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            assert (path.parent / target.split("#")[0]).exists(), \
                f"{path.relative_to(ROOT)} links to {target}"


def test_performance_opens_with_results_and_ends_with_the_notebook():
    text = (ROOT / "docs" / "PERFORMANCE.md").read_text()
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[0] == "Results and targets"
    assert headings[-1] == "Appendix: lab notebook"


def test_a_met_target_rests_on_three_runs_with_a_results_file_each():
    """On the results page (before the appendix), a target whose status says met names its
    run directory under bench/results/, which holds at least 3 run files."""
    text = (ROOT / "docs" / "PERFORMANCE.md").read_text()
    page = text.split("## Appendix: lab notebook")[0]
    for row in re.findall(r"^\|.+\|$", page, re.M):
        cells = [c.strip() for c in row.strip("|").split("|")]
        status = cells[-1]
        if not re.match(r"(\*\*)?met\b", status):
            continue
        dirs = re.findall(r"bench/results/([\w.-]+)/", row)
        assert dirs, f"a met target names no run directory: {row}"
        for d in dirs:
            runs = [p for p in (ROOT / "bench" / "results" / d).glob("*.json")
                    if p.name != "summary.json"]
            assert len(runs) >= 3, f"bench/results/{d}/ has {len(runs)} run files: {row}"


def test_readme_layout_names_directories_that_exist():
    layout = README.read_text().split("## Layout", 1)[1].split("```")[1]
    tops = re.findall(r"^([\w-]+)/ ", layout, re.M)
    assert "broker" in tops and "bench" in tops
    for top in tops:
        assert (ROOT / top).is_dir(), f"README's layout names {top}/"
    for sub in re.findall(r"\b([a-z_]+)/ \(", layout):
        assert any((ROOT / top / sub).is_dir() for top in tops), f"README's layout names {sub}/"


def test_connect_docs_show_the_example_connector_the_tests_run():
    """docs/CONNECT.md shows word_count.py whole, as the distributed test runs it."""
    repo = DOC.parents[1]
    doc = (repo / "docs/CONNECT.md").read_text()
    example = (repo / "docs/examples/connect-plugins/word_count.py").read_text()
    assert f"```python\n{example}```" in doc
