"""Checkers for the training exercises: a trained model must reach a stated accuracy on held-out
data the student never saw (drawn here with a seed of the checker's own, derived from the
instructor's grading secret when one is set: :func:`~lectures_lib.checks._base.probe_seed`).

* ``check_skip_flip_model(model)`` (section 03): ``model(tokens (batch, seq)) -> logits (batch,
  seq, 2)`` on the *skip-flip* task of :func:`make_skip_flip_task`; needs >= 95 % accuracy.
* ``check_sort_tagger(model)`` (section 04): ``model(tokens (batch, 6)) -> logits (batch, 6,
  8)``, token ``i`` of the output = the ``i``-th smallest input token; needs >= 90 %.
* ``check_reverse_translator(model)`` (section 05): a seq2seq model (``encode``/``decode``, as
  :class:`~lectures_lib.models.Transformer`), decoded greedily here; the source reversed (what
  follows the first 5 tokens is not checked); needs >= 90 % of sequences exactly right.

Each model must be a trained ``torch.nn.Module`` whose *weights* do the work. Where the exercise
prescribes the course's architecture (04: an ``EncoderTagger``; 05: a ``Transformer``), the
checker never runs the student's forward code: it rebuilds the course's own model from the
weights (``state_dict()``) and settings of the one returned, and evaluates that copy, so only
trained weights can earn the points (a module that notices it is being tested cannot switch to
a rule). Where the architecture is the student's own (03), after the model passes its weights
are tested (then put back): shuffled, it must fall below the target; with every tensor but one
shuffled (each in turn), it must fall below the target too (a rule that answers while one "key"
parameter, say ``torch.arange(k)``, is intact fails here); with noise of 1e-3 of each tensor's
size, its score must hardly move and its logits must change (a switch on exact values
collapses; a rule's logits do not depend on the weights). A hand-written rule wrapped in a
function or a module earns nothing; a module written to detect these tests (a switch tolerant
of noise, keyed on two tensors, leaking the weights into its logits) is not caught there (its
code is for a human to read).

Each check takes the student's *training function* (no arguments, returns the trained model or
``translate`` function; it may also be given the trained model itself). The training function is
called once, with a time limit of :data:`TRAIN_TIMEOUT` seconds, and its result is kept: the
hidden tests evaluate the same trained model on other held-out data without training again.
The data helpers are public: the notebooks train on them (other seeds than the checkers').

Training that must happen (04, 05). Graded with the instructor's secret, each submission gets its
own *variant* of the task: the grader derives a key from the secret and the submission's content
(:func:`~lectures_lib.checks._base.task_key`; never the secret itself), hands it to the sandbox in
the job's spec (the worker sets it, before the first cell runs, where the data helpers read it:
:func:`~lectures_lib.checks._base.set_task_variant`; not in the environment) and uses it for the
checker's held-out data. The variant relabels the tokens (:func:`sort_variant`,
:func:`reverse_variant`): exactly as hard to learn, but weights trained before grading on the
public task are far below the target (a model that reaches the target on the public task and not
on its variant is named: ``trained_elsewhere``). The student's code can read the key; weights
pasted from before cannot know it, and a key seen in one run is no use to a resubmission (its
content differs). What is not caught: code that reads the variant and reorders pasted weights'
rows to match (for a human to read). Without a secret (the notebooks, a learner's own check) the
task is the public one, the same draws as always.
"""

from __future__ import annotations

import inspect
import os
import sys
import weakref
from contextlib import redirect_stderr

import torch

