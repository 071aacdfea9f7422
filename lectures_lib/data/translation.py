"""A toy "translation" for section 05: numbers in digits <-> numbers in English words.

Derived in ``05_transformer_decoder.ipynb``.

By default the source is an integer of ``0..9999`` written as four digits, one token per digit
(``"3 0 4 2"``, ``"0 0 4 2"``), and the target is the same integer in English words, one token
per word (``"three thousand forty two"``, ``"forty two"``). The output length differs from the
input length and varies from 1 to 6 words (``"7 0 0 0" -> "seven thousand"``, ``"7 7 7 7" ->
"seven thousand seven hundred seventy seven"``), so the model cannot translate position by
position: the decoder itself decides when to stop, by emitting END. ``direction=
"words_to_digits"`` gives the reverse task.

Why this task: it trains in seconds on a CPU, yet it is compositional (zeros are skipped, "1 3"
is one word "thirteen", the place of a digit decides between "four", "forty" and "four hundred"),
and every output word comes from one or two source digits, so cross-attention can be read as an
alignment. The test numbers never occur in training: a model that translates them has learned
the rule, not memorised pairs.

Token ids: ``<pad>`` = 0, ``<bos>`` (BEGIN) = 1, ``<eos>`` (END) = 2 in both vocabularies.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from ..utils import check_bool, check_non_negative_int, check_positive_int

__all__ = [
    "PAD",
    "BOS",
    "EOS",
    "PAD_ID",
    "BOS_ID",
    "EOS_ID",
    "Vocab",
    "number_to_words",
    "number_to_digits",
    "TranslationSplit",
    "TranslationData",
    "make_translation_data",
    "sentence_shape",
]

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
SPECIALS = (PAD, BOS, EOS)

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()  # 20, 30, ..., 90
WORDS = (*_ONES, *_TENS, "hundred", "thousand")
DIGITS = tuple("0123456789")
MAX_NUMBER = 999_999  # number_to_words knows "thousand" as its largest unit
DIRECTIONS = ("words_to_digits", "digits_to_words")


class Vocab:
    """Token <-> id table with the three special tokens at fixed ids.

    ``<pad>`` (id 0) fills sequences up to a common length, ``<bos>`` (BEGIN, id 1) is the first
    input of the decoder, ``<eos>`` (END, id 2) is the token the decoder emits to say "I am done".
    The other tokens follow in the order given.

    >>> vocab = Vocab(["a", "b"])
    >>> vocab.encode(["b", "a"], add_eos=True)
    [4, 3, 2]
    >>> vocab.decode([4, 3, 2, 0, 0])
    ['b', 'a']
    """

    def __init__(self, tokens: Iterable[str]) -> None:
        if isinstance(tokens, str) or not isinstance(tokens, Iterable):
            raise TypeError(
                f"tokens must be a list of token strings, got {type(tokens).__name__} ({tokens!r})"
            )
        tokens = list(tokens)
        for token in tokens:
            if not isinstance(token, str) or not token:
                raise TypeError(f"tokens must be non-empty strings, got {token!r}")
        repeated = {t for t in tokens if tokens.count(t) > 1} | (set(tokens) & set(SPECIALS))
        if repeated:
            raise ValueError(
                f"tokens must be unique and not special tokens, got repeated {sorted(repeated)}"
            )
        self.id_to_token: list[str] = [*SPECIALS, *tokens]
        self.token_to_id: dict[str, int] = {t: i for i, t in enumerate(self.id_to_token)}

    pad_id, bos_id, eos_id = PAD_ID, BOS_ID, EOS_ID

    def __len__(self) -> int:
        return len(self.id_to_token)

    def __contains__(self, token: object) -> bool:
        return token in self.token_to_id

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens: {self.id_to_token})"

    def encode(
        self, tokens: str | Sequence[str], *, add_bos: bool = False, add_eos: bool = False
    ) -> list[int]:
        """Token ids of ``tokens`` (a list of tokens, or a string split at whitespace)."""
        if isinstance(tokens, str):
            tokens = tokens.split()
        if not isinstance(tokens, Sequence) or not all(isinstance(t, str) for t in tokens):
            raise TypeError(
                f"tokens must be a string or a list of token strings, got {tokens!r}"
            )
        check_bool(add_bos, "add_bos")
        check_bool(add_eos, "add_eos")
        unknown = [t for t in tokens if t not in self.token_to_id or t in SPECIALS]
        if unknown:
            raise ValueError(f"unknown tokens {unknown}; the vocabulary has {self.id_to_token[3:]}")
        ids = [self.token_to_id[t] for t in tokens]
        return ([BOS_ID] if add_bos else []) + ids + ([EOS_ID] if add_eos else [])

    def decode(self, ids: Iterable[int] | torch.Tensor, *, stop_at_eos: bool = True) -> list[str]:
        """Tokens of ``ids``, without ``<bos>``/``<pad>``; cut at the first ``<eos>`` by default.

        With ``stop_at_eos=False`` every token is returned, specials included.
        """
        check_bool(stop_at_eos, "stop_at_eos")
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                raise ValueError(
                    f"decode takes one sequence (1-D ids), got shape {tuple(ids.shape)}"
                )
            ids = ids.tolist()
        if isinstance(ids, str) or not isinstance(ids, Iterable):
            raise TypeError(f"ids must be a list or 1-D tensor of token ids, got {ids!r}")
        tokens = []
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, numbers.Integral):
                raise TypeError(f"ids must be ints (token ids), got {type(i).__name__} ({i!r})")
            if not 0 <= int(i) < len(self):
                raise ValueError(f"id {i!r} is not in the vocabulary (0..{len(self) - 1})")
            token = self.id_to_token[int(i)]
            if stop_at_eos:
                if token == EOS:
                    break
                if token in (BOS, PAD):
                    continue
            tokens.append(token)
        return tokens

    def to_string(self, ids: Iterable[int] | torch.Tensor) -> str:
        """``decode`` joined with spaces: ``[5, 4] -> "three two"``."""
        return " ".join(self.decode(ids))


def number_to_words(n: int) -> str:
    """English words of ``0 <= n <= 999_999`` without "and" or hyphens: ``3042 -> "three thousand
    forty two"``, ``115 -> "one hundred fifteen"``, ``0 -> "zero"``."""
    check_non_negative_int(n, "n")
    if n > MAX_NUMBER:
        raise ValueError(f"n must be <= {MAX_NUMBER}, got {n}")
    if n == 0:
        return "zero"
    words: list[str] = []
    thousands, rest = divmod(n, 1000)
    if thousands:
        words += [*_below_thousand(thousands), "thousand"]
    words += _below_thousand(rest)
    return " ".join(words)


