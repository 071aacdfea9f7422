"""Greedy and beam search, scoring and metrics (section 05), on fake models whose next-token
distribution is known exactly, and on a small random Transformer."""

import itertools
import math

import pytest
import torch

from lectures_lib.decoding import (
    beam_search,
    exact_match,
    greedy_decode,
    sample_decode,
    sentence_bleu,
    sequence_log_prob,
)
from lectures_lib.models import Transformer

PAD, BOS, EOS = 0, 1, 2


class MarkovModel:
    """Fake seq2seq model: the next token depends only on the last one, P(next | last) = table.

    ``encode`` returns a dummy memory; ``decode`` ignores it and the source.
    """

    def __init__(self, table):
        table = torch.as_tensor(table, dtype=torch.float64)
        assert torch.allclose(table.sum(dim=1), torch.ones(len(table), dtype=torch.float64))
        self.log_table = table.clamp_min(1e-30).log().float()  # (vocab, vocab)
        self.decode_calls = 0

    def encode(self, src):
        return torch.zeros(src.shape[0], src.shape[1], 1)

    def decode(self, tgt, memory, src=None):
        assert memory.shape[0] == tgt.shape[0]
        self.decode_calls += 1
        return self.log_table[tgt]  # (batch, t, vocab)


def markov_table(vocab, rows):
    """Table with the given rows; every other row sends everything to END."""
    table = torch.zeros(vocab, vocab)
    table[:, EOS] = 1.0
    for token, row in rows.items():
        table[token] = torch.tensor(row)
    return table


# Tokens 3 = A, 4 = B, 5 = X, 6 = Y, 7 = Z. Greedy takes A (0.6) and then at best X (0.4): total
# 0.24. Beam search keeps B (0.4), whose continuation X has 0.95: total 0.38, the better sequence.
A, B, X, Y, Z = 3, 4, 5, 6, 7
GREEDY_TRAP = markov_table(
    8,
    {
        BOS: [0, 0, 0, 0.6, 0.4, 0, 0, 0],
        A: [0, 0, 0, 0, 0, 0.4, 0.3, 0.3],
        B: [0, 0, 0, 0, 0, 0.95, 0.05, 0],
    },
)


def test_greedy_is_suboptimal_and_beam_finds_the_better_sequence():
    model = MarkovModel(GREEDY_TRAP)
    src = torch.tensor([[3, 4]])
    greedy, greedy_score = greedy_decode(model, src, 5, BOS, EOS, PAD, return_scores=True)
    beam, beam_score = beam_search(model, src, 2, 5, BOS, EOS, PAD, return_scores=True)
    assert greedy.tolist() == [[A, X, EOS]]
    assert beam.tolist() == [[B, X, EOS]]
    assert greedy_score.item() == pytest.approx(math.log(0.6 * 0.4), abs=1e-5)
    assert beam_score.item() == pytest.approx(math.log(0.4 * 0.95), abs=1e-5)
    # the reported scores are the model's log-probabilities of the returned sequences
    assert torch.allclose(sequence_log_prob(model, src, beam, BOS, EOS, PAD), beam_score)
    assert torch.allclose(sequence_log_prob(model, src, greedy, BOS, EOS, PAD), greedy_score)


def _best_sequence_by_brute_force(table, max_len):
    """The most probable output (ending with END, or cut at max_len) by enumerating all."""
    vocab = table.shape[0]
    log_table = table.clamp_min(1e-30).log()
    best, best_score = None, -math.inf
    for length in range(1, max_len + 1):
        for tokens in itertools.product(range(vocab), repeat=length):
            if EOS in tokens[:-1] or PAD in tokens or BOS in tokens:
                continue
            if length < max_len and tokens[-1] != EOS:
                continue
            score, last = 0.0, BOS
            for token in tokens:
                score, last = score + log_table[last, token].item(), token
            if score > best_score:
                best, best_score = list(tokens), score
    return best, best_score