from ._base import (
    Mistake,
    call,
    checker,
    expect_finite,
    expect_tensor,
    probe_seed,
    running,
)
from ._trained_tasks import (
    _HELD_OUT_SEED,
    REVERSE_BOS_ID,
    REVERSE_EOS_ID,
    REVERSE_LEN,
    REVERSE_PAD_ID,
    REVERSE_VOCAB_SIZE,
    SKIP_FLIP_IGNORE_INDEX,
    SKIP_FLIP_PAD_ID,
    SORT_SEQ_LEN,
    SORT_VOCAB_SIZE,
    VARIANT_MAX_OVERLAP,
    ReversePairs,
    make_reverse_pairs,
    make_skip_flip_task,
    make_sort_data,
    reverse_task,
    reverse_variant,
    sort_task,
    sort_variant,
)
from ._weights import _state, _weights_do_the_work

__all__ = [
    "SKIP_FLIP_PAD_ID",
    "SKIP_FLIP_IGNORE_INDEX",
    "make_skip_flip_task",
    "SORT_SEQ_LEN",
    "SORT_VOCAB_SIZE",
    "make_sort_data",
    "REVERSE_LEN",
    "REVERSE_VOCAB_SIZE",
    "REVERSE_PAD_ID",
    "REVERSE_BOS_ID",
    "REVERSE_EOS_ID",
    "ReversePairs",
    "make_reverse_pairs",
    "VARIANT_MAX_OVERLAP",
    "sort_variant",
    "sort_task",
    "reverse_variant",
    "reverse_task",
    "check_skip_flip_model",
    "check_sort_tagger",
    "check_reverse_translator",
    "trained",
]

# Seconds a training function may take (the notebooks' take a few seconds on a 2-core CPU).
TRAIN_TIMEOUT = float(os.environ.get("LECTURES_TRAIN_TIMEOUT", "120"))
_TRAINED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def trained(train_fn):
    """What ``train_fn()`` returned when a check trained it (trained now if no check did yet).

    Lets a notebook reuse the model an exercise's check trained, without training it again."""
    try:
        return _TRAINED[train_fn]
    except (KeyError, TypeError):
        result = train_fn()
    try:
        _TRAINED[train_fn] = result
    except TypeError:
        pass
    return result


def _trained(given, what: str):
    """The trained model: ``given`` itself, or what the training function ``given()`` returns."""
    if isinstance(given, torch.nn.Module):
        return given
    try:
        parameters = inspect.signature(given).parameters.values()
        trainer = not any(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY,
                          p.POSITIONAL_OR_KEYWORD) for p in parameters)
    except (TypeError, ValueError):
        trainer = False
    if not trainer:
        return given  # a model-like function of the tokens
    try:
        return _TRAINED[given]
    except (KeyError, TypeError):
        pass
    with running() as run:  # a check's run, or one for this call alone
        limit, run.timeout = run.timeout, TRAIN_TIMEOUT
        run.capture = False  # training shows its progress bar as usual, but on stdout: nbgrader
        try:  # scores a test cell that wrote to stderr 0 points
            with redirect_stderr(sys.stdout):
                model = call(given)
        finally:
            run.timeout, run.capture = limit, True
    if not callable(model):
        raise Mistake("wrong_return_type", f"your training function should return {what}, "
                      f"got {type(model).__name__}.")
    try:
        _TRAINED[given] = model
    except TypeError:
        pass
    return model
def _logits(model, tokens, classes: int, what: str) -> torch.Tensor:
    with torch.no_grad():
        logits = call(model, tokens)
    if isinstance(logits, tuple | list) and logits and isinstance(logits[0], torch.Tensor):
        logits = logits[0]  # a model that also returns its attention weights
    expect_tensor(logits, what, shape=(*tokens.shape, classes))
    return expect_finite(logits.detach().float().cpu(), what)


_MISSING = object()


def _setting(model, dotted: str, kinds: tuple[type, ...], what: str):
    """``model.a.b.c`` as plain data of one of ``kinds`` (the model's own answer)."""
    value = model
    for part in dotted.split("."):
        value = getattr(value, part, _MISSING)
        if value is _MISSING:
            raise ValueError(f"it has no `{dotted}` ({what})")
    if type(value) not in kinds:
        raise ValueError(f"its `{dotted}` ({what}) is a {type(value).__name__}")
    return value


