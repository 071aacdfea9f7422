"""Traditional Chinese (Taiwan usage) from the Simplified text: OpenCC ``s2twp`` + the course's terms.

:func:`to_hant` converts prose (the translated notebooks, the README, the checkers' catalogue).
OpenCC converts words, not meanings: ``s2twp`` reads 前缀 as a morphological prefix (字首), 注册表
as the Windows Registry (登錄檔), 激活 as "enable" (啟用), 很多任务 as 很 + 多任务 (multitasking)...
Where the Simplified text itself invites the wrong reading (查找 becomes 查詢, the course's word for
*query*; 串行 becomes 序列), the translation is written differently (``translations/glossary.md``
lists those words as ones to avoid). Where it does not, :data:`ZH_HANT_TERMS` repairs OpenCC's
output. :data:`ZH_HANT_WRONG` lists what must never appear in a generated Traditional text; the
tests check it on every generated notebook, README and message.

:func:`for_taiwan` turns the Simplified README's commands into Taiwan's (``LANG=zh-TW``,
``student/zh-Hant/``) before the conversion. This module imports nothing of the course's tooling,
so :mod:`~course_tools.translation.translate` can import it.
"""

from __future__ import annotations

import re
from functools import lru_cache

from course_tools import ROOT

OPENCC_CONFIG = "s2twp"  # Simplified -> Traditional (Taiwan standard), with Taiwan phrases

# What OpenCC's s2twp writes for a course term (left), and what a Taiwanese text on deep learning
# writes (right). Applied after the conversion in one pass, the longest match first (so an entry
# never rewrites another's result); tests/tooling/test_translations.py checks every entry of
# ZH_HANT_EXPECTED on the real converter.
ZH_HANT_TERMS = {
    "殘差連線": "殘差連接",  # residual connection: 连接 is not a network "connection" (連線) here
    "全連線": "全連接",  # fully connected
    "連線": "連接",
    "迴圈神經網路": "循環神經網路",  # RNN (a code loop stays 迴圈)
    "區域性注意力": "局部注意力",  # local attention
    "區域性": "局部",
    "全域性注意力": "全域注意力",  # global attention
    "全域性": "全域",
    "掩碼": "遮罩",  # mask
    "啟用函式啟用": "激勵函數激勵",  # the notes' 激活函数激活 (activation function, applied)
    "啟用函式": "激勵函數",  # activation function (Taiwan: 激勵函數, not the mainland 激活函數)
    "啟用值": "激勵值",  # activations (s2twp: 啟用 = "enable")
    "啟用": "激勵",  # the course never means "enable"
    # issue 40: mainland words s2twp leaves as they are, in Taiwan's usage (one word per idea)
    "歸一化": "正規化",  # normalise; layer / batch normalization: 層正規化 / 批正規化
    "獨熱編碼（one-hot）": "one-hot 編碼", "獨熱向量（one-hot）": "one-hot 向量",
    "獨熱編碼": "one-hot 編碼", "獨熱": "one-hot",  # one-hot (spaced from CJK: _SPACED)
    "並行": "平行",  # parallel (training, decoding)
    "清楚的報錯": "清楚的錯誤訊息", "報錯": "丟出錯誤",  # raise an error
    "程序": "行程",  # s2twp's word for 进程 (an OS process); 程序 (a program) becomes 程式
    "運行": "執行",  # run
    "打分": "評分",  # score (a pair of tokens)
    "丟擲": "拋出", "異常": "例外",  # raise an exception
    "矩母函式": "動差生成函數",  # moment-generating function
    "函式": "函數",  # the softmax function etc. are mathematical functions
    "引數": "參數",  # learned parameters (s2twp takes 参数 for a program's argument)
    "語音識別": "語音辨識",  # speech recognition
    "畫素": "像素",  # pixel
    "字首": "前綴",  # prefix (of a sequence), prefix sum; 字首 is a word's prefix
    "運算元": "運算子",  # s2twp's 算子 is an operand
    "登錄檔": "註冊表",  # a registry of variants, not the Windows Registry
    "多工": "多任務",  # 很多任务 read as 很 + 多任务 (multitasking)
    "隻": "只",  # 是只重写 read as a measure word; the course counts no animals
    "擴充套件": "擴展",  # extension
    "映象": "鏡像",  # a mirror (of PyPI), not a disk image
    "係統": "系統",
    "打印出": "印出", "列印出": "印出", "打印": "印出", "列印": "印出",  # print (to output)
    "單元格": "儲存格",  # a notebook cell (JupyterLab's and Colab's Taiwanese interface)
    "方差": "變異數",  # variance
    "K 均值": "K 平均",  # k-means
    "平均值": "平均值", "均值": "平均值",  # mean (平均值 itself left alone)
    "實現": "實作",  # an implementation (the catalogue's own UNKNOWN line)
    "軟體包": "套件",  # a (Python) package
    "返回": "傳回",  # a function returns
    "大數據集": "大資料集",
    "幻燈片": "投影片",  # slides
    "窗口": "視窗",  # window (s2twp leaves 窗口里 as it is)
    "筆記本里": "筆記本裡",  # s2twp reads 本里 as a place name
    "“": "「", "”": "」", "‘": "『", "’": "』",  # Taiwan's quotation marks
}

