"""The ListOps benchmark's comparison with the LRA (``benchmarks/listops.py``): ranks, Spearman's
rho and the per-variant summary the README and 07 read. Runs from a checkout (the benchmarks are
not part of the wheel); scipy, where installed, is the reference for rho."""

import random
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
if not (BENCHMARKS / "listops.py").exists():  # an installed wheel without the checkout
    pytest.skip("benchmarks/ is not here (a checkout is needed)", allow_module_level=True)
sys.path.insert(0, str(BENCHMARKS))
import listops  # noqa: E402


def test_ranks_average_ties():
    assert listops.ranks([0.3, 0.1, 0.3, 0.2]) == [3.5, 1.0, 3.5, 2.0]


def test_spearman_against_scipy():
    stats = pytest.importorskip("scipy.stats", reason="scipy is the reference")
    rng = random.Random(0)
    for _ in range(100):
        n = rng.randint(3, 12)
        x = [rng.choice([0.1, 0.2, rng.random()]) for _ in range(n)]
        y = [rng.random() for _ in range(n)]
        if len(set(x)) > 1:
            assert listops.spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert listops.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="same length"):
        listops.spearman([1, 2], [1])


def test_summary_compares_mapped_variants_only():
    rows = {}
    for cls, accuracies in {"MultiHeadAttention": [0.75, 0.25], "LocalAttention": [0.125, 0.125],
                            "PerformerAttention": [0.5, 0.5], "FourierMixing": [0.9, 0.9]}.items():
        for seed, accuracy in enumerate(accuracies):
            rows[f"{cls} / seed {seed}"] = {"cls": cls, "label": cls, "family": "f",
                                            "accuracy": accuracy}
    info = listops.summary({"rows": rows})
    assert info["per_variant"]["MultiHeadAttention"] == {
        "label": "MultiHeadAttention", "family": "f", "seeds": 2, "mean": 0.5, "min": 0.25,
        "max": 0.75}
    assert {cls for _, cls in info["mapped"]} == {"MultiHeadAttention", "LocalAttention",
                                                  "PerformerAttention"}, "FNet has no LRA row"
    # ours: Local < full = Performer (0.5 each, a tie); LRA: Local 15.82 < Performer 18.01 < Transformer
    expected = listops.spearman([0.5, 0.125, 0.5], [36.37, 15.82, 18.01])
    assert expected == pytest.approx(0.8660254037844387), "ranks (2.5, 1, 2.5) against (3, 1, 2)"
    assert info["spearman_rho"] == pytest.approx(expected)


def test_root_operator_rule_reads_position_zero_only():
    torch = pytest.importorskip("torch")
    from lectures_lib.data import LISTOPS_TOKENS, listops_encode

    def task(expressions, labels):
        rows = [listops_encode(e) for e in expressions]
        tokens = torch.zeros(len(rows), 8, dtype=torch.int64)
        for i, row in enumerate(rows):
            tokens[i, : len(row)] = torch.tensor(row)
        return tokens, tokens != 0, torch.tensor(labels)

    # Training: MAX roots answer 9 twice and 7 once, MIN roots 0; a MAX inside a MIN is not a root.
    train = task(["[MAX 9 1 ]", "[MAX 2 9 ]", "[MAX 7 1 ]", "[MIN 0 3 ]", "[MIN [MAX 4 0 ] 5 ]"],
                 [9, 9, 7, 0, 4])
    test = task(["[MAX 8 3 ]", "[MIN 1 2 ]", "[SM 4 5 ]"], [8, 1, 9])
    accuracy, labels = listops.root_operator_rule(train, test)
    assert labels == {"[MIN": 0, "[MAX": 9}, "the most frequent training label of each root"
    # MAX -> 9 (wrong, 8), MIN -> 0 (wrong, 1), SM unseen -> the majority label 9 (right)
    assert accuracy == pytest.approx(1 / 3)
    assert set(labels) <= set(LISTOPS_TOKENS)


def test_markdown_table_is_read_from_the_runs():
    rows = {}
    for cls, family, accuracies in (("MultiHeadAttention", "full", [0.3, 0.34]),
                                    ("LocalAttention", "human knowledge", [0.31, 0.31]),
                                    ("BagOfTokens", "baseline", [0.18, 0.2])):
        for seed, accuracy in enumerate(accuracies):
            rows[f"{cls} / seed {seed}"] = {"cls": cls, "label": cls, "family": family,
                                            "accuracy": accuracy, "seed": seed}
    results = {"rows": rows, "settings": {"min_len": 64, "max_len": 256},
               "lra_table1": listops.LRA_TABLE1, "lra_map": listops.LRA_MAP,
               "baselines": {"majority_class": 0.15, "root_operator": 0.32,
                             "lra_lengths": {"majority_class": 0.17, "root_operator": 0.35}}}
    text = listops.markdown(results)
    lines = text.splitlines()
    assert lines[2] == "| MultiHeadAttention | full | 2 | 0.320 | 0.300-0.340 | 36.37 (Transformer) |"
    assert lines[3].startswith("| LocalAttention |") and lines[4].endswith("| - |"), "best first"
    assert "The 2 models (every row but the two baselines) span 0.310-0.320" in text
    assert "full attention's 2 runs span 0.300-0.340 (0.040)" in text
    assert "over the 2 mapped rows: 1.000" in text, "local below full, in both tables"