def _layers(state: dict, stack: str) -> int:
    return len({key.split(".")[2] for key in state if key.startswith(f"{stack}.layers.")})


# The largest model each exercise may hand in: the notebooks' own (04: EncoderTagger(8, 8,
# d_model=32, num_heads=2, num_layers=1, d_ff=64); 05: Transformer(10, 10, d_model=32, 2 heads,
# 1 + 1 layers, d_ff=64)) with room to spare (8 times the width, 16 times the feed-forward, 6
# layers, a vocabulary up to 4 times the task's). Every size the rebuild reads off the student's
# model is held to these *before* anything is built, so a declared size cannot make the grader
# allocate (a d_model of 2**16 would be 16 GiB of attention weights per layer).
MODEL_BOUNDS = {
    "tagger": {"vocab": (SORT_VOCAB_SIZE, 4 * SORT_VOCAB_SIZE),
               "classes": (SORT_VOCAB_SIZE, SORT_VOCAB_SIZE)},
    "seq2seq": {"vocab": (REVERSE_VOCAB_SIZE, 4 * REVERSE_VOCAB_SIZE),
                "classes": (REVERSE_VOCAB_SIZE, 4 * REVERSE_VOCAB_SIZE)},
    "both": {"d_model": (1, 256), "d_ff": (1, 1024), "layers": (1, 6), "num_heads": (1, 16)},
}


def _bounded(kind: str, sizes: dict[str, tuple[int, str]]) -> None:
    """Raise ``ValueError`` naming the first size (value, where it was read) outside the
    exercise's :data:`MODEL_BOUNDS`."""
    bounds = {**MODEL_BOUNDS["both"], **MODEL_BOUNDS[kind]}
    for name, (value, where) in sizes.items():
        low, high = bounds[name.split(":")[0]]
        if type(value) is not int or not low <= value <= high:
            raise ValueError(
                f"its {name.split(':')[-1]} is {value!r:.40} (read from {where}), outside what "
                f"the exercise's model can have ({low} to {high}): the checker builds nothing "
                "that large. Use the exercise's settings")


def _course_copy(model, kind: str):
    """The course's own ``EncoderTagger`` (``kind="tagger"``) or ``Transformer``
    (``"seq2seq"``), built here with ``model``'s settings and loaded with its weights (strict):
    the copy's forward is the course's code, whatever ``model``'s own forward does."""
    from ..models import EncoderTagger, Transformer

    name = "EncoderTagger" if kind == "tagger" else "Transformer"
    state = _state(model)
    try:
        first = "encoder.layers.0"
        ff_key = f"{first}.feed_forward.linear1.weight"
        shared = dict(
            num_heads=_setting(model, f"{first}.num_heads", (int,), "heads"),
            d_ff=int(state[ff_key].shape[0]),
            norm_first=_setting(model, f"{first}.norm_first", (bool,), "Pre-LN or Post-LN"),
            activation=_setting(model, f"{first}.feed_forward.activation", (str,),
                                "activation"),
            pad_id=_setting(model, "pad_id", (int, type(None)), "padding id"),
        )
        embed = "embed" if kind == "tagger" else "src_embed"
        embedding = state[f"{embed}.embedding.weight"]
        if embedding.dim() != 2:
            raise ValueError(f"its {embed}.embedding.weight has {embedding.dim()} dimensions, "
                             "not 2 (vocabulary, d_model)")
        vocab, d_model = (int(n) for n in embedding.shape)
        out_key = "output.weight" if kind == "tagger" else "tgt_embed.embedding.weight"
        sizes = {"vocab:vocabulary": (vocab, f"{embed}.embedding.weight"),
                 "classes:output vocabulary": (int(state[out_key].shape[0]), out_key),
                 "d_model": (d_model, f"{embed}.embedding.weight"),
                 "d_ff": (shared["d_ff"], ff_key),
                 "num_heads": (shared["num_heads"], f"{first}.num_heads")}
        for stack in ("encoder",) if kind == "tagger" else ("encoder", "decoder"):
            sizes[f"layers:number of {stack} layers"] = (_layers(state, stack),
                                                        f"the {stack}.layers.* weights")
        _bounded(kind, sizes)  # before anything is built
        if kind == "tagger":
            positional = getattr(model.embed, "positional", None) is not None
            copy = EncoderTagger(vocab, sizes["classes:output vocabulary"][0], d_model=d_model,
                                 num_layers=_layers(state, "encoder"),
                                 positional_encoding=positional, **shared)
        else:
            positional = getattr(model.src_embed, "positional", None) is not None
            copy = Transformer(vocab, sizes["classes:output vocabulary"][0],
                               d_model=d_model, num_encoder_layers=_layers(state, "encoder"),
                               num_decoder_layers=_layers(state, "decoder"),
                               positional_encoding=positional, **shared)
        copy.load_state_dict(state, strict=True)
    except (KeyError, ValueError, TypeError, RuntimeError, AttributeError,
            IndexError) as error:
        problem = f"missing weights {error}" if isinstance(error, KeyError) else str(error)
        raise Mistake("not_a_model", f"the exercise asks for the course's `{name}` (with its "
                      f"default attention): the checker rebuilds one from your model's weights "
                      f"and settings and evaluates that copy, so only trained weights count. It "
                      f"could not: {' '.join(problem.split())[:300]}") from None
    return copy.eval()


