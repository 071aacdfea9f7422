r"""Checkers for section 05's exercises: label smoothing and one step of beam search.

* ``label_smoothing_loss(logits, targets, smoothing, ignore_index)``: the cross-entropy against
  the smoothed target distribution $(1 - \varepsilon)\,\text{one-hot} + \varepsilon / C$, averaged
  over the targets that are not ``ignore_index`` (the convention of
  ``F.cross_entropy(..., label_smoothing=ε)``; Szegedy et al. 2016, used by the Transformer paper).
* ``beam_step(beam_scores, log_probs, beam_size) -> (scores, parents, tokens)``: every beam
  ``b`` (summed log-probability ``beam_scores[b]``) extended by every word ``w``
  (``log_probs[b, w]``); keep the ``beam_size`` best extensions, best first.

Used in ``05_transformer_decoder.ipynb``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._base import checker, probe_generator
from ._compare import Probe, Wrong, compare

__all__ = [
    "check_label_smoothing_loss",
    "check_beam_step",
    "label_smoothing_loss_reference",
    "beam_step_reference",
]


def label_smoothing_loss_reference(logits, targets, smoothing, ignore_index):
    """The reference: ``F.cross_entropy(logits, targets, ignore_index=, label_smoothing=)``."""
    return F.cross_entropy(logits, targets, ignore_index=ignore_index, label_smoothing=smoothing)


def _smoothed(logits, targets, smoothing, ignore_index, *, spread_over_others=False,
              keep_ignored=False, reduce="mean"):
    log_p = torch.log_softmax(logits, dim=-1)  # (N, C)
    classes = logits.shape[-1]
    keep = torch.ones_like(targets, dtype=torch.bool) if keep_ignored else targets != ignore_index
    safe = targets.clamp(0, classes - 1)
    nll = -log_p.gather(-1, safe[:, None])[:, 0]  # (N,)
    if spread_over_others:
        uniform = -(log_p.sum(-1) + nll) / (classes - 1)  # mean over the other classes
        per_row = (1 - smoothing) * nll + smoothing * uniform
    else:
        per_row = (1 - smoothing) * nll + smoothing * (-log_p.mean(-1))
    per_row = per_row[keep]
    return per_row.sum() if reduce == "sum" else per_row.mean()


def _loss_probes(hidden: bool) -> list[Probe]:
    gen = probe_generator(3 if hidden else 2016)

    def probe(title, n, classes, smoothing, ignore_index, n_ignored, dtype=torch.float32):
        logits = (torch.randn(n, classes, generator=gen, dtype=torch.float64) * 2).to(dtype)
        targets = torch.randint(0, classes, (n,), generator=gen)
        targets[torch.randperm(n, generator=gen)[:n_ignored]] = ignore_index
        return Probe(title, (logits, targets, smoothing, ignore_index))

    probes = [
        probe("smoothing 0.1, two ignored targets", 6, 5, 0.1, -100, 2),
        probe("smoothing 0.3, padding id 0 ignored", 7, 4, 0.3, 0, 3),
        probe("no smoothing (plain cross-entropy)", 5, 6, 0.0, -100, 1),
        probe("float64, smoothing 0.2", 8, 3, 0.2, -100, 0, torch.float64),
    ]
    if hidden:
        probes += [
            probe("two classes, smoothing 0.5", 9, 2, 0.5, 1, 4),
            probe("many classes, float64", 4, 17, 0.15, -1, 1, torch.float64),
        ]
    return probes


def _loss_catalogue(probe: Probe) -> list[Wrong]:
    return [
        Wrong("smoothing_ignored", "the smoothing has no effect: that is the plain "
              "cross-entropy. Mix (1 - ε) of the one-hot target with ε of the uniform "
              "distribution over all C classes",
              lambda lo, t, s, ii: _smoothed(lo, t, 0.0, ii)),
        Wrong("ignored_targets_counted", "targets equal to ignore_index still count: leave them "
              "out of both the sum and the count of the mean",
              lambda lo, t, s, ii: _smoothed(lo, t, s, ii, keep_ignored=True)),
        Wrong("spread_over_other_classes", "you spread ε over the C - 1 *other* classes; the "
              "convention here (and of F.cross_entropy) spreads it over all C classes, the "
              "target included",
              lambda lo, t, s, ii: _smoothed(lo, t, s, ii, spread_over_others=True)),
        Wrong("sum_not_mean", "you summed over the targets: average over the targets that are "
              "not ignored",
              lambda lo, t, s, ii: _smoothed(lo, t, s, ii, reduce="sum")),
    ]


@checker("label_smoothing_loss", forbid=("label_smoothing",),
         positional_limit={"cross_entropy": 7, "CrossEntropyLoss": 5})
def check_label_smoothing_loss(student_fn, hidden: bool = False) -> str:
    """Check ``label_smoothing_loss(logits (N, C), targets (N,), smoothing, ignore_index)``."""
    probes = _loss_probes(hidden)
    compare(student_fn, probes, label_smoothing_loss_reference, _loss_catalogue, ("the loss",),
            "Per target: (1 - ε)·(-log p[target]) + ε·mean over all classes of (-log p), with "
            "log p = log_softmax(logits); then the mean over the targets that are not ignored.")
    return f"all {len(probes)} probes agree with F.cross_entropy(..., label_smoothing=ε)."


def beam_step_reference(beam_scores, log_probs, beam_size):
    """The reference: ``(scores, parents, tokens)``, each ``(beam_size,)``, best first."""
    vocab = log_probs.shape[-1]
    totals = (beam_scores[:, None] + log_probs).reshape(-1)  # (beams * vocab,)
    scores, flat = totals.topk(beam_size)
    return scores, flat // vocab, flat % vocab


def _beam_probes(hidden: bool) -> list[Probe]:
    gen = probe_generator(13 if hidden else 2014)

    def probe(title, beams, vocab, beam_size, dtype=torch.float32, spread=3.0):
        scores = (-torch.rand(beams, generator=gen, dtype=torch.float64) * spread).to(dtype)
        logits = torch.randn(beams, vocab, generator=gen, dtype=torch.float64) * 2
        return Probe(title, (scores, torch.log_softmax(logits, -1).to(dtype), beam_size))

    probes = [
        probe("3 beams, 7 words, keep 3", 3, 7, 3),
        probe("4 beams, 5 words, keep 2", 4, 5, 2),
        probe("one beam (the first step), keep 4", 1, 6, 4),
        probe("float64, 2 beams, keep 5", 2, 9, 5, torch.float64),
    ]
    if hidden:
        probes += [
            probe("5 beams, 3 words, keep 5", 5, 3, 5),
            probe("beam scores far apart", 3, 8, 3, spread=30.0),
        ]
    return probes


def _beam_catalogue(probe: Probe) -> list[Wrong]:
    def best_per_beam(scores, log_probs, k):
        best, tokens = log_probs.max(-1)
        total = scores + best
        order = total.argsort(descending=True)[:k]
        return total[order], order, tokens[order]

    def without_history(scores, log_probs, k):
        vocab = log_probs.shape[-1]
        _, flat = log_probs.reshape(-1).topk(k)
        return (scores[:, None] + log_probs).reshape(-1)[flat], flat // vocab, flat % vocab

    def wrong_divisor(scores, log_probs, k):
        beams = log_probs.shape[0]
        top, flat = (scores[:, None] + log_probs).reshape(-1).topk(k)
        return top, flat % beams, flat // beams

    def ascending(scores, log_probs, k):
        s, p, t = beam_step_reference(scores, log_probs, k)
        return s.flip(0), p.flip(0), t.flip(0)

    return [
        Wrong("one_word_per_beam", "you kept only the best word of each beam: two extensions "
              "of the same beam may both belong to the best k (flatten beams x words and take "
              "the top k of all of them)", best_per_beam),
        Wrong("history_ignored", "you ranked the words by this step's log-probability alone: "
              "a hypothesis' score is the *sum* of its log-probabilities, beam_scores[b] + "
              "log_probs[b, w]", without_history),
        Wrong("index_decoding", "the parents and tokens are decoded with the wrong divisor: in "
              "the flattened (beams * vocab) scores, index // vocab is the beam and index % "
              "vocab the word", wrong_divisor),
        Wrong("worst_first", "the order is reversed: return the best extension first",
              ascending),
    ]


@checker("beam_step")
def check_beam_step(student_fn, hidden: bool = False) -> str:
    """Check ``beam_step(beam_scores (beams,), log_probs (beams, vocab), beam_size)``."""
    probes = _beam_probes(hidden)
    compare(student_fn, probes, beam_step_reference, _beam_catalogue,
            ("scores", "parents", "tokens"),
            "Add beam_scores[:, None] to log_probs, flatten to (beams * vocab,), take the top "
            "beam_size; parent = index // vocab, token = index % vocab; best first.")
    return f"all {len(probes)} probes agree: the best beam_size extensions of all beams, best " \
        "first."