# Terms checked on the converter itself (Simplified -> expected Traditional, Taiwan usage): what
# s2twp already does right stays checked too, so an OpenCC update cannot silently change it.
ZH_HANT_EXPECTED = {
    "注意力": "注意力", "自注意力": "自注意力", "多头注意力": "多頭注意力",
    "交叉注意力": "交叉注意力", "位置编码": "位置編碼", "残差连接": "殘差連接",
    "层归一化": "層正規化", "编码器": "編碼器", "解码器": "解碼器", "解码": "解碼",
    "查询": "查詢", "键": "鍵", "值": "值", "矩阵": "矩陣", "向量": "向量", "张量": "張量",
    "掩码": "遮罩", "因果掩码": "因果遮罩", "全连接网络": "全連接網路", "参数": "參數",
    "循环神经网络": "循環神經網路", "for 循环": "for 迴圈", "卷积神经网络": "卷積神經網路",
    "激活函数": "激勵函數", "softmax 函数": "softmax 函數", "语音识别": "語音辨識",
    "像素": "像素", "局部注意力": "局部注意力", "全局注意力": "全域注意力",
    "信息": "資訊", "程序": "程式", "代码": "程式碼", "默认": "預設", "内存": "記憶體",
    "数据": "資料", "词嵌入": "詞嵌入", "感受野": "感受野", "帧": "幀",
    "在这个笔记本里": "在這個筆記本裡", "“可以关注”": "「可以關注」",
    # the review of issue 29: each of OpenCC's mis-readings, repaired
    "累积（前缀）和": "累積（前綴）和", "对整个前缀运行解码器": "對整個前綴執行解碼器",
    "融合内核": "融合核心", "注册表": "註冊表", "激活值": "激勵值",
    "非线性激活函数激活": "非線性激勵函數激勵", "很多任务": "很多任務", "许多任务": "許多任務",
    "是只重写了一步的": "是只重寫了一步的", "批次里": "批次裡", "副本里": "副本裡",
    "分数里": "分數裡", "在这个单元格里": "在這個儲存格裡", "两个扩展": "兩個擴展",
    "你的系统": "你的系統", "镜像": "鏡像", "打印出来的数值": "印出來的數值", "从不打印": "從不印出",
    "下一个单元格": "下一個儲存格", "方差为 1": "變異數為 1", "均值为 0": "平均值為 0",
    "代码实现": "程式碼實作", "软件包": "套件", "返回最好的": "傳回最好的",
    "大数据集": "大資料集", "矩母函数": "動差生成函數", "钟表的表针": "鐘錶的錶針",
    "赞成 Pre-LN 的理由": "贊成 Pre-LN 的理由", "检索": "檢索", "逐步计算": "逐步計算",
    # issue 40: the learner's review of the Taiwanese edition; the code cells' terms
    "归一化": "正規化", "批归一化": "批正規化", "独热编码（one-hot）": "one-hot 編碼",
    "所有独热向量": "所有 one-hot 向量", "并行训练": "平行訓練", "就会直接报错": "就會直接丟出錯誤",
    "在一个新进程里测": "在一個新行程裡測", "在一个批次上运行同一个": "在一個批次上執行同一個",
    "给查询和键打分": "給查詢和鍵評分", "抛出了异常": "拋出了例外", "哈希": "雜湊",
    "聚类": "聚類", "矩阵乘法的顺序": "矩陣乘法的順序", "奇异值": "奇異值", "核函数": "核函數",
    "人为设计": "人為設計", "学习出来": "學習出來", "机器学习": "機器學習",
}