def _verdict(accuracy: float, needed: float, chance: float, unit: str, advice: str) -> None:
    if accuracy >= needed:
        return
    if accuracy <= chance + 0.05:
        where = "about" if accuracy >= chance - 0.05 else "below"  # 0.194 is not "about" 0.30
        raise Mistake(
            "at_chance",
            f"held-out {unit} {accuracy:.3f}, {where} chance ({chance:.2f}); needed "
            f"{needed:.2f}. Was the model trained (and is this the trained one)? {advice}",
        )
    raise Mistake(
        "below_target",
        f"held-out {unit} {accuracy:.3f}, needed {needed:.2f}: train longer (more epochs), with a "
        f"larger learning rate, or a slightly larger model. {advice}",
    )


@checker("skip_flip_model")
def check_skip_flip_model(model, hidden: bool = False) -> str:
    """Held-out accuracy of ``model`` on the skip-flip task, lengths 8-16 (>= 0.95 needed)."""
    model = _trained(model, "the trained model")
    tokens, labels = make_skip_flip_task(400, 8, 16, seed=probe_seed(_HELD_OUT_SEED + hidden))
    scored = labels != SKIP_FLIP_IGNORE_INDEX

    def outputs() -> torch.Tensor:
        return _logits(model, tokens, 2, "the model's logits for tokens (400, 16)")

    def score() -> float:
        return float((outputs().argmax(-1) == labels)[scored].float().mean())

    accuracy = score()
    _verdict(accuracy, 0.95, 0.5, "accuracy",
             "The label of token i depends on token i - 2: the model needs positions (a "
             "relative bias, rotary or a positional encoding) and must ignore padding keys.")
    _weights_do_the_work(model, score, 0.95, "accuracy", outputs=outputs)
    return f"held-out accuracy {accuracy:.3f} >= 0.95 on 400 unseen sequences."


def _not_trained_here(public: float, graded: float, needed: float, unit: str,
                      helper: str) -> None:
    """Raise ``trained_elsewhere`` when a model below ``needed`` on the graded variant of the
    task reaches it on the public task: its weights were trained before the grading."""
    if public >= needed > graded:
        raise Mistake(
            "trained_elsewhere",
            f"held-out {unit} {graded:.3f} on the task as graded (needed {needed:.2f}), but "
            f"{public:.3f} on the public task: the weights were trained before grading, not by "
            f"your training function. When graded, `{helper}` draws this submission's own "
            "variant of the task (the tokens in another order), and the checker's held-out data "
            f"follows it: train the model inside the training function, on `{helper}`'s data.")