def test_wide_beam_equals_exhaustive_search_on_random_markov_models():
    generator = torch.Generator().manual_seed(0)
    vocab, max_len = 5, 4
    for _ in range(5):
        table = torch.rand(vocab, vocab, generator=generator) ** 3
        table[:, PAD] = 0.0
        table[:, BOS] = 0.0
        table = table / table.sum(dim=1, keepdim=True)
        best, best_score = _best_sequence_by_brute_force(table.double(), max_len)
        width = (vocab - 2) ** max_len  # keeps every hypothesis: exact search
        tokens, score = beam_search(
            MarkovModel(table), torch.ones(1, 2, dtype=torch.long), width, max_len, BOS, EOS,
            PAD, return_scores=True,
        )
        trimmed = tokens[0].tolist()
        trimmed = trimmed[: trimmed.index(EOS) + 1] if EOS in trimmed else trimmed
        assert trimmed == best
        assert score.item() == pytest.approx(best_score, abs=1e-4)


class CopyModel:
    """Fake model that copies its source token by token, then emits END (batched, padded)."""

    def encode(self, src):
        return src[..., None].float()  # (batch, n_src, 1): the memory carries the tokens

    def decode(self, tgt, memory, src=None):
        batch, n_tgt = tgt.shape
        source = memory[..., 0].long()  # (batch, n_src)
        source = torch.cat([source, torch.full((batch, n_tgt), PAD)], dim=1)
        wanted = source[:, :n_tgt]  # (batch, n_tgt): token i is the answer at step i
        wanted = torch.where(wanted == PAD, torch.full_like(wanted, EOS), wanted)
        return 5.0 * torch.nn.functional.one_hot(wanted, 10).float()  # (batch, n_tgt, 10)


SOURCES = torch.tensor([[3, 4, 5, 6], [7, 8, 0, 0], [9, 0, 0, 0]])
COPIES = torch.tensor([[3, 4, 5, 6, EOS], [7, 8, EOS, PAD, PAD], [9, EOS, PAD, PAD, PAD]])


@pytest.mark.parametrize("decode", ["greedy", "beam1", "beam3"])
def test_batch_of_different_lengths_stops_at_end_and_pads(decode):
    model = CopyModel()
    if decode == "greedy":
        out = greedy_decode(model, SOURCES, 10, BOS, EOS, PAD)
    else:
        out = beam_search(model, SOURCES, int(decode[-1]), 10, BOS, EOS, PAD)
    assert torch.equal(out, COPIES), out
    # each row decoded alone gives the same tokens: batching changes nothing
    for row, expected in zip(SOURCES, COPIES, strict=True):
        alone = greedy_decode(model, row[None], 10, BOS, EOS, PAD)[0]
        assert torch.equal(alone, expected[: len(alone)]) and not expected[len(alone):].any()


def test_decoding_stops_once_every_sequence_has_ended():
    model = MarkovModel(GREEDY_TRAP)
    greedy_decode(model, torch.ones(4, 3, dtype=torch.long), 50, BOS, EOS, PAD)
    assert model.decode_calls == 3  # A, X, END: then all finished


@pytest.mark.parametrize("max_len", [1, 2, 3])
def test_length_limit_is_respected(max_len):
    never_ends = markov_table(6, {t: [0, 0, 0, 0.2, 0.5, 0.3] for t in range(6)})
    model = MarkovModel(never_ends)
    src = torch.ones(2, 3, dtype=torch.long)
    for out in (
        greedy_decode(model, src, max_len, BOS, EOS, PAD),
        beam_search(model, src, 3, max_len, BOS, EOS, PAD),
    ):
        assert out.shape == (2, max_len)
        assert not (out == EOS).any()
    assert greedy_decode(model, src, max_len, BOS, EOS, PAD).eq(4).all()  # always the argmax


def test_length_penalty_changes_the_choice_between_short_and_long():
    # [END] has probability 0.55; [C, D, END] has 0.45: shorter wins on total log-probability,
    # longer wins on log-probability per token (-0.27 vs -0.60).
    C, D = 3, 4
    table = markov_table(5, {BOS: [0, 0, 0.55, 0.45, 0], C: [0, 0, 0, 0, 1.0], D: [0, 0, 1, 0, 0]})
    model = MarkovModel(table)
    src = torch.ones(1, 1, dtype=torch.long)
    short = beam_search(model, src, 2, 5, BOS, EOS, PAD, length_penalty=0.0)
    long = beam_search(model, src, 2, 5, BOS, EOS, PAD, length_penalty=1.0)
    assert short[0].tolist()[:1] == [EOS] and not short[0, 1:].any()
    assert long[0].tolist() == [C, D, EOS]


