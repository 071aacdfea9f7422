"""The Chinese notebooks are the English ones with translated prose: they cannot drift (issue 22).

* every translation file (``translations/zh-Hans/<stem>.md``) has one up-to-date block per
  English markdown cell: a new or changed English cell, an orphaned or misordered block fails,
  naming the cell (shown failing on a changed English cell, on a temporary copy);
* every generated notebook (``notebooks/zh-Hans/``, ``notebooks/zh-Hant/``) has the English
  notebook's cells in order, its code cells *verbatim*, and the markdown the translation file
  gives. So nbval need not run them: their code is the English code, which nbval runs
  (pyproject.toml keeps them out of its collection). Their stored outputs are their own run
  beside the English one (``make notebooks``), so the checkers' verdicts are in Chinese
  (issue 29);
* a translation keeps what must stay verbatim (math, code, URLs, solution markers, headings,
  ⚠️ boxes), and the exercise finder sees the same exercises and points in every language;
* Traditional Chinese is OpenCC's ``s2twp`` plus the course's term list, checked term by term;
  none of OpenCC's mis-readings (``zh_hant.ZH_HANT_WRONG``) is left in a generated notebook,
  README or message, and README.zh-TW's commands give the Traditional notebooks.
"""

import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from course_tools.publish.exercises import find_exercises
from course_tools.translation import own_runs, zh_hant
from course_tools.translation import translate as tr

TRANSLATED = tr.translated_notebooks()
IDS = [p.stem for p in TRANSLATED]


def _english(path: Path):
    return nbformat.read(path, as_version=4)


def _blocks(path: Path):
    return tr.parse_translation(tr.translation_path(path).read_text(encoding="utf-8"))


def test_some_notebooks_are_translated_and_the_rest_are_listed():
    assert TRANSLATED, "no translations/zh-Hans/*.md file"
    english = tr.english_notebooks()
    assert set(TRANSLATED) | set(tr.untranslated_notebooks()) == set(english)
    assert not set(TRANSLATED) & set(tr.untranslated_notebooks())
    for language in tr.LANGUAGES:  # generated exactly for the notebooks that have a translation
        stored = sorted(p.name for p in (tr.NOTEBOOKS / language).glob("*.ipynb"))
        assert stored == [p.name for p in TRANSLATED], (language, stored)


@pytest.mark.parametrize("path", TRANSLATED, ids=IDS)
def test_translation_is_in_step_with_the_english_notebook(path):
    found = tr.problems(_english(path), _blocks(path), tr.translation_path(path).name)
    assert not found, "translation out of step (update it in the same commit):\n" + "\n".join(found)


@pytest.mark.parametrize("language", tr.LANGUAGES)
@pytest.mark.parametrize("path", TRANSLATED, ids=IDS)
def test_generated_notebook_is_the_english_code_and_the_translated_prose(path, language):
    generated = tr.output_path(path, language)
    assert generated.is_file(), f"{generated} missing: python -m course_tools.translation.translate generate"
    translated = nbformat.read(generated, as_version=4)
    found = tr.compare_generated(_english(path), translated, path.name)
    assert not found, "\n".join(found)
    assert translated.metadata["translation"]["language"] == language
    english = {c.id: c for c in tr.markdown_cells(_english(path))}
    for cell in tr.markdown_cells(translated):
        record = cell.metadata["translation"]
        assert record["en_id"] == cell.id
        assert record["en_sha256"] == tr.text_hash(tr.source_of(english[cell.id]))
        assert not record.get("missing"), f"cell {cell.id} has no translation"


