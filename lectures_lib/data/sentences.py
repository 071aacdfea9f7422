"""Real sentences for section 08: 4,354 graded English-Chinese sentence pairs, shipped in a package.

The sentences come from the pinned package ``hsk-sentences-audio==1.0.0`` (installed with the
course, nothing is downloaded): sentences for the HSK 3.0 levels 1-6, each with its English
translation, Simplified and Traditional Chinese, its words (a segmentation), its HSK level and
its topic. :func:`load_sentences` checks the data file's SHA-256 before using it, so every
learner trains on exactly the sentences the course was measured on.

Attribution (the licence of the data, CC BY-SA 4.0, asks for it): the sentences are the
hsk-sentences-audio dataset by the hsk-sentences-audio contributors,
https://github.com/no7z/hsk-sentences-audio, licensed CC BY-SA 4.0
(https://creativecommons.org/licenses/by-sa/4.0/); the course reads them unchanged. Print
:data:`ATTRIBUTION` wherever they are shown.

The three kinds of output of the lecture, on these sentences:

* each token a label: word segmentation as one tag per character (:func:`bmes_tags`);
* the whole sequence a label: the sentence's HSK level;
* the model decides the length: English -> Chinese translation.

Token ids of every vocabulary here: ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2 (as the course's
``Transformer`` and ``decoding`` expect), ``<unk>`` = 3 for a token never seen in training.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata, resources
from pathlib import Path

import torch

from ..utils import check_non_negative_int, check_path, check_positive_int, check_seed
from .translation import PAD_ID, Vocab

__all__ = [
    "PACKAGE",
    "PACKAGE_VERSION",
    "DATA_SHA256",
    "ATTRIBUTION",
    "UNK",
    "UNK_ID",
    "TAGS",
    "SentencePair",
    "SentenceSplits",
    "load_sentences",
    "split_sentences",
    "secret_split",
    "chinese_characters",
    "english_words",
    "SentenceVocab",
    "build_vocab",
    "bmes_tags",
    "words_from_tags",
    "max_match",
    "segmentation_f1",
    "pad_batch",
]

PACKAGE, PACKAGE_VERSION = "hsk-sentences-audio", "1.0.0"
DATA_FILE = ("hsk_sentences_audio", "data/sentences.json")  # (module, path inside it)
DATA_SHA256 = "8f8ffd34eee29f395724ce060cad22511eeeabb7af731d5b5879dc0548e01660"
ATTRIBUTION = (
    "Sentences: hsk-sentences-audio 1.0.0 by the hsk-sentences-audio contributors "
    "(https://github.com/no7z/hsk-sentences-audio), CC BY-SA 4.0 "
    "(https://creativecommons.org/licenses/by-sa/4.0/), used unchanged."
)
UNK, UNK_ID = "<unk>", 3
TAGS = ("B", "M", "E", "S")  # Begin, Middle, End of a word; Single-character word


# Validators, called once at the door of each public function.
def _check_text(text: object, name: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__} ({text!r:.60})")
    return text


def _check_tokens(tokens: object, name: str) -> list[str]:
    """A list (or tuple) of non-empty strings."""
    if isinstance(tokens, str) or not isinstance(tokens, (list, tuple)) or not all(
        isinstance(t, str) and t for t in tokens
    ):
        raise TypeError(f"{name} must be a list of non-empty strings, got {tokens!r:.80}")
    return list(tokens)


@dataclass(frozen=True)
class SentencePair:
    """One sentence of the data.

    ``words`` segments ``simplified`` completely: ``"".join(words) == simplified`` (the data's
    words, plus each punctuation mark as a one-character word). ``traditional`` has the same
    length as ``simplified``, character for character, so the same word lengths segment it.
    """

    id: str
    english: str
    simplified: str
    traditional: str
    words: tuple[str, ...]
    level: int  # HSK level, 1 (first) .. 6
    topic: str

    def chinese(self, script: str = "simplified") -> str:
        """The Chinese sentence in ``"simplified"`` or ``"traditional"`` characters."""
        if script not in ("simplified", "traditional"):
            raise ValueError(f"script must be 'simplified' or 'traditional', got {script!r}")
        return self.simplified if script == "simplified" else self.traditional

    def words_in(self, script: str = "simplified") -> tuple[str, ...]:
        """``words`` written in ``script`` (the Traditional text cut at the same lengths)."""
        text, cut, start = self.chinese(script), [], 0
        for word in self.words:
            cut.append(text[start : start + len(word)])
            start += len(word)
        return tuple(cut)


@dataclass(frozen=True)
class SentenceSplits:
    """Disjoint lists of pairs: ``train``, ``valid`` (for choosing a recipe) and ``test``."""

    train: list[SentencePair]
    valid: list[SentencePair]
    test: list[SentencePair]


# ---------------------------------------------------------------------------------------------
# Loading, checked
# ---------------------------------------------------------------------------------------------


def _data_path() -> Path:
    """Where the installed package keeps its data file; a clear error when it is not there."""
    try:
        version = metadata.version(PACKAGE)
        path = Path(str(resources.files(DATA_FILE[0]).joinpath(DATA_FILE[1])))
    except (metadata.PackageNotFoundError, ModuleNotFoundError) as error:
        raise ModuleNotFoundError(
            f"the sentences come from the package {PACKAGE}=={PACKAGE_VERSION}, which is not "
            f"installed: pip install {PACKAGE}=={PACKAGE_VERSION}"
        ) from error
    if version != PACKAGE_VERSION:
        raise ValueError(
            f"the sentences were checked with {PACKAGE}=={PACKAGE_VERSION}, but {version} is "
            f"installed: pip install {PACKAGE}=={PACKAGE_VERSION}"
        )
    return path


def _checked_bytes(path: Path) -> bytes:
    """The file's bytes, after checking their SHA-256 against :data:`DATA_SHA256`."""
    if not path.is_file():
        raise FileNotFoundError(
            f"the data file of {PACKAGE}=={PACKAGE_VERSION} is missing: {path} "
            f"(reinstall it: pip install --force-reinstall {PACKAGE}=={PACKAGE_VERSION})"
        )
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != DATA_SHA256:
        raise ValueError(
            f"the data file {path} is not the one of {PACKAGE}=={PACKAGE_VERSION}: its SHA-256 "
            f"is {digest}, expected {DATA_SHA256} (reinstall it: pip install --force-reinstall "
            f"{PACKAGE}=={PACKAGE_VERSION})"
        )
    return raw


