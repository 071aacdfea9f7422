"""The checkers hold under grading: time limits, captured output, clear messages, hidden probes.

* a student function that sleeps for an hour or loops for ever (even one that catches
  ``Exception`` inside the loop) ends in a "timed out after N s" failure, in the main thread (the
  SIGALRM timer) and in another thread (the abandoned helper thread);
* what it prints is captured: nothing reaches the notebook, an excerpt is in the result;
* ``None`` asks "forgot `return`?", NaN says "NaN", randomness names dropout, a ``SystemExit`` or
  any other ``BaseException`` from the student's code is a failure, never an exception;
* every graded exercise's checker accepts its reference and another correct implementation,
  names each mistake of its catalogue, leaves its inputs alone, and with ``hidden=True`` probes
  inputs the student never saw (a function that only knows the visible probes fails).
"""

import math
import threading
import time

import pytest
import torch
import torch.nn.functional as F

from lectures_lib.checks import (
    CheckResult,
    additive,
    check_additive_attention,
    check_beam_step,
    check_causal_mask,
    check_label_smoothing_loss,
    check_layer_norm,
    check_padded_self_attention,
    check_relative_position_attention,
    check_reverse_translator,
    check_rms_norm,
    check_scaled_dot_product_attention,
    check_skip_flip_model,
    check_sort_tagger,
    decoder,
    norms,
    padding,
    relative,
)

CORRECT_MASK = lambda n: torch.ones(n, n, dtype=torch.bool).tril()  # noqa: E731


def sleeps(n):
    time.sleep(3600)


def loops(n):
    while True:  # noqa: SIM113 - an endless loop that swallows ordinary exceptions
        try:
            pass
        except Exception:
            pass


@pytest.mark.parametrize("student", [sleeps, loops], ids=["sleep", "while-true"])
def test_a_hanging_function_times_out_in_the_main_thread(student):
    result = check_causal_mask(student, timeout=0.5)
    assert not result.passed and result.mistake == "timed_out", result
    assert "timed out after 0.5 s" in str(result)


@pytest.mark.parametrize("student", [sleeps, loops], ids=["sleep", "while-true"])
def test_a_hanging_function_times_out_in_another_thread(student):
    results = []
    worker = threading.Thread(target=lambda: results.append(check_causal_mask(student,
                                                                               timeout=0.5)))
    worker.start()
    worker.join(120)  # only a guard: the check returns after ~0.5 s
    assert not worker.is_alive() and results, "the check hung"
    assert results[0].mistake == "timed_out" and "timed out after 0.5 s" in str(results[0])


def test_the_timer_is_gone_after_a_check():
    check_causal_mask(sleeps, timeout=0.2)
    time.sleep(0.4)  # a left-over alarm would raise here
    assert check_causal_mask(CORRECT_MASK).passed


def test_printed_output_is_captured_and_excerpted(capsys):
    def chatty(n):
        for i in range(1000):
            print("step", i)
        return CORRECT_MASK(n)

    result = check_causal_mask(chatty)
    assert result.passed, result
    assert capsys.readouterr().out == "", "nothing reaches the notebook"
    assert result.output.startswith("step 0") and len(result.output) < 200
    assert "printed" in str(result) and "step 0" in str(result)
    assert check_causal_mask(CORRECT_MASK).output == ""


def test_none_asks_for_return():
    def forgot_return(n):
        CORRECT_MASK(n)

    result = check_causal_mask(forgot_return)
    assert result.mistake == "returned_none" and "forgot `return`?" in str(result)


def test_nan_says_nan():
    def nan_attention(q, k, v, w_q, w_k, w_score, mask=None):
        out, weights = additive.additive_attention_reference(q, k, v, w_q, w_k, w_score, mask)
        return out * float("nan"), weights

    result = check_additive_attention(nan_attention)
    assert result.mistake == "nan" and "NaN" in str(result), result


def test_dropout_left_on_is_named():
    def with_dropout(q, k, v, w_q, w_k, w_score, mask=None):
        out, weights = additive.additive_attention_reference(q, k, v, w_q, w_k, w_score, mask)
        weights = F.dropout(weights, 0.2)  # training=True by default
        return weights @ v, weights

    result = check_additive_attention(with_dropout)
    assert result.mistake == "nondeterministic" and "Dropout" in str(result), result


@pytest.mark.parametrize("error", [SystemExit(3), GeneratorExit(), ZeroDivisionError()])
def test_any_exception_of_the_student_is_a_failure(error):
    def raises(n):
        raise error

    result = check_causal_mask(raises)
    assert isinstance(result, CheckResult) and result.mistake == "raised", result


def test_layer_norm_names_the_eps_it_used():
    def fixed_eps(x, gamma, beta, eps=1e-5):
        return F.layer_norm(x, x.shape[-1:], gamma, beta, 1e-5)

    result = check_layer_norm(fixed_eps)
    assert result.mistake == "eps_hard_coded" and "eps=0.1" in str(result), result


