"""Look inside a stored translator (notebook 08, section 4): what a trained English -> Chinese
Transformer writes for every test sentence, and its cross-attention on a few.

A notebook cannot train a translator worth looking at in its 60 s (4 epochs of a small one reach
test BLEU ~1 here), so this script trains one recipe of ``real_sentences.py`` (default
``smoothed-fast``, the same code, data, split and seed as its stored rows, so the run is the
stored one again) and stores, per seed:

* ``hypotheses``: its beam-search output (width 4, length penalty 1, the decoding the stored
  rows chose on the validation split) for every test sentence, in the split's order, so the
  notebook can score any subset (sentences with unknown words, long sentences) with sacrebleu;
* ``test_bleu``: the corpus BLEU of those outputs (the notebook checks it against the stored row);
* ``alignments``: for the first ``--maps`` test sentences, the cross-attention weights
  ``(layers, heads, n_output, n_source)`` of the model reading its own output (teacher-forced on
  ``<bos>`` + output), with the English words and the Chinese characters as labels (plain numbers,
  rounded to 3 digits: the notebook draws them in the course's attention explorer).

    nice -n 10 python benchmarks/real_sentences_inside.py --seeds 0 1 2

Results go to ``benchmarks/real_sentences_inside.json`` after every seed (a stored seed is
skipped: the script resumes).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # real_sentences.py beside this file

import real_sentences as R  # noqa: E402

from lectures_lib import real_sentences as T  # noqa: E402
from lectures_lib.data import sentences as S  # noqa: E402

DECODING = "beam4-lp1"


def alignments(model, pairs, src_vocab, tgt_vocab, hypotheses) -> list[dict]:
    """Cross-attention of ``model`` reading each hypothesis (teacher-forced), with labels."""
    out = []
    model.eval()
    for pair, hypothesis in zip(pairs, hypotheses):
        words = S.english_words(pair.english)
        characters = S.chinese_characters(hypothesis)
        src = torch.tensor([src_vocab.encode(words)])  # (1, n_src)
        tgt = torch.tensor([[tgt_vocab.bos_id, *tgt_vocab.encode(characters)]])  # (1, 1 + n_out)
        with torch.no_grad():
            maps = model.attention_maps(src, tgt)["decoder_cross"]  # (layers, 1, heads, n_tgt, n_src)
        # Row t of the map is the step that *predicts* character t (its input is <bos> + 0..t-1).
        out.append({"english": pair.english, "reference": pair.simplified,
                    "source_tokens": words, "output_tokens": characters,
                    "maps": maps[:, 0, :, : len(characters)].round(decimals=3).tolist()})
    return out


def run(splits, recipe_name: str, seed: int, n_maps: int) -> dict:
    recipe = R.RECIPES[recipe_name]
    trained = T.train_translator(splits.train, R.recipe_of(recipe), seed,
                                 max_cpu_s=recipe["max_cpu_s"])
    beam, penalty = R.DECODINGS[DECODING]
    hypotheses = T.translate(trained, [p.english for p in splits.test], beam=beam,
                             length_penalty=penalty, model=trained.model)
    vocabularies = (trained.data.src_vocab, trained.data.tgt_vocab)
    return {"recipe_name": recipe_name, "recipe": recipe, "seed": seed, "decoding": f"last/{DECODING}",
            "cpu_s": round(trained.cpu_s, 1), "epochs_done": trained.epochs_done,
            "stopped_early": bool(trained.stopped),
            "test_bleu": R.scores(hypotheses, splits.test)["bleu"],
            "hypotheses": hypotheses,
            "alignments": alignments(trained.model, splits.test[:n_maps], *vocabularies,
                                     hypotheses[:n_maps]),
            **R.machine()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="smoothed-fast", choices=list(R.RECIPES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--maps", type=int, default=12, help="test sentences with their maps")
    parser.add_argument("--json", type=Path, default=R.HERE / "real_sentences_inside.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    splits = S.split_sentences(seed=0)
    stored = json.loads(args.json.read_text()) if args.json.exists() else {"runs": []}
    stored["settings"] = {"data": f"{S.PACKAGE}=={S.PACKAGE_VERSION}", "sha256": S.DATA_SHA256,
                          "split_seed": 0, "test": len(splits.test)}
    for seed in args.seeds:
        if any(r["recipe_name"] == args.recipe and r["seed"] == seed for r in stored["runs"]):
            print(f"stored: {args.recipe} seed {seed}")
            continue
        row = run(splits, args.recipe, seed, args.maps)
        stored["runs"].append(row)
        args.json.write_text(json.dumps(stored, ensure_ascii=False, separators=(",", ":")) + "\n")
        print(json.dumps({k: row[k] for k in ("recipe_name", "seed", "cpu_s", "test_bleu")}))


if __name__ == "__main__":
    main()
