"""Replaying an archive's shards: in this process, on a local process pool, or on a Ray cluster.

Every engine runs :func:`replay_shard` on each shard with monitors made once per process from
the policies' bundles (:class:`Job`), and merges the tallies as they come; since a tally's merge
does not depend on the order, the report is the same whatever the engine and the number of
workers. A shard whose replay fails (its worker died, say) is replayed once more, then reported
as failed; an unreadable line or file is counted and located, never dropped.

The local engine keeps at most two shards per worker in flight, so memory does not grow with
the archive. The Ray engine hands the shards to Ray Data, which runs them on a pool of actors
that each load the bundles once (the archive's files must be readable where the actors run).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .archive import Shard, Unreadable, lines
from .tally import Tally

ATTEMPTS = 2  # a failing shard is replayed once more before it is reported
Progress = Callable[[int], None]  # told the sessions of each finished shard


@dataclass(frozen=True)
class Job:
    """What every worker needs: the policy's bundle, the older policy's (``--compare``), the
    functors module, the monitors' options, whether to keep every session's decisions, and
    whether to list every session whose decisions differ (``--differing``)."""

    bundle: bytes
    origin: str
    old: bytes | None = None
    old_origin: str = ""
    functors: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    each: bool = False
    differing: bool = False


_made: list[tuple[Job, tuple[Any, Any]]] = []  # this process's monitors, with the job they are of


def monitors(job: Job) -> tuple[Any, Any]:
    """The monitors of a job's policies in this process (made once per job)."""
    found = next((made for of, made in _made if of is job), None)
    if found is None:
        from policyc.runtime.functors import load_module
        from policyc.runtime.opener import policy_of
        from policyc.runtime.session import Monitor

        functors = load_module(job.functors) if job.functors else None
        new = Monitor(policy_of(job.bundle, job.origin, functors), **job.options)
        old = (
            None if job.old is None else Monitor(policy_of(job.old, job.old_origin, functors), **job.options)
        )
        found = (new, old)
        _made[:] = [(job, found)]
    return found


def replay_shard(job: Job, shard: Shard) -> Tally:
    """The tally of one shard's sessions."""
    from policyc.runtime.replay import TraceError, replay_session, session_line

    new, old = monitors(job)
    tally = Tally()
    prefix = f"{shard.path}:"
    for number, text in lines(shard):
        place = (shard.source, number, 0)
        if isinstance(text, Unreadable):
            tally.unreadable_line(place, shard.path, text.message)
            continue
        try:
            name, record = session_line(text, shard.path, number)
        except TraceError as error:
            tally.unreadable_line(place, shard.path, *_unlocated(str(error), prefix))
            continue
        where = {"source": shard.path, "line": number, "session": str(record.get("session", name))}
        try:
            replayed = replay_session(new, record, name)
            before = None if old is None else replay_session(old, record, name)
        except Exception as error:  # the monitor fails closed; anything else is a failure of the replay
            replayed = {"decisions": [], "problems": [f"the replay failed: {type(error).__name__}: {error}"]}
            before = None
        events = record["events"] if before is not None else None  # for the drill-down of an example
        tally.session(place, where, replayed, before, job.each, events, job.differing)
    return tally


def _unlocated(message: str, prefix: str) -> tuple[str, int | None]:
    """A located message without its file and line (kept apart in the report), and its column."""
    if message.startswith(prefix):
        found = re.match(r"(\d+):(?:(\d+):)? ?(.*)", message[len(prefix) :], re.S)
        if found:
            return found.group(3), int(found.group(2)) if found.group(2) else None
    return message, None


def _retried(job: Job, shard: Shard) -> Tally:
    """A shard's tally, replayed once more when it fails, else a tally saying it failed."""
    for attempt in range(ATTEMPTS):
        try:
            return replay_shard(job, shard)
        except Exception as error:
            if attempt + 1 == ATTEMPTS:
                return _failed(shard, f"{type(error).__name__}: {error}")
    raise AssertionError("unreachable")


def _failed(shard: Shard, message: str) -> Tally:
    tally = Tally()
    tally.shard_failed(
        (shard.source, shard.line, 0), shard.path, f"the shard could not be replayed: {message}"
    )
    return tally


# ------------------------------------------------------------------------------- engines


