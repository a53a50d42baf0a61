"""The report's sections on single runs: the profiled runs and the long-transaction scenario."""
from __future__ import annotations

from typing import Iterable, Optional

from benchmarks.summary import GUARANTEES, SHORT, point_key, point_label


def figure(value: Optional[float], digits: int = 0) -> str:
    """A number as the report writes it: thousands separated, ``n/a`` when missing."""
    return "n/a" if value is None else f"{value:,.{digits}f}"


def spread_text(spread: dict, digits: int = 0) -> str:
    """median [min–max] of a spread (:func:`benchmarks.stats.spread`)."""
    if spread["median"] is None:
        return "n/a"
    if spread["n"] == 1:
        return figure(spread["median"], digits)
    return f"{figure(spread['median'], digits)} [{figure(spread['min'], digits)}–{figure(spread['max'], digits)}]"


def profile_section(results: dict) -> Iterable[str]:
    runs = results.get("profiles") or []
    profiled = {r["guarantee"]: r for r in runs if r.get("profile", {}).get("samples")}
    not_taken = [f"{r['guarantee']}: {r.get('profile_error', 'no samples')}" for r in runs
                 if r["guarantee"] not in profiled]
    if not_taken:
        yield "## Where a worker's time goes: a profile"
        yield ""
        yield "Not taken for " + "; ".join(not_taken) + "."
        yield ""
    if not profiled:
        return
    shown = [g for g in GUARANTEES if g in profiled]
    first = profiled[shown[0]]
    if not not_taken:
        yield "## Where a worker's time goes: a profile"
        yield ""
    yield (f"One more run per guarantee at {point_label(point_key(first['point']))}, its worker sampled by py-spy "
           f"through the throughput phase (`benchmarks/profile.py`). First the worker's CPU by thread over that "
           "time, read from `/proc`: Python runs one thread at a time, so its Python threads together can use at "
           "most about one core. Then shares of the event-loop thread's wall-clock time, idle included. py-spy "
           "pauses the worker for each sample, which slows it, so these runs are not in the tables above.")
    yield ""
    heads = " | ".join(SHORT[g] for g in shown)
    yield f"| while profiled | {heads} |"
    yield "|---|" + "---|" * len(shown)
    yield ("| drain events/s | " + " | ".join(figure(profiled[g]["throughput"]["drain_events_per_s"]) for g in shown)
           + " |")
    yield "| seconds sampled | " + " | ".join(figure(profiled[g]["profile"]["seconds"], 1) for g in shown) + " |"
    yield ""
    kinds = list(dict.fromkeys(k for g in shown for k in profiled[g]["profile"].get("threads", {})))
    if kinds:
        yield f"| worker CPU by thread: share (cores) | {heads} |"
        yield "|---|" + "---|" * len(shown)
        for kind in kinds:
            yield f"| {kind} | " + " | ".join(_thread_cpu(profiled[g]["profile"].get("threads", {}).get(kind))
                                                for g in shown) + " |"
        yield ""
    yield f"| time inside | {heads} |"
    yield "|---|" + "---|" * len(shown)
    for part in first["profile"]["within"]:
        yield f"| {part} | " + " | ".join(_share(profiled[g]["profile"]["within"].get(part)) for g in shown) + " |"
    yield ""
    owners = list(dict.fromkeys(o for g in shown for o in profiled[g]["profile"]["own"]))
    yield f"| code running (the sampled frame's) | {heads} |"
    yield "|---|" + "---|" * len(shown)
    for owner in owners:
        yield f"| {owner} | " + " | ".join(_share(profiled[g]["profile"]["own"].get(owner)) for g in shown) + " |"
    yield ""


def _share(fraction: Optional[float]) -> str:
    return "—" if fraction is None else f"{fraction * 100:.1f} %"


def _thread_cpu(used: Optional[dict]) -> str:
    return "—" if used is None else f"{used['share'] * 100:.1f} % ({used['cores']:.2f})"


