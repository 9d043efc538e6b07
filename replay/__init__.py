"""Replaying trace archives at scale (``policyc replay``, docs/replay.md): archives read as
shards, sessions replayed by the incremental runtime on a local process pool or a Ray cluster,
and a report of the decisions (per verdict, rule and tool) and, against an older policy, of
every difference."""

from policyc.compiler.exports import exports

__all__, __getattr__ = exports(
    __name__,
    {
        "Shard": ".archive",
        "shards": ".archive",
        "files": ".archive",
        "Tally": ".tally",
        "Job": ".engines",
        "replay_archive": ".engines",
        "report_json": ".report",
        "report_text": ".report",
    },
)