def test_long_range_table_reads_every_seed_and_the_query_only_ceiling():
    torch = pytest.importorskip("torch")
    import long_range

    # Two queries (keys 9 and 10): key 9's answers 0, 0, 1 (best 2), key 10's 3 (best 1): 3 of 4.
    tokens = torch.tensor([[1, 9], [2, 9], [3, 9], [4, 10]])
    assert long_range.query_only_ceiling((tokens, torch.tensor([0, 0, 1, 3]))) == 0.75
    rows = {"full": {"accuracy": 0.9, "family": "full", "steps_per_s": 5.0, "peak_mib": 49.0},
            "flaky": {"accuracy": 0.26, "family": "clustering", "steps_per_s": 2.0, "peak_mib": 9.0},
            "blind": {"accuracy": 0.25, "family": "baseline", "steps_per_s": 30.0, "peak_mib": 1.0}}
    seed_rows = {"full": {"1": {"accuracy": 0.7}, "2": {"accuracy": 0.8}},
                 "flaky": {"2": {"accuracy": 0.44}, "1": {"accuracy": 0.27}},
                 "blind": {"1": {"accuracy": 0.27}}}
    results = {"settings": {"seed": 0, "n_test": 4}, "rows": rows, "seed_rows": seed_rows}
    assert long_range.seed_accuracies(results, "flaky") == {0: 0.26, 1: 0.27, 2: 0.44}
    lines = long_range.markdown(results, 0.25, 0.28).splitlines()
    assert lines[0].startswith("| attention | family | seed 0 | seed 1 | seed 2 | mean |")
    assert lines[2] == "| full | full | 0.900 | 0.700 | 0.800 | 0.800 | 3 of 3 | 5.00 | 49.0 |"
    assert lines[3].startswith("| flaky | clustering | 0.260 | 0.270 | 0.440 | 0.323 | 1 of 3 |")
    assert lines[4].startswith("| blind | baseline | 0.250 | 0.270 | - | 0.260 | 0 of 2 |"), \
        "a missing seed is shown as missing, not averaged in"
    assert "some seeds only: flaky (0.440 on seed 2)" in lines[-1]
    assert "every seed (1): blind." in lines[-1]


def test_long_range_picture_draws_every_seed_and_the_ceiling(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    import long_range
    import matplotlib.pyplot as plt

    tokens = torch.tensor([[1, 9], [2, 9], [3, 9], [4, 10]])
    test = (tokens, torch.tensor([0, 0, 1, 3]))
    assert long_range.task_ceiling("binding", test) == 0.75
    assert long_range.task_ceiling("retrieval", test) is None, "no ceiling where it is not defined"
    rows = {"full": {"accuracy": 0.9, "family": "full", "steps_per_s": 5.0, "peak_mib": 49.0},
            "blind": {"accuracy": 0.25, "family": "baseline", "steps_per_s": 30.0, "peak_mib": 1.0}}
    results = {"settings": {"task": "binding", "seq_len": 8, "layers": 2, "steps": 10,
                            "batch_size": 2, "seed": 0},
               "rows": rows, "seed_rows": {"full": {"1": {"accuracy": 0.7}, "2": {"accuracy": 0.8}}}}
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to read it back
    long_range.plot(results, tmp_path / "picture.png", ceiling=0.28)
    assert (tmp_path / "picture.png").stat().st_size > 0
    ax = figures[0].axes[0]
    ticks = sorted(y for collection in ax.collections for _, y in collection.get_offsets()
                   if collection.get_offsets().shape[0] == 3)
    assert ticks == pytest.approx([0.7, 0.8, 0.9]), "a tick at each of full's three seeds"
    dashed = [line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert dashed == pytest.approx([0.28]), "the ceiling, dashed"


def test_the_closing_picture_takes_longformer_and_big_bird_with_the_global_token_on_the_query(tmp_path):
    """long_range.closing_picture: the on-query runs (every seed) replace the registry's rows of
    Longformer and Big Bird, at those rows' cost; other settings or no file change nothing."""
    import json

    import long_range

    settings = {"task": "binding", "seq_len": 8, "seed": 0}
    cost = {"steps_per_s": 4.0, "peak_mib": 150.0, "family": "human knowledge"}
    results = {"settings": settings,
               "rows": {"full": {"accuracy": 0.9, "cls": "MultiHeadAttention"},
                        "Longformer": {**cost, "accuracy": 0.25, "cls": "LongformerAttention"}},
               "seed_rows": {"Longformer": {"1": {"accuracy": 0.26}}}}
    on_query = {"settings": settings,
                "rows": {"Longformer (global on the query)": {"accuracy": 0.8, "steps_per_s": 1.0,
                                                              "cls": "LongformerOnQuery"}},
                "seed_rows": {"Longformer (global on the query)": {"1": {"accuracy": 0.6}}}}
    path = tmp_path / "on_query.json"
    path.write_text(json.dumps(on_query))
    drawn = long_range.closing_picture(results, path)
    assert list(drawn["rows"]) == ["full", "Longformer (global on the query)"], "same place"
    row = drawn["rows"]["Longformer (global on the query)"]
    assert row["accuracy"] == 0.8 and row["steps_per_s"] == 4.0 and row["peak_mib"] == 150.0
    assert long_range.accuracies(drawn, "Longformer (global on the query)") == [0.8, 0.6]
    path.write_text(json.dumps({**on_query, "settings": {**settings, "seq_len": 16}}))
    assert long_range.closing_picture(results, path) == results, "other settings: unchanged"
    assert long_range.closing_picture(results, tmp_path / "absent.json") == results