@checker("sort_tagger")
def check_sort_tagger(model, hidden: bool = False) -> str:
    """Held-out per-token accuracy of ``model`` on sorting 6 tokens (>= 0.90 needed)."""
    model = _course_copy(_trained(model, "the trained model"), "tagger")
    tokens, targets = make_sort_data(500, seed=probe_seed(_HELD_OUT_SEED + hidden))

    def score(tokens, targets) -> float:
        logits = _logits(model, tokens, SORT_VOCAB_SIZE,
                         f"the model's logits for tokens (500, {SORT_SEQ_LEN})")
        return float((logits.argmax(-1) == targets).float().mean())

    accuracy = score(tokens, targets)
    relabel = sort_variant()
    if relabel is not None and accuracy < 0.90:  # the same draws, in the public task
        public = relabel.argsort()
        _not_trained_here(score(public[tokens], public[targets]), accuracy, 0.90,
                          "per-token accuracy", "make_sort_data")
    _verdict(accuracy, 0.90, 0.3, "per-token accuracy",
             "Output i is the i-th smallest input token: every position must see all tokens.")
    return f"held-out per-token accuracy {accuracy:.3f} >= 0.90 on 500 unseen sequences."


@checker("reverse_translator")
def check_reverse_translator(translate, hidden: bool = False) -> str:
    """Held-out exact match of ``translate(src)`` against the reversed source (>= 0.90 needed)."""
    model = _trained(translate, "the trained model")
    pairs = make_reverse_pairs(300, seed=probe_seed(_HELD_OUT_SEED + hidden))
    if not (hasattr(model, "encode") and hasattr(model, "decode")):
        raise Mistake("not_a_model", "your training function should return the trained "
                      "seq2seq model (with `encode` and `decode`, like lectures_lib.models."
                      "Transformer), decoded greedily here; a function or a hand-written rule "
                      "is not a trained model.")
    model = _course_copy(model, "seq2seq")
    from ..decoding import greedy_decode

    def translate(src):
        return greedy_decode(model, src, REVERSE_LEN + 1, REVERSE_BOS_ID, REVERSE_EOS_ID,
                             REVERSE_PAD_ID)

    def score(pairs: ReversePairs = pairs) -> float:
        with torch.no_grad():
            out = call(translate, pairs.src)
        expect_tensor(out, "translate(src)'s result")
        if out.dim() != 2 or out.shape[0] != pairs.src.shape[0] or out.shape[1] < REVERSE_LEN:
            raise Mistake(
                "wrong_shape",
                f"translate(src) with src of shape {tuple(pairs.src.shape)} should return the "
                f"decoded tokens, shape (300, >= {REVERSE_LEN}) (BEGIN not included), got "
                f"{tuple(out.shape)}",
            )
        if out.shape[1] > REVERSE_LEN and bool((out[:, 0] == REVERSE_BOS_ID).all()):
            raise Mistake("bos_included", "the decoded tokens start with BEGIN: drop column 0 "
                          "(the prefix you started from).")
        return float((out[:, :REVERSE_LEN].cpu() == pairs.tgt_out[:, :REVERSE_LEN]).all(-1)
                     .float().mean())

    exact = score()
    if reverse_variant() is not None and exact < 0.90:  # the same sources, the public task
        _not_trained_here(score(reverse_task(pairs.src)), exact, 0.90, "exact-match rate",
                          "make_reverse_pairs")
    _verdict(exact, 0.90, 0.0, "exact-match rate",
             "Train with teacher forcing (tgt_in -> tgt_out), decode greedily from BEGIN.")
    return f"held-out exact match {exact:.3f} >= 0.90 on 300 unseen sequences."
