"""strom-verify's verdict on a run: the summary table, its JSON form and the exit code, from
the checker's report and the faults done. No I/O here.

Exit codes: OK (0) nothing acknowledged was lost and no offset holds two values (and, with
idempotence on, nothing was duplicated or reordered: the idempotent producer promises that;
without it retries may do both, so they are counted, not held against the cluster);
VIOLATION (1) otherwise; COULD_NOT_RUN (3) when the run proves nothing (no broker reachable,
the topic not ready, the read back incomplete, nothing acknowledged). 2 is argparse's usage
error.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from broker.testing.verify.checker import CheckReport

OK = 0
VIOLATION = 1
COULD_NOT_RUN = 3

# (row label, CheckReport attribute), in the table's order
ROWS = [
    ("acknowledged", "acknowledged"),
    ("lost", "lost"),
    ("duplicated", "duplicated"),
    ("reordered", "out_of_order"),
    ("conflicting", "conflicting_offsets"),
    ("failed sends", "failed"),
    ("unacked but read", "unacked_but_present"),
    ("read back", "read_back"),
]


@dataclass
class RunFacts:
    """What the run was: the settings its verdict depends on, and the faults it did."""

    topic: str
    partitions: int
    acks: str
    idempotence: bool
    rate: float
    duration: float
    faults: Counter[str] = field(default_factory=Counter)
    fault_log: list[str] = field(default_factory=list)


def violations(report: CheckReport, idempotence: bool) -> dict[str, int]:
    """The counts held against the cluster (non-zero ones only)."""
    names = ["lost", "conflicting_offsets"]
    if idempotence:
        names += ["duplicated", "out_of_order"]
    return {n: getattr(report, n) for n in names if getattr(report, n)}


def exit_code(report: CheckReport, facts: RunFacts) -> int:
    if violations(report, facts.idempotence):
        return VIOLATION
    if report.acknowledged == 0:
        return COULD_NOT_RUN
    return OK


def verdict(report: CheckReport, facts: RunFacts) -> str:
    found = violations(report, facts.idempotence)
    if found:
        label = dict((attr, row) for row, attr in ROWS)
        return "FAILED: " + ", ".join(f"{n} {label[k]}" for k, n in found.items())
    if report.acknowledged == 0:
        return "NOTHING CHECKED: no record was acknowledged"
    return "OK: every acknowledged record read back where it was acknowledged"


def table(report: CheckReport, facts: RunFacts) -> str:
    """The summary table, then examples of each violation."""
    faults = sum(facts.faults.values())
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(facts.faults.items()))
    lines = [f"strom-verify: topic {facts.topic} ({facts.partitions} partitions), "
             f"acks={facts.acks}, idempotence {'on' if facts.idempotence else 'off'}, "
             f"{facts.rate:g} records/s for {facts.duration:g} s"]
    width = max(len(label) for label, _ in ROWS + [("faults done", "")])
    for label, attr in ROWS:
        lines.append(f"  {label:<{width}}  {getattr(report, attr):>8}")
    lines.append(f"  {'faults done':<{width}}  {faults:>8}" + (f"  ({kinds})" if kinds else ""))
    lines.append(f"result: {verdict(report, facts)}")
    for name in violations(report, facts.idempotence):
        examples = report.examples.get(name, [])
        if examples:
            lines.append(f"{name.replace('_', ' ')}, e.g.:")
            lines.extend(f"  {e}" for e in examples)
    return "\n".join(lines)


def as_json(report: CheckReport, facts: RunFacts) -> str:
    doc: dict[str, Any] = {
        "topic": facts.topic, "partitions": facts.partitions, "acks": facts.acks,
        "idempotence": facts.idempotence, "rate": facts.rate, "duration_s": facts.duration,
        "counts": {label.replace(" ", "_"): getattr(report, attr) for label, attr in ROWS},
        "faults_done": dict(sorted(facts.faults.items())),
        "fault_log": facts.fault_log,
        "violations": violations(report, facts.idempotence),
        "examples": {k: v for k, v in report.examples.items() if v},
        "result": verdict(report, facts),
        "exit_code": exit_code(report, facts),
    }
    return json.dumps(doc, indent=2)


def could_not_run_json(reason: str) -> str:
    return json.dumps({"result": f"COULD NOT RUN: {reason}", "exit_code": COULD_NOT_RUN},
                      indent=2)
