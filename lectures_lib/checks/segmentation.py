"""Checker for the code exercise of section 08: from B/M/E/S tags back to words.

Used in ``08_real_sentences.ipynb``. The student writes ``my_words_from_tags(characters, tags)``:
one tag per character (``B`` begins a word, ``M`` is inside one, ``E`` ends it, ``S`` is a
one-character word) -> the list of words. The reference is
:func:`lectures_lib.data.sentences.words_from_tags` on well-formed tags (those of
:func:`~lectures_lib.data.sentences.bmes_tags`).
"""

from __future__ import annotations

from ..data.sentences import bmes_tags, words_from_tags
from ._base import Mistake, call, checker

__all__ = ["check_words_from_tags"]

# Probes: short and long words, punctuation, single characters only, a 7-character word, one
# word; the hidden ones other words and lengths the student never saw.
_CASES = (["老师", "您", "好"], ["我", "下午", "去", "理发", "。"], ["打印机"], ["他", "来", "了"],
          ["中华人民共和国", "成立", "了"])
_HIDDEN_CASES = (["图书馆", "里", "有", "很多", "书", "。"], ["自行车"], ["一", "二"],
                 ["可持续发展", "很", "重要"])


@checker("words_from_tags")
def check_words_from_tags(student_fn, hidden: bool = False) -> str:
    """Check ``student_fn(characters, tags) -> list of words`` against :func:`words_from_tags`
    on the tags of known words (``hidden=True`` adds words the student never saw).

    Mistake codes: ``not_implemented``, ``raised``, ``wrong_return_type``,
    ``returned_characters``, ``single_not_a_word``, ``wrong_words``.
    """
    for words in _CASES + (_HIDDEN_CASES if hidden else ()):
        characters, tags = list("".join(words)), bmes_tags(words)
        expected = words_from_tags(characters, tags)
        got = call(student_fn, list(characters), list(tags))
        if not isinstance(got, (list, tuple)) or not all(isinstance(w, str) for w in got):
            raise Mistake("wrong_return_type", f"my_words_from_tags must return a list of words "
                          f"(strings), got {type(got).__name__}: {got!r:.80}")
        got = list(got)
        if got == expected:
            continue
        if got == characters and expected != characters:
            raise Mistake("returned_characters", f"for tags {tags} you returned the characters "
                          f"{got}: join the characters of each word (a word ends after E or S).")
        if "".join(got) == "".join(expected) and len(got) < len(expected) and "S" in tags:
            raise Mistake("single_not_a_word", f"for tags {tags} you returned {got}: an S "
                          f"character is a word by itself (it ends the word it begins).")
        raise Mistake("wrong_words", f"for characters {characters} and tags {tags} expected "
                      f"{expected}, got {got}.")
    return "every tag sequence gives back its words, as the reference."