def in_process(job: Job, shards: Sequence[Shard], progress: Progress) -> Tally:
    total = Tally()
    for shard in shards:
        part = _retried(job, shard)
        total.merge(part)
        progress(part.sessions)
    return total


_job: Job | None = None  # a pool worker's job


def _start(job: Job) -> None:
    global _job
    _job = job
    monitors(job)


def _in_worker(shard: Shard) -> Tally:
    assert _job is not None
    return replay_shard(_job, shard)


def local(job: Job, shards: Sequence[Shard], workers: int, progress: Progress) -> Tally:
    """The shards replayed by ``workers`` processes (this one alone for one worker or one shard)."""
    if workers <= 1 or len(shards) <= 1:
        return in_process(job, shards, progress)
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    total = Tally()
    context = multiprocessing.get_context("spawn")
    pending = list(reversed(shards))  # popped from the end: in order
    attempts: dict[Shard, int] = {}
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_start, initargs=(job,))
    running: dict[Future[Tally], Shard] = {}
    try:
        while pending or running:
            while pending and len(running) < 2 * workers:
                shard = pending.pop()
                running[pool.submit(_in_worker, shard)] = shard
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            broken = False
            for future in done:
                shard = running.pop(future)
                try:
                    part = future.result()
                except Exception as error:
                    broken = broken or isinstance(error, BrokenProcessPool)
                    attempts[shard] = attempts.get(shard, 0) + 1
                    if attempts[shard] < ATTEMPTS:
                        pending.append(shard)
                        continue
                    part = _failed(shard, f"{type(error).__name__}: {error}")
                total.merge(part)
                progress(part.sessions)
            if broken:  # a worker died: every shard it held is asked again of a new pool
                for future, shard in running.items():
                    future.cancel()
                    attempts[shard] = attempts.get(shard, 0) + 1
                    if attempts[shard] < ATTEMPTS:
                        pending.append(shard)
                    else:
                        total.merge(_failed(shard, "its worker process died"))
                running.clear()
                pool.shutdown(wait=False, cancel_futures=True)
                pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_start, initargs=(job,))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return total


class _RayReplayer:
    """A Ray Data actor: the job's monitors, made once; each batch's shards replayed."""

    def __init__(self, job: Job) -> None:
        self.job = job
        monitors(job)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import pickle

        import numpy as np

        tallies = [pickle.dumps(_retried(self.job, pickle.loads(shard))) for shard in batch["shard"]]
        return {"tally": np.array(tallies, dtype=object)}


def on_ray(job: Job, shards: Sequence[Shard], workers: int, address: str | None, progress: Progress) -> Tally:
    """The shards replayed by ``workers`` Ray actors, on the cluster at ``address`` or on a
    local one started for the replay (and stopped after it)."""
    import logging
    import pickle

    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(
            address=address,
            num_cpus=None if address else workers,
            include_dashboard=False,
            logging_level=logging.ERROR,
            log_to_driver=False,
        )
    try:
        context = ray.data.DataContext.get_current()
        for name in ("ray", "ray.data"):  # the report says what happened; Ray's own progress is noise
            logging.getLogger(name).setLevel(logging.ERROR)
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        items = [{"shard": pickle.dumps(shard)} for shard in shards]
        dataset = ray.data.from_items(items, override_num_blocks=max(1, len(items)))
        replayed = dataset.map_batches(
            _RayReplayer,
            fn_constructor_args=(job,),
            batch_size=1,
            compute=ray.data.ActorPoolStrategy(size=workers),
            num_cpus=1,
        )
        total = Tally()
        for row in replayed.iter_rows():
            part = pickle.loads(row["tally"])
            total.merge(part)
            progress(part.sessions)
        return total
    finally:
        if started:
            ray.shutdown()


def replay_archive(
    job: Job,
    shards: Sequence[Shard],
    *,
    engine: str = "local",
    workers: int = 1,
    address: str | None = None,
    progress: Progress = lambda sessions: None,
) -> Tally:
    """The tally of every shard, by ``engine`` (``local`` or ``ray``) with ``workers`` workers."""
    if engine == "ray":
        return on_ray(job, shards, workers, address, progress)
    if engine != "local":
        raise ValueError(f"engine is `local` or `ray`, not {engine!r}")
    return local(job, shards, workers, progress)