def test_sdpa_raised_hint_fits_the_error():
    def name_error(q, k, v, mask=None):
        return undefined_name  # noqa: F821

    def unbatched_only(q, k, v, mask=None):
        weights = torch.softmax(q @ k.t() / math.sqrt(q.shape[-1]), dim=-1)  # 2-D only
        return weights @ v, weights

    crashed = check_scaled_dot_product_attention(name_error)
    assert crashed.mistake == "raised" and "transpose" not in str(crashed), crashed
    batched = check_scaled_dot_product_attention(unbatched_only)
    assert batched.mistake == "raised" and "k.transpose(-2, -1)" in str(batched), batched


# ---------------------------------------------------------------------------------------------
# The graded exercises' checkers
# ---------------------------------------------------------------------------------------------


def _additive_loops(q, k, v, w_q, w_k, w_score, mask=None):
    """Another correct implementation: einsum, and a large negative fill."""
    hidden = torch.tanh(torch.einsum("...qd,da->...qa", q, w_q)[..., :, None, :]
                        + torch.einsum("...kd,da->...ka", k, w_k)[..., None, :, :])
    scores = torch.einsum("...qka,a->...qk", hidden, w_score)
    if mask is not None:
        scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def _padded_other(x, lengths, w_q, w_k, w_v, w_o, num_heads):
    """Another correct implementation: heads one by one in a loop."""
    batch, seq, d_model = x.shape
    d_head = d_model // num_heads
    real = torch.arange(seq)[None, :] < lengths[:, None]  # (batch, seq)
    outs, maps = [], []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        scores = q @ k.transpose(1, 2) / math.sqrt(d_head)
        weights = torch.softmax(scores.masked_fill(~real[:, None, :], -1e30), dim=-1)
        outs.append(weights @ v)
        maps.append(weights)
    out = torch.cat(outs, dim=-1) @ w_o
    return torch.where(real[..., None], out, torch.zeros((), dtype=x.dtype)), torch.stack(maps, 1)


def _relative_other(q, k, v, bias, max_distance):
    n = q.shape[-2]
    table = torch.empty(bias.shape[0], n, n, dtype=bias.dtype)
    for i in range(n):
        for j in range(n):
            table[:, i, j] = bias[:, min(max(j - i, -max_distance), max_distance) + max_distance]
    weights = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5 + table, dim=-1)
    return weights @ v, weights


def _rms_other(x, gamma, eps=1e-6):
    return gamma * x / (x.pow(2).sum(-1, keepdim=True) / x.shape[-1] + eps).sqrt()


def _smoothing_other(logits, targets, smoothing, ignore_index):
    keep = targets != ignore_index
    classes = logits.shape[-1]
    target_dist = torch.full_like(logits[keep], smoothing / classes)
    target_dist.scatter_add_(1, targets[keep][:, None],
                             torch.full_like(target_dist[:, :1], 1 - smoothing))
    return -(target_dist * logits[keep].log_softmax(-1)).sum(-1).mean()


def _beam_other(beam_scores, log_probs, beam_size):
    candidates = sorted(
        ((float(beam_scores[b] + log_probs[b, w]), b, w)
         for b in range(log_probs.shape[0]) for w in range(log_probs.shape[1])),
        reverse=True,
    )[:beam_size]
    return (torch.tensor([c[0] for c in candidates], dtype=log_probs.dtype),
            torch.tensor([c[1] for c in candidates]), torch.tensor([c[2] for c in candidates]))


CHECKERS = [
    (check_additive_attention, additive, additive.additive_attention_reference, _additive_loops),
    (check_padded_self_attention, padding, padding.padded_self_attention_reference, _padded_other),
    (check_relative_position_attention, relative,
     relative.relative_position_attention_reference, _relative_other),
    (check_rms_norm, norms, norms.rms_norm_reference, _rms_other),
    (check_label_smoothing_loss, decoder, decoder.label_smoothing_loss_reference,
     _smoothing_other),
    (check_beam_step, decoder, decoder.beam_step_reference, _beam_other),
]
IDS = [check.__name__ for check, *_ in CHECKERS]


def _probes_and_catalogue(check, module):
    if check is check_label_smoothing_loss:
        return module._loss_probes, module._loss_catalogue
    if check is check_beam_step:
        return module._beam_probes, module._beam_catalogue
    return module._probes, module._catalogue


@pytest.mark.parametrize(("check", "module", "reference", "other"), CHECKERS, ids=IDS)
def test_correct_implementations_pass_visible_and_hidden(check, module, reference, other):
    for correct in (reference, other):
        for hidden in (False, True):
            result = check(correct, hidden=hidden)
            assert result.passed, f"{correct.__name__} hidden={hidden}: {result}"


@pytest.mark.parametrize(("check", "module", "reference", "other"), CHECKERS, ids=IDS)
def test_every_catalogued_mistake_is_named(check, module, reference, other):
    probes, catalogue = _probes_and_catalogue(check, module)
    named = set()
    for probe in probes(False):
        for wrong in catalogue(probe):
            result = check(wrong.function)
            assert not result.passed, f"{wrong.code} passed"
            named.add(result.mistake)
    codes = {wrong.code for probe in probes(False) for wrong in catalogue(probe)}
    assert codes <= named, f"never named: {codes - named}"