def test_beam_width_one_equals_greedy_on_a_random_transformer():
    torch.manual_seed(0)
    model = Transformer(11, 9, d_model=16, num_heads=2, num_encoder_layers=1,
                        num_decoder_layers=1, d_ff=32)
    src = torch.randint(3, 11, (6, 5))
    src[1, 3:] = PAD  # a shorter source in the batch
    src[4, 1:] = PAD
    greedy, greedy_scores = greedy_decode(model, src, 7, BOS, EOS, PAD, return_scores=True)
    beam, beam_scores = beam_search(model, src, 1, 7, BOS, EOS, PAD, return_scores=True)
    assert torch.equal(greedy, beam)
    assert torch.allclose(greedy_scores, beam_scores, atol=1e-5)
    wide, wide_scores = beam_search(model, src, 4, 7, BOS, EOS, PAD, return_scores=True)
    assert torch.allclose(sequence_log_prob(model, src, wide, BOS, EOS, PAD), wide_scores,
                          atol=1e-4)
    # a wider beam decodes each source as if it were alone in the batch
    for row in range(src.shape[0]):
        alone = beam_search(model, src[row : row + 1], 4, 7, BOS, EOS, PAD)
        assert exact_match(alone, wide[row : row + 1]) == 1.0
    assert model.training, "decoding restores the training mode"


def test_decoders_check_the_ids_against_a_model_without_tgt_vocab_size():
    model = MarkovModel(GREEDY_TRAP)  # its vocabulary shows only in the logits it returns
    src = torch.ones(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="vocabulary size"):
        greedy_decode(model, src, 3, BOS, 99, PAD)


def test_exact_match():
    predictions = torch.tensor([[5, 6, EOS, PAD], [5, 7, EOS, PAD], [5, 6, 7, 8]])
    targets = torch.tensor([[5, 6, EOS], [5, 6, EOS], [5, 6, EOS]])
    assert exact_match(predictions, targets) == pytest.approx(1 / 3)
    assert exact_match(predictions, targets, reduce=False).tolist() == [True, False, False]
    # without END the output never stopped: wrong, even if the tokens before agree
    assert exact_match([[5, 6]], [[5, 6, EOS]]) == 0.0
    # with eos_id, whatever follows the first END is ignored
    assert exact_match([[5, 6, EOS, 9]], [[5, 6, EOS]], eos_id=EOS) == 1.0
    assert exact_match([[5, 6, EOS, 9]], [[5, 6, EOS]]) == 0.0
    assert exact_match([["a", "b"]], [["a", "b"]], pad_id=None) == 1.0


def test_sentence_bleu():
    reference = "the cat sat on the mat".split()
    assert sentence_bleu(reference, reference) == pytest.approx(1.0)
    assert sentence_bleu(["dog"], reference) == 0.0
    # clipping: "the" occurs twice in the reference, so 7 "the" count as 2 matches
    assert sentence_bleu(["the"] * 7, reference, max_n=1) == pytest.approx(2 / 7)
    # brevity penalty: a correct but short candidate is penalised
    short = "the cat".split()
    assert sentence_bleu(short, reference, max_n=1) == pytest.approx(math.exp(1 - 6 / 2))
    # by hand, max_n = 2 with add-one smoothing of the bigram precision:
    candidate = "the cat sat on a mat".split()  # 5/6 unigrams, bigrams 3/5 -> (3+1)/(5+1)
    expected = math.exp(0.5 * math.log(5 / 6) + 0.5 * math.log(4 / 6))
    assert sentence_bleu(candidate, reference, max_n=2) == pytest.approx(expected)
    unsmoothed = sentence_bleu(candidate, reference, max_n=2, smooth=False)
    assert unsmoothed == pytest.approx(math.exp(0.5 * math.log(5 / 6) + 0.5 * math.log(3 / 5)))
    assert sentence_bleu([], reference) == 0.0


