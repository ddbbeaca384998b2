"""A synthetic event table: many rows per person, keyed by ``user_id``.

The tables :mod:`dmondrian.privacy.entities` is for: each user has a fixed age and region and a few
to a few dozen events, each on a device (mostly the user's own, sometimes another), with an amount
and an event type. As with :mod:`dmondrian.synthetic`, the users are a stream fixed by a seed: users
are generated in blocks of :data:`BLOCK_USERS`, block ``b`` from ``SeedSequence(seed,
spawn_key=(b,))``, so any range of users (a Dask partition) is generated on its own and is exactly
the rows one call gives.

============== ================================================================
column         model
============== ================================================================
user_id        the user's number (the person key, never a quasi-identifier)
age            18-90 per user, right-skewed
region         one of :data:`REGIONS` per user, skewed
device         per event: the user's usual device 70 % of the time, else any
               of :data:`DEVICES`
event_type     per event, one of :data:`EVENT_TYPES`; each user leans to one
amount         per event, lognormal, larger for purchases
============== ================================================================

Events per user are ``1 + Poisson(events_per_user - 1)``: the default 6.62
gives the issue's table, about 331k events for 50k users.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .synthetic import _check_int

__all__ = ["BLOCK_USERS", "DEVICES", "EVENT_TYPES", "EVENT_QUASI_IDENTIFIERS", "REGIONS",
           "events_dask", "make_events"]

#: Users per independently seeded block of the stream.
BLOCK_USERS = 10_000
DEVICES = ["android", "ios", "web", "tablet", "tv", "console"]
REGIONS = [f"region-{i:02d}" for i in range(20)]
EVENT_TYPES = ["view", "click", "search", "cart", "purchase", "share", "review"]
#: The quasi-identifiers of the issue's example.
EVENT_QUASI_IDENTIFIERS = ["age", "region", "device"]


def _block(seed: int, block: int, events_per_user: float) -> pd.DataFrame:
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(block,)))
    m = BLOCK_USERS
    age = 18 + np.floor(72 * rng.beta(2.0, 3.5, m)).astype(np.int64)
    region_p = 1.0 / np.arange(1, len(REGIONS) + 1) ** 0.8
    region = rng.choice(len(REGIONS), m, p=region_p / region_p.sum())
    usual = rng.choice(len(DEVICES), m, p=[0.4, 0.3, 0.15, 0.08, 0.05, 0.02])
    leaning = rng.choice(len(EVENT_TYPES), m)
    counts = 1 + rng.poisson(max(events_per_user - 1.0, 0.0), m)
    user = np.repeat(np.arange(m), counts)
    n = len(user)
    device = np.where(rng.random(n) < 0.7, usual[user], rng.choice(len(DEVICES), n))
    event = np.where(rng.random(n) < 0.5, leaning[user], rng.choice(len(EVENT_TYPES), n))
    amount = rng.lognormal(2.0 + 1.5 * (event == EVENT_TYPES.index("purchase")), 0.8, n)
    return pd.DataFrame({"user_id": block * BLOCK_USERS + user, "age": age[user],
                         "region": np.asarray(REGIONS, dtype=object)[region[user]],
                         "device": np.asarray(DEVICES, dtype=object)[device],
                         "event_type": np.asarray(EVENT_TYPES, dtype=object)[event],
                         "amount": np.round(amount, 2)})


def make_events(n_users: int, seed: int = 0, *, start_user: int = 0,
                events_per_user: float = 6.62) -> pd.DataFrame:
    """The events of users ``start_user .. start_user + n_users - 1`` of the seeded stream.

    Parameters
    ----------
    n_users : int
        Number of users.
    seed : int, default 0
    start_user : int, default 0
        First user (a multiple of :data:`BLOCK_USERS` is cheapest; any works).
    events_per_user : float, default 6.62
        Mean events per user (at least 1).

    Returns
    -------
    pandas.DataFrame
        Columns ``user_id``, ``age`` (int64), ``region``, ``device``, ``event_type`` (strings) and
        ``amount`` (float64), the events of a user together, on a RangeIndex.

    Examples
    --------
    >>> ev = make_events(1_000, seed=1)
    >>> int(ev["user_id"].nunique()), bool(ev.groupby("user_id")["age"].nunique().max() == 1)
    (1000, True)
    >>> make_events(300, seed=1, start_user=700).reset_index(drop=True).equals(
    ...     ev[ev["user_id"] >= 700].reset_index(drop=True))
    True
    """
    n_users = _check_int("n_users", n_users, 0)
    seed = _check_int("seed", seed, 0)
    start_user = _check_int("start_user", start_user, 0)
    stop = start_user + n_users
    parts = []
    for block in range(start_user // BLOCK_USERS, -(-stop // BLOCK_USERS)):
        part = _block(seed, block, events_per_user)
        parts.append(part[(part["user_id"] >= start_user) & (part["user_id"] < stop)])
    if not parts:
        return _block(seed, 0, events_per_user).iloc[:0].reset_index(drop=True)
    return pd.concat(parts, ignore_index=True)


def events_dask(n_users: int, seed: int = 0, *, users_per_partition: int = 100_000,
                events_per_user: float = 6.62):
    """The event table as a lazy Dask DataFrame, one partition per range of users.

    Examples
    --------
    >>> ddf = events_dask(25_000, seed=2, users_per_partition=10_000)
    >>> ddf.npartitions, len(ddf.compute()) == len(make_events(25_000, seed=2))
    (3, True)
    """
    import dask.dataframe as dd

    n_users = _check_int("n_users", n_users, 0)
    per = _check_int("users_per_partition", users_per_partition, 1)
    starts = list(range(0, n_users, per)) or [0]
    meta = make_events(0, seed)
    return dd.from_map(lambda s: make_events(min(per, n_users - s), seed, start_user=s,
                                             events_per_user=events_per_user),
                       starts, meta=meta, enforce_metadata=False)