@pytest.mark.parametrize(("check", "module", "reference", "other"), CHECKERS, ids=IDS)
def test_hidden_probes_are_new(check, module, reference, other):
    """A function that only knows the visible probes' inputs passes them and fails the hidden."""
    probes, _ = _probes_and_catalogue(check, module)
    seen = [probe.args for probe in probes(False)]

    def same(args, other_args):
        return len(args) == len(other_args) and all(
            torch.equal(a, b) if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
            and a.shape == b.shape and a.dtype == b.dtype else (
                not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor) and a == b)
            for a, b in zip(args, other_args))

    def memoriser(*args, **kwargs):
        answer = reference(*args, **kwargs)
        if any(same(args, s) for s in seen):
            return answer
        if isinstance(answer, tuple):
            return tuple(a + 1 if a.is_floating_point() else a + 1 for a in answer)
        return answer + 1

    assert check(memoriser).passed, "the memoriser answers every visible probe correctly"
    assert not check(memoriser, hidden=True).passed, "the hidden probes must be new inputs"


@pytest.mark.parametrize(("check", "module", "reference", "other"), CHECKERS, ids=IDS)
def test_inputs_are_never_changed(check, module, reference, other):
    def in_place(*args, **kwargs):
        answer = reference(*args, **kwargs)
        args[0].add_(1.0) if args[0].is_floating_point() else args[0].add_(1)
        return answer

    result = check(in_place)
    assert result.mistake == "modified_input", result


class _Constant(torch.nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.classes = classes

    def forward(self, tokens):
        return torch.zeros(*tokens.shape, self.classes)


def _untrained_tagger(classes):
    from lectures_lib.models import EncoderTagger

    torch.manual_seed(0)
    return EncoderTagger(8, classes, d_model=16, num_heads=2, num_layers=1, d_ff=32,
                         pad_id=None).eval()


@pytest.mark.parametrize(
    ("check", "model"),
    [(check_skip_flip_model, _Constant(2)), (check_skip_flip_model, _untrained_tagger(2)),
     (check_sort_tagger, _untrained_tagger(8))],
)
def test_training_checkers_reject_an_untrained_model(check, model):
    result = check(model)
    assert not result.passed and result.mistake in ("at_chance", "below_target"), result


def test_the_sort_checker_evaluates_the_course_model_only():
    """04 prescribes an EncoderTagger: a module of another architecture is refused, saying so."""
    result = check_sort_tagger(_Constant(8))
    assert result.mistake == "not_a_model" and "EncoderTagger" in result.message, result


def test_training_checkers_refuse_a_hand_written_rule_and_train_once():
    """A perfect answer that no trained weights produce (a rule in a module, or a plain
    function) is not a trained model; the hidden check reuses what the training returned."""
    from lectures_lib.checks.trained import SKIP_FLIP_PAD_ID

    class Oracle(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.unused = torch.nn.Linear(2, 2)  # weights that play no part in the answer

        def forward(self, tokens):
            flips = torch.zeros(*tokens.shape, dtype=torch.long)
            flips[:, 2:] = (tokens[:, 2:] != tokens[:, :-2]).long()
            flips[tokens == SKIP_FLIP_PAD_ID] = 0
            return F.one_hot(flips, 2).float()

    calls = []

    def train():
        calls.append(1)
        return Oracle()

    for hidden in (False, True):
        result = check_skip_flip_model(train, hidden=hidden)
        assert not result.passed and result.mistake == "not_a_model", result
        assert "weights shuffled" in result.message, result
    assert len(calls) == 1, "the hidden check reuses the trained model"
    sorter = check_sort_tagger(lambda t: F.one_hot(t.sort(-1).values, 8).float())
    assert sorter.mistake == "not_a_model", sorter
    assert check_reverse_translator(lambda src: src.flip(-1)).mistake == "not_a_model"


def test_the_shuffled_weights_are_put_back():
    """The check shuffles the weights to test that they matter, then restores them."""
    from lectures_lib.checks.trained import _weights_do_the_work

    model = torch.nn.Linear(3, 3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    seen = []

    def score():
        seen.append(model.weight.detach().clone())
        return 0.0

    _weights_do_the_work(model, score, 0.9, "accuracy")
    assert not torch.equal(seen[0], before["weight"]), "the score was taken with shuffled weights"
    for name, value in model.state_dict().items():
        assert torch.equal(value, before[name]), name


def test_a_training_function_that_hangs_times_out():
    def train():
        time.sleep(3600)

    from lectures_lib.checks import trained

    limit, trained.TRAIN_TIMEOUT = trained.TRAIN_TIMEOUT, 0.5
    try:
        result = check_sort_tagger(train)
    finally:
        trained.TRAIN_TIMEOUT = limit
    assert result.mistake == "timed_out" and "timed out after 0.5 s" in str(result)
