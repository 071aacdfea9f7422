"""The scaled dot-product attention checker: accepts every correct version, names each mistake."""

import math

import pytest
import torch
import torch.nn.functional as F

from lectures_lib.attention import scaled_dot_product_attention as library_attention
from lectures_lib.checks import check_scaled_dot_product_attention
from lectures_lib.checks.attention import MISTAKE_CODES, _catalogue, _probes

# ---------------------------------------------------------------------------------------------
# Correct implementations, written the ways learners write them
# ---------------------------------------------------------------------------------------------


def loops(q, k, v, mask=None):
    """Explicit loops over every (batch, query, key), with a hand-written stable softmax."""
    *batch, n_q, d_k = q.shape
    n_k, d_v = v.shape[-2], v.shape[-1]
    qs, ks, vs = q.reshape(-1, n_q, d_k), k.reshape(-1, n_k, d_k), v.reshape(-1, n_k, d_v)
    allowed = None
    if mask is not None:
        allowed = mask.expand(*batch, n_q, n_k).reshape(-1, n_q, n_k)
    weights = torch.zeros(qs.shape[0], n_q, n_k, dtype=q.dtype)
    out = torch.zeros(qs.shape[0], n_q, d_v, dtype=q.dtype)
    for b in range(qs.shape[0]):
        for i in range(n_q):
            scores = []
            for j in range(n_k):
                if allowed is not None and not allowed[b, i, j]:
                    scores.append(None)
                else:
                    scores.append(float(qs[b, i] @ ks[b, j]) / math.sqrt(d_k))
            top = max(s for s in scores if s is not None)
            exps = [0.0 if s is None else math.exp(s - top) for s in scores]
            total = sum(exps)
            for j in range(n_k):
                weights[b, i, j] = exps[j] / total
                out[b, i] += weights[b, i, j] * vs[b, j]
    return out.reshape(*batch, n_q, d_v), weights.reshape(*batch, n_q, n_k)


def einsum_minus_1e9(q, k, v, mask=None):
    scores = torch.einsum("...id,...jd->...ij", q, k) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    scores = scores - scores.amax(dim=-1, keepdim=True)
    weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)
    return torch.einsum("...ij,...jd->...id", weights, v), weights


def minus_inf_fill(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def finfo_min_where(q, k, v, mask=None):
    scale = torch.sqrt(torch.tensor(q.shape[-1], dtype=q.dtype))
    scores = torch.matmul(q / scale, k.transpose(-1, -2))
    if mask is not None:
        scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
    weights = F.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights


def renormalise_after_softmax(q, k, v, mask=None):
    """Softmax first, then zero the blocked keys and renormalise: also right."""
    weights = torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        weights = weights * mask
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights @ v, weights


def logsumexp_form(q, k, v, mask=None):
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -1e30)
    weights = torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))
    return [weights @ v, weights]  # a list is as good as a tuple