@pytest.mark.parametrize("path", TRANSLATED, ids=IDS)
def test_translation_keeps_math_code_links_and_markers_verbatim(path):
    english = {c.id: tr.source_of(c) for c in tr.markdown_cells(_english(path))}
    found = [f"block {b.cell_id} (line {b.line}): {problem}" for b in _blocks(path)
             if b.cell_id in english for problem in tr.verbatim_problems(english[b.cell_id], b.text)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("language", tr.LANGUAGES)
@pytest.mark.parametrize("path", TRANSLATED, ids=IDS)
def test_exercises_are_found_alike_in_every_language(path, language):
    """The graders (release, nbgrader metadata) see the same exercises in the Chinese notebook."""
    translated = nbformat.read(tr.output_path(path, language), as_version=4)
    ours, theirs = find_exercises(translated), find_exercises(_english(path))
    assert [(e.number, e.points, e.header, e.solutions, e.tests, e.answers) for e in ours] == [
        (e.number, e.points, e.header, e.solutions, e.tests, e.answers) for e in theirs]


def test_chinese_prose_uses_chinese_punctuation():
    """Spot check on a few cells: translated sentences end with 。, not '.'."""
    for path in TRANSLATED:
        text = tr.translation_path(path).read_text(encoding="utf-8")
        assert "。" in text and "，" in text, path


# --- the sync check fails when it should: on temporary copies ------------------------------

@pytest.fixture()
def copy_course(tmp_path):
    """A temporary course: the first translated notebook, its translation, nothing else."""
    path = TRANSLATED[0]
    notebooks, translations = tmp_path / "notebooks", tmp_path / "translations"
    (translations / tr.SOURCE_LANGUAGE).mkdir(parents=True)
    notebooks.mkdir()
    shutil.copy(path, notebooks / path.name)
    shutil.copy(tr.translation_path(path), translations / tr.SOURCE_LANGUAGE / f"{path.stem}.md")
    return notebooks / path.name, translations


def _edit_json(path: Path, change):
    nb = json.loads(path.read_text(encoding="utf-8"))
    change(nb)
    path.write_text(json.dumps(nb, ensure_ascii=False, indent=1), encoding="utf-8")


def _first_markdown(nb):
    return next(c for c in nb["cells"] if c["cell_type"] == "markdown" and c["id"] != "")


def test_a_changed_english_cell_fails_naming_it(copy_course):
    notebook, translations = copy_course
    changed = {}

    def change(nb):
        cell = [c for c in nb["cells"] if c["cell_type"] == "markdown"][3]
        cell["source"] = "".join(cell["source"]) + "\nOne more English sentence."
        changed["id"] = cell["id"]

    assert not tr.status(notebook.parent, translations)[0]
    _edit_json(notebook, change)
    found, _ = tr.status(notebook.parent, translations)
    assert len(found) == 1 and "stale block" in found[0] and changed["id"] in found[0], found
    # the generated notebook records the old hash, so the generated-notebook check names it too
    tr.generate(notebook, translations=translations)
    generated = nbformat.read(tr.output_path(notebook, tr.SOURCE_LANGUAGE), as_version=4)
    cell = next(c for c in generated.cells if c.id == changed["id"])
    record = cell.metadata["translation"]
    assert record["translated_sha256"] != record["en_sha256"]


def test_a_new_english_cell_is_missing_and_a_deleted_one_orphans_its_block(copy_course):
    notebook, translations = copy_course
    gone = {}

    def change(nb):
        cells = [c for c in nb["cells"] if c["cell_type"] == "markdown"]
        gone["id"] = cells[-1]["id"]
        nb["cells"].remove(cells[-1])
        nb["cells"].append({"cell_type": "markdown", "id": "newcell1", "metadata": {},
                            "source": "## A new section"})

    _edit_json(notebook, change)
    found, _ = tr.status(notebook.parent, translations)
    assert any("missing block for cell newcell1" in line for line in found), found
    assert any(f"orphaned block for cell {gone['id']}" in line for line in found), found
    skeleton = tr.skeleton(_english(notebook), tr.parse_translation(
        (translations / tr.SOURCE_LANGUAGE / f"{notebook.stem}.md").read_text(encoding="utf-8")))
    blocks = tr.parse_translation(skeleton)
    todo = [b.cell_id for b in blocks if tr.untranslated(b.text)]
    assert todo == ["newcell1"], todo  # --update keeps the up-to-date blocks, marks the new one


def test_code_or_outputs_changed_in_a_generated_notebook_fail(copy_course):
    notebook, translations = copy_course
    tr.generate(notebook, translations=translations)
    english = _english(notebook)
    generated = tr.output_path(notebook, tr.SOURCE_LANGUAGE)
    assert not tr.compare_generated(english, nbformat.read(generated, as_version=4),
                                    notebook.name, translations, notebook.parent, own_run=False)
    translated = nbformat.read(generated, as_version=4)
    code = [c for c in translated.cells if c.cell_type == "code"]
    code[0].source += "\nprint('translated code')"
    with_output = next(c for c in code if c.outputs)
    with_output.outputs = []
    translated.cells[0].source += " 手改"
    found = tr.compare_generated(english, translated, notebook.name, translations, notebook.parent,
                                 own_run=False)
    assert any(code[0].id in line and "source" in line for line in found), found
    assert any(with_output.id in line and "outputs" in line for line in found), found
    assert any(translated.cells[0].id in line and "markdown" in line for line in found), found


def test_blocks_out_of_order_and_text_before_the_first_header_fail():
    nb = _english(TRANSLATED[0])
    blocks = _blocks(TRANSLATED[0])
    swapped = [blocks[1], blocks[0], *blocks[2:]]
    assert any("out of order" in line for line in tr.problems(nb, swapped))
    with pytest.raises(ValueError, match="must start with a block header"):
        tr.parse_translation("stray text\n" + tr.header(tr.markdown_cells(nb)[0]) + "\n译文\n")
    duplicate = [*blocks, blocks[0]]
    assert any("duplicate block" in line for line in tr.problems(nb, duplicate))


def test_a_skeleton_block_is_not_a_translation():
    nb = _english(TRANSLATED[0])
    blocks = tr.parse_translation(tr.skeleton(nb))
    assert [b.cell_id for b in blocks] == [c.id for c in tr.markdown_cells(nb)]
    assert all(b.sha256 == tr.text_hash(tr.source_of(c))
               for b, c in zip(blocks, tr.markdown_cells(nb), strict=True))
    found = tr.problems(nb, blocks)
    assert len(found) == len(blocks) and all("untranslated block" in line for line in found)


def test_verbatim_check_catches_a_changed_formula_and_a_lost_marker():
    english = "Score $q \\cdot k$ with `attention_scores`.\n\n### BEGIN SOLUTION\nx\n### END SOLUTION"
    good = "用 `attention_scores` 计算分数 $q \\cdot k$。\n\n### BEGIN SOLUTION\nx\n### END SOLUTION"
    assert tr.verbatim_problems(english, good) == []
    assert tr.verbatim_problems(english, good.replace("\\cdot", "\\times"))
    assert tr.verbatim_problems(english, good.replace("### END SOLUTION", "### 结束"))
    assert tr.verbatim_problems(english, good.replace("`attention_scores`", "attention_scores"))
    # repeating a formula, translating the words inside \text{...}: fine
    assert tr.verbatim_problems("$x_\\text{pos}$ and $q$", "$x_\\text{位置}$ 和 $q$，$q$") == []
    assert tr.verbatim_problems("$\\mathrm{ReLU}$", "$\\mathrm{GELU}$")


def test_links_resolve_from_the_language_folder(tmp_path):
    notebooks, translations = tmp_path / "notebooks", tmp_path / "translations"
    (translations / "zh-Hans").mkdir(parents=True)
    (translations / "zh-Hans" / "02_b.md").write_text("", encoding="utf-8")
    text = ("[README](../README.md) [02](02_b.ipynb#top) [03](03_c.ipynb) [web](https://x.org) "
            "[here](#anchor) <img src=\"figures/a.png\"> ![a](attachment:a.png)")
    out = tr.rewrite_links(text, "zh-Hant", notebooks, translations)
    assert out == ("[README](../../README.zh-TW.md) [02](02_b.ipynb#top) [03](../03_c.ipynb) "
                   "[web](https://x.org) [here](#anchor) <img src=\"../figures/a.png\"> "
                   "![a](attachment:a.png)")


@pytest.mark.parametrize(("simplified", "traditional"), sorted(tr.ZH_HANT_EXPECTED.items()))
def test_traditional_chinese_keeps_the_course_terms(simplified, traditional):
    assert tr.to_hant(simplified) == traditional


def test_traditional_chinese_leaves_math_and_code_alone():
    text = "掩码 `mask=None` 与 $\\operatorname{softmax}(QK^\\top)$，见 <https://arxiv.org/abs/1706.03762>"
    out = tr.to_hant(text)
    assert out.startswith("遮罩") and tr.verbatim_problems(text, out) == []


def test_the_chinese_readmes_list_the_notebooks_as_they_are():
    """README.zh-CN.md's table links the translated notebooks and names the untranslated ones;
    README.zh-TW.md is its OpenCC conversion (python -m course_tools.translation.translate generate)."""
    readme = (tr.ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    hans, hant = tr.readme_texts(readme)
    assert readme == hans, "README.zh-CN.md's notebook table is stale: regenerate"
    assert (tr.ROOT / "README.zh-TW.md").read_text(encoding="utf-8") == hant
    for path in TRANSLATED:
        assert f"(notebooks/zh-Hans/{path.name})" in readme and f"(notebooks/zh-Hant/{path.name})" in hant
    for path in tr.untranslated_notebooks():
        assert f"尚未翻译，[英文版](notebooks/{path.name})" in readme
    assert "make lab-student LANG=zh-CN" in readme and "PIP_INDEX_URL=" in readme
    assert "TORCH_INDEX=" in readme and "jupyterlab-language-pack-zh-CN" in readme
    assert "[简体中文](README.zh-CN.md)" in hant and "README.zh-CN.md" in (
        tr.ROOT / "README.md").read_text(encoding="utf-8")


# --- issue 29: the Chinese notebooks store their own run ---------------------------------------

_VERDICTS = {"zh-Hans": ("通过", "未通过"), "zh-Hant": ("通過", "未通過")}


def _printed(cell) -> str:
    return "".join(o.get("text", "") + "".join(o.get("data", {}).get("text/plain", ""))
                   for o in cell.get("outputs", []))


@pytest.mark.parametrize("language", tr.LANGUAGES)
@pytest.mark.parametrize("path", TRANSLATED, ids=IDS)
def test_a_chinese_notebook_stores_its_own_run_with_chinese_verdicts(path, language):
    translated = nbformat.read(tr.output_path(path, language), as_version=4)
    found = own_runs.output_problems(_english(path), translated)
    assert not found, "\n".join(found)
    results = [line for cell in translated.cells if cell.cell_type == "code"
               for line in _printed(cell).splitlines() if re.match(r"\[(PASSED|FAILED)\] ", line)]
    for line in results:  # every stored checker result speaks the notebook's language
        assert any(f": {word}。" in line for word in _VERDICTS[language]), line


def test_regenerating_keeps_a_notebook_s_own_run_until_the_english_run_changes(copy_course):
    notebook, translations = copy_course
    tr.generate(notebook, translations=translations)
    path = tr.output_path(notebook, tr.SOURCE_LANGUAGE)
    english = _english(notebook)
    assert own_runs.output_problems(english, nbformat.read(path, as_version=4))  # not run yet
    ran = nbformat.read(path, as_version=4)  # stands for its run: a stored output in Chinese
    cell = next(c for c in ran.cells if c.cell_type == "code" and c.outputs
                and c.outputs[0].get("output_type") == "stream")
    cell.outputs[0]["text"] = "[PASSED] x: 通过。\n"
    nbformat.write(ran, path)
    own_runs.mark_own_run(path, notebook)
    tr.generate(notebook, translations=translations)  # the translation regenerated: run kept
    kept = nbformat.read(path, as_version=4)
    assert _printed(kept.cells[ran.cells.index(cell)]) == "[PASSED] x: 通过。\n"
    assert not tr.compare_generated(english, kept, notebook.name, translations, notebook.parent)
    _edit_json(notebook, lambda nb: next(c for c in nb["cells"] if c["cell_type"] == "code"
                                         ).__setitem__("outputs", []))  # the English ran anew
    tr.generate(notebook, translations=translations)
    dropped = nbformat.read(path, as_version=4)
    found = tr.compare_generated(_english(notebook), dropped, notebook.name, translations,
                                 notebook.parent)
    assert any("not its own run" in line for line in found), found
    assert _printed(dropped.cells[ran.cells.index(cell)]) != "[PASSED] x: 通过。\n"


# --- issue 29: Taiwan usage -------------------------------------------------------------------

def _hant_texts() -> dict[str, str]:
    texts = {}
    for path in TRANSLATED:
        nb = nbformat.read(tr.output_path(path, "zh-Hant"), as_version=4)
        texts[f"zh-Hant/{path.name}"] = "\n".join(tr.source_of(c) for c in tr.markdown_cells(nb))
    texts["README.zh-TW.md"] = (tr.ROOT / "README.zh-TW.md").read_text(encoding="utf-8")
    texts["checks/_messages_zh_hant.py"] = zh_hant.MESSAGES_ZH_HANT.read_text(encoding="utf-8")
    return texts


def _hant_code(path: Path) -> str:
    """The Chinese of a zh-Hant notebook's code cells (plot titles, comments), one run a line."""
    nb = nbformat.read(tr.output_path(path, "zh-Hant"), as_version=4)
    return "\n".join(run for cell in nb.cells if cell.cell_type == "code"
                     for run in tr.chinese_runs(tr.source_of(cell)))


@pytest.mark.parametrize("path", TRANSLATED, ids=IDS)
def test_traditional_code_cells_speak_taiwanese(path):
    """A zh-Hant code cell's strings and comments (issue 40: plot titles showed 聚类, 哈希,
    矩阵乘法的顺序) hold no Simplified character and no mainland word of ZH_HANT_WRONG."""
    text = _hant_code(path)
    found = zh_hant.simplified_characters(text) + tr.wrong_forms(text)
    assert not found, f"zh-Hant/{path.name}'s code cells:\n" + "\n".join(found)


def test_the_code_check_fails_on_simplified_and_mainland_strings():
    english = "\n".join(run for path in TRANSLATED for cell in _english(path).cells
                        if cell.cell_type == "code" for run in tr.chinese_runs(tr.source_of(cell)))
    assert zh_hant.simplified_characters(english), "the English code cells hold Simplified terms"
    assert zh_hant.simplified_characters("title=\"LSH (哈希) and k-means (聚类)\"")
    assert tr.wrong_forms(tr.code_to_hant("# 在一个新进程里测，并行训练"))  == [] and tr.wrong_forms(
        "# 在一個新程序裡測，並行訓練")
    converted = tr.code_to_hant('ax.set(title="LSH (哈希) and k-means (聚类) masks")  # 机 器 学 习')
    assert converted == 'ax.set(title="LSH (雜湊) and k-means (聚類) masks")  # 機 器 學 習'


def test_no_mis_conversion_is_left_in_the_traditional_texts():
    found = [f"{name}: {problem}" for name, text in _hant_texts().items()
             for problem in tr.wrong_forms(text)]
    assert not found, "\n".join(found)


# Simplified text that s2twp alone gets wrong, for each form of ZH_HANT_WRONG: the check finds it
# (in OpenCC's output) and the course's conversion repairs it, or the glossary avoids the
# Simplified word that invites it (对象, 钟表的指针, 数位, 支持…的理由, 串行: written otherwise).
_INVITING = {
    "字首": "累积（前缀）和", "運算元": "融合算子", "登錄檔": "注册表", "啟用": "激活值",
    "多工": "很多任务", "隻": "是只重写了一步的", "(?<![公鄰])里(?!程)": "副本里", "擴充套件": "两个扩展",
    "係統": "你系统的", "映象": "镜像", "打印|列印": "见打印的步数", "單元格": "下一个单元格",
    "物件": "比较的对象", "鐘錶的指標": "钟表的指针", "數位": "它的数位", "支援[^。，；]{0,12}的理由":
    "支持 Pre-LN 的理由", "序列步數|是序列的|RNN：序列": "RNN 是串行的", "方差": "方差",
    "矩母": "矩母函数", "實現": "实现", "軟體包": "软件包", "大數據": "大数据集",
    "窗口": "一个窗口里的帧",
    # issue 40: mainland words s2twp leaves in place
    "歸一化": "层归一化", "獨熱": "独热编码", "並行": "并行训练", "報錯": "程序不会报错",
    "程序": "在一个新进程里测", "運行": "批次上运行同一个", "打分": "给查询和键打分",
    "異常": "抛出了异常",
}
_AT_THE_SOURCE = {"物件", "鐘錶的指標", "數位", "支援[^。，；]{0,12}的理由", "序列步數|是序列的|RNN：序列"}


@pytest.mark.parametrize("pattern", sorted(zh_hant.ZH_HANT_WRONG))
def test_each_mis_conversion_is_found_and_repaired(pattern):
    simplified = _INVITING[pattern]
    assert re.search(pattern, zh_hant._converter().convert(simplified)), "the check can fail"
    if pattern in _AT_THE_SOURCE:
        assert not any(simplified in text for text in
                       (tr.translation_path(p).read_text("utf-8") for p in TRANSLATED)), simplified
    else:
        assert not tr.wrong_forms(tr.to_hant(simplified)), tr.to_hant(simplified)


def test_readme_zh_tw_gives_the_traditional_notebooks():
    hant = (tr.ROOT / "README.zh-TW.md").read_text(encoding="utf-8")
    commands = "\n".join(re.findall(r"```bash\n(.*?)```", hant, re.DOTALL))
    # the class list names each student's language (a class of en, zh-CN and zh-TW): data, not
    # the reader's own commands
    commands = "\n".join(line for line in commands.splitlines()
                         if not line.startswith("printf 'username,language"))
    assert "make lab-student LANG=zh-TW TORCH=cpu" in commands
    assert "--lang zh-TW" in commands
    assert not re.search(r"zh-CN|zh-Hans", commands), commands
    assert "student/zh-Hant/" in hant and "pypi.tuna" not in hant
    for wrong in ("你係統", "副本里", "映象"):
        assert wrong not in hant
    hans = (tr.ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    for needed in ("Python ≥ 3.11", "从不覆盖", "删掉 `student/zh-Hans/NN_….ipynb`", "## 常见问题",
                   "nvidia-", "端口", "PyTorch CPU 版的镜像"):
        assert needed in hans, needed