def _below_thousand(n: int) -> list[str]:
    """Words of ``0 <= n < 1000`` (``[]`` for 0)."""
    hundreds, rest = divmod(n, 100)
    words = [_ONES[hundreds], "hundred"] if hundreds else []
    if rest >= 20:
        tens, ones = divmod(rest, 10)
        words.append(_TENS[tens - 2])
        if ones:
            words.append(_ONES[ones])
    elif rest:
        words.append(_ONES[rest])
    return words


def number_to_digits(n: int, width: int | None = None) -> str:
    """The digits of ``n >= 0`` as space-separated tokens: ``3042 -> "3 0 4 2"``.

    With ``width``, leading zeros fill up to ``width`` digits: ``(42, 4) -> "0 0 4 2"``.
    """
    check_non_negative_int(n, "n")
    digits = str(n)
    if width is not None:
        width = check_positive_int(width, "width")
        if len(digits) > width:
            raise ValueError(f"{n} has more than width={width} digits")
        digits = digits.zfill(width)
    return " ".join(digits)


@dataclass(frozen=True)
class TranslationSplit:
    """One split as padded ``int64`` tensors (``<pad>`` = 0 after the real tokens).

    * ``numbers`` ``(n,)``: the integers, for reference;
    * ``src`` ``(n, max_src_len)``: the source tokens (no BEGIN/END);
    * ``tgt_in`` ``(n, max_tgt_len + 1)``: ``<bos>`` + target: what the decoder *reads*
      (teacher forcing);
    * ``tgt_out`` ``(n, max_tgt_len + 1)``: target + ``<eos>``: what it must *predict*, so
      ``tgt_out[:, t]`` is the token after ``tgt_in[:, t]`` and ``tgt_in[:, 1:] == tgt_out[:, :-1]``
      on the real tokens.
    """

    numbers: torch.Tensor
    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor

    def __len__(self) -> int:
        return self.numbers.shape[0]

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(src, tgt_in, tgt_out)``: the ``(inputs..., targets)`` tuple ``training.fit`` takes."""
        return self.src, self.tgt_in, self.tgt_out


@dataclass(frozen=True)
class TranslationData:
    """Train and test splits (disjoint numbers) and the two vocabularies."""

    train: TranslationSplit
    test: TranslationSplit
    src_vocab: Vocab
    tgt_vocab: Vocab
    direction: str


def _sentences(n: int, direction: str, width: int | None) -> tuple[str, str]:
    words, digits = number_to_words(n), number_to_digits(n, width)
    return (words, digits) if direction == "words_to_digits" else (digits, words)


def _pad(rows: list[list[int]], width: int) -> torch.Tensor:
    """``(len(rows), width)`` int64 tensor, each row followed by ``<pad>`` (0)."""
    return torch.tensor([row + [PAD_ID] * (width - len(row)) for row in rows], dtype=torch.long)


def _split(
    numbers: list[int], pairs: list[tuple[str, str]], src_vocab: Vocab, tgt_vocab: Vocab,
    src_len: int, tgt_len: int,
) -> TranslationSplit:
    sources = [src_vocab.encode(source) for source, _ in pairs]
    targets = [tgt_vocab.encode(target) for _, target in pairs]
    return TranslationSplit(
        numbers=torch.tensor(numbers, dtype=torch.long),
        src=_pad(sources, src_len),
        tgt_in=_pad([[BOS_ID, *target] for target in targets], tgt_len + 1),  # BEGIN + y
        tgt_out=_pad([[*target, EOS_ID] for target in targets], tgt_len + 1),  # y + END
    )


def make_translation_data(
    n_train: int = 9000,
    n_test: int = 1000,
    max_number: int = 9999,
    seed: int = 0,
    direction: str = "digits_to_words",
    leading_zeros: bool = True,
) -> TranslationData:
    """Digits <-> number words, with train and test numbers drawn *without overlap*.

    The numbers written as a single word (0..20, 30, 40, ..., 90: 28 numbers for
    ``max_number >= 90``) are dictionary entries, not compositions, so they are always training
    numbers (the first rows of the training split). The other integers of ``0..max_number`` are
    shuffled with ``seed``; the first ``n_test`` form the test split, the next ones fill the
    training split up to ``n_train``. So no test number (hence no test sentence) is ever seen in
    training: the test split measures how well the model *composes* translations of new numbers.

    Args:
        n_train: number of training pairs (at least the number of single-word numbers).
        n_test: number of test pairs.
        max_number: largest integer (at most 999_999); ``n_train + n_test`` may not exceed
            ``max_number + 1``.
        seed: seed of the shuffle; the same arguments always give the same tensors.
        direction: ``"digits_to_words"`` (source digits, target words) or ``"words_to_digits"``.
        leading_zeros: write every number with as many digits as ``max_number`` (``42 -> "0 0 4
            2"`` for ``max_number=9999``), so a digit's position alone tells its place value.
            Without them, a short number's first digit sits where a long number's thousands
            digit does, and the rare short numbers become much harder to learn.

    Returns:
        :class:`TranslationData` with ``train``/``test`` :class:`TranslationSplit` s and the
        vocabularies. The tensor widths are the longest source and target of the two splits
        together (``+ 1`` for BEGIN/END on the target side), the same for both splits.
    """
    n_train = check_positive_int(n_train, "n_train")
    n_test = check_positive_int(n_test, "n_test")
    max_number = check_non_negative_int(max_number, "max_number")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    leading_zeros = check_bool(leading_zeros, "leading_zeros")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if max_number > MAX_NUMBER:
        raise ValueError(f"max_number must be <= {MAX_NUMBER}, got {max_number}")
    if n_train + n_test > max_number + 1:
        raise ValueError(
            f"n_train + n_test = {n_train + n_test} pairs asked for, but 0..{max_number} has only "
            f"{max_number + 1} numbers (train and test may not overlap)"
        )
    # Numbers written as one word (zero..nineteen, twenty, thirty, ..., ninety) are dictionary
    # entries, not compositions: nothing about "eleven" can be inferred from other numbers, so
    # they always belong to the training split. Every other number is drawn at random.
    single_words = [n for n in range(min(max_number, 99) + 1) if " " not in number_to_words(n)]
    if n_train < len(single_words):
        raise ValueError(
            f"n_train must be at least {len(single_words)}: the numbers written as one word "
            f"({single_words[0]}..{single_words[-1]}) always belong to the training split"
        )
    is_single_word = set(single_words)
    composed = torch.tensor([n for n in range(max_number + 1) if n not in is_single_word])
    if n_test > len(composed):
        raise ValueError(
            f"n_test={n_test} is more than the {len(composed)} numbers of 0..{max_number} that "
            "are not written as a single word"
        )
    generator = torch.Generator().manual_seed(seed)
    shuffled = composed[torch.randperm(len(composed), generator=generator)].tolist()
    test_numbers = shuffled[:n_test]
    train_numbers = single_words + shuffled[n_test : n_test + n_train - len(single_words)]
    order = test_numbers + train_numbers

    words_vocab, digits_vocab = Vocab(WORDS), Vocab(DIGITS)
    if direction == "words_to_digits":
        src_vocab, tgt_vocab = words_vocab, digits_vocab
    else:
        src_vocab, tgt_vocab = digits_vocab, words_vocab
    # Widths: the longest sentence of both splits, so train and test share a shape.
    width = len(str(max_number)) if leading_zeros else None
    pairs = [_sentences(n, direction, width) for n in order[: n_test + n_train]]
    src_len = max(len(source.split()) for source, _ in pairs)
    tgt_len = max(len(target.split()) for _, target in pairs)
    test = _split(test_numbers, pairs[:n_test], src_vocab, tgt_vocab, src_len, tgt_len)
    train = _split(train_numbers, pairs[n_test:], src_vocab, tgt_vocab, src_len, tgt_len)
    return TranslationData(train, test, src_vocab, tgt_vocab, direction)


def sentence_shape(n: int) -> str:
    """The shape of ``n``'s words: each number word replaced by its kind.

    ``U`` = a unit (one..nine), ``E`` = ten..nineteen, ``T`` = a multiple of ten (twenty..
    ninety); "hundred", "thousand" and "zero" stay. ``3042 -> "U thousand T U"``,
    ``7000 -> "U thousand"``, ``615 -> "U hundred E"``. Numbers of the same shape are
    translated by the same rule: the shape is what the model has to learn per kind of number.
    """
    kinds = {**{w: "U" for w in _ONES[1:10]}, **{w: "E" for w in _ONES[10:]}}
    kinds.update({w: "T" for w in _TENS})
    return " ".join(kinds.get(word, word) for word in number_to_words(n).split())
