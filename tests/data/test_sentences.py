"""Tests of section 08's real sentences, ``lectures_lib.data.sentences``: the checked loading (a
tampered or missing file, a missing or other version of the package), the splits (disjoint,
deterministic, the secret one unguessable without its secret), the tokenisers, the vocabularies
the course's models read, and segmentation as tagging, each against its definition."""

from importlib import metadata

import pytest
import torch

from lectures_lib.data import sentences as S
from lectures_lib.decoding import greedy_decode
from lectures_lib.models import Transformer


@pytest.fixture(scope="module")
def pairs():
    return S.load_sentences()


@pytest.fixture(scope="module")
def splits(pairs):
    return S.split_sentences(pairs)


def test_every_pair_is_complete_and_translated(pairs):
    assert len(pairs) == len({p.id for p in pairs}) == 4274
    for p in pairs:
        assert "".join(p.words) == p.simplified, p  # the words cover every character
        assert len(p.traditional) == len(p.simplified)
        assert "".join(p.words_in("traditional")) == p.traditional
        assert 1 <= p.level <= 6 and p.topic and p.english.strip()
        assert "placeholder" not in p.english.lower()


def test_attribution_names_the_licence_the_package_declares():
    import hsk_sentences_audio

    assert hsk_sentences_audio.DATASET_LICENSE == "CC-BY-SA-4.0"
    assert "CC BY-SA 4.0" in S.ATTRIBUTION
    assert f"{S.PACKAGE} {S.PACKAGE_VERSION}" in S.ATTRIBUTION
    assert metadata.version(S.PACKAGE) == S.PACKAGE_VERSION


def test_an_unchanged_copy_loads_the_same_pairs(tmp_path, pairs):
    copy = tmp_path / "sentences.json"
    copy.write_bytes(S._data_path().read_bytes())
    assert S.load_sentences(copy) == pairs


def test_a_tampered_copy_is_refused_with_both_hashes(tmp_path):
    raw = bytearray(S._data_path().read_bytes())
    raw[raw.index("老师".encode())] ^= 1  # one bit of one character
    copy = tmp_path / "sentences.json"
    copy.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"hsk-sentences-audio==1\.0\.0") as error:
        S.load_sentences(copy)
    assert S.DATA_SHA256 in str(error.value) and "SHA-256" in str(error.value)


def test_a_missing_file_names_the_package(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"hsk-sentences-audio==1\.0\.0"):
        S.load_sentences(tmp_path / "absent.json")


def test_a_missing_or_other_package_is_named(monkeypatch):
    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(S.metadata, "version", absent)
    with pytest.raises(ModuleNotFoundError, match=r"pip install hsk-sentences-audio==1\.0\.0"):
        S._data_path()
    monkeypatch.setattr(S.metadata, "version", lambda name: "1.0.1")
    with pytest.raises(ValueError, match=r"1\.0\.1 is installed"):
        S._data_path()


def _sentences(part):
    return {p.english.strip().lower() for p in part} | {p.simplified for p in part}


def test_the_fixed_split_is_disjoint_complete_and_repeatable(pairs, splits):
    parts = (splits.train, splits.valid, splits.test)
    assert sorted(p.id for part in parts for p in part) == sorted(p.id for p in pairs)
    assert len(splits.test) >= 400 and len(splits.valid) >= 400
    assert len(splits.test) + len(splits.valid) < 400 + 400 + 10  # a group overshoots by little
    # no English or Chinese sentence on two sides of the split
    assert not _sentences(splits.test) & _sentences(splits.train)
    assert not _sentences(splits.valid) & _sentences(splits.train)
    assert S.split_sentences(pairs) == splits
    assert S.split_sentences(pairs, seed=1).test != splits.test