def via_torch_kernel(q, k, v, mask=None):
    """out from PyTorch's fused kernel, weights computed beside it."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -float("inf"))
    return out, scores.softmax(-1)


CORRECT = [
    library_attention,
    loops,
    einsum_minus_1e9,
    minus_inf_fill,
    finfo_min_where,
    renormalise_after_softmax,
    logsumexp_form,
    via_torch_kernel,
]


@pytest.mark.parametrize("fn", CORRECT, ids=lambda fn: fn.__name__)
def test_correct_implementations_pass(fn):
    result = check_scaled_dot_product_attention(fn)
    assert result.passed, result
    assert result.mistake is None
    assert "probes agree" in str(result)


# ---------------------------------------------------------------------------------------------
# One buggy implementation per mistake
# ---------------------------------------------------------------------------------------------


def _scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])


def _masked(scores, mask):
    return scores if mask is None else scores.masked_fill(~mask, float("-inf"))


def _finish(scores, v, mask=None):
    weights = torch.softmax(_masked(scores, mask), dim=-1)
    return weights @ v, weights


def not_implemented(q, k, v, mask=None):
    raise NotImplementedError()


def returns_out_only(q, k, v, mask=None):
    return _finish(_scores(q, k), v, mask)[0]


def returns_three(q, k, v, mask=None):
    out, weights = _finish(_scores(q, k), v, mask)
    return out, weights, None


def returns_a_list_of_weights(q, k, v, mask=None):
    out, weights = _finish(_scores(q, k), v, mask)
    return out, weights.tolist()


def outputs_swapped(q, k, v, mask=None):
    out, weights = _finish(_scores(q, k), v, mask)
    return weights, out


def weights_transposed(q, k, v, mask=None):
    """The lecture's column convention A' = softmax(K Q^T) per column, returned as is."""
    a = k @ q.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., n_k, n_q)
    if mask is not None:
        a = a.masked_fill(~mask.transpose(-2, -1), float("-inf"))
    a_prime = torch.softmax(a, dim=-2)
    return a_prime.transpose(-2, -1) @ v, a_prime


def keys_instead_of_values(q, k, v, mask=None):
    weights = _finish(_scores(q, k), v, mask)[1]
    return weights @ k, weights


def integer_weights(q, k, v, mask=None):
    """Weights written into an integer buffer: every fraction truncated to 0."""
    out, weights = _finish(_scores(q, k), v, mask)
    return out, weights.long()


def missing_scaling(q, k, v, mask=None):
    return _finish(q @ k.transpose(-2, -1), v, mask)


def divided_by_d_k(q, k, v, mask=None):
    return _finish(q @ k.transpose(-2, -1) / q.shape[-1], v, mask)


def power_precedence(q, k, v, mask=None):
    d_k = q.shape[-1]
    return _finish(q @ k.transpose(-2, -1) / d_k ** 1 / 2, v, mask)  # the bug itself


def power_precedence_in_scale(q, k, v, mask=None):
    scale = q.shape[-1] ** 1 / 2
    return _finish(q @ k.transpose(-2, -1) / scale, v, mask)


def multiplied_by_sqrt_d_k(q, k, v, mask=None):
    return _finish(q @ k.transpose(-2, -1) * math.sqrt(q.shape[-1]), v, mask)


def divided_by_sqrt_n_keys(q, k, v, mask=None):
    return _finish(q @ k.transpose(-2, -1) / math.sqrt(k.shape[-2]), v, mask)


def divided_by_sqrt_n_queries(q, k, v, mask=None):
    return _finish(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-2]), v, mask)


def divided_by_sqrt_d_v(q, k, v, mask=None):
    return _finish(q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1]), v, mask)


def scaled_after_softmax(q, k, v, mask=None):
    weights = torch.softmax(_masked(q @ k.transpose(-2, -1), mask), dim=-1) / math.sqrt(q.shape[-1])
    return weights @ v, weights


def softmax_over_queries(q, k, v, mask=None):
    weights = torch.softmax(_masked(_scores(q, k), mask), dim=-2)
    return weights @ v, weights


def softmax_over_first_dim(q, k, v, mask=None):
    weights = torch.softmax(_masked(_scores(q, k), mask), dim=0)
    return weights @ v, weights


def softmax_without_dim(q, k, v, mask=None):
    """``F.softmax(x)`` without ``dim`` picks dim 1 for a 4-d tensor (right for 2-d only)."""
    scores = _masked(_scores(q, k), mask)
    dim = 0 if scores.dim() in (0, 1, 3) else 1  # what the implicit choice does
    weights = F.softmax(scores, dim=dim)
    return weights @ v, weights


def no_softmax(q, k, v, mask=None):
    weights = _scores(q, k)
    return weights @ v, weights


def relu_weights(q, k, v, mask=None):
    weights = torch.relu(_scores(q, k))
    return weights @ v, weights


def returns_scores(q, k, v, mask=None):
    scores = _scores(q, k)
    out, _ = _finish(scores, v, mask)
    return out, scores


def out_from_scores(q, k, v, mask=None):
    scores = _scores(q, k)
    _, weights = _finish(scores, v, mask)
    return _masked(scores, mask).nan_to_num(0.0, 0.0, 0.0) @ v, weights


def mask_ignored(q, k, v, mask=None):
    return _finish(_scores(q, k), v)


def mask_inverted(q, k, v, mask=None):
    return _finish(_scores(q, k), v, None if mask is None else ~mask)


def mask_after_softmax(q, k, v, mask=None):
    weights = torch.softmax(_scores(q, k), dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ v, weights


def mask_multiplies_scores(q, k, v, mask=None):
    scores = _scores(q, k)
    if mask is not None:
        scores = scores * mask
    return _finish(scores, v)


def weak_fill(fill):
    def mask_fill_not_negative_enough(q, k, v, mask=None):
        scores = _scores(q, k)
        if mask is not None:
            scores = scores.masked_fill(~mask, fill)
        return _finish(scores, v)

    return mask_fill_not_negative_enough


def naive_exp(q, k, v, mask=None):
    """exp without subtracting the row maximum: fine for small scores, inf/inf = NaN for large."""
    scores = _scores(q, k)
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    exps = scores.exp()
    weights = exps / exps.sum(dim=-1, keepdim=True)
    return weights @ v, weights


def divides_by_zero(q, k, v, mask=None):
    return _finish(_scores(q, k) / torch.zeros((), dtype=q.dtype), v, mask)


def computes_in_float32(q, k, v, mask=None):
    out, weights = _finish(_scores(q.float(), k.float()), v.float(), mask)
    return out.to(q.dtype), weights.to(q.dtype)


def scales_queries_in_place(q, k, v, mask=None):
    q /= math.sqrt(q.shape[-1])
    return _finish(q @ k.transpose(-2, -1), v, mask)


def inverts_mask_in_place(q, k, v, mask=None):
    if mask is not None:
        mask.logical_not_()
        mask.logical_not_()
        mask[..., 0] = True
    return _finish(_scores(q, k), v, mask)


def batched_matmul_only(q, k, v, mask=None):
    """torch.bmm needs 3-d tensors: crashes on unbatched inputs."""
    weights = torch.softmax(_masked(torch.bmm(q, k.transpose(1, 2)) / q.shape[-1] ** 0.5, mask), -1)
    return torch.bmm(weights, v), weights


def boolean_indexing(q, k, v, mask=None):
    scores = _scores(q, k)
    if mask is not None:
        scores[~mask] = float("-inf")  # fails when the mask broadcasts
    return _finish(scores, v)


def temperature_two(q, k, v, mask=None):
    return _finish(2 * _scores(q, k), v, mask)


BUGGY = [
    (not_implemented, "not_implemented"),
    (returns_out_only, "wrong_return_type"),
    (returns_three, "wrong_return_type"),
    (returns_a_list_of_weights, "wrong_return_type"),
    (outputs_swapped, "outputs_swapped"),
    (weights_transposed, "weights_transposed"),
    (keys_instead_of_values, "wrong_shape"),
    (integer_weights, "wrong_dtype"),
    (missing_scaling, "missing_scaling"),
    (divided_by_d_k, "wrong_scaling"),
    (power_precedence, "wrong_scaling"),
    (power_precedence_in_scale, "wrong_scaling"),
    (multiplied_by_sqrt_d_k, "wrong_scaling"),
    (divided_by_sqrt_n_keys, "wrong_scaling"),
    (divided_by_sqrt_n_queries, "wrong_scaling"),
    (divided_by_sqrt_d_v, "wrong_scaling"),
    (scaled_after_softmax, "wrong_scaling"),
    (softmax_over_queries, "softmax_wrong_axis"),
    (softmax_over_first_dim, "softmax_wrong_axis"),
    (softmax_without_dim, "softmax_wrong_axis"),
    (no_softmax, "missing_softmax"),
    (relu_weights, "relu_instead_of_softmax"),
    (returns_scores, "returned_scores"),
    (out_from_scores, "wrong_output"),
    (mask_ignored, "mask_ignored"),
    (mask_inverted, "mask_inverted"),
    (mask_after_softmax, "mask_after_softmax"),
    (mask_multiplies_scores, "mask_filled_with_zero"),
    (weak_fill(-10.0), "masked_weights_not_zero"),
    (weak_fill(-40.0), "masked_weights_not_zero"),
    (naive_exp, "overflow"),
    (divides_by_zero, "non_finite"),
    (computes_in_float32, "low_precision"),
    (scales_queries_in_place, "modified_input"),
    (inverts_mask_in_place, "modified_input"),
    (batched_matmul_only, "raised"),
    (boolean_indexing, "raised"),
    (temperature_two, "wrong_values"),
]


@pytest.mark.parametrize(
    ("fn", "code"), BUGGY, ids=[f"{code}-{fn.__name__}" for fn, code in BUGGY]
)
def test_each_mistake_is_named(fn, code):
    result = check_scaled_dot_product_attention(fn)
    assert not result.passed, f"{fn.__name__} should fail but passed: {result}"
    assert result.mistake == code, f"{fn.__name__}: expected {code!r}, got {result}"
    assert code in MISTAKE_CODES, f"{code} is not documented in MISTAKE_CODES"
    if code != "not_implemented":
        assert "Seen on" in result.message, "a failure should name the probe that showed it"


def test_every_documented_code_is_exercised():
    # not_callable, timed_out, returned_none: the shared machinery, tests/test_checks_grading.py
    exercised = {code for _, code in BUGGY} | {"not_callable", "timed_out", "returned_none"}
    assert exercised == set(MISTAKE_CODES), set(MISTAKE_CODES) ^ exercised


def test_not_implemented_message_says_so():
    assert "not implemented" in str(check_scaled_dot_product_attention(not_implemented))


def test_mistake_messages_are_specific():
    by_d_k = check_scaled_dot_product_attention(divided_by_d_k)
    assert "divided by d_k instead of √d_k" in by_d_k.message, by_d_k
    precedence = check_scaled_dot_product_attention(power_precedence)
    assert "d_k ** 0.5" in precedence.message, precedence
    implicit = check_scaled_dot_product_attention(softmax_without_dim)
    assert "batch dimension 1" in implicit.message, implicit


# ---------------------------------------------------------------------------------------------
# The checker never raises, never mutates, never changes the caller's state
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error", [ValueError("boom"), RuntimeError("shapes"), ZeroDivisionError(), RecursionError()]
)
def test_student_exceptions_are_reported(error):
    def raises(q, k, v, mask=None):
        raise error

    result = check_scaled_dot_product_attention(raises)
    assert result.mistake == "raised", result
    assert type(error).__name__ in result.message
    assert "line" in result.message and "raises" in result.message, "it names where it crashed"


def test_requires_grad_and_wrong_signature():
    def grad_tracking(q, k, v, mask=None):
        return library_attention(q.requires_grad_(False).clone().requires_grad_(), k, v, mask)

    assert check_scaled_dot_product_attention(grad_tracking).passed
    result = check_scaled_dot_product_attention(lambda q, k, v: library_attention(q, k, v))
    assert result.mistake == "raised" and "TypeError" in result.message, result


def test_probes_survive_a_mutating_student_and_rng_is_untouched():
    before = [tuple(t.clone() for t in probe.args()) for probe in _probes()]
    seen = []

    def mutate_everything(q, k, v, mask=None):
        seen.append((q, k, v, mask))
        for t in (q, k, v):
            t.zero_()
        return library_attention(q, k, v, mask)

    torch.manual_seed(7)
    expected_next = torch.rand(3)
    torch.manual_seed(7)
    assert check_scaled_dot_product_attention(mutate_everything).mistake == "modified_input"
    assert torch.equal(torch.rand(3), expected_next), "the checker must not move the global RNG"
    after = [probe.args() for probe in _probes()]
    for old, new in zip(before, after, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(old, new, strict=True))
    assert check_scaled_dot_product_attention(library_attention).passed


def test_result_renders_as_text_and_html():
    passed = check_scaled_dot_product_attention(minus_inf_fill)
    failed = check_scaled_dot_product_attention(mask_inverted)
    assert str(passed).startswith("[PASSED] scaled_dot_product_attention")
    assert str(failed).startswith("[FAILED] scaled_dot_product_attention")
    assert "inverted" in str(failed)
    assert bool(passed) and not bool(failed)
    assert "passed" in passed._repr_html_() and "failed" in failed._repr_html_()
    assert "<script" not in check_scaled_dot_product_attention(lambda *a: "<script>")._repr_html_()


# ---------------------------------------------------------------------------------------------
# The probes are designed so that no two diagnoses coincide
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("probe", _probes(), ids=lambda probe: probe.title)
def test_probe_shapes_separate_the_mistakes(probe):
    sizes = [probe.n_q, probe.n_k, probe.q.shape[-1], probe.v.shape[-1]]
    assert len(set(sizes)) == 4 and min(sizes) > 1, f"n_q, n_k, d_k, d_v must differ: {sizes}"
    if probe.mask is not None:
        allowed = probe.mask.expand(*probe.q.shape[:-2], probe.n_q, probe.n_k)
        assert allowed.any(dim=-1).all(), "no query may have every key masked"
        assert (~allowed).any(dim=-1).all(), "every query must have a masked key"


@pytest.mark.parametrize("probe", _probes(), ids=lambda probe: probe.title)
def test_diagnoses_are_far_apart(probe):
    """Each mistake's prediction differs from the reference and from every other prediction."""
    _, reference = probe.reference()
    predictions = [("reference", reference)] + [(c.code, c.weights) for c in _catalogue(probe)]
    for i, (name_a, a) in enumerate(predictions):
        for name_b, b in predictions[i + 1 :]:
            if {name_a, name_b} == {"returned_scores", "missing_softmax"}:
                continue  # same weights on purpose: told apart by `out`
            gap = float((a - b).abs().max())
            assert gap > 1e-2, f"{probe.title}: {name_a} and {name_b} differ by only {gap:.2g}"


def test_large_scores_overflow_float32_exp():
    large = [probe for probe in _probes() if probe.large_scores]
    assert large
    for probe in large:
        scores = probe.scores()
        assert scores.abs().max() < 512, "scores stay small enough for float32 rounding"
        if probe.mask is not None:
            scores = scores.masked_fill(~probe.mask, -math.inf)
        assert (scores.amax(dim=-1) > 88.8).all(), "every row must overflow a naive float32 exp"
