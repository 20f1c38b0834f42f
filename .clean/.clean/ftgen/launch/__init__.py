"""Thin launchers that run ftgen's shards (``--shard I/N``) on an existing scheduler. Each is
imported only when used; ftgen itself schedules nothing across hosts."""