def _segmentation(text: str, words: list[str]) -> tuple[str, ...]:
    """The data's ``words`` (punctuation left out) completed to cover every character of
    ``text``: what lies between two words (punctuation) becomes one-character words."""
    out, start = [], 0
    for word in words:
        found = text.index(word, start)
        out += list(text[start:found])  # punctuation before the word, one mark per word
        out.append(word)
        start = found + len(word)
    return tuple(out + list(text[start:]))


def _pair(record: dict) -> SentencePair:
    return SentencePair(
        id=record["id"],
        english=record["translation"]["en"],
        simplified=record["chinese"],
        traditional=record["traditional"],
        words=_segmentation(record["chinese"], [t["word"] for t in record["tokens"]]),
        level=int(record["hsk_level"]),
        topic=record["topic"],
    )


def load_sentences(path: str | Path | None = None) -> list[SentencePair]:
    """The 4,274 sentence pairs of ``hsk-sentences-audio`` 1.0.0 that have an English
    translation, in the data's order (80 of its 4,354 sentences have the English
    ``"placeholder"`` or ``"placeholder-p1"``... instead: they are left out).

    ``path``: the data file to read (default: the installed package's); its SHA-256 must be
    :data:`DATA_SHA256`, or a ``ValueError`` names the package, its version and both hashes.
    """
    if path is None:
        return list(_load_installed())
    return _pairs(json.loads(_checked_bytes(check_path(path, "path"))))


@lru_cache(maxsize=1)
def _load_installed() -> tuple[SentencePair, ...]:
    return tuple(_pairs(json.loads(_checked_bytes(_data_path()))))


def _pairs(records: list[dict]) -> list[SentencePair]:
    """The records with a real English translation, as pairs."""
    translated = [r for r in records if not _PLACEHOLDER.match(r["translation"]["en"])]
    return [_pair(record) for record in translated]


_PLACEHOLDER = re.compile(r"\s*placeholder\b", re.IGNORECASE)


# ---------------------------------------------------------------------------------------------
# Splits: a fixed one for learning, one drawn from a secret for grading
# ---------------------------------------------------------------------------------------------