# --- sampling --------------------------------------------------------------------------------


def test_sampling_draws_first_words_with_the_models_probabilities():
    model = MarkovModel(GREEDY_TRAP)
    src = torch.ones(4000, 1, dtype=torch.long)
    out = sample_decode(model, src, 5, BOS, EOS, PAD, generator=torch.Generator().manual_seed(0))
    share_a = (out[:, 0] == A).float().mean().item()
    # 4000 draws of P(A) = 0.6: standard deviation sqrt(0.24 / 4000) ~ 0.008; 5 sd = 0.04
    assert abs(share_a - 0.6) < 0.04, share_a
    after_b = out[out[:, 0] == B, 1]
    assert abs((after_b == X).float().mean().item() - 0.95) < 0.03
    assert (out[:, 2] == EOS).all(), "after X, Y or Z always END"


def test_temperature_reshapes_the_distribution():
    model = MarkovModel(GREEDY_TRAP)
    src = torch.ones(4000, 1, dtype=torch.long)
    generator = torch.Generator().manual_seed(1)
    # P(A) at temperature T: 0.6^(1/T) / (0.6^(1/T) + 0.4^(1/T))
    for temperature in (0.5, 2.0):
        out = sample_decode(model, src, 1, BOS, EOS, PAD, temperature=temperature,
                            generator=generator)
        expected = 0.6 ** (1 / temperature) / (0.6 ** (1 / temperature) + 0.4 ** (1 / temperature))
        assert abs((out[:, 0] == A).float().mean().item() - expected) < 0.04, temperature


def test_top_k_one_and_a_cold_temperature_are_greedy():
    table = torch.softmax(torch.randn(9, 9, generator=torch.Generator().manual_seed(3)), dim=-1)
    model = MarkovModel(table)
    src = torch.ones(50, 2, dtype=torch.long)
    greedy = greedy_decode(model, src, 6, BOS, EOS, PAD)
    assert torch.equal(sample_decode(model, src, 6, BOS, EOS, PAD, top_k=1), greedy)
    assert torch.equal(sample_decode(model, src, 6, BOS, EOS, PAD, temperature=1e-4), greedy)


def test_top_k_never_draws_outside_the_k_best():
    model = MarkovModel(GREEDY_TRAP)  # after A: X 0.4, Y 0.3, Z 0.3 (Y and Z tie)
    src = torch.ones(2000, 1, dtype=torch.long)
    out = sample_decode(model, src, 5, BOS, EOS, PAD, top_k=1,
                        generator=torch.Generator().manual_seed(0))
    assert (out[:, 0] == A).all(), "top_k=1 always takes the most likely first word"
    out = sample_decode(model, src, 5, BOS, EOS, PAD, top_k=2,
                        generator=torch.Generator().manual_seed(0))
    assert set(out[:, 0].tolist()) == {A, B}
    assert not (out[:, 1] == PAD).any()


def test_sampling_scores_are_the_models_log_probabilities_and_runs_reproduce():
    model = MarkovModel(GREEDY_TRAP)
    src = torch.ones(64, 1, dtype=torch.long)
    out, scores = sample_decode(model, src, 5, BOS, EOS, PAD, temperature=2.0, return_scores=True,
                                generator=torch.Generator().manual_seed(5))
    assert torch.allclose(sequence_log_prob(model, src, out, BOS, EOS, PAD), scores, atol=1e-5)
    again = sample_decode(model, src, 5, BOS, EOS, PAD, temperature=2.0,
                          generator=torch.Generator().manual_seed(5))
    assert torch.equal(out, again), "the same generator seed draws the same outputs"


def test_sampling_stops_and_pads_like_greedy():
    model = MarkovModel(GREEDY_TRAP)
    out = sample_decode(model, torch.ones(300, 1, dtype=torch.long), 10, BOS, EOS, PAD,
                        generator=torch.Generator().manual_seed(2))
    assert out.shape[1] == 3, "every output ends after two words and END"
    ended = (out == EOS).cumsum(dim=1) > 0
    after_end = ended & (out != EOS)
    assert (out[after_end] == PAD).all()


