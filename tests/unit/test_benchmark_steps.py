"""The benchmark's steps: a failed one is recorded and shown, and the sweep goes on; every outcome is saved."""
from benchmarks.run import Progress, Steps


def steps() -> tuple[Steps, dict, list]:
    results = {"pipeline": [], "failures": []}
    saved: list = []
    return Steps(Progress(2), results, lambda: saved.append(repr(results))), results, saved


def failing_run() -> dict:
    raise TimeoutError("only 10 of 50,000 events visible")


def test_a_step_that_fails_is_recorded_with_its_names_and_the_next_step_still_runs(capsys):
    step, results, saved = steps()

    failed = step("repeat 1, exactly_once, 1 s", "pipeline", {"repeat": 0, "guarantee": "exactly_once"},
                  failing_run, lambda result: "never shown")
    ran = step("repeat 1, at_least_once, 1 s", "pipeline", {"repeat": 0, "guarantee": "at_least_once"},
               lambda: {"drain": 9000}, lambda result: f"{result['drain']:,} events/s")

    assert failed is None and ran == {"drain": 9000}
    assert results["failures"] == [{"repeat": 0, "guarantee": "exactly_once",
                                    "error": "TimeoutError: only 10 of 50,000 events visible"}]
    assert results["pipeline"] == [{"drain": 9000}]
    assert len(saved) == 2 and "TimeoutError" in saved[0] and "9000" in saved[1]
    shown = capsys.readouterr().err.splitlines()
    assert [line.split("] ", 1)[1] for line in shown] == [
        "repeat 1, exactly_once, 1 s: starting",
        "repeat 1, exactly_once, 1 s: FAILED: only 10 of 50,000 events visible",
        "repeat 1, at_least_once, 1 s: starting",
        "repeat 1, at_least_once, 1 s: 9,000 events/s",
    ]