# Forms a generated Traditional text must never contain: OpenCC's mis-readings of the Simplified
# (issue 29's review), each with what the text means. A regular expression each.
ZH_HANT_WRONG = {
    "字首": "前綴 (prefix of a sequence)",
    "運算元": "運算子 or 核心 (a fused kernel)",
    "登錄檔": "註冊表 (a registry of variants)",
    "啟用": "激活 (activation)",
    "多工": "多任務 (many tasks)",
    "隻": "只 (only)",
    "(?<![公鄰])里(?!程)": "裡 (inside)",
    "擴充套件": "擴展",
    "係統": "系統",
    "映象": "鏡像 (a mirror)",
    "打印|列印": "印出 (print)",
    "單元格": "儲存格 (a notebook cell)",
    "物件": "對象 (what is compared); the course has no Python objects in prose",
    "鐘錶的指標": "鐘錶的錶針 (clock hands)",
    "數位": "位 (a digit's place value); 數位 is 'digital' in Taiwan",
    "支援[^。，；]{0,12}的理由": "支持/贊成…的理由 (arguing for)",
    "序列步數|是序列的|RNN：序列": "逐步 (sequential, from 串行)",
    "方差": "變異數 (variance)",
    "矩母": "動差生成函數",
    "實現": "實作 (implementation)",
    "軟體包": "套件 (package)",
    "大數據": "大資料",
    "窗口": "視窗 (a window)",
    # issue 40: mainland words (the learner's review of the Taiwanese edition)
    "歸一化": "正規化 (normalise)",
    "獨熱": "one-hot (one-hot encoding)",
    "並行": "平行 (parallel)",
    "報錯": "丟出錯誤 (raise an error)",
    "程序": "程式 (a program) or 行程 (a process)",
    "運行": "執行 (run)",
    "打分": "評分 (score)",
    "異常": "例外 (an exception)",
}
_LEFT_AS_LI = re.compile(r"(?<![公鄰])里(?!程)")  # 里 left unconverted: always 裡 in this course


@lru_cache(maxsize=None)
def _converter():
    try:
        import opencc
    except ImportError as error:  # a dev dependency: `make notebooks` installs it
        raise RuntimeError("Traditional Chinese is generated with OpenCC: pip install opencc "
                           "(pyproject.toml, the dev extra)") from error
    return opencc.OpenCC(OPENCC_CONFIG)


_TERMS = re.compile("|".join(re.escape(wrong) for wrong in sorted(ZH_HANT_TERMS, key=len,
                                                                      reverse=True)))


def to_hant(text: str) -> str:
    """Simplified -> Traditional Chinese (Taiwan usage): OpenCC ``s2twp``, then :data:`ZH_HANT_TERMS`.

    Only CJK text changes: LaTeX, code and URLs are ASCII, which OpenCC leaves as it is.
    """
    converted = _TERMS.sub(lambda match: ZH_HANT_TERMS[match.group(0)],
                           _converter().convert(text))
    return _SPACED.sub(" ", _LEFT_AS_LI.sub("裡", converted))


# "one-hot" written where 獨熱 stood: a space between it and a CJK neighbour, as the course spaces
# every Latin word in Chinese text
_SPACED = re.compile(r"(?<=[\u3400-\u9fff])(?=one-hot)|(?<=one-hot)(?=[\u3400-\u9fff])")
# A code cell's Chinese: runs of CJK characters (with the spaces inside a run, 机 器 学 习)
_CJK_RUN = re.compile(r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]+"
                      r"(?:[ \t]+[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]+)*")


def code_to_hant(source: str) -> str:
    """A code cell for the Traditional edition: each run of Chinese in it (a plot title's term, a
    comment) converted by :func:`to_hant`; every other character (the code) is left as it is."""
    return _CJK_RUN.sub(lambda match: to_hant(match.group(0)), source)


def chinese_runs(source: str) -> list[str]:
    """The runs of Chinese in a text (a code cell's strings and comments)."""
    return _CJK_RUN.findall(source)


# Characters that OpenCC's s2tw would change but that are standard Traditional too (干擾, 上游)
_ALSO_TRADITIONAL = set("干游")