def long_transaction_section(results: dict, plots: dict[str, str]) -> Iterable[str]:
    scenarios = results.get("long_transaction") or []
    if not scenarios:
        return
    yield "## Long transaction: one open transaction holds back every read_committed reader"
    yield ""
    yield ("The pipeline runs under exactly_once (100 ms commits, 200 events/s). A separate producer "
           f"(`transaction.timeout.ms` = {scenarios[0]['scenario']['stall_timeout_ms']:,}) begins a transaction, "
           "writes one record to partition 0 of `merchant-totals` and stalls. The project's own transaction "
           "commands (`faust -A app transactions`, `hanging-transactions`, `lso`) look at it while it happens; "
           "in the `manual` run an operator then aborts it with `faust -A app abort-transaction`.")
    yield ""
    yield ("| run | stalled at | aborted by hand at | LSO cleared at | lag lasted | max lag | "
           "reader got from p0 / others while stalled |")
    yield "|---|---|---|---|---|---|---|"
    for s in scenarios:
        reader = s["reader_records_during_stall"]
        aborted = "—" if s["aborted_at_s"] is None else f"{s['aborted_at_s']:.1f} s"
        yield (f"| {s['mode']} | {s['stalled_at_s']:.1f} s | {aborted} | "
               f"{figure(s['cleared_at_s'], 1)} s | {figure(s['lag_lasted_s'], 1)} s | "
               f"{s['max_lag_records']:,} records, "
               f"{s['max_lag_ms'] / 1000:.1f} s | {reader['partition_0']:,} / {reader['other_partitions']:,} |")
    yield ""
    if "lso" in plots:
        yield f"![LSO lag timeline]({plots['lso']})"
        yield ""
    for s in scenarios:
        yield f"**{s['mode']}** sanity checks: " + ", ".join(
            f"{name.replace('_', ' ')}: {'yes' if ok else 'NO'}"
            for name, ok in s["sanity"].items() if ok is not None) + "."
        if s["cleared_after_abort_s"] is not None:
            abort = next(c for c in s["commands"] if _is_abort(c))
            before = s["lag_lasted_s"] < s["scenario"]["stall_timeout_ms"] / 1000
            yield (f"The LSO moved {s['cleared_after_abort_s']:.1f} s after the abort command started "
                   f"(the command itself took {abort.get('seconds', 0):.1f} s; LSO sampled "
                   f"every 0.25 s), {s['lag_lasted_s']:.1f} s after the stall: "
                   + ("before" if before else "NOT before")
                   + " the stalled producer's own timeout could have aborted it.")
        elif s["cleared_at_s"] is not None:
            yield (f"The broker aborted it {s['lag_lasted_s']:.1f} s after the stall: the "
                   f"{s['scenario']['stall_timeout_ms'] / 1000:g} s timeout plus up to 10 s until the broker's "
                   "next check for timed-out transactions "
                   "(`transaction.abort.timed.out.transaction.cleanup.interval.ms`).")
        yield ""
    yield ("What the transaction commands showed during the `manual` run (the `transactions` output is cut to "
           "transactions writing to `merchant-totals`):")
    yield ""
    manual = next((s for s in scenarios if s["mode"] == "manual"), scenarios[-1])
    for command in manual["commands"]:
        yield f"```\n$ {command['command']}\n{command['output'] or '(no output)'}\n```"
    yield ""
    yield ("The stalled producer is still within its own transaction timeout, so its coordinator holds the "
           "transaction as Ongoing: it is a *long* transaction, not a hanging one, and `hanging-transactions` "
           "reports it only with `--blocking` (every open transaction holding back an LSO).")
    yield ""


def _is_abort(command: dict) -> bool:
    """The by-hand abort: ``abort-transaction`` (``kafka-transactions.sh ... abort`` in older results)."""
    return "abort-transaction" in command["command"] or " abort " in command["command"]


def sanity_section(results: dict) -> Iterable[str]:
    """Whether the runs can be trusted: counts against reconcile, exactness, clean stops, failures."""
    yield "## Sanity checks"
    yield ""
    runs = results["pipeline"]
    matched = sum(1 for r in runs if r["counts"]["match"])
    exact = sum(1 for r in runs if r["reconcile_ok"])
    clean = sum(1 for r in runs if all(code == 0 for code in r["exit_codes"].values()))
    yield (f"* Throughput counts vs reconcile: in {matched} of {len(runs)} runs the events and updates the "
           "benchmark's reader saw equal reconcile's counted events and total updates of the same run.")
    yield f"* Reconcile exact (no loss, no duplicate, right totals) in {exact} of {len(runs)} runs."
    yield f"* Workers stopped cleanly (exit code 0) in {clean} of {len(runs)} runs."
    profiled = results.get("profiles") or []
    if profiled:
        sound = sum(1 for r in profiled if r["counts"]["match"] and r["reconcile_ok"]
                    and all(code == 0 for code in r["exit_codes"].values()))
        yield (f"* Profiled runs: {sound} of {len(profiled)} matched reconcile, exact, with workers stopped "
               "cleanly.")
    restarts = sum(r.get("restarted_workers", 0) for r in runs)
    yield (f"* Workers restarted during warm-up after the changelog start-up race (Faust's agent crash-loops with "
           f"`PartitionsMismatch` when it starts before its new changelog topics show in the metadata): {restarts}.")
    failures = results.get("failures") or []
    yield f"* Runs that failed and are left out of the tables: {len(failures)}."
    for failure in failures:
        yield f"  * {failure}"
    unsound = [r for r in runs if not r["counts"]["match"] or not r["reconcile_ok"]]
    yield f"* Runs in the tables that reconcile found inexact, or whose counts differ from it: {len(unsound)}."
    for bad in unsound:
        yield (f"  * {bad['run']} ({bad['guarantee']}, {point_label(point_key(bad['point']))}, workers restarted "
               f"after the start-up race: {bad.get('restarted_workers', 0)}): counts match reconcile: "
               f"{bad['counts']['match']}; reconcile problems {bad['reconcile_problems']}")
    yield ""