def test_the_secret_split_depends_on_the_secret_only(pairs, splits):
    train, test = S.secret_split("instructor's secret", pairs)
    assert S.secret_split("instructor's secret", pairs) == (train, test)
    assert sorted(p.id for p in train + test) == sorted(p.id for p in pairs)
    assert not _sentences(test) & _sentences(train)
    other = S.secret_split("another secret", pairs)[1]
    shared = {p.id for p in test} & {p.id for p in other}
    assert len(shared) < len(test) / 4  # about 400 * 400 / 4274 = 37 by chance
    assert len({p.id for p in test} & {p.id for p in splits.test}) < len(test) / 4


def test_tokenisers():
    assert S.chinese_characters("你好， 老师。") == ["你", "好", "，", "老", "师", "。"]
    assert S.english_words("Hello, I'm Li. Don’t go!") == [
        "hello", ",", "i'm", "li", ".", "don't", "go", "!"]


def test_english_words_lose_only_spaces_and_case(pairs):
    for p in pairs:
        text = p.english.lower().replace("\u2019", "'")
        assert "".join(S.english_words(p.english)) == "".join(text.split()), p.english


def test_vocab_has_the_models_special_ids_and_an_unknown_token():
    vocab = S.build_vocab([["a", "b", "b"], ["c"]], min_count=1)
    assert vocab.id_to_token[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert (vocab.pad_id, vocab.bos_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2, 3)
    assert vocab.id_to_token[4] == "b"  # most frequent first
    assert vocab.encode(["b", "zzz", "<unk>"], add_bos=True, add_eos=True) == [1, 4, 3, 3, 2]
    assert "a" not in S.build_vocab([["a", "b", "b"]], min_count=2)


def test_a_transformer_reads_and_writes_the_vocabularies(splits):
    src_vocab = S.build_vocab(S.english_words(p.english) for p in splits.train[:50])
    tgt_vocab = S.build_vocab(S.chinese_characters(p.simplified) for p in splits.train[:50])
    src = S.pad_batch([src_vocab.encode(S.english_words(p.english)) for p in splits.test[:3]])
    assert src.shape[0] == 3 and src.dtype == torch.long  # (batch, longest source)
    torch.manual_seed(0)
    model = Transformer(len(src_vocab), len(tgt_vocab), d_model=16, num_heads=2, d_ff=32)
    out = greedy_decode(model, src, 5, tgt_vocab.bos_id, tgt_vocab.eos_id, tgt_vocab.pad_id)
    assert all(isinstance(t, str) for row in out for t in tgt_vocab.decode(row))


def test_bmes_tags_round_trip_on_every_sentence(pairs):
    assert S.bmes_tags(["老师", "您", "好", "图书馆"]) == ["B", "E", "S", "S", "B", "M", "E"]
    for p in pairs:
        tags = S.bmes_tags(p.words)
        assert len(tags) == len(p.simplified)
        assert S.words_from_tags(list(p.simplified), tags) == list(p.words)


def test_any_tags_give_a_segmentation_of_the_text():
    chars = list("我们是学生")
    for tags in (["M"] * 5, ["E", "B", "B", "M", "S"], ["S", "M", "E", "B", "M"]):
        assert "".join(S.words_from_tags(chars, tags)) == "我们是学生"
    assert S.words_from_tags(chars, ["B", "E", "S", "B", "E"]) == ["我们", "是", "学生"]


def test_max_match_takes_the_longest_word_first():
    lexicon = {"研究", "研究生", "生命", "起源"}
    # the classic failure of greedy matching: 研究/生命/的/起源 is right
    assert S.max_match("研究生命的起源", lexicon) == ["研究生", "命", "的", "起源"]
    assert S.max_match("", lexicon) == []


def test_segmentation_f1_counts_words_at_the_same_characters():
    gold = [["老师", "您", "好"]]
    assert S.segmentation_f1(gold, gold) == 1.0
    # predicted 老/师/您/好: 2 right of 4 predicted and of 3 gold words
    assert S.segmentation_f1([["老", "师", "您", "好"]], gold) == pytest.approx(2 * 2 / 7)