@lru_cache(maxsize=None)
def _simplified_to_traditional():
    import opencc

    return opencc.OpenCC("s2tw")


def simplified_characters(text: str) -> list[str]:
    """The Simplified characters in a Traditional text, each with its context."""
    convert = _simplified_to_traditional().convert
    found = []
    for index, char in enumerate(text):
        if "\u3400" <= char <= "\u9fff" and char not in _ALSO_TRADITIONAL and convert(char) != char:
            context = text[max(0, index - 8):index + 8].replace("\n", " ")
            found.append(f"{char!r} (Simplified; {convert(char)!r}) in …{context}…")
    return found


def wrong_forms(text: str) -> list[str]:
    """Every form of :data:`ZH_HANT_WRONG` in ``text``, with its context and the right word."""
    found = []
    for pattern, right in ZH_HANT_WRONG.items():
        for match in re.finditer(pattern, text):
            context = text[max(0, match.start() - 12):match.end() + 12].replace("\n", " ")
            found.append(f"{match.group(0)!r} in …{context}… (write {right})")
    return found


# ------------------------------------------------------------------------- the README for Taiwan

_ONLY_HANS = re.compile(r"<!-- zh-CN-only:start -->\n.*?<!-- zh-CN-only:end -->\n", re.DOTALL)
_ONLY_HANT = re.compile(r"<!-- zh-TW-only:start\n(?P<text>.*?)zh-TW-only:end -->\n", re.DOTALL)
_COMMANDS = (("LANG=zh-CN", "LANG=zh-TW"), ("--lang zh-CN", "--lang zh-TW"),
             ("student/zh-Hans/", "student/zh-Hant/"), ("notebooks/zh-Hans/", "notebooks/zh-Hant/"),
             ("COURSE_LANG=zh-Hans", "COURSE_LANG=zh-Hant"),
             ("jupyterlab-language-pack-zh-CN", "jupyterlab-language-pack-zh-TW"),
             (",zh-CN\\n", ",zh-TW\\n"))  # a class list's language column (make hub)
_OTHER_SCRIPT = re.compile(r"zh-TW|zh-Hant")


def for_taiwan(readme: str) -> str:
    """The Simplified README as a Taiwanese reader follows it, still in Simplified characters.

    Its commands and paths become Taiwan's (``LANG=zh-TW``, ``--lang zh-TW``, ``student/zh-Hant/``)
    on every line that speaks of the reader's own language only: a line naming both scripts (the
    notebook table, how the checkers pick a language) is left as it is. ``<!-- zh-CN-only -->``
    regions (mainland mirrors) are dropped; a ``<!-- zh-TW-only`` comment is uncovered, as written.
    """
    kept: list[str] = []

    def hold(match: re.Match) -> str:
        kept.append(match["text"])
        return f"\x00{len(kept) - 1}\x00\n"

    text = _ONLY_HANT.sub(hold, _ONLY_HANS.sub("", readme))
    lines = []
    for line in text.split("\n"):
        if not _OTHER_SCRIPT.search(line):
            for hans, hant in _COMMANDS:
                line = line.replace(hans, hant)
        lines.append(line)
    text = "\n".join(lines)
    return re.sub(r"\x00(\d+)\x00\n", lambda m: kept[int(m.group(1))], text)


# ------------------------------------------------------------------- the checkers' catalogue

MESSAGES_ZH_HANT = ROOT / "lectures_lib" / "checks" / "_messages_zh_hant.py"


def messages_zh_hant_source() -> str:
    """The module ``checks/_messages_zh_hant.py``: the checkers' catalogue converted by :func:`to_hant`.

    Generated (``python -m course_tools.translation.translate generate`` writes it) because the
    checkers run without OpenCC, which only the course's tooling needs.
    """
    from lectures_lib.checks.messages import MISTAKES

    lines = ['"""The checkers\' mistakes in Traditional Chinese (Taiwan): GENERATED from messages.py',
             "by `python -m course_tools.translation.translate generate` (OpenCC s2twp + course terms).",
             'Do not edit: edit MISTAKES in messages.py and regenerate."""', "",
             "MISTAKES_ZH_HANT = {"]
    lines += [f"    {code!r}: {to_hant(text)!r}," for code, text in MISTAKES.items()]
    return "\n".join(lines) + "\n}\n"
