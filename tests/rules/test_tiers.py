"""Which tier survives each failure class, and the MTBF of each tier."""

from __future__ import annotations

import pytest

from ckpt_advisor.parsers.vocabulary import GENERIC_CLASSES, PLANNED_CLASSES, SPECIFIC_CLASSES
from ckpt_advisor.rules.mtbf import estimate_mtbf
from ckpt_advisor.rules.tiers import (
    DEFAULT_SURVIVAL,
    MISSING,
    XID_DEFAULT,
    Tier,
    surviving_tier,
    tier_rates,
    with_overrides,
)

HOUR_S = 3600.0


def test_every_vocabulary_class_has_its_own_entry() -> None:
    """Every class the parsers can give (parsers/vocabulary.py) is named in the default table,
    and Xids have a default entry: a new class must be placed on purpose, not by fallback."""
    vocabulary = PLANNED_CLASSES | GENERIC_CLASSES | SPECIFIC_CLASSES
    assert vocabulary - DEFAULT_SURVIVAL.keys() == set()
    assert XID_DEFAULT in DEFAULT_SURVIVAL


@pytest.mark.parametrize(
    ("failure_class", "tier"),
    [
        ("nccl_timeout", Tier.MEMORY),
        ("python_exception", Tier.MEMORY),
        ("host_oom", Tier.LOCAL),
        ("node_failure", Tier.PERSISTENT),
        ("gpu_fallen_off_bus", Tier.PERSISTENT),
        ("gpu_xid_31", Tier.MEMORY),
        ("gpu_xid_79", Tier.PERSISTENT),
        ("gpu_xid_48", Tier.PERSISTENT),
        ("unknown", Tier.PERSISTENT),
        ("slurm_time_limit", Tier.PERSISTENT),
    ],
)
def test_default_tiers_follow_what_the_interruption_destroys(
    failure_class: str, tier: Tier
) -> None:
    """Software faults keep host memory, the OOM killer keeps the disk, lost hosts keep
    neither; an Xid not listed by number takes the Xid default (persistent)."""
    assert surviving_tier(failure_class).tier is tier


def test_a_class_the_table_lacks_needs_the_persistent_copy() -> None:
    """An unnamed class (a parser's new one) is assumed to destroy fast copies."""
    assert surviving_tier("some_new_class") is MISSING
    assert MISSING.tier is Tier.PERSISTENT


def test_overrides_move_a_class_and_refuse_bad_tiers() -> None:
    """A job with peer-replicated memory copies maps node_failure to memory; a misspelt tier
    is refused with the class named."""
    table = with_overrides({"node_failure": "memory"})
    assert surviving_tier("node_failure", table).tier is Tier.MEMORY
    assert surviving_tier("node_failure").tier is Tier.PERSISTENT  # the default is untouched
    with pytest.raises(ValueError, match="node_failure: tier must be one of"):
        with_overrides({"node_failure": "ram"})
    with pytest.raises(ValueError, match="snake_case"):
        with_overrides({"Node Failure": "memory"})


def test_tier_rates_split_the_interruptions_over_one_exposure() -> None:
    """6 NCCL timeouts, 2 Python errors and 2 node failures in 100 h: memory survives 8, so
    M1 = 12.5 h and M2 = 50 h, each with the chi-square interval of its own count; a local
    tier also survives the host OOM kill."""
    counts = {"nccl_timeout": 6, "python_exception": 2, "node_failure": 2}
    rates = tier_rates(counts, 100 * HOUR_S)
    assert rates.recoverable.mtbf_s == pytest.approx(12.5 * HOUR_S)
    assert rates.persistent.mtbf_s == pytest.approx(50 * HOUR_S)
    assert rates.persistent.ci_s == estimate_mtbf(100 * HOUR_S, 2).ci_s
    assert rates.recoverable_fraction == pytest.approx(0.8)
    local = tier_rates({**counts, "host_oom": 2}, 100 * HOUR_S, fast_tier=Tier.LOCAL)
    assert local.recoverable.n_failures == 10
    assert tier_rates({**counts, "host_oom": 2}, 100 * HOUR_S).recoverable.n_failures == 8
    assert tier_rates({}, 100 * HOUR_S).recoverable_fraction is None
    with pytest.raises(ValueError, match="fast_tier"):
        tier_rates(counts, 100 * HOUR_S, fast_tier=Tier.PERSISTENT)
