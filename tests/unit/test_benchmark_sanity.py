"""The report's sanity checks: runs left out, and runs kept in the tables that were not exact, each said apart."""
from benchmarks.sections import sanity_section

POINT = {"commit_interval_ms": 1000, "record_bytes": 0, "partitions": 6, "workers": 1, "backlog": 50000}


def run(name: str, *, match: bool = True, exact: bool = True) -> dict:
    return {"run": name, "guarantee": "exactly_once", "point": POINT, "counts": {"match": match},
            "reconcile_ok": exact, "reconcile_problems": {} if exact else {"totals: lost event": 1},
            "exit_codes": {"worker-0": 0}}


def lines(results: dict) -> list[str]:
    return list(sanity_section(results))


def test_a_run_kept_in_the_tables_but_not_exact_is_counted_apart_from_the_runs_left_out():
    text = lines({"pipeline": [run("good"), run("inexact", match=False, exact=False)], "failures": []})
    assert "* Runs that failed and are left out of the tables: 0." in text
    assert "* Runs in the tables that reconcile found inexact, or whose counts differ from it: 1." in text
    named = [line for line in text if line.startswith("  * ")]
    assert len(named) == 1 and named[0].startswith("  * inexact (exactly_once, 1 s")
    assert "{'totals: lost event': 1}" in named[0]


def test_failed_runs_are_listed_under_their_own_count():
    text = lines({"pipeline": [run("good")], "failures": ["bench-exa-1 (exactly_once, 1 s): TimeoutError"]})
    assert text.index("* Runs that failed and are left out of the tables: 1.") + 1 == text.index(
        "  * bench-exa-1 (exactly_once, 1 s): TimeoutError")
    assert "* Runs in the tables that reconcile found inexact, or whose counts differ from it: 0." in text
