"""What one fault run measured (:class:`Outcome`), and its summary for a reader."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Outcome:
    """What one run measured."""

    guarantee: str
    plan: dict
    events_in: int = 0
    events_aggregated: int = 0
    upstream_duplicates: int = 0
    duplicates_in_output: int = 0
    losses: int = 0
    dead_letters: int = 0
    expected_dead_letters: int = 0
    late_events: int = 0  # of the expected dead letters: events whose window had closed
    fenced_zombie_writes: int = 0
    recovery_s: list[float] = field(default_factory=list)
    #: per lost worker: seconds from the loss until every input partition it owned committed again
    recovery_after_loss_s: list[float] = field(default_factory=list)
    faults_done: list[str] = field(default_factory=list)
    verifier_records: int = 0
    checks: dict[str, bool] = field(default_factory=dict)
    follow_differences: dict[str, int] = field(default_factory=dict)  # what reconcile --follow found, by kind
    problems: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: markers the broker lost around a restart, written by the harness as an operator would (tools.markers)
    lost_markers_written: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return all(self.checks.values()) and not self.duplicates_in_output and not self.losses


def summary(outcome: Outcome) -> str:
    lines = [
        f"{outcome.guarantee}: faults {', '.join(outcome.faults_done) or 'none'}",
        f"  events in {outcome.events_in:,}; aggregated {outcome.events_aggregated:,}; "
        f"upstream duplicates {outcome.upstream_duplicates:,}; dead letters {outcome.dead_letters:,} "
        f"(expected {outcome.expected_dead_letters:,}, of them late {outcome.late_events:,})",
        f"  duplicates in output {outcome.duplicates_in_output:,}; losses {outcome.losses:,}; "
        f"fenced zombie writes {outcome.fenced_zombie_writes:,}; verifier read {outcome.verifier_records:,} updates",
    ]
    if outcome.recovery_s:
        lines.append(f"  recovery after kill (s): {', '.join(f'{s:.1f}' for s in outcome.recovery_s)}")
    if outcome.recovery_after_loss_s:
        lines.append("  recovery after loss, every partition (s): "
                     + ", ".join(f"{s:.1f}" for s in outcome.recovery_after_loss_s))
    if outcome.follow_differences:
        lines.append("  reconcile --follow found: "
                     + ", ".join(f"{kind} {n:,}" for kind, n in outcome.follow_differences.items()))
    lines += [f"  [{'ok' if ok else 'FAILED'}] {check}" for check, ok in outcome.checks.items()]
    lines += [f"  note: {note}" for note in outcome.notes]
    lines += [f"  the broker lost a marker; the harness wrote it from the coordinator's log: {line}"
              for line in outcome.lost_markers_written]
    lines.append(f"  => {'EXACT' if outcome.exact else 'NOT EXACT'}"
                 + ("" if outcome.guarantee == "exactly_once" else f", {'NO' if not outcome.losses else 'SOME'} LOSS"))
    return "\n".join(lines)
