"""A dataset's fingerprint, by which a saved model's held-out pairs are found again (tests/test_honest_pairs.py)."""
from core.data import pairs_fingerprint


def test_fingerprint_follows_content_and_order(sample_pairs):
    pairs, _ = sample_pairs
    assert pairs_fingerprint(pairs) == pairs_fingerprint(pairs.copy())
    assert pairs_fingerprint(pairs) != pairs_fingerprint(pairs.iloc[::-1])
    edited = pairs.copy()
    edited.loc[3, "is_duplicate"] = 1 - edited.loc[3, "is_duplicate"]
    assert pairs_fingerprint(pairs) != pairs_fingerprint(edited)

