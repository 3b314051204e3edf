"""Preference pairs for reward-model and DPO training, one per comparison, from its counted
votes (judgments of annotators not excluded). README, "Hugging Face datasets":

- the *mean preference* m is the mean of the counted votes keyed by the pair (−2 response A much
  better … 2 response B much better; "both unacceptable" is 0, the tie point, as everywhere on
  the platform);
- m = 0 is a **tie**: left out of the pairs, counted in the card;
- when "both unacceptable" is the most frequent outcome (at least as many votes as A better
  and as B better), the comparison is left out as **both unacceptable** (neither response is
  a good "chosen"), counted in the card;
- otherwise `chosen` is the response m points to (`chosen` and `rejected` are one assistant
  message each, TRL's conversational preference format), `margin` = |m| (0 < margin ≤ 2) and
  `agreement` = the share of counted votes pointing the chosen way.
"""

from collections import Counter, defaultdict

TIE = "tie"
BOTH_UNACCEPTABLE = "both_unacceptable"


def outcome(votes: list[tuple[int, bool]]) -> str | None:
    """Why a comparison's votes [(preference, both_unacceptable)] give no pair, or None."""
    counts = Counter(
        "u" if unacceptable else ("a" if p < 0 else "b" if p > 0 else "t")
        for p, unacceptable in votes
    )
    if counts["u"] and counts["u"] >= max(counts["a"], counts["b"]):
        return BOTH_UNACCEPTABLE
    if sum(p for p, _ in votes) == 0:
        return TIE
    return None


def preference_pairs(judgments: list[dict]) -> tuple[list[dict], Counter]:
    """(pairs, left out by reason) from judgment rows (rows.judgment_rows); excluded
    annotators' judgments do not count."""
    by_comparison = defaultdict(list)
    for row in judgments:
        if not row["excluded"]:
            by_comparison[row["comparison_id"]].append(row)
    pairs, left_out = [], Counter()
    for comparison, rows in sorted(by_comparison.items()):
        votes = [(r["preference"], r["both_unacceptable"]) for r in rows]
        reason = outcome(votes)
        if reason:
            left_out[reason] += 1
            continue
        mean = sum(p for p, _ in votes) / len(votes)
        b_wins = mean > 0
        first = rows[0]
        chosen, rejected = ("b", "a") if b_wins else ("a", "b")
        pair = {
            "comparison_id": comparison,
            "scenario_id": first["scenario"]["id"],
            "subtask": first["scenario"]["subtask"],
            "language": first["scenario"]["language"],
            "prompt": first["prompt"],
            "chosen": [{"role": "assistant", "content": first[f"response_{chosen}"]}],
            "rejected": [{"role": "assistant", "content": first[f"response_{rejected}"]}],
            "chosen_response": chosen,
            "margin": abs(mean),
            "agreement": sum(1 for p, _ in votes if (p > 0) == b_wins and p != 0) / len(votes),
            "n_votes": len(votes),
            "votes": sorted(p if b_wins else -p for p, _ in votes),
            "is_gold": first["is_gold"],
        }
        if "companion_a" in first:
            pair["chosen_companion"] = first[f"companion_{chosen}"]
            pair["rejected_companion"] = first[f"companion_{rejected}"]
        pairs.append(pair)
    return pairs, left_out