def _groups(pairs: Sequence[SentencePair]) -> list[list[SentencePair]]:
    """Pairs that share their English or their Chinese sentence, grouped (so that a split never
    has the same sentence on both sides), in the order of their first pair."""
    parent = list(range(len(pairs)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for i, pair in enumerate(pairs):
        for key in ("en:" + pair.english.strip().lower(), "zh:" + pair.simplified):
            if key in first:
                parent[root(i)] = root(first[key])
            else:
                first[key] = i
    groups: dict[int, list[SentencePair]] = {}
    for i, pair in enumerate(pairs):
        groups.setdefault(root(i), []).append(pair)
    return list(groups.values())


def _draw(pairs: Sequence[SentencePair], rng: random.Random, sizes: Sequence[int]):
    """Shuffle the groups of ``pairs`` with ``rng``; fill one part per size, the rest last."""
    groups = _groups(pairs)
    rng.shuffle(groups)
    parts: list[list[SentencePair]] = [[] for _ in range(len(sizes) + 1)]
    part = 0
    for group in groups:
        while part < len(sizes) and len(parts[part]) >= sizes[part]:
            part += 1
        parts[part] += group
    return parts


def _check_sizes(pairs: Sequence[SentencePair], **sizes: int) -> None:
    if not all(isinstance(p, SentencePair) for p in pairs):
        raise TypeError("pairs must be SentencePair records (from load_sentences)")
    for name, size in sizes.items():
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"{name} must be a positive int, got {size!r}")
    if sum(sizes.values()) >= len(pairs):
        raise ValueError(
            f"{' + '.join(sizes)} = {sum(sizes.values())} leaves no training pairs "
            f"of the {len(pairs)} given"
        )


def split_sentences(
    pairs: Sequence[SentencePair] | None = None, *, seed: int = 0, n_valid: int = 400,
    n_test: int = 400,
) -> SentenceSplits:
    """The course's fixed split: ``n_test`` test pairs, ``n_valid`` validation pairs and the
    rest for training, drawn with ``seed``. Pairs that share their English or their Chinese
    sentence stay on one side (a test sentence is never a training sentence); a part may
    exceed its size by the last group it takes (a few pairs)."""
    pairs = load_sentences() if pairs is None else list(pairs)
    _check_sizes(pairs, n_valid=n_valid, n_test=n_test)
    seed = check_seed(seed)
    test, valid, train = _draw(pairs, random.Random(seed), [n_test, n_valid])
    return SentenceSplits(train=train, valid=valid, test=test)


def secret_split(
    secret: str, pairs: Sequence[SentencePair] | None = None, *, n_test: int = 400
) -> tuple[list[SentencePair], list[SentencePair]]:
    """``(train, test)`` for grading: the ``n_test`` test pairs are drawn from the instructor's
    ``secret`` (the data are public, so a fixed test split could be trained on); ``train`` is
    every other pair. The same secret always gives the same split; without it, the test pairs
    cannot be told from the training pairs."""
    if not _check_text(secret, "secret"):
        raise ValueError("secret must be a non-empty string, got ''")
    pairs = load_sentences() if pairs is None else list(pairs)
    _check_sizes(pairs, n_test=n_test)
    digest = hashlib.sha256(f"{PACKAGE}=={PACKAGE_VERSION}\n{secret}".encode()).digest()
    test, train = _draw(pairs, random.Random(int.from_bytes(digest, "big")), [n_test])
    return train, test


# ---------------------------------------------------------------------------------------------
# Tokens and vocabularies
# ---------------------------------------------------------------------------------------------

_ENGLISH_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[^\sa-z0-9]")


def chinese_characters(text: str) -> list[str]:
    """One token per character (spaces dropped): ``"你好。" -> ["你", "好", "。"]``."""
    text = _check_text(text, "text")
    return [c for c in text if not c.isspace()]


def english_words(text: str) -> list[str]:
    """Lowercased words, each punctuation mark a token of its own:
    ``"Hello, I'm Li." -> ["hello", ",", "i'm", "li", "."]``."""
    text = _check_text(text, "text")
    return _ENGLISH_TOKEN.findall(text.lower().replace("\u2019", "'"))


class SentenceVocab(Vocab):
    """A :class:`~lectures_lib.data.Vocab` with ``<unk>`` (id 3): a token never seen in
    training is encoded as ``<unk>`` instead of raising (real test sentences hold new words)."""

    unk_id = UNK_ID

    def __init__(self, tokens: Iterable[str]) -> None:
        if isinstance(tokens, str) or not isinstance(tokens, Iterable):
            raise TypeError(f"tokens must be a list of token strings, got {tokens!r:.60}")
        super().__init__([UNK, *tokens])

    def encode(self, tokens, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        if isinstance(tokens, str):
            tokens = tokens.split()
        known = [t if t in self.token_to_id and t != UNK else UNK for t in tokens]
        return super().encode(known, add_bos=add_bos, add_eos=add_eos)


def build_vocab(token_lists: Iterable[Sequence[str]], min_count: int = 1) -> SentenceVocab:
    """The tokens that occur at least ``min_count`` times, most frequent first (ties in order of
    first appearance), after ``<pad>``, ``<bos>``, ``<eos>``, ``<unk>``."""
    min_count = check_positive_int(min_count, "min_count")
    token_lists = [_check_tokens(tokens, "token_lists[i]") for tokens in token_lists]
    counts = Counter(token for tokens in token_lists for token in tokens)
    return SentenceVocab(t for t, n in counts.most_common() if n >= min_count)


def pad_batch(rows: Sequence[Sequence[int]], width: int | None = None) -> torch.Tensor:
    """``(len(rows), width)`` int64 ids, each row followed by ``<pad>`` (0); default width: the
    longest row."""
    if not rows or not all(
        isinstance(r, (list, tuple)) and all(isinstance(i, int) for i in r) for r in rows
    ):
        raise TypeError(f"rows must be a non-empty list of lists of token ids, got {rows!r:.80}")
    longest = max(map(len, rows))
    width = longest if width is None else check_non_negative_int(width, "width")
    if width < longest:
        raise ValueError(f"width must be >= the longest row ({longest}), got {width}")
    return torch.tensor([list(r) + [PAD_ID] * (width - len(r)) for r in rows], dtype=torch.long)


# ---------------------------------------------------------------------------------------------
# Word segmentation as tagging
# ---------------------------------------------------------------------------------------------


def bmes_tags(words: Iterable[str]) -> list[str]:
    """One tag per character: ``S`` a one-character word, else ``B`` (begin), ``M`` (middle),
    ``E`` (end): ``["老师", "您", "好"] -> ["B", "E", "S", "S"]``."""
    tags = []
    for word in _check_tokens(words, "words"):
        tags += ["S"] if len(word) == 1 else ["B", *["M"] * (len(word) - 2), "E"]
    return tags


def words_from_tags(characters: Sequence[str], tags: Sequence[str]) -> list[str]:
    """The words that the tags cut ``characters`` into: a word ends after ``E`` or ``S`` and
    before ``B`` or ``S`` (so any tag sequence gives a segmentation, well-formed or not)."""
    characters, tags = _check_tokens(characters, "characters"), _check_tokens(tags, "tags")
    if len(characters) != len(tags):
        raise ValueError(f"one tag per character: {len(characters)} characters, {len(tags)} tags")
    if set(tags) - set(TAGS):
        raise ValueError(f"tags must be among {TAGS}, got {sorted(set(tags) - set(TAGS))}")
    words: list[str] = []
    for i, (character, tag) in enumerate(zip(characters, tags)):
        starts = i == 0 or tag in ("B", "S") or tags[i - 1] in ("E", "S")
        if starts:
            words.append(character)
        else:
            words[-1] += character
    return words


def max_match(text: str, lexicon: set[str] | frozenset[str], max_word: int | None = None) -> list[str]:
    """Forward maximum matching, the dictionary baseline of segmentation: from left to right,
    take the longest word of ``lexicon`` that starts here (one character if none does)."""
    text = _check_text(text, "text")
    if not isinstance(lexicon, (set, frozenset)):
        raise TypeError(f"lexicon must be a set of words, got {type(lexicon).__name__}")
    max_word = check_positive_int(max_word, "max_word") if max_word is not None else max(
        map(len, lexicon), default=1)
    words, start = [], 0
    while start < len(text):
        for length in range(min(max_word, len(text) - start), 0, -1):
            if length == 1 or text[start : start + length] in lexicon:
                words.append(text[start : start + length])
                start += length
                break
    return words


def _spans(words: Iterable[str]) -> set[tuple[int, int]]:
    spans, start = set(), 0
    for word in words:
        spans.add((start, start + len(word)))
        start += len(word)
    return spans


def segmentation_f1(predicted: Iterable[Sequence[str]], gold: Iterable[Sequence[str]]) -> float:
    """Word F1 over a corpus: a predicted word is right when the gold segmentation has a word
    at the same characters (precision = right / predicted words, recall = right / gold words)."""
    right = n_predicted = n_gold = 0
    predicted, gold = list(predicted), list(gold)
    if len(predicted) != len(gold):
        raise ValueError(f"one prediction per gold sentence: {len(predicted)} vs {len(gold)}")
    for p, g in zip(predicted, gold):
        p, g = _check_tokens(p, "predicted[i]"), _check_tokens(g, "gold[i]")
        if "".join(p) != "".join(g):
            raise ValueError(f"predicted and gold words cover different text: {p} vs {g}")
        p_spans, g_spans = _spans(p), _spans(g)
        right += len(p_spans & g_spans)
        n_predicted += len(p_spans)
        n_gold += len(g_spans)
    return 2 * right / (n_predicted + n_gold) if n_predicted + n_gold else 0.0

